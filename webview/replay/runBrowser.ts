// The run browser: every trajectory of the loaded file or run, filtered and sorted; for a run on a connected
// trainer, a search box whose matches (the trainer's search index) replace the list.
import type { EpisodeQuery, TrajectoryRecord } from '../../protocol/webview-messages';
import { formatNumber, h, icon } from '../dom';
import { describeQuery, renderSearchBox, type SearchState } from './searchBox';
import { ROW_PAGE, type RunSort, type UiState } from './state';
import { addEpisodeButton } from './trainingSetAction';

export function visibleRecords(records: TrajectoryRecord[], state: UiState): TrajectoryRecord[] {
  const { status, toolErrorsOnly, step } = state.filters;
  const filtered = records.filter(
    (r) =>
      (!status || r.status === status) &&
      (!toolErrorsOnly || r.stats.num_tool_errors > 0) &&
      (step === '' || String(r.step) === step),
  );
  const key: Record<RunSort, (r: TrajectoryRecord) => number> = {
    step: (r) => r.step * 1e6 + r.group * 1e3 + r.sample,
    reward: (r) => r.reward,
    '-reward': (r) => -r.reward,
    length: (r) => r.stats.response_tokens,
    '-length': (r) => -r.stats.response_tokens,
  };
  return [...filtered].sort((a, b) => key[state.runSort](a) - key[state.runSort](b));
}

/** The list's filters that are on, as words ("step 3", "status error", "tool errors only"). */
function filtersOn({ filters }: UiState): string[] {
  return [
    ...(filters.step === '' ? [] : [`step ${filters.step}`]),
    ...(filters.status ? [`status ${filters.status}`] : []),
    ...(filters.toolErrorsOnly ? ['tool errors only'] : []),
  ];
}

export function renderRunBrowser(
  records: TrajectoryRecord[],
  state: UiState,
  actions: {
    update: (change: (state: UiState) => void) => void;
    open: (id: string) => void;
    /** Add to Training Set (the whole episode); absent where the host has nowhere to add it. */
    addToSet?: (record: TrajectoryRecord) => void;
  },
  search?: {
    state: SearchState | undefined;
    run: (query: EpisodeQuery) => void;
    more: () => void;
    clear: () => void;
  },
): HTMLElement {
  const steps = [...new Set(records.map((r) => r.step))].sort((a, b) => a - b);
  const status = h(
    'select',
    { 'aria-label': 'Filter by status', id: 'filter-status' },
    ...['', 'finished', 'truncated', 'error'].map((value) =>
      h('option', { value, selected: state.filters.status === value }, value || 'any status'),
    ),
  );
  status.addEventListener('change', () =>
    actions.update((s) => {
      s.filters.status = status.value as UiState['filters']['status'];
    }),
  );
  const stepSelect = h(
    'select',
    { 'aria-label': 'Filter by step', id: 'filter-step' },
    h('option', { value: '', selected: state.filters.step === '' }, 'every step'),
    ...steps.map((value) =>
      h('option', { value: String(value), selected: state.filters.step === String(value) }, `step ${value}`),
    ),
  );
  stepSelect.addEventListener('change', () =>
    actions.update((s) => {
      s.filters.step = stepSelect.value;
    }),
  );
  const errors = h('input', { type: 'checkbox', id: 'filter-tool-errors', checked: state.filters.toolErrorsOnly });
  errors.addEventListener('change', () =>
    actions.update((s) => {
      s.filters.toolErrorsOnly = errors.checked;
    }),
  );
  const sort = h(
    'select',
    { 'aria-label': 'Sort trajectories', id: 'run-sort' },
    ...(
      [
        ['step', 'by step'],
        ['-reward', 'highest reward'],
        ['reward', 'lowest reward'],
        ['-length', 'longest'],
        ['length', 'shortest'],
      ] as const
    ).map(([value, label]) => h('option', { value, selected: state.runSort === value }, label)),
  );
  sort.addEventListener('change', () =>
    actions.update((s) => {
      s.runSort = sort.value as RunSort;
    }),
  );
  const follow = h('input', { type: 'checkbox', id: 'follow-live', checked: state.followLive });
  follow.addEventListener('change', () =>
    actions.update((s) => {
      s.followLive = follow.checked;
    }),
  );

  const narrowedBy = filtersOn(state);
  const clearFilters = h(
    'button',
    { id: 'clear-filters', title: 'Show every episode of the run' },
    `filtered by ${narrowedBy.join(', ')}: show all`,
  );
  clearFilters.addEventListener('click', () =>
    actions.update((s) => {
      s.filters = { status: '', toolErrorsOnly: false, step: '' };
    }),
  );

  const found = search?.state;
  const byId = new Map(records.map((r) => [r.id, r]));
  const matching = found
    ? found.ids.map((id) => byId.get(id)).filter((r): r is TrajectoryRecord => r !== undefined)
    : visibleRecords(records, state);
  const shown = matching.slice(0, state.runRowLimit); // a run can hold 10,000s of episodes: render a page at a time
  const body = h('tbody');
  const addToSet = actions.addToSet;
  for (const record of shown) {
    const row = h(
      'tr',
      {
        tabindex: 0,
        'data-id': record.id,
        class: `status-${record.status}`,
        'aria-label': `Open trajectory ${record.id}`,
      },
      h('td', {}, record.id),
      h('td', {}, record.step),
      h('td', { class: 'num' }, formatNumber(record.reward)),
      h(
        'td',
        {},
        icon(record.status === 'finished' ? 'pass' : record.status === 'truncated' ? 'warning' : 'error'),
        ' ',
        record.status,
      ),
      h('td', { class: 'num' }, record.stats.num_turns),
      h(
        'td',
        { class: 'num' },
        `${record.stats.num_tool_calls}`,
        record.stats.num_tool_errors ? h('span', { class: 'bad' }, ` (${record.stats.num_tool_errors} failed)`) : null,
      ),
      h('td', { class: 'num' }, record.stats.response_tokens),
      h('td', { class: 'answer' }, record.final_answer ?? ''),
      addToSet
        ? h(
            'td',
            {},
            addEpisodeButton(record.id, () => addToSet(record)),
          )
        : null,
    );
    row.addEventListener('click', () => actions.open(record.id));
    row.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') actions.open(record.id);
    });
    body.appendChild(row);
  }
  return h(
    'section',
    { class: 'run-browser', 'aria-label': 'Trajectories' },
    h(
      'div',
      { class: 'toolbar' },
      status,
      stepSelect,
      h('label', { for: 'filter-tool-errors' }, errors, ' tool errors only'),
      sort,
      h('label', { for: 'follow-live' }, follow, ' follow live'),
      h('span', { class: 'count' }, `${matching.length} of ${records.length}`),
      // Said in words, beside the count: a filter set by a click elsewhere (a chart's point filters to its step)
      // would else stay on unseen when the list comes back.
      !found && narrowedBy.length ? clearFilters : null,
    ),
    search ? renderSearchBox(records, found?.query, search.run) : null,
    found ? searchBanner(found, search!) : null,
    h(
      'table',
      { class: 'grid' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ...['id', 'step', 'reward', 'status', 'turns', 'tool calls', 'tokens', 'final answer'].map((t) =>
            h('th', { scope: 'col' }, t),
          ),
          addToSet ? h('th', { scope: 'col', 'aria-label': 'Add to Training Set' }) : null,
        ),
      ),
      body,
    ),
    !found && matching.length > shown.length ? more(matching.length - shown.length, actions) : null,
  );
}

/** What the search found, with the next page and the way back to the whole list. */
function searchBanner(found: SearchState, search: { more: () => void; clear: () => void }): HTMLElement {
  const said = found.error
    ? `Search failed: ${found.error}`
    : found.pending
      ? `Searching for ${describeQuery(found.query)}…`
      : `${found.total} episode${found.total === 1 ? '' : 's'} match ${describeQuery(found.query)}` +
        (found.total > found.ids.length ? ` (${found.ids.length} shown)` : '');
  const next = h('button', { id: 'search-more', disabled: found.pending || !found.nextCursor }, 'next matches');
  next.addEventListener('click', search.more);
  const clear = h('button', { id: 'search-clear' }, 'clear search');
  clear.addEventListener('click', search.clear);
  return h(
    'div',
    { class: `toolbar search-results${found.error ? ' bad' : ''}`, id: 'search-results', role: 'status' },
    h('span', {}, said),
    found.nextCursor ? next : null,
    clear,
  );
}

function more(remaining: number, actions: { update: (change: (state: UiState) => void) => void }): HTMLElement {
  const button = h(
    'button',
    { id: 'show-more' },
    `show ${Math.min(ROW_PAGE, remaining)} more (${remaining} not shown)`,
  );
  button.addEventListener('click', () =>
    actions.update((s) => {
      s.runRowLimit += ROW_PAGE;
    }),
  );
  return h('div', { class: 'toolbar' }, button);
}
