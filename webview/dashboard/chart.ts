// One chart: a uPlot canvas for a group of metrics (one series per metric and run), the values at the cursor
// in its legend, and a visually hidden table of every series' latest value for screen readers. Colours come
// from the theme (CSS variables, re-read when the theme changes); runs differ by dash pattern, metrics by
// colour. A chart scrolled out of view is not redrawn while a run grows: it catches up when it comes back
// into view (its table of latest values is always current). Keyboard: arrows move along the points, Enter opens the replay at the step under the cursor,
// + and - zoom around it, 0 shows everything. Drag zooms, double-click resets, a click opens the replay.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { clear, formatNumber, h } from '../dom';
import type { ChartData, LatestPoint, XAxis } from './chartData';
import type { ChartSpec } from './metricGroups';

export interface ChartTheme {
  foreground: string;
  grid: string;
  palette: string[];
}

const PALETTE_SIZE = 8;
const RUN_DASHES: number[][] = [[], [6, 4], [2, 3], [10, 3, 2, 3]];
const HEIGHT = 200;
const STEP_TICKS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000];

export function readTheme(): ChartTheme {
  const style = getComputedStyle(document.body);
  const read = (name: string) => style.getPropertyValue(name).trim();
  return {
    foreground: read('--chart-fg'),
    grid: read('--chart-grid'),
    palette: Array.from({ length: PALETTE_SIZE }, (_, i) => read(`--series-${i}`)),
  };
}

export class MetricChart {
  readonly element: HTMLElement;
  private readonly plotHost: HTMLElement;
  private readonly summary: HTMLElement;
  /** Says which x range is shown after a zoom, for a keyboard or screen-reader user who cannot see it. */
  private readonly range = h('span', { class: 'visually-hidden x-range', 'aria-live': 'polite' });
  private plot: uPlot | undefined;
  private data: ChartData | undefined;
  /** Series labels, axis and theme the plot was built for: a change rebuilds it, anything else is setData. */
  private shape = '';
  private pointerDownAt: number | undefined;
  private readonly resize = new ResizeObserver(() => this.plot?.setSize({ width: this.width(), height: HEIGHT }));
  private visible = true;
  /** The draw a chart out of view skipped, done when it comes into view. */
  private pending: (() => void) | undefined;
  private readonly viewport = new IntersectionObserver(
    ([entry]) => {
      this.visible = entry.isIntersecting;
      if (this.visible && this.pending) this.pending();
    },
    { rootMargin: '200px' },
  );

  constructor(
    readonly spec: ChartSpec,
    private readonly onOpen: (runIndex: number, step: number) => void,
  ) {
    this.plotHost = h('div', {
      class: 'plot',
      tabindex: 0,
      role: 'application',
      id: `chart-${spec.key.replace(/[^a-z0-9]+/gi, '-')}`,
      'aria-label': `${spec.title} chart. Left and right arrows move between steps, Enter opens the replay at that step, plus and minus zoom, 0 shows every step.`,
    });
    this.summary = h('div', {});
    this.element = h(
      'section',
      { class: 'chart', 'data-chart': spec.key },
      h(
        'h3',
        { class: spec.title === spec.group ? 'visually-hidden' : undefined },
        spec.title,
      ) /* the group's heading says it already */,
      this.plotHost,
      this.range,
      this.summary,
    );
    this.plotHost.addEventListener('keydown', (event) => this.onKey(event));
    this.resize.observe(this.plotHost);
    this.viewport.observe(this.element);
  }

  /** `build` gives the chart's data; it is only called when the chart is in view. */
  update(build: () => ChartData, axis: XAxis, theme: ChartTheme, runNames: string[], latest: LatestPoint[]): void {
    this.renderSummary(latest, runNames);
    this.pending = () => {
      this.pending = undefined;
      this.plotData(build(), axis, theme);
    };
    if (this.visible) this.pending();
  }

  private plotData(data: ChartData, axis: XAxis, theme: ChartTheme): void {
    this.data = data;
    const shape = JSON.stringify([data.series.map((s) => s.label), axis, theme]);
    const aligned: uPlot.AlignedData = [data.x, ...data.ys];
    if (this.plot && shape === this.shape) {
      // Keep the user's zoom while a live run grows; without one the x range follows the new points.
      const zoomed = this.isZoomed();
      this.plot.setData(aligned, !zoomed);
    } else {
      this.plot?.destroy();
      this.shape = shape;
      this.plot = new uPlot(this.options(data, axis, theme), aligned, this.plotHost);
      this.plot.over.addEventListener('mousedown', (event) => {
        this.pointerDownAt = event.clientX;
      });
      this.plot.over.addEventListener('click', (event) => this.onClick(event));
    }
  }

  destroy(): void {
    this.resize.disconnect();
    this.viewport.disconnect();
    this.plot?.destroy();
  }

  private options(data: ChartData, axis: XAxis, theme: ChartTheme): uPlot.Options {
    const axisStyle = {
      stroke: theme.foreground,
      grid: { stroke: theme.grid, width: 1 },
      ticks: { stroke: theme.grid, width: 1 },
    };
    const metrics = this.spec.metrics;
    return {
      width: this.width(),
      height: HEIGHT,
      scales: {
        x: { time: false },
        // A fraction reads against its whole range; a flat series gets a unit around its value (uPlot's
        // default stretches an all-zero series to 0..100, which reads as a scale of percent).
        y: {
          range: (_u: uPlot, min: number, max: number): uPlot.Range.MinMax =>
            this.spec.key.endsWith(':fraction')
              ? [Math.min(0, min), Math.max(1, max)]
              : min === max
                ? [min - 1, max + 1]
                : uPlot.rangeNum(min, max, 0.1, true),
        },
      },
      cursor: { drag: { x: true, y: false }, focus: { prox: 24 } },
      focus: { alpha: 0.35 },
      legend: { live: true },
      hooks: {
        setScale: [
          (u, key) => {
            const { min, max } = u.scales.x;
            if (key === 'x' && min !== undefined && max !== undefined) {
              this.range.textContent = `${axis === 'step' ? 'steps' : 'seconds'} ${formatNumber(min, 1)} to ${formatNumber(max, 1)} shown`;
            }
          },
        ],
      },
      // Steps are whole numbers: no tick at 1.5.
      axes: [
        {
          ...axisStyle,
          label: axis === 'step' ? 'step' : 'seconds since start',
          ...(axis === 'step' ? { incrs: STEP_TICKS } : {}),
        },
        { ...axisStyle, size: 60 },
      ],
      series: [
        { label: axis === 'step' ? 'step' : 'seconds', value: (_u, v) => formatNumber(v, 1) },
        ...data.series.map((s) => ({
          label: s.label,
          stroke: theme.palette[metrics.indexOf(s.metric) % theme.palette.length],
          dash: RUN_DASHES[s.runIndex % RUN_DASHES.length],
          width: 1.5,
          spanGaps: true,
          points: { show: false },
          value: (_u: uPlot, v: number | null) => formatNumber(v, 4),
        })),
      ],
    };
  }

  private width(): number {
    return Math.max(240, this.plotHost.clientWidth || this.element.clientWidth || 600);
  }

  /** Whether the x range shown is narrower than the data's (the user zoomed), read before new data is set. */
  private isZoomed(): boolean {
    const x = this.plot?.data[0];
    const { min, max } = this.plot?.scales.x ?? {};
    return !!x?.length && min !== undefined && max !== undefined && (min > x[0] || max < x[x.length - 1]);
  }

  private renderSummary(latest: LatestPoint[], runNames: string[]): void {
    const rows = latest.map(({ series, step, value }) =>
      h(
        'tr',
        { 'data-series': series.label },
        h('th', { scope: 'row' }, series.metric),
        h('td', {}, runNames[series.runIndex] ?? ''),
        h('td', {}, step),
        h('td', { class: 'value' }, formatNumber(value, 4)),
      ),
    );
    clear(this.summary);
    this.summary.append(
      h(
        'table',
        { class: 'visually-hidden latest' },
        h('caption', {}, `${this.spec.title}: latest values`),
        h('thead', {}, h('tr', {}, ...['metric', 'run', 'step', 'value'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, ...rows),
      ),
    );
  }

  /** The point nearest to the cursor, over every series shown: its series and x index. */
  private nearestPoint(): { series: number; idx: number } | undefined {
    const plot = this.plot;
    const data = this.data;
    const { left, top, idx } = plot?.cursor ?? {};
    if (!plot || !data || idx === null || idx === undefined || left === undefined || top === undefined || left < 0)
      return undefined;
    let best: { series: number; idx: number; distance: number } | undefined;
    data.ys.forEach((ys, s) => {
      if (!plot.series[s + 1].show) return;
      const at = nearestDefined(ys, idx);
      if (at === undefined) return;
      const dx = plot.valToPos(data.x[at], 'x') - left;
      const dy = plot.valToPos(ys[at]!, 'y') - top;
      const distance = Math.hypot(dx, dy);
      if (!best || distance < best.distance) best = { series: s, idx: at, distance };
    });
    return best;
  }

  private open(point: { series: number; idx: number } | undefined): void {
    const step = point && this.data?.steps[point.series][point.idx];
    if (point && step !== null && step !== undefined) this.onOpen(this.data!.series[point.series].runIndex, step);
  }

  private onClick(event: MouseEvent): void {
    const dragged = this.pointerDownAt !== undefined && Math.abs(event.clientX - this.pointerDownAt) > 3;
    this.pointerDownAt = undefined;
    if (!dragged) this.open(this.nearestPoint());
  }

  private onKey(event: KeyboardEvent): void {
    const plot = this.plot;
    const x = this.data?.x;
    if (!plot || !x?.length) return;
    const current = plot.cursor.idx ?? x.length - 1;
    const moveTo = (idx: number) => {
      const at = Math.max(0, Math.min(x.length - 1, idx));
      const series = this.data!.ys.findIndex((ys) => ys[at] !== null);
      const top = series >= 0 ? plot.valToPos(this.data!.ys[series][at]!, 'y') : plot.over.clientHeight / 2;
      plot.setCursor({ left: plot.valToPos(x[at], 'x'), top });
    };
    const zoom = (factor: number) => {
      const { min = x[0], max = x[x.length - 1] } = plot.scales.x;
      const centre = x[current];
      const first = x[0];
      const last = x[x.length - 1];
      const width = Math.min(last - first, (max - min) * factor);
      // Centred on the cursor, slid inside the data so the window keeps its width at either end.
      const from = Math.max(first, Math.min(centre - width / 2, last - width));
      plot.setScale('x', { min: from, max: from + width });
      moveTo(current);
    };
    const keys: Record<string, () => void> = {
      ArrowRight: () => moveTo(current + 1),
      ArrowLeft: () => moveTo(current - 1),
      Home: () => moveTo(0),
      End: () => moveTo(x.length - 1),
      Enter: () => this.open(this.nearestPoint()),
      '+': () => zoom(0.5),
      '=': () => zoom(0.5),
      '-': () => zoom(2),
      '0': () => {
        plot.setScale('x', { min: x[0], max: x[x.length - 1] });
        moveTo(current);
      },
    };
    const action = keys[event.key];
    if (action) {
      event.preventDefault();
      action();
    }
  }
}

function nearestDefined(values: Array<number | null>, from: number): number | undefined {
  for (let d = 0; d < values.length; d++) {
    if (from - d >= 0 && values[from - d] !== null) return from - d;
    if (from + d < values.length && values[from + d] !== null) return from + d;
    if (from - d < 0 && from + d >= values.length) return undefined;
  }
  return undefined;
}
