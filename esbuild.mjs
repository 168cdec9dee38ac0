// Builds the bundles the .vsix ships: the extension host (Node), the language server (Node), and the
// two webview apps (browser): the replay panel and the Run Dashboard; and, into out/ (gitignored, outside the .vsix's allow-list), the
// extension-host tests: out/exthost/index.js (the run() entry, with mocha) and one bundle per
// test/exthost/*.test.ts. `node esbuild.mjs --watch` rebuilds on change.
import * as esbuild from 'esbuild';
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';

const watch = process.argv.includes('--watch');
const common = { bundle: true, sourcemap: true, minify: !watch, logLevel: 'info' };

const builds = [
  {
    ...common,
    entryPoints: ['extension/extension.ts'],
    outfile: 'dist/extension.js',
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    external: ['vscode'],
  },
  {
    ...common,
    entryPoints: ['extension/languageServer/server.ts'],
    outfile: 'dist/languageServer.js',
    platform: 'node',
    format: 'cjs',
    target: 'node20',
  },
  {
    ...common,
    entryPoints: ['webview/replay/main.ts'],
    outfile: 'dist/webview/main.js',
    platform: 'browser',
    format: 'iife',
    target: 'es2022',
    loader: { '.css': 'css' },
  },
  {
    ...common,
    entryPoints: ['webview/dashboard/main.ts'],
    outfile: 'dist/webview/dashboard.js',
    platform: 'browser',
    format: 'iife',
    target: 'es2022',
    loader: { '.css': 'css' },
  },
].filter((b) => existsSync(b.entryPoints[0]));

const exthostTests = existsSync('test/exthost')
  ? readdirSync('test/exthost').filter((f) => f.endsWith('.test.ts'))
  : [];
rmSync('out/exthost', { recursive: true, force: true }); // no stale bundle of a deleted test
if (exthostTests.length) {
  builds.push({
    bundle: true,
    sourcemap: false,
    minify: false,
    logLevel: 'warning',
    entryPoints: ['test/exthost/index.ts', ...exthostTests.map((f) => `test/exthost/${f}`)],
    outdir: 'out/exthost',
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    external: ['vscode'],
    // mocha require()s its optional reporters, its parallel worker and the test files by name at run time.
    logOverride: {
      'unsupported-require-call': 'silent',
      'unsupported-dynamic-import': 'silent',
      'require-resolve-not-external': 'silent',
    },
  });
}

// codicons ship as a font + stylesheet; the webview loads them from its own resource root.
mkdirSync('dist/webview', { recursive: true });
cpSync('node_modules/@vscode/codicons/dist', 'dist/webview/codicons', { recursive: true });

if (watch) {
  for (const b of builds) await (await esbuild.context(b)).watch();
} else {
  await Promise.all(builds.map((b) => esbuild.build(b)));
}
