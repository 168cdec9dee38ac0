// Packs an env folder into a gzipped ustar archive for `env/upload` (protocol/rpc.md, "Env bundles") when the
// trainer server runs on another machine. Only regular files travel; links, caches, virtual environments and
// run outputs stay home. No `vscode` import.
import { lstatSync, readFileSync, readdirSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { gzipSync } from 'node:zlib';

/** Folders never uploaded: they are large, machine-specific, or outputs rather than the env. */
const SKIPPED_DIRS = new Set([
  '.git',
  '.hg',
  '.svn',
  '__pycache__',
  '.venv',
  'venv',
  'node_modules',
  '.agentrl',
  'runs',
  '.pytest_cache',
  '.mypy_cache',
  '.ruff_cache',
]);
/** The server's limits (rpc.md): 2,000 entries; the archive rides in one 48 MiB frame as base64. */
export const MAX_BUNDLE_FILES = 2000;
export const MAX_BUNDLE_BYTES = 32 * 1024 * 1024;

export interface EnvBundle {
  archive: Buffer;
  files: string[];
}

export function collectFiles(root: string): string[] {
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!SKIPPED_DIRS.has(entry.name)) walk(path);
      } else if (entry.isFile() && !entry.name.endsWith('.pyc')) {
        files.push(relative(root, path).split(sep).join('/'));
        if (files.length > MAX_BUNDLE_FILES)
          throw new Error(
            `${root} holds more than ${MAX_BUNDLE_FILES} files; an env bundle may not (move data or outputs elsewhere)`,
          );
      }
    }
  };
  walk(root);
  return files;
}

/** One 512-byte ustar header; names longer than 100 bytes are split into prefix/name at a '/'. */
function header(name: string, size: number, mtime: number): Buffer {
  const block = Buffer.alloc(512);
  let prefix = '';
  let base = name;
  if (Buffer.byteLength(name) > 100) {
    const cut = name.lastIndexOf('/', 155);
    if (cut <= 0 || Buffer.byteLength(name.slice(cut + 1)) > 100)
      throw new Error(`path too long for an env bundle: ${name}`);
    prefix = name.slice(0, cut);
    base = name.slice(cut + 1);
  }
  const octal = (value: number, width: number) => value.toString(8).padStart(width - 1, '0') + '\0';
  block.write(base, 0, 100, 'utf8');
  block.write(octal(0o644, 8), 100, 'ascii');
  block.write(octal(0, 8), 108, 'ascii');
  block.write(octal(0, 8), 116, 'ascii');
  block.write(octal(size, 12), 124, 'ascii');
  block.write(octal(Math.floor(mtime / 1000), 12), 136, 'ascii');
  block.write('        ', 148, 'ascii'); // the checksum is computed with its own field as spaces
  block.write('0', 156, 'ascii');
  block.write('ustar\0', 257, 'ascii');
  block.write('00', 263, 'ascii');
  block.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 'ascii');
  return block;
}

export function packEnvFolder(root: string): EnvBundle {
  const files = collectFiles(root);
  const chunks: Buffer[] = [];
  let total = 0;
  for (const file of files) {
    const path = join(root, ...file.split('/'));
    const stat = lstatSync(path);
    total += stat.size;
    if (total > MAX_BUNDLE_BYTES)
      throw new Error(
        `${root} is over ${MAX_BUNDLE_BYTES / 1024 / 1024} MiB; an env bundle may not be (move large data elsewhere and point data.train at it on the server)`,
      );
    const content = readFileSync(path);
    chunks.push(
      header(file, content.length, stat.mtimeMs),
      content,
      Buffer.alloc((512 - (content.length % 512)) % 512),
    );
  }
  chunks.push(Buffer.alloc(1024)); // two zero blocks end the archive
  return { archive: gzipSync(Buffer.concat(chunks)), files };
}
