// Diffs the replay shows: the tool re-run's line diff (which lines of the recorded outcome the current code's outcome
// kept, dropped and added) and the re-roll's token diff (which tokens a re-rolled turn kept, dropped and added). Pure
// data in, data out: the panel renders each piece as a text node.

export type DiffKind = 'same' | 'removed' | 'added';

export interface DiffLine {
  kind: DiffKind;
  text: string;
}

/** Past this many item pairs the longest common subsequence table is too big for a webview: the diff then shows
 * every item of the first sequence removed and every item of the second added. */
const MAX_TABLE_CELLS = 4_000_000;

/** The longest-common-subsequence diff of two sequences, items compared by `key` (themselves by default). */
export function diffSequences<T>(
  a: readonly T[],
  b: readonly T[],
  key: (item: T) => unknown = (item) => item,
): Array<{ kind: DiffKind; item: T }> {
  const removed = (item: T) => ({ kind: 'removed' as const, item });
  const added = (item: T) => ({ kind: 'added' as const, item });
  if (a.length * b.length > MAX_TABLE_CELLS) return [...a.map(removed), ...b.map(added)];
  const ka = a.map(key);
  const kb = b.map(key);
  // common[i][j]: length of the longest common subsequence of a[i..] and b[j..]
  const common = Array.from({ length: a.length + 1 }, () => new Uint32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--)
    for (let j = b.length - 1; j >= 0; j--)
      common[i][j] = ka[i] === kb[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
  const items: Array<{ kind: DiffKind; item: T }> = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (ka[i] === kb[j]) {
      items.push({ kind: 'same', item: a[i] });
      i++;
      j++;
    } else if (common[i + 1][j] >= common[i][j + 1]) {
      items.push(removed(a[i++]));
    } else {
      items.push(added(b[j++]));
    }
  }
  while (i < a.length) items.push(removed(a[i++]));
  while (j < b.length) items.push(added(b[j++]));
  return items;
}

export function lineDiff(before: string, after: string): DiffLine[] {
  return diffSequences(before.split('\n'), after.split('\n')).map(({ kind, item }) => ({ kind, text: item }));
}
