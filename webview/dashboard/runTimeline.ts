// One run's events as the dashboard draws them: metric series by name, its status and its health alerts.
// Events come from the host in seq order, but the same event can come twice (the history re-sent after a
// webview reload, a resubscription after a reconnect): one is kept per seq. A resumed run's status event
// supersedes the events after its checkpoint (protocol/superseded-events.ts): they are forgotten, since the
// resumed process re-emits those steps.
import type { DashboardEvent, DashboardHealth } from '../../protocol/dashboard-messages';
import type { StatusEvent } from '../../protocol/generated/rpc';
import { forgetSupersededEvents } from '../../protocol/superseded-events';

export interface MetricSeries {
  steps: number[];
  /** Epoch seconds at which each step's metrics were written. */
  times: number[];
  values: number[];
}

export interface HealthEntry {
  seq: number;
  alert: DashboardHealth;
}

export class RunTimeline {
  private readonly bySeq = new Map<number, DashboardEvent>();
  private lastSeq = 0;
  readonly metrics = new Map<string, MetricSeries>();
  health: HealthEntry[] = [];
  status: StatusEvent | undefined;
  /** Time of the run's first event: the origin of the wall-clock axis. */
  startTime: number | undefined;

  /** Adds events; says whether anything changed. Events after the last one known extend the series in
   * place (a live step); anything else (a gap filled, a resume) rebuilds them from every event kept. */
  apply(events: DashboardEvent[]): boolean {
    let changed = false;
    let rebuild = false;
    for (const event of events) {
      if (this.bySeq.has(event.seq)) continue;
      changed = true;
      this.bySeq.set(event.seq, event);
      if (event.type === 'status' && forgetSupersededEvents(this.bySeq, event)) rebuild = true;
      if (event.seq < this.lastSeq) rebuild = true;
      else if (!rebuild) this.fold(event);
      this.lastSeq = Math.max(this.lastSeq, event.seq);
    }
    if (rebuild) this.rebuildFromEvents();
    return changed;
  }

  get latestStep(): number {
    let step = 0;
    for (const series of this.metrics.values()) step = Math.max(step, series.steps[series.steps.length - 1] ?? 0);
    return step;
  }

  private rebuildFromEvents(): void {
    this.metrics.clear();
    this.health = [];
    this.status = undefined;
    this.startTime = undefined;
    for (const event of [...this.bySeq.values()].sort((a, b) => a.seq - b.seq)) this.fold(event);
  }

  private fold(event: DashboardEvent): void {
    this.startTime ??= event.time;
    switch (event.type) {
      case 'status':
        this.status = event.data;
        return;
      case 'health':
        this.health.push({ seq: event.seq, alert: event.data });
        return;
      case 'metrics': {
        const { step, metrics } = event.data;
        for (const [name, value] of Object.entries(metrics)) {
          let series = this.metrics.get(name);
          if (!series) this.metrics.set(name, (series = { steps: [], times: [], values: [] }));
          // Steps arrive in order; a step written twice (a resume already dropped the superseded one) keeps the later.
          let at = series.steps.length;
          while (at > 0 && series.steps[at - 1] > step) at--;
          if (at > 0 && series.steps[at - 1] === step) {
            series.times[at - 1] = event.time;
            series.values[at - 1] = value;
          } else {
            series.steps.splice(at, 0, step);
            series.times.splice(at, 0, event.time);
            series.values.splice(at, 0, value);
          }
        }
      }
    }
  }
}
