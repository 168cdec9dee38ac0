// The run browser's search box: the replayed run's episodes found by the trainer's search index (trajectory/search)
// by words the model wrote or was told back, a tool, a tool error kind, a reward range or a health alert's steps;
// the matches replace the list, a page at a time.
import type { HealthCode } from '../../protocol/generated/rpc';
import type { EpisodeQuery, TrajectoryRecord } from '../../protocol/webview-messages';
import { h } from '../dom';

type ErrorKind = NonNullable<TrajectoryRecord['turns'][number]['tool_calls'][number]['error_kind']>;
export const ERROR_KINDS: readonly ErrorKind[] = [
  'exception',
  'timeout',
  'schema',
  'bad_result',
  'unknown_tool',
  'bad_json',
];
export const HEALTH_CODES: readonly HealthCode[] = [
  'zero_variance_groups',
  'no_tool_calls',
  'all_truncated',
  'high_truncation',
  'entropy_collapse',
  'response_length_explosion',
  'tool_failure_spike',
  'logprob_gap',
  'kl_above_bound',
  'non_finite',
  'heldout_divergence',
  'agent_prefix_breaks',
];

/** Where the search stands: asked (`pending` until the host answers), then the matches so far. */
export interface SearchState {
  query: EpisodeQuery;
  pending: boolean;
  ids: string[];
  total: number;
  nextCursor: string | null;
  error?: string;
}

/** A query's words for the results banner. */
export function describeQuery(query: EpisodeQuery): string {
  const parts = [
    query.text !== undefined ? `"${query.text}"` : '',
    query.tool !== undefined ? `tool ${query.tool}` : '',
    query.errorKind !== undefined ? `error ${query.errorKind}` : '',
    query.reward?.min !== undefined ? `reward ≥ ${query.reward.min}` : '',
    query.reward?.max !== undefined ? `reward ≤ ${query.reward.max}` : '',
    query.healthCode !== undefined ? `steps of ${query.healthCode}` : '',
  ];
  return parts.filter(Boolean).join(', ') || 'every episode';
}

/** The form; `run` is called with the query its fields make. */
export function renderSearchBox(
  records: TrajectoryRecord[],
  current: EpisodeQuery | undefined,
  run: (query: EpisodeQuery) => void,
): HTMLElement {
  const tools = [...new Set(records.flatMap((r) => r.tools.map((t) => toolName(t))).filter(Boolean))].sort();
  const text = h('input', {
    type: 'search',
    id: 'search-text',
    placeholder: 'words the model wrote or was told',
    'aria-label': 'Search the words of the episodes',
    value: current?.text ?? '',
  });
  const select = (id: string, label: string, options: readonly string[], chosen: string | undefined) =>
    h(
      'select',
      { id, 'aria-label': label },
      h('option', { value: '' }, label),
      ...options.map((value) => h('option', { value, selected: value === chosen }, value)),
    );
  const tool = select('search-tool', 'any tool', tools, current?.tool);
  const errorKind = select('search-error', 'any error', ERROR_KINDS, current?.errorKind);
  const health = select('search-health', 'any health alert', HEALTH_CODES, current?.healthCode);
  const bound = (id: string, label: string, value: number | undefined) =>
    h('input', { type: 'number', step: 'any', id, 'aria-label': label, placeholder: label, value: value ?? '' });
  const low = bound('search-reward-min', 'reward ≥', current?.reward?.min);
  const high = bound('search-reward-max', 'reward ≤', current?.reward?.max);
  const form = h(
    'form',
    { class: 'search-box', role: 'search', 'aria-label': 'Search episodes' },
    text,
    tool,
    errorKind,
    low,
    high,
    health,
    h('button', { type: 'submit', id: 'search-run' }, 'Search'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const number = (input: HTMLElement) => {
      const value = (input as HTMLInputElement).value.trim();
      return value === '' ? undefined : Number(value);
    };
    const chosen = (input: HTMLElement) => (input as HTMLSelectElement).value || undefined;
    const reward = { min: number(low), max: number(high) };
    const query: EpisodeQuery = {
      ...((text as HTMLInputElement).value.trim() ? { text: (text as HTMLInputElement).value.trim() } : {}),
      ...(chosen(tool) ? { tool: chosen(tool) } : {}),
      ...(chosen(errorKind) ? { errorKind: chosen(errorKind) } : {}),
      ...(reward.min !== undefined || reward.max !== undefined
        ? { reward: Object.fromEntries(Object.entries(reward).filter(([, v]) => v !== undefined)) }
        : {}),
      ...(chosen(health) ? { healthCode: chosen(health) as HealthCode } : {}),
    };
    run(query);
  });
  return form;
}

function toolName(schema: Record<string, unknown>): string {
  const fn = schema.function as { name?: unknown } | undefined;
  return typeof fn?.name === 'string' ? fn.name : typeof schema.name === 'string' ? schema.name : '';
}
