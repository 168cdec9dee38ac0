// Loads a built webview bundle (the replay panel's `main`, or `dashboard`) into headless Chromium the way
// VS Code does: a page with a strict CSP, the script by nonce, and a stand-in for acquireVsCodeApi whose
// state survives a reload.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { DashboardEvent, DashboardRun } from '../../protocol/dashboard-messages';
import type { TrajectoryRecord } from '../../protocol/webview-messages';

export const ROOT = resolve(__dirname, '..', '..');
export const SCREENSHOTS = join(ROOT, 'test-results', 'screenshots');
const DIST = join(ROOT, 'dist', 'webview');

export type Theme = 'vscode-light' | 'vscode-dark' | 'vscode-high-contrast';

export function fixture(name: string): TrajectoryRecord[] {
  const text = readFileSync(join(ROOT, 'protocol', 'examples', 'trajectories', `${name}.trajectories.jsonl`), 'utf8');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as TrajectoryRecord);
}

/**
 * Records as the trainer writes them now that turns carry their step fields, derived from what a fixture
 * recorded before they existed (until make_fixtures.py records them): each turn's state key is the one the
 * trainer falls back on for an env without ToolEnv.state_key() ('start', then the observation the model last
 * read), its step return its own and later process rewards plus the outcome reward, and its step advantage
 * the mean advantage of its sampled tokens (null where none was trained).
 */
export function withStepFields(records: TrajectoryRecord[]): TrajectoryRecord[] {
  return records.map((record) => {
    let lastRead = 'start';
    const turns = record.turns.map((turn, i) => {
      const later = record.turns.slice(i).reduce((sum, t) => sum + t.process_reward, 0);
      const advantages = record.tokens.turn
        .map((t, k) => (t === turn.index && record.tokens.loss_mask[k] === 1 ? record.tokens.advantage[k] : null))
        .filter((a): a is number => a !== null);
      const withFields = {
        ...turn,
        state_key: lastRead,
        step_return: later + record.outcome_reward,
        step_advantage: advantages.length ? advantages.reduce((sum, a) => sum + a, 0) / advantages.length : null,
      };
      if (turn.observation !== null) lastRead = turn.observation;
      return withFields;
    });
    return { ...record, turns };
  });
}

export function pageFile(theme: Theme, bundle = 'main'): string {
  const nonce = 'test-nonce';
  const html = `<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src file:; font-src file:; script-src 'nonce-${nonce}';">
<link rel="stylesheet" href="${pathToFileURL(join(DIST, 'codicons', 'codicon.css'))}">
<link rel="stylesheet" href="${pathToFileURL(join(DIST, `${bundle}.css`))}">
</head><body class="${theme}"><div id="app"></div>
<script nonce="${nonce}">
  window.__posted = [];
  window.acquireVsCodeApi = () => ({
    postMessage: (m) => window.__posted.push(m),
    getState: () => JSON.parse(sessionStorage.getItem('state') || 'null'),
    setState: (s) => sessionStorage.setItem('state', JSON.stringify(s)),
  });
</script>
<script nonce="${nonce}" src="${pathToFileURL(join(DIST, `${bundle}.js`))}"></script>
</body></html>`;
  const dir = join(ROOT, 'test-results', 'pages');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${bundle}-${theme}.html`);
  writeFileSync(file, html);
  return pathToFileURL(file).href;
}

export async function launch(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-dev-shm-usage',
      '--allow-file-access-from-files',
    ],
  });
}

/** Opens the panel, waits for its `ready`, and answers with a `load` of these records, as the host does. The page is as
 *  wide as the `viewport`: VS Code's editor at its default width in a 1280px window is about 800px. */
export async function openReplay(
  browser: Browser,
  records: TrajectoryRecord[],
  theme: Theme = 'vscode-light',
  viewport = { width: 1400, height: 860 },
): Promise<Page> {
  const page = await browser.newPage({ viewport });
  page.on('pageerror', (err) => {
    throw err;
  });
  await page.goto(pageFile(theme));
  await load(page, records);
  return page;
}

export async function load(page: Page, records: TrajectoryRecord[]): Promise<void> {
  await page.waitForFunction(() =>
    (window as unknown as { __posted: Array<{ type: string }> }).__posted.some((m) => m.type === 'ready'),
  );
  await page.evaluate(
    (recs) => window.postMessage({ type: 'load', source: 'fixture', records: recs, live: false }, '*'),
    records,
  );
}

/** A run recorded by protocol/examples/run-logs/make_fixtures.py: its config and the events the dashboard draws. */
export function runFixture(runId: string): { run: DashboardRun; events: DashboardEvent[] } {
  const dir = join(ROOT, 'protocol', 'examples', 'run-logs');
  const config = JSON.parse(readFileSync(join(dir, `${runId}.config.json`), 'utf8')) as Record<string, unknown>;
  const events = readFileSync(join(dir, `${runId}.events.jsonl`), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { type: string })
    .filter((event): event is DashboardEvent => ['status', 'metrics', 'health'].includes(event.type));
  return { run: { runId, name: runId, config }, events };
}

const violations = new WeakMap<Page, string[]>();

/** What Chromium reported as blocked by the page's Content Security Policy since it opened. */
export function cspViolations(page: Page): string[] {
  return violations.get(page) ?? [];
}

/** Opens the Run Dashboard, waits for its `ready`, and sends these runs and their events, as the host does. */
export async function openDashboard(
  browser: Browser,
  runs: Array<{ run: DashboardRun; events: DashboardEvent[] }>,
  theme: Theme = 'vscode-light',
): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on('pageerror', (err) => {
    throw err;
  });
  violations.set(page, []);
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) violations.get(page)!.push(message.text());
  });
  await page.goto(pageFile(theme, 'dashboard'));
  await page.waitForFunction(() =>
    (window as unknown as { __posted: Array<{ type: string }> }).__posted.some((m) => m.type === 'ready'),
  );
  await page.evaluate((rs) => {
    window.postMessage({ type: 'runs', runs: rs.map((r) => r.run) }, '*');
    for (const r of rs) window.postMessage({ type: 'events', runId: r.run.runId, events: r.events }, '*');
  }, runs);
  await page.locator('section.chart').first().waitFor();
  return page;
}

/** Waits until the dashboard has drawn at least `count` times since it loaded (it marks each draw). */
export async function drawn(page: Page, count: number): Promise<void> {
  await page.waitForFunction((n) => performance.getEntriesByName('dashboard-drawn').length >= n, count);
}
