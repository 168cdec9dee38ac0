// Run Dashboard benchmark (not a test): a run of 5,000 steps x 40 metrics drawn from nothing, then one new
// step at a time, in headless Chromium.   npm run bench:dashboard
// "end to end" runs from the host's postMessage to the end of the draw (the message's structured clone, the
// fold into series, the wait for an animation frame, the charts); "draw" is the draw alone.
import type { DashboardEvent } from '../../protocol/dashboard-messages';
import { launch, pageFile, runFixture } from './harness';

const STEPS = 5_000;
const UPDATES = 30;

/** The recorded run's 35 metric names and 5 more per-tool series, as a run with several Tools emits. */
function metricNames(): string[] {
  const recorded = runFixture('lookup-lr-high').events.find((e) => e.type === 'metrics')!.data as {
    metrics: Record<string, number>;
  };
  const tools = ['search', 'calculator', 'lookup', 'fetch', 'python'].map((tool) => `tools/${tool}/failure_rate`);
  return [...Object.keys(recorded.metrics), ...tools].slice(0, 40);
}

function metricsEvent(names: string[], step: number): DashboardEvent {
  const metrics: Record<string, number> = {};
  names.forEach((name, i) => {
    metrics[name] = Math.sin(step / (50 + i)) + i + ((step * 7919 + i * 104729) % 1000) / 5000;
  });
  return { seq: step + 1, time: 1.8e9 + step * 20, type: 'metrics', data: { step, metrics } };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const round = (ms: number) => Math.round(ms * 10) / 10;

async function main() {
  const names = metricNames();
  const events: DashboardEvent[] = [
    { seq: 1, time: 1.8e9, type: 'status', data: { status: 'running', step: 0, total_steps: STEPS + UPDATES } },
    ...Array.from({ length: STEPS }, (_, i) => metricsEvent(names, i + 1)),
  ];
  const browser = await launch();
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on('pageerror', (err) => {
    throw err;
  });
  await page.goto(pageFile('vscode-dark', 'dashboard'));
  await page.waitForFunction(() =>
    (window as unknown as { __posted: Array<{ type: string }> }).__posted.some((m) => m.type === 'ready'),
  );
  await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))); // the empty first draw is done

  /** Posts the messages and resolves with the time to the end of the next draw, and that draw's own time. */
  // (No named functions inside evaluate: tsx would wrap them in a helper the page does not have.)
  const timed = (messages: unknown[]) =>
    page.evaluate(async (ms) => {
      const before = performance.getEntriesByName('dashboard-drawn').length;
      const started = performance.now();
      for (const m of ms) window.postMessage(m, '*');
      while (performance.getEntriesByName('dashboard-drawn').length <= before)
        await new Promise((resolve) => setTimeout(resolve, 0));
      const last = performance.getEntriesByName('dashboard-drawn').at(-1)!;
      return { endToEnd: last.startTime + last.duration - started, draw: last.duration };
    }, messages);

  const runId = 'bench';
  const render = await timed([
    { type: 'runs', runs: [{ runId, name: 'bench' }] },
    { type: 'events', runId, events },
  ]);
  const charts = await page.locator('section.chart').count();
  const series = await page.locator('table.latest tbody tr').count();
  const updates: Array<{ endToEnd: number; draw: number }> = [];
  for (let i = 1; i <= UPDATES; i++)
    updates.push(await timed([{ type: 'events', runId, events: [metricsEvent(names, STEPS + i)] }]));
  await browser.close();
  console.log(
    JSON.stringify(
      {
        run: { steps: STEPS, series, charts },
        render_5000_steps_x_40_series_ms: { end_to_end: round(render.endToEnd), draw: round(render.draw) },
        new_step_update_ms: {
          end_to_end_median: round(median(updates.map((u) => u.endToEnd))),
          end_to_end_max: round(Math.max(...updates.map((u) => u.endToEnd))),
          draw_median: round(median(updates.map((u) => u.draw))),
          draw_max: round(Math.max(...updates.map((u) => u.draw))),
        },
      },
      null,
      2,
    ),
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
