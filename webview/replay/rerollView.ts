// "Edit and re-roll from here": the form that edits one turn of a recorded episode (its assistant text or its
// observation) and asks the trainer to play the episode on from there with the run's policy (`episode/reroll`); the
// re-rolls stored for the episode; and a re-roll beside the recorded episode from the edited turn on, with a token
// diff of the first turn the policy sampled otherwise. Everything the trainer and the model wrote goes in as text.
import type {
  RerollEdit,
  RerollListResult,
  RerollRecords,
  RerollSummary,
  Reply,
  ToolRerunCode,
  TrajectoryRecord,
} from '../../protocol/webview-messages';
import { formatNumber, h, icon } from '../dom';
import { outcomeText } from './toolRerunView';
import { diffSequences } from './lineDiff';
import { visibleText } from './tokenView';
import type { RerollBranch } from './state';

type Turn = TrajectoryRecord['turns'][number];

/** The policy a re-roll samples with: the run's base model, its latest checkpoint, or a checkpoint's step. */
export type RerollPolicy = 'base' | 'latest' | number;

/** What the form holds. `temperature` null: the run's own, once the trainer has said what it is; `code`: the env's
 * code as it is now, or as the run recorded it when it started. */
export interface RerollForm {
  text: string;
  policy: RerollPolicy;
  samples: number;
  temperature: number | null;
  code: ToolRerunCode;
}

const CODE_WORDS: Record<ToolRerunCode, string> = { current: "today's code", snapshot: "the run's code" };

/** The trainer's bounds (rpc.schema.json, episode/reroll.params). */
export const MAX_SAMPLES = 8;
export const MAX_TEMPERATURE = 5;

export function recordedText(record: TrajectoryRecord, turn: number, edit: RerollEdit): string {
  const recorded = record.turns[turn];
  return (edit === 'assistant' ? recorded?.assistant : recorded?.observation) ?? '';
}

/** The policy's words: a re-roll's (its checkpoint's step, or null for the base model) or the form's. */
export function policyName(policy: RerollPolicy | null): string {
  if (policy === null || policy === 'base') return 'base model';
  return policy === 'latest' ? 'latest checkpoint' : `checkpoint ${policy}`;
}

function sampledTokens(record: TrajectoryRecord, turn: number): Array<{ id: number; text: string }> {
  const t = record.tokens;
  const found: Array<{ id: number; text: string }> = [];
  for (let i = 0; i < t.ids.length; i++)
    if (t.turn[i] === turn && t.role[i] === 'assistant') found.push({ id: t.ids[i], text: t.text[i] });
  return found;
}

/** The first turn from `from` on whose sampled tokens differ between the two episodes (one lacking the turn
 * counts), or undefined when none does. */
export function firstDivergingTurn(
  recorded: TrajectoryRecord,
  rerolled: TrajectoryRecord,
  from: number,
): number | undefined {
  const last = Math.max(recorded.turns.length, rerolled.turns.length);
  for (let turn = from; turn < last; turn++) {
    const a = sampledTokens(recorded, turn);
    const b = sampledTokens(rerolled, turn);
    if (a.length !== b.length || a.some((token, i) => token.id !== b[i].id)) return turn;
  }
  return undefined;
}

export interface RerollView {
  branch: RerollBranch;
  /** The recorded episode the branch is a turn of. */
  record: TrajectoryRecord;
  form: RerollForm;
  /** The run's stored re-rolls and checkpoints: undefined before asking, 'loading' until the host answers. */
  list: 'loading' | Reply<RerollListResult> | undefined;
  /** While a re-roll of this episode runs: the last thing the trainer said of it. */
  progress: string | undefined;
  /** The re-roll shown beside the recorded episode. */
  shown: 'loading' | Reply<RerollRecords> | undefined;
}

export interface RerollActions {
  /** The form changed (no redraw: the user is typing). */
  change: (form: Partial<RerollForm>) => void;
  run: () => void;
  open: (rerollId: string) => void;
  back: () => void;
}

export function renderReroll(view: RerollView, actions: RerollActions): HTMLElement {
  const { branch, record, form } = view;
  const running = view.progress !== undefined;
  const listed = view.list !== undefined && view.list !== 'loading' && view.list.ok ? view.list.result : undefined;
  const what = branch.edit === 'assistant' ? "the assistant's text" : 'the observation';
  const back = h('button', { id: 'reroll-back', class: 'link' }, icon('arrow-left'), ' back to the episode');
  back.addEventListener('click', actions.back);

  const text = h('textarea', {
    id: 'reroll-text',
    rows: 8,
    'aria-label': `The new text of ${what}`,
    readonly: running,
  });
  text.value = form.text;
  text.addEventListener('input', () => actions.change({ text: text.value }));
  const recorded = recordedText(record, branch.turn, branch.edit);
  const reset = h('button', { id: 'reroll-reset', class: 'link', disabled: running }, 'put back the recorded text');
  reset.addEventListener('click', () => {
    text.value = recorded;
    actions.change({ text: recorded });
  });

  const checkpoints = listed?.checkpoints ?? [];
  const latest = checkpoints.length ? ` (step ${checkpoints[checkpoints.length - 1]})` : ' (none yet: the base model)';
  const policy = h(
    'select',
    { id: 'reroll-policy', 'aria-label': 'Policy', disabled: running },
    h('option', { value: 'latest', selected: form.policy === 'latest' }, `latest checkpoint${latest}`),
    h('option', { value: 'base', selected: form.policy === 'base' }, 'base model'),
    ...checkpoints.map((step) => h('option', { value: step, selected: form.policy === step }, `checkpoint ${step}`)),
  );
  policy.addEventListener('change', () => {
    const value = policy.value;
    actions.change({ policy: value === 'base' || value === 'latest' ? value : Number(value) });
  });
  const samples = h('input', {
    id: 'reroll-samples',
    type: 'number',
    min: 1,
    max: MAX_SAMPLES,
    step: 1,
    value: form.samples,
    disabled: running,
  });
  samples.addEventListener('change', () => actions.change({ samples: Number(samples.value) }));
  const temperature = h('input', {
    id: 'reroll-temperature',
    type: 'number',
    min: 0,
    max: MAX_TEMPERATURE,
    step: 0.1,
    value: form.temperature ?? listed?.temperature ?? 1,
    disabled: running,
  });
  temperature.addEventListener('change', () => actions.change({ temperature: Number(temperature.value) }));
  const code = h(
    'select',
    {
      id: 'reroll-code',
      'aria-label': 'Code',
      disabled: running,
      title: "The env's code: its files as they are now, or as the run recorded them when it started",
    },
    ...(['current', 'snapshot'] as const).map((value) =>
      h('option', { value, selected: form.code === value }, CODE_WORDS[value]),
    ),
  );
  code.addEventListener('change', () => actions.change({ code: code.value as ToolRerunCode }));
  const run = h(
    'button',
    {
      id: 'reroll-run',
      disabled: running,
      title: 'Play the episode on from this turn with the edit, on the connected trainer (its Tools run)',
    },
    icon('debug-restart'),
    running ? ' Re-rolling…' : ' Re-roll',
  );
  run.addEventListener('click', actions.run);

  return h(
    'section',
    { class: 'reroll', 'aria-label': 'Edit and re-roll' },
    h(
      'div',
      { class: 'reroll-heading' },
      back,
      h('h3', {}, `Re-roll ${record.id} from turn ${branch.turn + 1}: edit ${what}`),
    ),
    h(
      'div',
      { class: 'reroll-form' },
      h('label', { for: 'reroll-text' }, `${branch.edit === 'assistant' ? 'Assistant text' : 'Observation'} `, reset),
      text,
      h(
        'div',
        { class: 'reroll-settings' },
        h('label', {}, 'policy ', policy),
        h('label', {}, 'samples ', samples),
        h('label', {}, 'temperature ', temperature),
        h('label', {}, 'env ', code),
        run,
      ),
      h('p', { id: 'reroll-progress', class: 'reroll-progress', 'aria-live': 'polite' }, view.progress ?? ''),
      view.list !== undefined && view.list !== 'loading' && !view.list.ok
        ? h('p', { class: 'error-text reroll-list-error' }, view.list.message)
        : null,
    ),
    storedList(listed?.rerolls.filter((r) => r.trajectoryId === record.id) ?? [], view, actions),
    comparison(view),
  );
}

function describe(summary: RerollSummary): string {
  const rewards = summary.rewards.map((r) => formatNumber(r, 2)).join(', ');
  return (
    `turn ${summary.turn + 1} ${summary.edit} · ${policyName(summary.policyStep)} · ${summary.samples} × ` +
    `T ${formatNumber(summary.temperature, 2)} · ${CODE_WORDS[summary.code]} · rewards ${rewards} · ` +
    summary.createdAt.slice(0, 16).replace('T', ' ')
  );
}

function storedList(rerolls: RerollSummary[], view: RerollView, actions: RerollActions): HTMLElement | null {
  if (!rerolls.length) return null;
  const shownId =
    view.shown !== undefined && view.shown !== 'loading' && view.shown.ok ? view.shown.result.reroll.rerollId : '';
  return h(
    'section',
    { class: 'reroll-stored', 'aria-label': 'Stored re-rolls of this episode' },
    h('h4', {}, `Stored re-rolls of this episode (${rerolls.length})`),
    h(
      'ul',
      { id: 'reroll-stored' },
      ...rerolls.map((summary) => {
        const open = h(
          'button',
          { class: `link${summary.rerollId === shownId ? ' active' : ''}`, 'data-reroll': summary.rerollId },
          describe(summary),
        );
        open.addEventListener('click', () => actions.open(summary.rerollId));
        return h('li', {}, open);
      }),
    ),
  );
}

function comparison(view: RerollView): HTMLElement | null {
  const shown = view.shown;
  if (shown === undefined) return null;
  if (shown === 'loading') return h('p', { class: 'reroll-loading' }, 'Opening the re-roll…');
  if (!shown.ok) return h('p', { class: 'error-text reroll-error' }, shown.message);
  const { reroll, records } = shown.result;
  const from = reroll.turn;
  return h(
    'section',
    { id: 'reroll-compare', class: 'reroll-compare', 'aria-label': 'The recorded episode and its re-rolls' },
    h(
      'h4',
      {},
      `From turn ${from + 1} (${reroll.edit} edited) · ${policyName(reroll.policyStep)} · ` +
        `temperature ${formatNumber(reroll.temperature, 2)} · seed ${reroll.seed} · ${CODE_WORDS[reroll.code]}`,
    ),
    reroll.differences.length
      ? h(
          'ul',
          { class: 'reroll-differences', 'aria-label': 'Where the env answered otherwise than recorded' },
          ...reroll.differences.map((d) =>
            h(
              'li',
              {},
              icon('warning'),
              ` ${d.turn === null ? "the env's prompt" : `turn ${d.turn + 1}'s observation`} is now `,
              h('code', {}, d.now ?? '(none)'),
              ', recorded ',
              h('code', {}, d.recorded ?? '(none)'),
              ': the re-roll keeps the recorded tokens',
            ),
          ),
        )
      : null,
    h(
      'div',
      { class: 'reroll-columns' },
      column('Recorded', view.record, from, undefined),
      ...records.map((r, i) => column(`Re-roll ${i + 1}`, r, from, reroll.edit)),
    ),
    h(
      'section',
      { id: 'reroll-token-diff', 'aria-label': 'Token diff of the first turn sampled otherwise' },
      h('h4', {}, 'First turn the policy sampled otherwise'),
      ...records.map((r, i) => tokenDiff(view.record, r, from + 1, i + 1)),
    ),
  );
}

function column(title: string, record: TrajectoryRecord, from: number, edited: RerollEdit | undefined): HTMLElement {
  return h(
    'div',
    { class: 'reroll-column' },
    h('h5', {}, title),
    h(
      'div',
      { class: `reroll-outcome status-${record.status}` },
      `reward ${formatNumber(record.reward)} · ${record.status}${record.status_reason ? ` (${record.status_reason})` : ''}`,
    ),
    ...record.turns.filter((t) => t.index >= from).map((t) => turnBlock(t, t.index === from ? edited : undefined)),
  );
}

function turnBlock(turn: Turn, edited: RerollEdit | undefined): HTMLElement {
  return h(
    'div',
    { class: 'reroll-turn' },
    h('div', { class: 'role' }, `turn ${turn.index + 1}`),
    h('pre', { class: `text assistant${edited === 'assistant' ? ' edited' : ''}` }, turn.assistant),
    ...turn.tool_calls.map((call) =>
      h(
        'div',
        { class: 'reroll-call' },
        icon(call.error ? 'error' : 'tools'),
        ` ${call.name || '(unparsed call)'} `,
        h('code', {}, call.arguments === null ? call.raw : JSON.stringify(call.arguments)),
        ' → ',
        h('span', { class: call.error ? 'error-text' : '' }, outcomeText(call)),
      ),
    ),
    turn.observation !== null
      ? h('pre', { class: `text observation${edited === 'observation' ? ' edited' : ''}` }, turn.observation)
      : null,
    h(
      'div',
      { class: 'reroll-turn-reward' },
      `process reward ${formatNumber(turn.process_reward)}${turn.done ? ' · done' : ''}`,
    ),
  );
}

function tokenDiff(recorded: TrajectoryRecord, rerolled: TrajectoryRecord, from: number, sample: number): HTMLElement {
  const turn = firstDivergingTurn(recorded, rerolled, from);
  if (turn === undefined)
    return h(
      'p',
      { class: 'reroll-same' },
      `Re-roll ${sample}: the same sampled tokens as recorded from turn ${from + 1} on.`,
    );
  const diff = diffSequences(sampledTokens(recorded, turn), sampledTokens(rerolled, turn), (token) => token.id);
  const count = (kind: string) => diff.filter((d) => d.kind === kind).length;
  return h(
    'div',
    { class: 'reroll-token-diff' },
    h(
      'h5',
      {},
      `Re-roll ${sample}: turn ${turn + 1} (${count('removed')} recorded only, ${count('added')} re-rolled only)`,
    ),
    h(
      'p',
      { class: 'token-diff', 'aria-label': `Tokens of turn ${turn + 1}, recorded to re-rolled` },
      ...diff.map(({ kind, item }) =>
        h(
          'span',
          {
            class: `tok tok-${kind}`,
            title: `id ${item.id} · ${kind === 'same' ? 'in both' : kind === 'removed' ? 'recorded only' : 're-roll only'}`,
          },
          visibleText(item.text),
        ),
      ),
    ),
  );
}
