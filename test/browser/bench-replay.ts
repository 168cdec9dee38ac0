// Replay panel benchmark (not a test): time to first paint and to interactive for a 50-turn episode of
// 20,000 tokens, and for a run of 10,000 trajectories.   npm run bench:replay
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
  console.log(JSON.stringify({ episode_50_turns_20000_tokens: episode, run_10000_trajectories: run }, null, 2));
  await browser.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
