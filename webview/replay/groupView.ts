// The group view: the samples of one prompt side by side, as GRPO compares them; or, by anchor state, the
// steps of those samples grouped by the state they start from, as GiGPO compares them.
import type { TrajectoryRecord } from '../../protocol/webview-messages';
import { ADVANTAGE } from './advantage';
import { anchorGroups, hasStateKeys, stateKeyPreview, type AnchorGroup } from './anchorGroups';
import { formatNumber, h, icon } from '../dom';
import type { GroupBy, GroupSort, UiState } from './state';
import { groupOf, hasZeroVariance } from './steps';
import { largestMismatches } from './tokenOverlays';
import { mismatchList } from './tokenView';
import { addGroupButton } from './trainingSetAction';

export function sortGroup(group: TrajectoryRecord[], sort: GroupSort): TrajectoryRecord[] {
  const key: Record<GroupSort, (r: TrajectoryRecord) => number> = {
    reward: (r) => r.reward,
    '-reward': (r) => -r.reward,
    turns: (r) => r.stats.num_turns,
    sample: (r) => r.sample,
  };
  return [...group].sort((a, b) => key[sort](a) - key[sort](b) || a.sample - b.sample);
}

export function renderGroup(
  records: TrajectoryRecord[],
  record: TrajectoryRecord,
  state: UiState,
  actions: {
    update: (change: (state: UiState) => void) => void;
    open: (id: string) => void;
    /** Opens the episode at the assistant step of this turn. */
    openStep: (id: string, turn: number) => void;
    /** Opens the episode's token view at this token. */
    openToken: (id: string, index: number) => void;
    /** "Add Group to Training Set": every sample of the group, whole. */
    addGroupToSet: (group: TrajectoryRecord[]) => void;
  },
): HTMLElement {
  const group = sortGroup(groupOf(records, record), state.groupSort);
  const keyed = hasStateKeys(group);
  const groupBy: GroupBy = keyed ? state.groupBy : 'episode';
  const components = [...new Set(group.flatMap((r) => Object.keys(r.reward_breakdown)))];
  const header = (label: string, sort?: GroupSort, title?: string) => {
    if (!sort) return h('th', { scope: 'col', title }, label);
    const active = state.groupSort === sort || state.groupSort === `-${sort}`;
    const button = h(
      'button',
      { class: `sort${active ? ' active' : ''}`, 'data-sort': sort, 'aria-label': `Sort by ${label}` },
      label,
      active ? icon(state.groupSort.startsWith('-') ? 'arrow-down' : 'arrow-up') : null,
    );
    button.addEventListener('click', () =>
      actions.update((s) => {
        // reward toggles between highest and lowest first; the other columns sort ascending
        s.groupSort = sort !== 'reward' ? sort : s.groupSort === '-reward' ? 'reward' : '-reward';
      }),
    );
    return h('th', { scope: 'col' }, button);
  };
  const rows = group.map((r) => {
    const row = h(
      'tr',
      { tabindex: 0, 'data-id': r.id, class: r.id === record.id ? 'current' : '' },
      h('td', {}, r.sample),
      h('td', { class: 'num' }, formatNumber(r.reward)),
      ...components.map((c) => h('td', { class: 'num' }, formatNumber(r.reward_breakdown[c]))),
      h('td', { class: 'num' }, formatNumber(r.advantage)),
      h('td', { class: 'num' }, r.stats.num_turns),
      h('td', { class: 'num' }, r.stats.num_tool_calls),
      h('td', {}, r.status),
      h('td', { class: 'answer' }, r.final_answer ?? ''),
    );
    row.addEventListener('click', () => actions.open(r.id));
    row.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') actions.open(r.id);
    });
    return row;
  });
  const toggle = (mode: GroupBy, label: string, title: string) => {
    const button = h(
      'button',
      {
        id: `group-by-${mode}`,
        'aria-pressed': groupBy === mode ? 'true' : 'false',
        class: groupBy === mode ? 'active' : '',
        disabled: mode === 'anchor' && !keyed,
        title:
          mode === 'anchor' && !keyed
            ? 'These episodes carry no state keys (recorded before the trainer wrote them): there is nothing to group by'
            : title,
      },
      label,
    );
    button.addEventListener('click', () =>
      actions.update((s) => {
        s.groupBy = mode;
      }),
    );
    return button;
  };
  return h(
    'section',
    { class: 'group-view', 'aria-label': `Group ${record.group} of step ${record.step}` },
    h(
      'div',
      { class: 'toolbar' },
      h('span', {}, `step ${record.step} · group ${record.group} · task ${record.task_id} · ${group.length} samples`),
      addGroupButton(group.length, () => actions.addGroupToSet(group)),
      h(
        'div',
        { class: 'segmented', role: 'group', 'aria-label': 'Rows of the group view' },
        toggle('episode', 'by episode', 'One row per sample, as GRPO compares them'),
        toggle(
          'anchor',
          'by anchor state',
          "The samples' steps grouped by the state they start from (GiGPO's anchor states)",
        ),
      ),
    ),
    mismatchList(
      largestMismatches(records.filter((r) => r.step === record.step)),
      `Largest trainer − rollout mismatches of step ${record.step}`,
      (m) => actions.openToken(m.recordId, m.index),
    ),
    hasZeroVariance(group)
      ? h(
          'div',
          { class: 'banner warning', id: 'zero-variance', role: 'status' },
          icon('warning'),
          ' Every sample earned the same reward: this group has zero variance and gives GRPO no learning signal.',
        )
      : null,
    groupBy === 'anchor'
      ? renderAnchors(group, record, actions.openStep)
      : h(
          'table',
          { class: 'grid' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              header('sample', 'sample'),
              header('reward', 'reward'),
              ...components.map((c) => header(c)),
              header(ADVANTAGE.episode.label, undefined, ADVANTAGE.episode.help),
              header('turns', 'turns'),
              header('tool calls'),
              header('status'),
              header('final answer'),
            ),
          ),
          h('tbody', {}, ...rows),
        ),
  );
}

/** A state key as text: on one line when short, else a one-line summary that opens onto the whole key. */
function stateKeyText(key: string): HTMLElement {
  const preview = stateKeyPreview(key);
  if (preview === key) return h('code', { class: 'state-key' }, key);
  return h('details', { class: 'state-key' }, h('summary', {}, h('code', {}, preview)), h('pre', {}, key));
}

function anchorHead(anchor: AnchorGroup, index: number): HTMLElement {
  const flat = !anchor.singleton && anchor.returnMin !== null && anchor.returnMin === anchor.returnMax;
  const range =
    anchor.returnMean === null
      ? 'step return –'
      : anchor.returnMin === anchor.returnMax
        ? `step return ${formatNumber(anchor.returnMean)}`
        : `step return mean ${formatNumber(anchor.returnMean)} (${formatNumber(anchor.returnMin)} to ${formatNumber(anchor.returnMax)})`;
  return h(
    'tr',
    { class: 'anchor-head' },
    h(
      'td',
      { colspan: 5 },
      h('span', { class: 'anchor-index' }, `state ${index + 1}`),
      ' ',
      stateKeyText(anchor.stateKey),
      h(
        'div',
        { class: 'anchor-meta' },
        h(
          'span',
          { class: 'anchor-size' },
          `anchor group of ${anchor.size} step${anchor.size === 1 ? '' : 's'} · ${anchor.episodes} episode${anchor.episodes === 1 ? '' : 's'}`,
        ),
        ' · ',
        range,
        anchor.singleton
          ? h(
              'span',
              {
                class: 'badge singleton',
                title: 'Only one step starts from this state: nothing to compare it with, so no step-level signal',
              },
              'size 1 · no step-level signal',
            )
          : flat
            ? h(
                'span',
                {
                  class: 'badge flat',
                  title: 'Every step from this state has the same return: their step advantages are 0',
                },
                'equal returns · no step-level signal',
              )
            : null,
      ),
    ),
  );
}

function renderAnchors(
  group: TrajectoryRecord[],
  record: TrajectoryRecord,
  openStep: (id: string, turn: number) => void,
): HTMLElement {
  const { groups, keyless } = anchorGroups(group);
  const reward = new Map(group.map((r) => [r.id, r.reward]));
  const steps = groups.reduce((sum, g) => sum + g.size, 0);
  const singletons = groups.filter((g) => g.singleton).length;
  const bodies = groups.map((anchor, index) =>
    h(
      'tbody',
      { class: `anchor-group${anchor.singleton ? ' singleton' : ''}`, 'data-size': anchor.size },
      anchorHead(anchor, index),
      ...anchor.steps.map((step) => {
        const row = h(
          'tr',
          {
            tabindex: 0,
            class: `anchor-step${step.id === record.id ? ' current' : ''}`,
            'data-id': step.id,
            'data-turn': step.turn,
            title: `Open sample ${step.sample} at turn ${step.turn + 1}`,
          },
          h('td', { class: 'num' }, step.sample),
          h('td', { class: 'num' }, step.turn + 1),
          h('td', { class: 'num' }, formatNumber(step.stepReturn)),
          h('td', { class: 'num' }, formatNumber(step.stepAdvantage)),
          h('td', { class: 'num' }, formatNumber(reward.get(step.id))),
        );
        row.addEventListener('click', () => openStep(step.id, step.turn));
        row.addEventListener('keydown', (event) => {
          if (event.key === 'Enter') openStep(step.id, step.turn);
        });
        return row;
      }),
    ),
  );
  return h(
    'div',
    { class: 'anchor-view' },
    h(
      'p',
      { class: 'anchor-summary', id: 'anchor-summary' },
      `${groups.length} distinct state${groups.length === 1 ? '' : 's'} over ${steps} step${steps === 1 ? '' : 's'}`,
      singletons
        ? ` · ${singletons} reached by one step only (size 1: no step-level signal)`
        : ' · every state reached by more than one step',
      keyless ? ` · ${keyless} step${keyless === 1 ? '' : 's'} without a state key, not grouped` : '',
    ),
    h(
      'table',
      { class: 'grid anchors' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, 'sample'),
          h('th', { scope: 'col' }, 'turn'),
          h('th', { scope: 'col' }, 'step return'),
          h('th', { scope: 'col' }, 'step advantage'),
          h('th', { scope: 'col' }, 'episode reward'),
        ),
      ),
      ...bodies,
    ),
  );
}
