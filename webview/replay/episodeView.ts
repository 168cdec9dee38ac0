// The episode view: the step list, the transcript up to the current step, and an inspector whose I/O tab
// shows a tool's raw result ("what happened") beside the ToolEnv's observation ("what it means").
import type { EpisodeSource, RerollEdit, TrajectoryRecord } from '../../protocol/webview-messages';
import { ADVANTAGE } from './advantage';
import { hasStepFields, type AnchorGroup } from './anchorGroups';
import { formatNumber, h, icon, pretty } from '../dom';
import type { InspectorTab, UiState } from './state';
import { buildSteps, type JumpTarget, type Step } from './steps';
import type { TokenOverlay } from './tokenOverlays';
import { renderTokenView } from './tokenView';
import { toolCallOffers } from './toolOffers';
import { outcomeText, rerunSection, type RerunActions } from './toolRerunView';
import { promptTab } from './promptTab';
import { describeTools } from './toolSchemas';
import { addFromTurnButton } from './trainingSetAction';

export interface EpisodeActions extends RerunActions {
  goTo: (index: number) => void;
  jump: (target: JumpTarget) => void;
  togglePlay: () => void;
  setSpeed: (ms: number) => void;
  setTab: (tab: InspectorTab) => void;
  setOverlay: (overlay: TokenOverlay) => void;
  openToolSource: (toolName: string) => void;
  /** The anchor group (same GRPO group, same state key) of this turn's step; undefined without a state key. */
  anchorOf: (turn: number) => AnchorGroup | undefined;
  /** "Edit and re-roll from here" on an assistant turn or an observation. */
  rerollFrom: (turn: number, edit: RerollEdit) => void;
  /** "Add to Training Set from This Turn": the episode, learned from this turn on. */
  addToSetFrom: (turn: number) => void;
}

/** An assistant step's return and advantage, short, for the step list; null when the record has neither. */
function stepValues(step: Step): HTMLElement | null {
  const turn = step.turnRecord;
  if (step.kind !== 'assistant' || !turn) return null;
  const known = (v: number | null | undefined): v is number => typeof v === 'number';
  if (!known(turn.step_return) && !known(turn.step_advantage)) return null;
  const signed = (v: number) => `${v > 0 ? '+' : ''}${formatNumber(v, 2)}`;
  return h(
    'span',
    {
      class: 'step-values',
      title: `step return ${formatNumber(turn.step_return)} · step advantage ${formatNumber(turn.step_advantage)}`,
    },
    ` R ${known(turn.step_return) ? formatNumber(turn.step_return, 2) : '–'} · A ${known(turn.step_advantage) ? signed(turn.step_advantage) : '–'}`,
  );
}

function stepList(steps: Step[], current: number, actions: EpisodeActions): HTMLElement {
  const list = h('ol', { class: 'steps', role: 'listbox', 'aria-label': 'Steps of the episode' });
  steps.forEach((step, index) => {
    const item = h(
      'li',
      {
        class: `step kind-${step.kind} status-${step.status}${index === current ? ' current' : ''}`,
        role: 'option',
        'aria-selected': index === current ? 'true' : 'false',
        'data-index': index,
        tabindex: -1,
      },
      icon(step.icon),
      ' ',
      step.label,
      stepValues(step),
    );
    item.addEventListener('click', () => actions.goTo(index));
    list.appendChild(item);
  });
  return list;
}

function transcript(record: TrajectoryRecord, steps: Step[], current: number): HTMLElement {
  const shownTurns = steps[current].kind === 'prompt' ? -1 : steps[current].turn;
  const blocks: HTMLElement[] = record.prompt.map((m) =>
    h(
      'div',
      { class: `message role-${m.role}` },
      h('div', { class: 'role' }, m.role),
      h('pre', { class: 'text' }, m.content),
    ),
  );
  const tools = describeTools(record.tools);
  const afterSystem = record.prompt.findIndex((m) => m.role !== 'system');
  // where the chat template puts them: with the system prompt, before the conversation
  if (tools.length)
    blocks.splice(
      afterSystem < 0 ? blocks.length : afterSystem,
      0,
      h(
        'div',
        { class: 'message role-tools' },
        h('div', { class: 'role' }, 'tools'),
        h('pre', { class: 'text' }, tools.map((t) => t.name).join(', ')),
      ),
    );
  for (const turn of record.turns.filter((t) => t.index <= shownTurns)) {
    blocks.push(
      h(
        'div',
        { class: `message role-assistant${turn.index === steps[current].turn ? ' current' : ''}` },
        h('div', { class: 'role' }, `assistant · turn ${turn.index + 1}`),
        h('pre', { class: 'text' }, turn.assistant),
      ),
    );
    if (turn.parse_error)
      blocks.push(
        h('div', { class: 'message parse-error' }, icon('error'), ' malformed tool call: ', turn.parse_error),
      );
    if (turn.observation !== null) {
      blocks.push(
        h(
          'div',
          { class: 'message role-tool' },
          h('div', { class: 'role' }, 'observation'),
          h('pre', { class: 'text' }, turn.observation),
        ),
      );
    }
  }
  return h('section', { class: 'transcript', 'aria-label': 'Transcript' }, ...blocks);
}

function ioTab(
  record: TrajectoryRecord,
  step: Step,
  actions: EpisodeActions,
  episodeSource: EpisodeSource | undefined,
): HTMLElement {
  if (step.kind === 'tool' && step.call) {
    const call = step.call;
    const offers = toolCallOffers(episodeSource, call.name, record.tool_servers?.[call.name] !== undefined);
    const open = offers.openSource
      ? h(
          'button',
          { class: 'link', title: `Open the source of ${call.name}` },
          icon('go-to-file'),
          ' open tool source',
        )
      : null;
    open?.addEventListener('click', () => actions.openToolSource(call.name));
    const turn = step.turnRecord!;
    return h(
      'div',
      { class: 'io' },
      h(
        'div',
        { class: 'call-header' },
        h('strong', {}, call.name || '(unparsed)'),
        ` · ${formatNumber(call.latency_ms, 1)} ms `,
        open,
      ),
      h('h4', {}, 'Arguments'),
      h('pre', { class: 'json' }, call.arguments === null ? call.raw : pretty(call.arguments)),
      h(
        'div',
        { class: 'pair' },
        h(
          'div',
          { class: 'happened' },
          h('h4', {}, offers.interpreter ? 'What happened (Tool result)' : "What happened (the agent's tool message)"),
          h('pre', { class: call.error ? 'error-text' : 'json' }, outcomeText(call)),
          ...(call.result_cut
            ? [
                h(
                  'p',
                  { class: 'result-cut' },
                  `Stored cut: the first ${formatNumber(String(call.result).length)} of ` +
                    `${formatNumber(call.result_cut.chars)} characters (sha256 ${call.result_cut.sha256.slice(0, 12)}…)`,
                ),
              ]
            : []),
        ),
        ...(offers.interpreter
          ? [
              h(
                'div',
                { class: 'means' },
                h('h4', {}, `What it means (${offers.interpreter})`),
                h('dl', {}, ...meaningRows(turn)),
              ),
            ]
          : []),
      ),
      ...(offers.interpreter ? [rerunSection(call, turn.index, step.callIndex!, actions, offers.noRerun)] : []),
    );
  }
  if (step.kind === 'prompt') return promptTab(record);
  if (step.kind === 'reward') return rewardTab(record);
  const turn = step.turnRecord!;
  return h(
    'div',
    { class: 'io' },
    h('h4', {}, 'Assistant output'),
    h('pre', {}, turn.assistant),
    h(
      'dl',
      {},
      ...(turn.agent ? [h('dt', {}, 'agent'), h('dd', {}, turn.agent)] : []),
      h('dt', {}, 'finish'),
      h('dd', {}, turn.finish_reason),
      h('dt', {}, 'tool calls'),
      h('dd', {}, String(turn.tool_calls.length)),
      ...meaningRows(turn),
    ),
    validActionsSection(turn),
    hasStepFields(record) ? stepSection(turn, actions.anchorOf(turn.index)) : null,
    rerollHere(record, step.kind === 'observation' ? 'observation' : 'assistant', turn, actions),
    addFromTurnButton(turn.index, () => actions.addToSetFrom(turn.index)),
  );
}

/** What the env made of a turn: the observation the model reads next, the process reward, whether it ended the
 *  episode (a definition list's rows, in the tool call's panel and the turn's). */
function meaningRows(turn: TrajectoryRecord['turns'][number]): HTMLElement[] {
  return [
    h('dt', {}, 'observation'),
    h('dd', {}, h('pre', {}, turn.observation ?? '(none)')),
    h('dt', {}, 'process reward'),
    h('dd', {}, formatNumber(turn.process_reward)),
    h('dt', {}, 'done'),
    h('dd', {}, String(turn.done)),
  ];
}

/** The actions the env listed as valid in the state this turn started from (a text game's, env.gym's
 *  valid_actions_key), one a line, as text; null where the record has none. */
function validActionsSection(turn: TrajectoryRecord['turns'][number]): HTMLElement | null {
  const valid = turn.valid_actions;
  if (!valid?.length) return null;
  return h(
    'section',
    { class: 'valid-actions', 'aria-label': 'Valid actions' },
    h('h4', {}, `Valid actions (${valid.length}), in the state this turn started from`),
    h('pre', { id: 'valid-actions' }, valid.join('\n')),
  );
}

/** Why a turn's observation cannot be edited (the trainer refuses the same: rollout/branch.py), else undefined. */
export function whyNotObservation(
  record: TrajectoryRecord,
  turn: TrajectoryRecord['turns'][number],
): string | undefined {
  if (turn.done)
    return 'This turn ended the episode: no turn follows its observation. Edit its assistant text instead.';
  const read = record.tokens.turn.some((t, i) => t === turn.index && record.tokens.role[i] === 'tool');
  if (turn.observation === null || !read)
    return 'The model read no observation after this turn. Edit its assistant text instead.';
  return undefined;
}

/** "Edit and re-roll from here": opens the re-roll form on this turn's assistant text or its observation. */
function rerollHere(
  record: TrajectoryRecord,
  edit: RerollEdit,
  turn: TrajectoryRecord['turns'][number],
  actions: EpisodeActions,
): HTMLElement {
  const why = edit === 'observation' ? whyNotObservation(record, turn) : undefined;
  const button = h(
    'button',
    {
      id: 'reroll-here',
      disabled: why !== undefined,
      title:
        why ??
        `Edit this turn's ${edit === 'assistant' ? 'assistant text' : 'observation'} and play the episode on from ` +
          "here with the run's policy, on the connected trainer",
    },
    icon('debug-restart'),
    ' Edit and re-roll from here',
  );
  button.addEventListener('click', () => actions.rerollFrom(turn.index, edit));
  return h(
    'section',
    { class: 'reroll-here', 'aria-label': 'Edit and re-roll from here' },
    button,
    why ? h('p', { class: 'hint' }, why) : null,
  );
}

/** What the step-level trainer read of this step: the state it started from, its return and its advantage. */
function stepSection(turn: TrajectoryRecord['turns'][number], anchor: AnchorGroup | undefined): HTMLElement {
  const key = turn.state_key;
  const others = anchor ? anchor.size - 1 : 0;
  return h(
    'section',
    { class: 'step-fields', 'aria-label': 'Step-level values' },
    h('h4', {}, 'Step'),
    h(
      'dl',
      {},
      h('dt', {}, 'state key'),
      h('dd', { id: 'step-state-key' }, typeof key === 'string' ? h('pre', { class: 'state-key' }, key) : '–'),
      h('dt', {}, 'step return'),
      h('dd', { id: 'step-return' }, formatNumber(turn.step_return)),
      h('dt', {}, 'step advantage'),
      h('dd', { id: 'step-advantage' }, formatNumber(turn.step_advantage)),
      h('dt', {}, 'anchor group'),
      h(
        'dd',
        { id: 'step-anchor' },
        !anchor
          ? '–'
          : anchor.singleton
            ? 'size 1: no other step of the group starts from this state (no step-level signal)'
            : `size ${anchor.size}: ${others} other step${others === 1 ? '' : 's'} of the group start${others === 1 ? 's' : ''} from this state (${anchor.episodes} episodes)`,
      ),
    ),
  );
}

function rewardTab(record: TrajectoryRecord): HTMLElement {
  const process = record.turns.map((t) => t.process_reward);
  return h(
    'div',
    { class: 'reward' },
    h(
      'dl',
      {},
      h('dt', {}, 'total reward'),
      h('dd', { class: 'big' }, formatNumber(record.reward)),
      h('dt', {}, 'outcome reward'),
      h('dd', {}, formatNumber(record.outcome_reward)),
      h('dt', {}, 'process rewards'),
      h('dd', {}, process.map((p) => formatNumber(p)).join(', ') || '–'),
      h('dt', { title: ADVANTAGE.episode.help }, ADVANTAGE.episode.label),
      h('dd', {}, formatNumber(record.advantage)),
      h('dt', {}, 'final answer'),
      h('dd', {}, record.final_answer ?? '–'),
    ),
    h(
      'table',
      { class: 'grid breakdown' },
      h('thead', {}, h('tr', {}, h('th', {}, 'component'), h('th', {}, 'value'))),
      h(
        'tbody',
        {},
        ...Object.entries(record.reward_breakdown).map(([k, v]) =>
          h('tr', {}, h('td', {}, k), h('td', { class: 'num' }, formatNumber(v))),
        ),
      ),
    ),
  );
}

function metadataTab(record: TrajectoryRecord): HTMLElement {
  const rows: Array<[string, string]> = [
    ['id', record.id],
    ['run', record.run_id],
    ['step', String(record.step)],
    ['group', String(record.group)],
    ['sample', String(record.sample)],
    ['task', record.task_id],
    ['status', `${record.status}${record.status_reason ? ` (${record.status_reason})` : ''}`],
    ['turns', String(record.stats.num_turns)],
    ['tool calls', `${record.stats.num_tool_calls} (${record.stats.num_tool_errors} failed)`],
    ['tokens', `${record.stats.total_tokens} (${record.stats.response_tokens} trained)`],
    [
      'tools',
      describeTools(record.tools)
        .map((t) => t.name)
        .join(', ') || '–',
    ],
  ];
  return h('dl', { class: 'metadata' }, ...rows.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

/** `episodeSource`: where the run's episodes came from, when the host knows it (what a tool call offers). */
export function renderEpisode(
  record: TrajectoryRecord,
  state: UiState,
  playing: boolean,
  actions: EpisodeActions,
  episodeSource?: EpisodeSource,
): HTMLElement {
  const steps = buildSteps(record);
  const current = Math.min(state.stepIndex, steps.length - 1);
  const button = (
    id: string,
    label: string,
    iconName: string,
    onClick: () => void,
    shortcut: string,
    text?: string,
  ) => {
    const b = h(
      'button',
      { id, 'aria-label': `${label} (${shortcut})`, title: `${label} (${shortcut})` },
      icon(iconName),
      text ? ` ${text}` : null,
    );
    b.addEventListener('click', onClick);
    return b;
  };
  const scrubber = h('input', {
    type: 'range',
    id: 'scrubber',
    min: 0,
    max: steps.length - 1,
    value: current,
    'aria-label': 'Step',
  });
  scrubber.addEventListener('input', () => actions.goTo(Number(scrubber.value)));
  const speed = h(
    'select',
    { id: 'speed', 'aria-label': 'Playback speed' },
    ...[
      [1600, '0.5×'],
      [800, '1×'],
      [400, '2×'],
      [150, '5×'],
    ].map(([ms, label]) => h('option', { value: ms, selected: state.playSpeedMs === ms }, label)),
  );
  speed.addEventListener('change', () => actions.setSpeed(Number(speed.value)));
  const tabs: Array<[InspectorTab, string]> = [
    ['io', 'Input / output'],
    ['reward', 'Reward'],
    ['tokens', 'Tokens'],
    ['json', 'Raw JSON'],
    ['metadata', 'Metadata'],
  ];
  const tabBar = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Inspector' });
  for (const [tab, label] of tabs) {
    const t = h(
      'button',
      {
        role: 'tab',
        id: `tab-${tab}`,
        'aria-selected': state.inspectorTab === tab ? 'true' : 'false',
        class: state.inspectorTab === tab ? 'active' : '',
      },
      label,
    );
    t.addEventListener('click', () => actions.setTab(tab));
    tabBar.appendChild(t);
  }
  const step = steps[current];
  const panel =
    state.inspectorTab === 'io'
      ? ioTab(record, step, actions, episodeSource)
      : state.inspectorTab === 'reward'
        ? rewardTab(record)
        : state.inspectorTab === 'json'
          ? h(
              'pre',
              { class: 'json raw' },
              JSON.stringify(
                { ...record, tokens: `(${record.tokens.ids.length} tokens: see the Tokens tab)` },
                null,
                2,
              ),
            )
          : state.inspectorTab === 'metadata'
            ? metadataTab(record)
            : renderTokenView(record, { compact: true, overlay: state.tokenOverlay, setOverlay: actions.setOverlay });
  return h(
    'section',
    { class: 'episode', 'aria-label': `Episode ${record.id}` },
    h(
      'div',
      { class: 'toolbar' },
      button('prev', 'Previous step', 'arrow-left', () => actions.goTo(current - 1), '← or k'),
      button('play', playing ? 'Pause' : 'Play', playing ? 'debug-pause' : 'play', actions.togglePlay, 'space'),
      button('next', 'Next step', 'arrow-right', () => actions.goTo(current + 1), '→ or j'),
      speed,
      scrubber,
      h('span', { class: 'position', id: 'position' }, `step ${current + 1} / ${steps.length}`),
      button('jump-tool', 'Next tool call', 'tools', () => actions.jump('tool'), 't', 'next call'),
      button('jump-error', 'Next error', 'error', () => actions.jump('error'), 'e', 'next error'),
      button('jump-reward', 'Next reward', 'star-full', () => actions.jump('reward'), 'r', 'next reward'),
    ),
    h(
      'div',
      { class: 'panes' },
      stepList(steps, current, actions),
      transcript(record, steps, current),
      h('aside', { class: 'inspector' }, tabBar, h('div', { class: 'tab-panel', role: 'tabpanel' }, panel)),
    ),
  );
}
