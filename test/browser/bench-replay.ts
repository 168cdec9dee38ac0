// Replay panel benchmark (not a test): time to first paint and to interactive for a 50-turn episode of
// 20,000 tokens, and for a run of 10,000 trajectories; and a live run followed: how much of the page's main thread
// (in VS Code, the thread the workbench shares) its appends keep busy.   npm run bench:replay
import type { Browser, Page } from 'playwright-core';
import type { TrajectoryRecord } from '../../protocol/webview-messages';
import { fixture, launch, load, pageFile } from './harness';

function longEpisode(base: TrajectoryRecord, turns: number, tokens: number): TrajectoryRecord {
  const turn = base.turns[0];
  const many = Array.from({ length: turns }, (_, index) => ({ ...turn, index }));
  const pick = <T>(values: T[]) => Array.from({ length: tokens }, (_, i) => values[i % values.length]);
  const t = base.tokens;
  return {
    ...base,
    id: 'long',
    turns: many,
    stats: { ...base.stats, num_turns: turns, total_tokens: tokens },
    tokens: {
      ids: pick(t.ids),
      text: pick(t.text),
      role: pick(t.role),
      turn: pick(t.turn),
      loss_mask: pick(t.loss_mask),
      logprob: pick(t.logprob),
      advantage: pick(t.advantage),
    },
  };
}

function bigRun(base: TrajectoryRecord, count: number): TrajectoryRecord[] {
  const small = {
    ...base,
    tokens: { ids: [], text: [], role: [], turn: [], loss_mask: [], logprob: [], advantage: [] },
  };
  return Array.from({ length: count }, (_, i) => ({
    ...small,
    id: `${Math.floor(i / 16)}-${Math.floor(i / 8) % 2}-${i % 8}`,
    step: Math.floor(i / 16),
    reward: ((i * 7919) % 100) / 100,
  }));
}

async function measure(
  browser: Browser,
  records: TrajectoryRecord[],
  open: (page: Page) => Promise<void>,
  ready: string,
) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 860 } }); // fresh webview state
  await page.goto(pageFile('vscode-dark'));
  const started = Date.now();
  await load(page, records);
  await page.waitForSelector('tbody tr');
  const firstPaint = Date.now() - started;
  await open(page);
  await page.waitForSelector(ready);
  await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => resolve(null))));
  const interactive = Date.now() - started;
  await page.close();
  return { firstPaintMs: firstPaint, interactiveMs: interactive };
}

/** A live run of 1,000 episodes followed in the list for 10 s while 8 more arrive every 100 ms (a fast run on a
 * busy trainer): the redraws, the main thread's time in tasks over 50 ms (a click waits for them), the longest. */
async function liveRun(browser: Browser, base: TrajectoryRecord) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 860 } });
  await page.goto(pageFile('vscode-dark'));
  const records = bigRun(base, 2000);
  await load(page, []);
  await page.evaluate(
    (first) => window.postMessage({ type: 'load', source: 'run', records: first, live: true }, '*'),
    records.slice(0, 1000),
  );
  await page.waitForSelector('tbody tr');
  const seconds = 10;
  const result = await page.evaluate(
    async ({ rest, seconds }) => {
      const tasks: number[] = [];
      new PerformanceObserver((list) => list.getEntries().forEach((e) => tasks.push(e.duration))).observe({
        type: 'longtask',
      });
      let redraws = 0;
      new MutationObserver(() => redraws++).observe(document.getElementById('app')!, { childList: true });
      const started = performance.now();
      for (let i = 0; i * 100 < seconds * 1000; i++) {
        window.postMessage({ type: 'append', records: rest.slice(i * 8, i * 8 + 8) }, '*');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      await new Promise((resolve) => setTimeout(resolve, 1500)); // the last redraw
      const elapsed = performance.now() - started;
      return {
        appends: seconds * 10,
        redraws,
        busyInLongTasksPct: Math.round((100 * tasks.reduce((a, b) => a + b, 0)) / elapsed),
        longestTaskMs: Math.round(Math.max(0, ...tasks)),
        rows: document.querySelectorAll('tbody tr').length,
      };
    },
    { rest: records.slice(1000), seconds },
  );
  await page.close();
  return result;
}

async function main() {
  const base = fixture('lookup')[0];
  const browser = await launch();
  const long = longEpisode(base, 50, 20_000);
  const episode = await measure(
    browser,
    [long],
    async (p) => {
      await p.click('tr[data-id="long"]');
      await p.click('#view-tokens');
    },
    '.token[data-index]',
  );
  const run = await measure(
    browser,
    bigRun(base, 10_000),
    async (p) => {
      await p.selectOption('#run-sort', '-reward');
    },
    'tbody tr',
  );
  const live = await liveRun(browser, base);
  console.log(
    JSON.stringify(
      { episode_50_turns_20000_tokens: episode, run_10000_trajectories: run, live_run_1000_plus_8_every_100ms: live },
      null,
      2,
    ),
  );
  await browser.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
