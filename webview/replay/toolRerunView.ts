// A recorded tool call run again in the replay: its two re-runs (the Tool's current code, the run's snapshot), the
// outcome beside the recorded one, and how any outcome (recorded, re-run, re-rolled) is shown as text.
import type { ToolRerunCode, ToolRerunMessage, TrajectoryRecord } from '../../protocol/webview-messages';
import { formatNumber, h, icon, pretty } from '../dom';
import { lineDiff } from './lineDiff';

/** What the re-run section asks of the episode view: to re-run a call, and where its latest re-run stands. */
export interface RerunActions {
  rerunToolCall: (turn: number, call: number, code: ToolRerunCode) => void;
  /** Where the latest re-run of that call stands: undefined before any. */
  rerunOf: (turn: number, call: number) => RerunState | undefined;
}

/** A re-run of a tool call: the code it asked for, and the host's reply once it came (none while it runs). */
export interface RerunState {
  code: ToolRerunCode;
  reply?: ToolRerunMessage['reply'];
}

/** The two re-runs a tool call offers: with the Tool's code as it is now, and with the code the run recorded when it
 *  started (its snapshot), each with its button's id, words and what its outcome is headed. */
const RERUNS: Record<ToolRerunCode, { id: string; label: string; title: string; heading: string }> = {
  current: {
    id: 'rerun-tool-call',
    label: 'Re-run with current code',
    title: 'with its current code',
    heading: 'Current code',
  },
  snapshot: {
    id: 'rerun-tool-call-snapshot',
    label: "Re-run with the run's code",
    title: 'with the code the run recorded when it started',
    heading: "The run's code",
  },
};

type ToolCall = TrajectoryRecord['turns'][number]['tool_calls'][number];
interface Outcome {
  result: unknown;
  error: string | null;
  error_kind: ToolCall['error_kind'];
}

/** An outcome as the panel shows it, recorded, re-run or re-rolled alike: the error with its kind, else the result. */
export function outcomeText(outcome: Outcome): string {
  return outcome.error ? `${outcome.error_kind}: ${outcome.error}` : pretty(outcome.result);
}

export function rerunSection(
  call: ToolCall,
  turn: number,
  callIndex: number,
  actions: RerunActions,
  noRerun: string | undefined,
): HTMLElement {
  if (noRerun !== undefined)
    return h(
      'section',
      { class: 'rerun', 'aria-label': 'Re-run the tool call' },
      h('p', { class: 'hint', id: 'no-rerun' }, noRerun),
    );
  const state = actions.rerunOf(turn, callIndex);
  const running = state !== undefined && state.reply === undefined;
  const unparsed = call.arguments === null;
  const buttons = (Object.keys(RERUNS) as ToolRerunCode[]).map((code) => {
    const button = h(
      'button',
      {
        id: RERUNS[code].id,
        disabled: unparsed || running,
        title: unparsed
          ? 'This call did not parse: there are no arguments to run it with'
          : `Run ${call.name} again ${RERUNS[code].title} and the recorded arguments, on the connected trainer`,
      },
      icon('debug-rerun'),
      running && state.code === code ? ' Re-running…' : ` ${RERUNS[code].label}`,
    );
    button.addEventListener('click', () => actions.rerunToolCall(turn, callIndex, code));
    return button;
  });
  const shown: Array<HTMLElement | null> = [];
  const reply = state?.reply;
  if (reply && !reply.ok) shown.push(h('p', { class: 'error-text rerun-error' }, reply.message));
  if (state && reply?.ok) {
    const { recorded, rerun, timeoutS } = reply.result;
    const before = outcomeText({ result: recorded.result, error: recorded.error, error_kind: recorded.errorKind });
    const after = outcomeText({ result: rerun.result, error: rerun.error, error_kind: rerun.errorKind });
    const diff = lineDiff(before, after);
    const changed = diff.some((line) => line.kind !== 'same');
    shown.push(
      h(
        'div',
        { class: 'pair rerun-pair' },
        h(
          'div',
          { class: 'recorded' },
          h('h4', {}, `Recorded · ${formatNumber(recorded.latencyMs, 1)} ms`),
          h('pre', { class: recorded.error ? 'error-text' : 'json' }, before),
        ),
        h(
          'div',
          { class: 'current' },
          h(
            'h4',
            {},
            `${RERUNS[state.code].heading} · ${formatNumber(rerun.latencyMs, 1)} ms`,
            timeoutS === null ? '' : ` (timeout ${formatNumber(timeoutS, 1)} s)`,
          ),
          h('pre', { class: rerun.error ? 'error-text' : 'json' }, after),
        ),
      ),
      h(
        'p',
        { class: `rerun-verdict ${changed ? 'changed' : 'same'}` },
        changed ? 'The outcome changed:' : 'Same outcome as recorded.',
      ),
      changed
        ? h(
            'pre',
            { class: 'diff', 'aria-label': `Line diff, recorded to ${RERUNS[state.code].heading.toLowerCase()}` },
            ...diff.map((line) =>
              h(
                'span',
                { class: `diff-line diff-${line.kind}` },
                `${line.kind === 'added' ? '+' : line.kind === 'removed' ? '-' : ' '} ${line.text}`,
              ),
            ),
          )
        : null,
    );
  }
  return h(
    'section',
    { class: 'rerun', 'aria-label': 'Re-run the tool call' },
    ...buttons,
    h('div', { class: 'rerun-result', 'aria-live': 'polite' }, ...shown),
  );
}
