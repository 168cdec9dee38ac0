// A chart's data as uPlot takes it: one x array and, per series (a metric of a run), y values aligned to it,
// null where that series has no point. The x axis is the step, or the seconds since the run's first event;
// several runs' points then sit at different x, each series null at the others'. Every point also remembers
// its step, so a click on it opens the replay at that step whichever axis is shown.
import type { RunTimeline } from './runTimeline';
import { ema } from './smoothing';

export type XAxis = 'step' | 'time';

export interface SeriesInfo {
  metric: string;
  runIndex: number;
  label: string;
}

export interface ChartData {
  x: number[];
  /** ys[s][i]: series s at x[i]. */
  ys: Array<Array<number | null>>;
  /** steps[s][i]: the step of series s's point at x[i]. */
  steps: Array<Array<number | null>>;
  series: SeriesInfo[];
}

/** A series' last point, unsmoothed: what the text alternative reads out. */
export interface LatestPoint {
  series: SeriesInfo;
  step: number;
  value: number;
}

export interface RunView {
  name: string;
  timeline: RunTimeline;
}

export function buildChartData(metrics: string[], runs: RunView[], axis: XAxis, smoothing: number): ChartData {
  const raw: Array<{ info: SeriesInfo; xs: number[]; steps: number[]; values: number[] }> = [];
  runs.forEach(({ name, timeline }, runIndex) => {
    for (const metric of metrics) {
      const series = timeline.metrics.get(metric);
      if (!series?.steps.length) continue;
      const start = timeline.startTime ?? 0;
      raw.push({
        info: seriesInfo(metric, runIndex, runs.length, name),
        xs: axis === 'step' ? series.steps : series.times.map((t) => t - start),
        steps: series.steps,
        values: ema(series.values, smoothing),
      });
    }
  });
  const x = sortedUnion(raw.map((r) => r.xs));
  const index = new Map(x.map((value, i) => [value, i]));
  const ys = raw.map(() => new Array<number | null>(x.length).fill(null));
  const steps = raw.map(() => new Array<number | null>(x.length).fill(null));
  raw.forEach((r, s) => {
    for (let i = 0; i < r.xs.length; i++) {
      const at = index.get(r.xs[i])!;
      ys[s][at] = r.values[i];
      steps[s][at] = r.steps[i];
    }
  });
  return { x, ys, steps, series: raw.map((r) => r.info) };
}

/** Every series' last point, in the order buildChartData gives the series; cheap enough for every draw. */
export function latestPoints(metrics: string[], runs: RunView[]): LatestPoint[] {
  const points: LatestPoint[] = [];
  runs.forEach(({ name, timeline }, runIndex) => {
    for (const metric of metrics) {
      const series = timeline.metrics.get(metric);
      if (!series?.steps.length) continue;
      points.push({
        series: seriesInfo(metric, runIndex, runs.length, name),
        step: series.steps[series.steps.length - 1],
        value: series.values[series.values.length - 1],
      });
    }
  });
  return points;
}

function seriesInfo(metric: string, runIndex: number, runCount: number, runName: string): SeriesInfo {
  return { metric, runIndex, label: runCount > 1 ? `${metric} · ${runName}` : metric };
}

function sortedUnion(lists: number[][]): number[] {
  if (lists.length === 1) return lists[0].slice();
  const all = new Set<number>();
  for (const list of lists) for (const value of list) all.add(value);
  return [...all].sort((a, b) => a - b);
}
