// Which files differ between the code two runs trained with (each run's code.json, `run/code`), written once for
// both of its readers: Compare Code in the extension host opens these files' diffs, and the Run Dashboard's Code
// section marks them. A file is the same when its SHA-256 is.
import type { CodeState } from './generated/rpc';

/** How a file of the other run's code stands against the base run's: only in the other, only in the base, or in both
 *  with other bytes. */
export type CodeChange = 'added' | 'removed' | 'changed';

export interface CodeFileChange {
  path: string;
  change: CodeChange;
}

/** The files that differ between `base` and `other`, by path. */
export function codeChanges(base: CodeState, other: CodeState): CodeFileChange[] {
  const before = new Map(base.files.map((file) => [file.path, file.sha256]));
  const after = new Map(other.files.map((file) => [file.path, file.sha256]));
  return [...new Set([...before.keys(), ...after.keys()])]
    .sort()
    .filter((path) => before.get(path) !== after.get(path))
    .map((path) => ({
      path,
      change: !before.has(path) ? 'added' : !after.has(path) ? 'removed' : 'changed',
    }));
}
