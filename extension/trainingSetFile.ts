// A training set on disk (protocol/schemas/training-set.schema.json): `<workspace>/training-sets/NAME.jsonl`, one
// `{episode, from_turn}` a line. Its name checked, its folder refused where it is a link, its lines appended with
// those already there left out. Pure (no `vscode`): trainingSets.ts asks the user and shows what happened.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { TrainingSetLine } from '../protocol/generated/training-set';
import type { TrajectoryRecord } from '../protocol/generated/trajectory';

/** The folder of a workspace that holds its training sets; a run config names one as `training-sets/NAME.jsonl`. */
export const TRAINING_SETS_FOLDER = 'training-sets';
export const TRAINING_SET_EXTENSION = '.jsonl';

/** Why `name` cannot name a training set, or undefined when it can: letters, digits, `-`, `_` and `.`, no `..`. */
export function whyNotName(name: string): string | undefined {
  if (!name) return 'A training set needs a name.';
  if (name.length > 100) return 'At most 100 characters.';
  if (!/^[A-Za-z0-9._-]+$/.test(name)) return 'Letters, digits, "-", "_" and "." only (no spaces, no "/" or "\\").';
  if (name.includes('..') || name.startsWith('.')) return 'No ".." and no leading ".".';
  return undefined;
}

/** The names of the training sets in `root`'s folder, sorted (none when it has no folder). */
export function listTrainingSets(root: string): string[] {
  const folder = setsFolder(root, false);
  if (folder === undefined) return [];
  return fs
    .readdirSync(folder, { withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(TRAINING_SET_EXTENSION))
    .map((entry) => entry.name.slice(0, -TRAINING_SET_EXTENSION.length))
    .sort();
}

/** `<root>/training-sets`, made if `create`; a link there (to a folder elsewhere, say) is refused, as is a file. */
function setsFolder(root: string, create: boolean): string | undefined {
  const folder = path.join(root, TRAINING_SETS_FOLDER);
  const stat = fs.lstatSync(folder, { throwIfNoEntry: false });
  if (stat?.isSymbolicLink())
    throw new Error(
      `${folder} is a symbolic link: training sets are written only into a real folder of the workspace.`,
    );
  if (stat && !stat.isDirectory()) throw new Error(`${folder} is a file, not a folder: move it away first.`);
  if (!stat && !create) return undefined;
  if (!stat) fs.mkdirSync(folder);
  return folder;
}

/** The file of training set `name` in `root`: checked name, real folder, and not a link itself. */
export function trainingSetPath(root: string, name: string): string {
  const why = whyNotName(name);
  if (why) throw new Error(`"${name}" cannot name a training set: ${why}`);
  const file = path.join(setsFolder(root, true)!, `${name}${TRAINING_SET_EXTENSION}`);
  const stat = fs.lstatSync(file, { throwIfNoEntry: false });
  if (stat && !stat.isFile())
    throw new Error(`${file} is ${stat.isSymbolicLink() ? 'a symbolic link' : 'not a file'}: it is left alone.`);
  return file;
}

/** What one append did: the lines written and the episodes left out as already there. */
export interface Appended {
  file: string;
  added: number;
  skipped: number;
}

/** The same episode learned from the same turn: its run, its id and `from_turn`. */
const keyOf = (runId: string, id: string, fromTurn: number): string => JSON.stringify([runId, id, fromTurn]);

/** Appends a line per record to training set `name` of `root`, leaving out each episode the set already has with
 *  the same `from_turn` (and a record given twice). A line of the file that is not JSON is kept as it is. */
export function appendToTrainingSet(
  root: string,
  name: string,
  records: readonly TrajectoryRecord[],
  fromTurn: number,
): Appended {
  if (!Number.isInteger(fromTurn) || fromTurn < 0)
    throw new Error(`from_turn must be a whole number >= 0, not ${fromTurn}`);
  const file = trainingSetPath(root, name);
  const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  const seen = new Set(
    text.split('\n').flatMap((line) => {
      try {
        const { episode, from_turn } = JSON.parse(line) as TrainingSetLine;
        return [keyOf(episode.run_id, episode.id, from_turn)];
      } catch {
        return [];
      }
    }),
  );
  const short = records.find((episode) => fromTurn > 0 && fromTurn >= episode.turns.length);
  if (short)
    throw new Error(
      `episode ${short.id} of run ${short.run_id} has ${short.turns.length} turn(s): none to learn from turn ${fromTurn} on`,
    );
  const lines: string[] = [];
  for (const episode of records) {
    const key = keyOf(episode.run_id, episode.id, fromTurn);
    if (seen.has(key)) continue;
    seen.add(key);
    const line: TrainingSetLine = { episode, from_turn: fromTurn };
    lines.push(JSON.stringify(line));
  }
  if (lines.length) {
    const separator = text && !text.endsWith('\n') ? '\n' : ''; // a last line cut short keeps its own line
    fs.appendFileSync(file, `${separator}${lines.join('\n')}\n`);
  }
  return { file, added: lines.length, skipped: records.length - lines.length };
}
