// What the replay opens: a trajectory file's text as trajectory records, kept free of `vscode` so unit tests run
// without VS Code. A file is ours (`*.trajectories.jsonl`, a record a line) or ATIF (extension/replay/atif.ts): a
// trajectory a line (`agentrl export-trajectories`, `*.atif.jsonl`) or one trajectory as a whole JSON document
// (Harbor's `trajectory.json`).
import type { TrajectoryRecord } from '../../protocol/webview-messages';
import { atifToRecord, isAtif, isObject } from './atif';

const EXPECTED =
  'neither an Agent RL trajectory record (schema_version 1, id, turns, ...) ' +
  'nor an ATIF trajectory (schema_version "ATIF-v1.x", steps, ...)';

/** What a JSON value is, for a line that holds something else than a trajectory. */
function found(value: unknown): string {
  if (isObject(value)) {
    const keys = Object.keys(value);
    return `has keys {${keys.slice(0, 8).join(', ')}${keys.length > 8 ? ', ...' : ''}}`;
  }
  return `is a JSON ${Array.isArray(value) ? 'array' : value === null ? 'null' : typeof value}`;
}

type Line = { line: number; value: unknown } | { line: number; error: string };

/** The JSON values of the text, each with its line: the text as one document when it is one (a pretty-printed
 *  trajectory.json), else a value a line (or what is wrong with the line). */
function lines(text: string): Line[] {
  if (text.trimStart().startsWith('{')) {
    try {
      return [{ line: 1, value: JSON.parse(text) }];
    } catch {
      // not one document: JSON lines
    }
  }
  return text.split('\n').flatMap((line, i): Line[] => {
    if (!line.trim()) return [];
    try {
      return [{ line: i + 1, value: JSON.parse(line) }];
    } catch (err) {
      return [{ line: i + 1, error: `not JSON (${(err as Error).message})` }];
    }
  });
}

/** The trajectory records of a file's text, in either format; a line that holds no trajectory is reported by number
 *  with what it holds instead, never dropped silently. */
export function parseTrajectories(text: string): { records: TrajectoryRecord[]; errors: string[] } {
  const records: TrajectoryRecord[] = [];
  const errors: string[] = [];
  let atifCount = 0;
  for (const entry of lines(text)) {
    if ('error' in entry) {
      errors.push(`line ${entry.line}: ${entry.error}`);
    } else if (isObject(entry.value) && entry.value.schema_version === 1) {
      records.push(entry.value as unknown as TrajectoryRecord);
    } else if (isAtif(entry.value)) {
      try {
        records.push(atifToRecord(entry.value, atifCount++));
      } catch (err) {
        errors.push(`line ${entry.line}: an ATIF trajectory this cannot read: ${(err as Error).message}`);
      }
    } else {
      errors.push(`line ${entry.line} ${found(entry.value)}: ${EXPECTED}`);
    }
  }
  return { records, errors };
}
