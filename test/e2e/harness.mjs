// Drives the packaged extension inside code-server from Chromium and runs every scenario in test/e2e/*.e2e.mjs.
// Each scenario module exports functions named `...Scenario` taking { page, workspace, lap, runCommand, quickOpen,
// openFromExplorer }; each gets a screenshot in test-results/e2e/. usage: node harness.mjs BASE_URL WORKSPACE_DIR
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const SHOTS = path.resolve(HERE, '..', '..', 'test-results', 'e2e');
const [base, workspace] = process.argv.slice(2);
const t0 = Date.now();
const lap = (m) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${m}`);

/** Contributed commands reach the palette a few seconds after the workbench paints and an open palette
 * does not refresh, so: open, filter, and retry until the row appears. */
export async function runCommand(page, title, ms = 60000) {
  const end = Date.now() + ms;
  const input = page.locator('.quick-input-widget input');
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
  for (;;) {
    await page.keyboard.press('F1');
    await input.waitFor({ state: 'visible' });
    await input.fill('>' + title);
    try { await row.waitFor({ timeout: 2000 }); break; }
    catch (e) { if (Date.now() > end) throw e; await page.keyboard.press('Escape'); await page.waitForTimeout(500); }
  }
  await page.keyboard.press('Enter');
}

/** Opens a workspace file by name through Quick Open. A file written a moment ago may be missing from its
 * index until the file watcher catches up, so: retry until the row appears. */
export async function quickOpen(page, name, ms = 60000) {
  const end = Date.now() + ms;
  const input = page.locator('.quick-input-widget input');
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: name }).first();
  for (;;) {
    await page.keyboard.press('Control+P');
    await input.waitFor({ state: 'visible' });
    await input.fill(name);
    try { await row.waitFor({ timeout: 3000 }); break; }
    catch (e) { if (Date.now() > end) throw e; await page.keyboard.press('Escape'); await page.waitForTimeout(1000); }
  }
  await page.keyboard.press('Enter');
}

/** Opens a workspace file from the Explorer, as a user would: expands its folders, double-clicks it (its default
 * editor). The Explorer follows the file watcher within a second or two, where Quick Open's index of a file
 * written a moment ago can lag half a minute. */
export async function openFromExplorer(page, relativePath) {
  await runCommand(page, 'View: Show Explorer');
  const parts = relativePath.split('/');
  for (const [i, name] of parts.entries()) {
    const exact = new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
    const row = page.locator('.explorer-folders-view .monaco-list-row').filter({ has: page.locator('.label-name', { hasText: exact }) }).first();
    await row.waitFor({ timeout: 10000 }).catch(async () => {
      await runCommand(page, 'File: Refresh Explorer');
      await row.waitFor({ timeout: 20000 });
    });
    if (i === parts.length - 1) await row.dblclick();
    else if ((await row.getAttribute('aria-expanded')) !== 'true') await row.click();
  }
}

const scenarios = [];
for (const file of fs.readdirSync(HERE).filter((f) => f.endsWith('.e2e.mjs')).sort()) {
  const mod = await import(path.join(HERE, file));
  for (const [name, fn] of Object.entries(mod)) if (name.endsWith('Scenario')) scenarios.push([name, fn]);
}

fs.mkdirSync(SHOTS, { recursive: true });
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'agentrl-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium',
  env: { ...process.env, HOME: profile, XDG_CONFIG_HOME: `${profile}/.config`, XDG_CACHE_HOME: `${profile}/.cache` },
  headless: true,
  viewport: { width: 1400, height: 900 },
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
});
let failed = 0;
try {
  const page = context.pages()[0] ?? (await context.newPage());
  await page.goto(`${base}/?folder=${encodeURIComponent(workspace)}`);
  await page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
  await page.locator('.explorer-folders-view, .explorer-viewlet').first().waitFor({ timeout: 60000 });
  lap('workbench ready');
  for (const [name, scenario] of scenarios) {
    try {
      await scenario({ page, workspace, lap, runCommand, quickOpen, openFromExplorer });
      lap(`PASS ${name}`);
      await page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
    } catch (e) {
      failed++;
      console.error(`FAIL ${name}`, e);
      await page.screenshot({ path: path.join(SHOTS, `${name}-fail.png`) }).catch(() => {});
    }
    await page.keyboard.press('Escape');
  }
} finally {
  await context.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
console.log(`${scenarios.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
