// Which chart a metric goes on. Metrics are named `prefix/name` by the trainer (agentrl/run/stats.py); the
// prefix picks the group, and within a group metrics of different units get their own chart, so seconds and
// tokens per second never share a y axis. Names the trainer adds later land in a group by their prefix, or
// in `other`. `steps/` are the per-step (turn) measures: calls per step, retries, state changes, the size of
// GiGPO's anchor groups and the spread of the step advantages.
export const GROUPS = ['reward', 'actor', 'loss', 'adv', 'steps', 'tool', 'health', 'perf', 'other'] as const;
export type MetricGroup = (typeof GROUPS)[number];

const PREFIX_GROUP: Record<string, MetricGroup> = {
  reward: 'reward',
  actor: 'actor',
  loss: 'loss',
  adv: 'adv',
  steps: 'steps',
  tool: 'tool',
  tools: 'tool',
  health: 'health',
  perf: 'perf',
};

export function metricGroup(name: string): MetricGroup {
  return PREFIX_GROUP[name.split('/')[0]] ?? 'other';
}

/** The unit a metric's name ends in, or '' for plain values and counts. */
export function metricUnit(name: string): string {
  const last = name.split('/').pop() ?? name;
  if (/(^|_)(rate|frac|fraction|share)$/.test(last)) return 'fraction';
  if (/per_s$/.test(last)) return 'per second';
  if (/(^|_)s$/.test(last)) return 'seconds';
  if (/_mb$/.test(last)) return 'MB';
  return '';
}

export interface ChartSpec {
  /** Stable id: group and unit. */
  key: string;
  group: MetricGroup;
  title: string;
  metrics: string[];
}

/** The charts for these metric names: in group order, then by unit, metrics sorted by name. */
export function chartSpecs(names: Iterable<string>): ChartSpec[] {
  const specs = new Map<string, ChartSpec>();
  for (const name of names) {
    const group = metricGroup(name);
    const unit = metricUnit(name);
    const key = unit ? `${group}:${unit}` : group;
    let spec = specs.get(key);
    if (!spec) specs.set(key, (spec = { key, group, title: unit ? `${group} (${unit})` : group, metrics: [] }));
    spec.metrics.push(name);
  }
  for (const spec of specs.values()) spec.metrics.sort();
  return [...specs.values()].sort(
    (a, b) => GROUPS.indexOf(a.group) - GROUPS.indexOf(b.group) || a.key.localeCompare(b.key),
  );
}
