// GiGPO's anchor states: within one GRPO group (the samples of one prompt), the steps that start from the
// same state (equal `state_key`) form an anchor group, and their step returns are compared with each other
// the way GRPO compares the episodes' rewards. A state only one step reached gives nothing to compare.
// Pure: no DOM, so the unit tests run it in Node.
import type { TrajectoryRecord } from '../../protocol/webview-messages';

export interface AnchorStep {
  /** The episode's trajectory id. */
  id: string;
  sample: number;
  /** The turn's index in its episode (0-based). */
  turn: number;
  stepReturn: number | null;
  stepAdvantage: number | null;
}

export interface AnchorGroup {
  stateKey: string;
  /** Ordered by sample, then turn. */
  steps: AnchorStep[];
  /** How many steps start from this state (a state revisited in one episode counts each time). */
  size: number;
  /** How many of the group's episodes reach it. */
  episodes: number;
  /** Size 1: no other step to compare with, so no step-level signal. */
  singleton: boolean;
  /** Mean, lowest and highest of the known step returns; null when none is known. */
  returnMean: number | null;
  returnMin: number | null;
  returnMax: number | null;
}

export interface AnchorGrouping {
  groups: AnchorGroup[];
  /** Steps without a state key (records written before the field existed, or a null key). */
  keyless: number;
}

const known = (value: number | null | undefined): value is number => typeof value === 'number' && !isNaN(value);

/** Whether any turn of these records carries a state key (files written before the field existed carry none). */
export function hasStateKeys(records: TrajectoryRecord[]): boolean {
  return records.some((r) => r.turns.some((t) => typeof t.state_key === 'string'));
}

/** Whether any turn of this record carries a state key, step return or step advantage. */
export function hasStepFields(record: TrajectoryRecord): boolean {
  return record.turns.some(
    (t) => t.state_key !== undefined || t.step_return !== undefined || t.step_advantage !== undefined,
  );
}

/**
 * The anchor groups of one GRPO group's episodes: each distinct state key with the steps that start from it.
 * Ordered by the earliest turn that reaches the state, then the larger group first, then the key.
 */
export function anchorGroups(records: TrajectoryRecord[]): AnchorGrouping {
  const byKey = new Map<string, AnchorStep[]>();
  let keyless = 0;
  const ordered = [...records].sort((a, b) => a.sample - b.sample);
  for (const record of ordered) {
    for (const turn of record.turns) {
      if (typeof turn.state_key !== 'string') {
        keyless++;
        continue;
      }
      let steps = byKey.get(turn.state_key);
      if (!steps) byKey.set(turn.state_key, (steps = []));
      steps.push({
        id: record.id,
        sample: record.sample,
        turn: turn.index,
        stepReturn: known(turn.step_return) ? turn.step_return : null,
        stepAdvantage: known(turn.step_advantage) ? turn.step_advantage : null,
      });
    }
  }
  const groups = [...byKey].map(([stateKey, steps]): AnchorGroup => {
    steps.sort((a, b) => a.sample - b.sample || a.turn - b.turn);
    const returns = steps.map((s) => s.stepReturn).filter(known);
    return {
      stateKey,
      steps,
      size: steps.length,
      episodes: new Set(steps.map((s) => s.id)).size,
      singleton: steps.length === 1,
      returnMean: returns.length ? returns.reduce((sum, r) => sum + r, 0) / returns.length : null,
      returnMin: returns.length ? Math.min(...returns) : null,
      returnMax: returns.length ? Math.max(...returns) : null,
    };
  });
  const firstTurn = (g: AnchorGroup) => Math.min(...g.steps.map((s) => s.turn));
  groups.sort(
    (a, b) =>
      firstTurn(a) - firstTurn(b) ||
      b.size - a.size ||
      (a.stateKey < b.stateKey ? -1 : a.stateKey > b.stateKey ? 1 : 0),
  );
  return { groups, keyless };
}

/** The anchor group of one step (a record's turn) among its GRPO group's episodes; undefined without a state key. */
export function anchorOf(group: TrajectoryRecord[], record: TrajectoryRecord, turn: number): AnchorGroup | undefined {
  const key = record.turns.find((t) => t.index === turn)?.state_key;
  if (typeof key !== 'string') return undefined;
  const members = group.some((r) => r.id === record.id) ? group : [...group, record];
  return anchorGroups(members).groups.find((g) => g.stateKey === key);
}

/** A state key on one line for a heading: whitespace runs folded, cut at `max` characters with an ellipsis. */
export function stateKeyPreview(key: string, max = 120): string {
  const line = key.replace(/\s+/g, ' ').trim();
  if (!line) return key.length ? '(whitespace)' : '(empty)';
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
