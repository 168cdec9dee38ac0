// The group view: the samples of one prompt side by side, as GRPO compares them.
import type { TrajectoryRecord } from '../protocol/webview-messages';
import { formatNumber, h, icon } from './dom';
import type { GroupSort, UiState } from './state';
import { groupOf, hasZeroVariance } from './steps';

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
  },
): HTMLElement {
  const group = sortGroup(groupOf(records, record), state.groupSort);
  const components = [...new Set(group.flatMap((r) => Object.keys(r.reward_breakdown)))];
  const header = (label: string, sort?: GroupSort) => {
    if (!sort) return h('th', { scope: 'col' }, label);
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
  return h(
    'section',
    { class: 'group-view', 'aria-label': `Group ${record.group} of step ${record.step}` },
    h(
      'div',
      { class: 'toolbar' },
      h('span', {}, `step ${record.step} · group ${record.group} · task ${record.task_id} · ${group.length} samples`),
    ),
    hasZeroVariance(group)
      ? h(
          'div',
          { class: 'banner warning', id: 'zero-variance', role: 'status' },
          icon('warning'),
          ' Every sample earned the same reward: this group has zero variance and gives GRPO no learning signal.',
        )
      : null,
    h(
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
          header('advantage'),
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
