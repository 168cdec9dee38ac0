// The Run Dashboard's browser app: live charts of every metric the shown runs emit, their health alerts, their
// config differences and the code they trained with. It talks to its host only through protocol/dashboard-messages.ts and keeps the
// user's smoothing and x axis in the webview state. Events are folded as they come; drawing waits for the
// next animation frame, so a burst of events (a finished run's whole log) is drawn once.
import type { DashboardHostMessage, DashboardRun, DashboardWebviewMessage } from '../../protocol/dashboard-messages';
import { clear, h } from '../dom';
import { renderAlerts } from './alerts';
import { MetricChart, readTheme, type ChartTheme } from './chart';
import { buildChartData, latestPoints, type XAxis } from './chartData';
import { configDiff } from './configDiff';
import { renderCode } from './codeSection';
import { chartSpecs, GROUPS } from './metricGroups';
import { RunTimeline } from './runTimeline';
import '../styles.css';
import './styles.css';

interface VsCodeApi {
  postMessage(message: DashboardWebviewMessage): void;
  getState(): unknown;
  setState(state: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

interface DashboardState {
  smoothing: number;
  axis: XAxis;
  showConfigDiff: boolean;
}

const DEFAULT_STATE: DashboardState = { smoothing: 0, axis: 'step', showConfigDiff: false };
/** How each run's lines are drawn, in the run legend as in the charts (chart.ts RUN_DASHES). */
const RUN_LINE_STYLES = ['solid', 'dashed', 'dotted', 'dash-dot'];

class DashboardApp {
  private readonly vscode = acquireVsCodeApi();
  private readonly state: DashboardState = {
    ...DEFAULT_STATE,
    ...(this.vscode.getState() as Partial<DashboardState> | null),
  };
  private runs: DashboardRun[] = [];
  private timelines: RunTimeline[] = [];
  private readonly charts = new Map<string, MetricChart>();
  private theme: ChartTheme = readTheme();
  private drawQueued = false;
  private readonly legend = h('div', { class: 'run-legend', 'aria-label': 'Runs' });
  private readonly configPanel = h('div', { class: 'config-diff', id: 'config-diff' });
  private readonly codePanel = h('div', { id: 'code' });
  private readonly alerts = h('div', {});
  private readonly chartsHost = h('div', { class: 'charts' });
  private readonly configToggle = h(
    'button',
    { id: 'toggle-config-diff', 'aria-controls': 'config-diff' },
    'config differences',
  );

  constructor(private readonly root: HTMLElement) {
    window.addEventListener('message', (event: MessageEvent<DashboardHostMessage>) => this.receive(event.data));
    // VS Code swaps the body's theme class when the user changes theme: the canvases re-read their colours.
    new MutationObserver(() => {
      this.theme = readTheme();
      this.queueDraw();
    }).observe(document.body, { attributes: true, attributeFilter: ['class'] });
    this.root.append(this.toolbar(), this.configPanel, this.codePanel, this.alerts, this.chartsHost);
    this.queueDraw();
    this.vscode.postMessage({ type: 'ready' });
  }

  private receive(message: DashboardHostMessage): void {
    if (message.type === 'runs') {
      this.runs = message.runs;
      this.timelines = message.runs.map(() => new RunTimeline());
      // The runs' code does not change while they are shown: drawn once, so an opened file list stays open.
      this.codePanel.replaceChildren(
        renderCode(message.runs, (runId, otherRunId) =>
          this.vscode.postMessage({ type: 'compareCode', runId, otherRunId }),
        ),
      );
      for (const chart of this.charts.values()) chart.destroy();
      this.charts.clear();
      clear(this.chartsHost);
      this.queueDraw();
    } else if (message.type === 'events') {
      const index = this.runs.findIndex((r) => r.runId === message.runId);
      if (index >= 0 && this.timelines[index].apply(message.events)) this.queueDraw();
    }
  }

  private toolbar(): HTMLElement {
    const smoothing = h('input', {
      type: 'range',
      id: 'smoothing',
      min: 0,
      max: 0.99,
      step: 0.01,
      value: this.state.smoothing,
      'aria-label': 'Smoothing (exponential moving average weight)',
    });
    const smoothingValue = h('output', { for: 'smoothing', id: 'smoothing-value' }, this.state.smoothing.toFixed(2));
    smoothing.addEventListener('input', () => {
      smoothingValue.textContent = Number(smoothing.value).toFixed(2);
      this.setState({ smoothing: Number(smoothing.value) });
    });
    const axis = h(
      'select',
      { id: 'x-axis', 'aria-label': 'X axis' },
      h('option', { value: 'step', selected: this.state.axis === 'step' }, 'x: step'),
      h('option', { value: 'time', selected: this.state.axis === 'time' }, 'x: wall-clock'),
    );
    axis.addEventListener('change', () => this.setState({ axis: axis.value as XAxis }));
    this.configToggle.addEventListener('click', () => this.setState({ showConfigDiff: !this.state.showConfigDiff }));
    return h(
      'header',
      { class: 'dashboard-header' },
      this.legend,
      h(
        'div',
        { class: 'toolbar' },
        h('label', { for: 'smoothing' }, 'smoothing '),
        smoothing,
        smoothingValue,
        axis,
        this.configToggle,
        h('span', { class: 'hint' }, 'drag to zoom · double-click resets · click a point to open its replay'),
      ),
    );
  }

  private setState(change: Partial<DashboardState>): void {
    Object.assign(this.state, change);
    this.vscode.setState(this.state);
    this.queueDraw();
  }

  private queueDraw(): void {
    if (this.drawQueued) return;
    this.drawQueued = true;
    requestAnimationFrame(() => {
      this.drawQueued = false;
      this.draw();
    });
  }

  private openReplay(runIndex: number, step: number): void {
    const run = this.runs[runIndex];
    if (run) this.vscode.postMessage({ type: 'openReplay', runId: run.runId, step });
  }

  private draw(): void {
    const start = performance.now();
    const names = this.runs.map((r) => r.name);
    this.drawLegend();
    this.drawConfigDiff();
    clear(this.alerts);
    this.alerts.append(
      renderAlerts(
        this.timelines.map((t, runIndex) => ({ runIndex, runName: names[runIndex], entries: t.health })),
        this.runs.length > 1,
        (runIndex, step) => this.openReplay(runIndex, step),
      ),
    );
    const views = this.timelines.map((timeline, i) => ({ name: names[i], timeline }));
    const specs = chartSpecs(new Set(this.timelines.flatMap((t) => [...t.metrics.keys()])));
    if (!specs.length) {
      clear(this.chartsHost);
      this.chartsHost.append(
        h(
          'p',
          { class: 'empty' },
          this.runs.length ? 'No metrics yet: they appear after the first step.' : 'Waiting for runs…',
        ),
      );
    } else {
      this.layoutCharts(specs);
      for (const spec of specs) {
        const { axis, smoothing } = this.state;
        this.charts
          .get(spec.key)!
          .update(
            () => buildChartData(spec.metrics, views, axis, smoothing),
            axis,
            this.theme,
            names,
            latestPoints(spec.metrics, views),
          );
      }
    }
    // Each draw's duration, for the benchmark and for the tests that wait for a draw (test/browser/). uPlot
    // paints its canvases in microtasks queued during the draw: this one, queued after them, ends it.
    queueMicrotask(() => performance.measure('dashboard-drawn', { start }));
  }

  /** One section per metric group, one chart per group and unit; charts are kept across draws. */
  private layoutCharts(specs: ReturnType<typeof chartSpecs>): void {
    const wanted = new Set(specs.map((s) => s.key));
    for (const [key, chart] of this.charts) {
      if (wanted.has(key)) continue;
      chart.destroy();
      this.charts.delete(key);
    }
    const sections = GROUPS.filter((group) => specs.some((s) => s.group === group)).map((group) => {
      const grid = h('div', { class: 'chart-grid' });
      for (const spec of specs.filter((s) => s.group === group)) {
        let chart = this.charts.get(spec.key);
        if (!chart)
          this.charts.set(
            spec.key,
            (chart = new MetricChart(spec, (runIndex, step) => this.openReplay(runIndex, step))),
          );
        grid.appendChild(chart.element);
      }
      return h(
        'section',
        { class: 'group', 'data-group': group, 'aria-label': `${group} metrics` },
        h('h2', {}, group),
        grid,
      );
    });
    const focused = document.hasFocus() ? document.activeElement : null; // an unfocused page's: never taken back
    this.chartsHost.replaceChildren(...sections); // moving a chart keeps its canvas; focus is given back
    if (focused instanceof HTMLElement && this.chartsHost.contains(focused)) focused.focus();
  }

  private drawLegend(): void {
    clear(this.legend);
    this.runs.forEach((run, i) => {
      const status = this.timelines[i].status;
      const progress = status ? `${status.status} · step ${status.step}/${status.total_steps}` : 'loading…';
      this.legend.appendChild(
        h(
          'span',
          { class: 'run', 'data-run': run.runId, title: run.runId },
          h('span', {
            class: `line ${RUN_LINE_STYLES[i % RUN_LINE_STYLES.length]}`,
            'aria-label': `${RUN_LINE_STYLES[i % RUN_LINE_STYLES.length]} lines`,
            role: 'img',
          }),
          h('strong', {}, run.name),
          ` ${progress}`,
        ),
      );
    });
  }

  private drawConfigDiff(): void {
    const comparable = this.runs.length > 1;
    this.configToggle.hidden = !comparable;
    this.configToggle.setAttribute('aria-expanded', String(this.state.showConfigDiff));
    clear(this.configPanel);
    if (!comparable || !this.state.showConfigDiff) return;
    const [base, ...others] = this.runs;
    for (const run of others) {
      const title = `${run.name} against ${base.name}`;
      if (!base.config || !run.config) {
        this.configPanel.append(h('p', { class: 'empty' }, `${title}: the trainer did not give both configs.`));
        continue;
      }
      const differences = configDiff(base.config, run.config).filter((d) => d.key !== 'name');
      if (!differences.length) {
        this.configPanel.append(
          h(
            'p',
            { class: 'same-config', 'data-run': run.runId },
            `${title}: 0 differences (the same config apart from its name)`,
          ),
        );
        continue;
      }
      this.configPanel.append(
        h(
          'table',
          { class: 'grid', 'data-run': run.runId },
          h('caption', {}, `${title}: ${differences.length} difference${differences.length === 1 ? '' : 's'}`),
          h('thead', {}, h('tr', {}, ...['key', base.name, run.name].map((t) => h('th', { scope: 'col' }, t)))),
          h(
            'tbody',
            {},
            ...differences.map((d) =>
              h('tr', {}, h('td', {}, d.key), h('td', {}, d.base ?? '(absent)'), h('td', {}, d.other ?? '(absent)')),
            ),
          ),
        ),
      );
    }
  }
}

new DashboardApp(document.getElementById('app') ?? document.body);
