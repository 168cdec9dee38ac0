// An episode as a list of steps the user walks through: prompt, each assistant turn, each tool call
// ("what happened") with the ToolEnv's reading of it ("what it means"), and the final reward.
import type { TrajectoryRecord } from '../../protocol/webview-messages';

type Turn = TrajectoryRecord['turns'][number];
type ToolCall = Turn['tool_calls'][number];

export type StepKind = 'prompt' | 'assistant' | 'tool' | 'observation' | 'reward';
export type StepStatus = 'normal' | 'error' | 'truncated' | 'reward';

export interface Step {
  kind: StepKind;
  status: StepStatus;
  label: string;
  icon: string;
  turn: number;
  call?: ToolCall;
  /** The call's index in its turn's tool_calls (a tool step's). */
  callIndex?: number;
  turnRecord?: Turn;
}

export function buildSteps(record: TrajectoryRecord): Step[] {
  const steps: Step[] = [{ kind: 'prompt', status: 'normal', label: 'Prompt', icon: 'comment', turn: -1 }];
  for (const turn of record.turns) {
    const cut = turn.finish_reason !== 'stop';
    steps.push({
      kind: 'assistant',
      status: turn.parse_error ? 'error' : cut ? 'truncated' : 'normal',
      icon: 'hubot',
      turn: turn.index,
      label: `Turn ${turn.index + 1}: assistant${cut ? ` (${turn.finish_reason})` : ''}`,
      turnRecord: turn,
    });
    turn.tool_calls.forEach((call, callIndex) => {
      steps.push({
        kind: 'tool',
        status: call.error ? 'error' : 'normal',
        icon: call.error ? 'error' : 'tools',
        turn: turn.index,
        call,
        callIndex,
        turnRecord: turn,
        label: `${call.name || '(unparsed call)'}${call.error_kind ? ` — ${call.error_kind}` : ''}`,
      });
    });
    if (turn.observation !== null || turn.process_reward !== 0 || turn.done) {
      steps.push({
        kind: 'observation',
        status: turn.process_reward !== 0 ? 'reward' : 'normal',
        icon: 'eye',
        turn: turn.index,
        turnRecord: turn,
        label: `Observation${turn.process_reward !== 0 ? ` (process ${turn.process_reward > 0 ? '+' : ''}${turn.process_reward.toFixed(2)})` : ''}${turn.done ? ' · done' : ''}`,
      });
    }
  }
  steps.push({
    kind: 'reward',
    status: record.status === 'finished' ? 'reward' : record.status === 'truncated' ? 'truncated' : 'error',
    icon: record.status === 'finished' ? 'star-full' : 'warning',
    turn: record.turns.length,
    label: `Reward ${record.reward.toFixed(3)} · ${record.status}${record.status_reason ? ` (${record.status_reason})` : ''}`,
  });
  return steps;
}

export type JumpTarget = 'tool' | 'error' | 'reward';

/** Index of the next step after `from` that matches, wrapping around; `from` itself when none does. */
export function nextStep(steps: Step[], from: number, target: JumpTarget): number {
  for (let offset = 1; offset <= steps.length; offset++) {
    const index = (from + offset) % steps.length;
    const step = steps[index];
    if (target === 'tool' && step.kind === 'tool') return index;
    if (target === 'error' && (step.status === 'error' || step.status === 'truncated')) return index;
    if (target === 'reward' && step.status === 'reward') return index;
  }
  return from;
}

export function groupOf(records: TrajectoryRecord[], record: TrajectoryRecord): TrajectoryRecord[] {
  return records.filter((r) => r.run_id === record.run_id && r.step === record.step && r.group === record.group);
}

export function hasZeroVariance(group: TrajectoryRecord[]): boolean {
  return group.length > 1 && group.every((r) => Math.abs(r.reward - group[0].reward) < 1e-9);
}
