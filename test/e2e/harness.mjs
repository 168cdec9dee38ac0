// Drives the packaged extension inside code-server from Chromium and runs every scenario in test/e2e/*.e2e.mjs.
// Each scenario module exports functions named `...Scenario` taking { page, workspace, lap, runCommand, quickOpen,
// openFromExplorer, openRunReplay, fromRowAction, fromRowMenu, stopFromRow }; each gets a screenshot in test-results/e2e/.
// A scenario marked `first` (a property of its function) runs before the others, in the window as it opened.
// usage: node harness.mjs BASE_URL WORKSPACE_DIR ($E2E_GREP: only the scenarios whose function name matches).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { launchChromium } from './chromium.mjs';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const SHOTS = path.resolve(HERE, '..', '..', 'test-results', 'e2e');
const [base, workspace] = process.argv.slice(2);
const t0 = Date.now();
const lap = (m) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${m}`);

/** Opens the quick input with `key`, types `text` and presses Enter on the row showing `rowText`. What it lists
 * can lag (contributed commands reach the palette seconds after the workbench paints; Quick Open's index of a
 * file written a moment ago trails the file watcher) and an open widget does not refresh, so: retry. So too when the
 * widget closes as it opens (a page such as the Welcome page taking the focus back as it renders). */
async function pickFromQuickInput(page, key, text, rowText, ms) {
  const end = Date.now() + ms;
  const input = page.locator('.quick-input-widget input');
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: rowText }).first();
  for (;;) {
    await page.keyboard.press(key);
    try {
      await input.waitFor({ state: 'visible', timeout: 10000 });
      await input.fill(text, { timeout: 5000 });
      await row.waitFor({ timeout: 3000 });
      break;
    } catch (e) {
      if (Date.now() > end) throw e;
      await page.keyboard.press('Escape');
      await page.waitForTimeout(500);
    }
  }
  await page.keyboard.press('Enter');
}

export const runCommand = (page, title, ms = 60000) => pickFromQuickInput(page, 'F1', '>' + title, title, ms);
export const quickOpen = (page, name, ms = 60000) => pickFromQuickInput(page, 'Control+P', name, name, ms);

/** Opens a workspace file from the Explorer, as a user would: collapses its folders, expands the file's, double-clicks
 * it (its default editor). The Explorer follows the file watcher within a second or two, where Quick Open's index of
 * a file written a moment ago can lag half a minute. Collapsed first because the Explorer renders only the rows in
 * its viewport: after the scenarios before it, a folder's row can lie below folders left expanded, never drawn.
 * (The Explorer's commands have no category in the palette: "Refresh Explorer", not "File: Refresh Explorer".) */
export async function openFromExplorer(page, relativePath) {
  await runCommand(page, 'View: Show Explorer');
  await runCommand(page, 'Collapse Folders in Explorer');
  const parts = relativePath.split('/');
  for (const [i, name] of parts.entries()) {
    const exact = new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
    const row = page
      .locator('.explorer-folders-view .monaco-list-row')
      .filter({ has: page.locator('.label-name', { hasText: exact }) })
      .first();
    await row.waitFor({ timeout: 10000 }).catch(async () => {
      await runCommand(page, 'Refresh Explorer');
      await row.waitFor({ timeout: 20000 });
    });
    // A row's hover (its path) opens under a mouse left resting on the Explorer and covers the rows below it,
    // taking their clicks: rest the mouse away from it first.
    await page.mouse.move(0, 0);
    await page
      .locator('.context-view .hover-contents')
      .waitFor({ state: 'hidden', timeout: 5000 })
      .catch(() => {});
    if (i === parts.length - 1) await row.dblclick();
    else {
      // A click as the Explorer redraws (a file watcher's event) can select a folder without opening it: click again.
      const open = row.and(page.locator('[aria-expanded="true"]'));
      for (let tries = 0; !(await open.count()) && tries < 3; tries += 1) {
        await row.click();
        await open.waitFor({ timeout: 3000 }).catch(() => {});
      }
    }
  }
}

/** Runs a Runs view row's inline action (`row`, a locator; `action`, the start of its label: "Open Trajectory Replay", "Open Run
 * Dashboard"), as a user would. A row the view redraws as it is clicked (its runs' events, its ages every minute)
 * hands its command nothing; the command then asks which run, and the run is picked there by `pickText` (text its row
 * in that list shows), as the user would pick it. That list can close as it opens (the focus taken back by the view
 * the redraw replaced): then the action is run again, up to five times. */
export async function fromRowAction(page, row, action, pickText) {
  const asked = page.locator('.quick-input-widget .quick-input-title', { hasText: action });
  const listed = page.locator('.quick-input-list .monaco-list-row', { hasText: pickText }).first();
  for (let attempt = 1; ; attempt++) {
    await row.hover();
    await row.locator(`.action-label[aria-label^="${action}"]`).click();
    const askedWhich = await asked.waitFor({ timeout: 2000 }).then(
      () => true,
      () => false,
    );
    if (!askedWhich) return;
    lap(`the row was redrawn as its ${action} was clicked: the run picked from the list the command offers`);
    const picked = await listed.click({ timeout: 5000 }).then(
      () => true,
      () => false,
    );
    if (picked) return;
    if (attempt === 5) throw new Error(`${action}: the list of runs it offered closed before ${pickText} was picked`);
    lap(`${action}: the list of runs closed as it opened (attempt ${attempt}): again`);
    await page.keyboard.press('Escape');
    await page.waitForTimeout(1000);
  }
}

/** Stops a Runs view row's run from its inline Stop Training action (`fromRowAction`, the run picked by `pickText` if the
 * row was redrawn), choosing `mode` ("Graceful" or "Immediate") in the list Stop then offers: by its name and Enter, as
 * the palette is driven (a click on a row of a list still settling can miss). That list too can close as it opens, or
 * never open when the click hit a row being replaced: then Stop is clicked again, up to five times. */
export async function stopFromRow(page, row, pickText, mode) {
  const offered = page.locator('.quick-input-list .monaco-list-row', { hasText: mode }).first();
  for (let attempt = 1; ; attempt++) {
    await fromRowAction(page, row, 'Stop Training', pickText);
    const shown = await offered.waitFor({ timeout: 5000 }).then(
      () => true,
      () => false,
    );
    if (shown) {
      await page.locator('.quick-input-widget input').fill(mode);
      await offered.waitFor({ timeout: 5000 });
      await page.keyboard.press('Enter');
      return;
    }
    if (attempt === 5) throw new Error(`Stop Training: the list of stop modes never offered ${mode}`);
    lap(`Stop Training: no list of stop modes (attempt ${attempt}): again`);
    await page.keyboard.press('Escape');
    await page.waitForTimeout(1000);
  }
}

/** Opens the replay of a Runs view row (`fromRowAction`). */
export const openRunReplay = (page, row, pickText) => fromRowAction(page, row, 'Open Trajectory Replay', pickText);

/** Runs the command `item` of a Runs view row's context menu (`row`, a locator) and waits for `given` (a locator that
 * shows the command got the row). The Runs view redraws its rows as the runs it follows send events (at most twice a
 * second), and a menu opened on a row being replaced opens no menu, or runs its command without the row: then the
 * command's prompt is closed and the menu opened again, up to five times. */
export async function fromRowMenu(page, row, item, given) {
  for (let attempt = 1; ; attempt++) {
    await row.click({ button: 'right' });
    const menu = await page
      .locator('.monaco-menu .action-label', { hasText: item })
      .hover({ timeout: 5000 })
      .then(
        () => 'menu',
        () => 'no menu',
      );
    if (menu === 'menu') {
      await page.keyboard.press('Enter'); // the workbench's context menu takes a hovered item's Enter (a synthetic click does not reach it)
      if (
        await given.waitFor({ timeout: 5000 }).then(
          () => true,
          () => false,
        )
      )
        return;
    }
    if (attempt === 5) throw new Error(`${item} from the row's context menu never got the row`);
    lap(
      `${item} from the row's context menu: ${menu === 'menu' ? 'came without the row' : 'no menu opened'} (attempt ${attempt}): again`,
    );
    await page.keyboard.press('Escape');
    await page.waitForTimeout(1000);
  }
}

const scenarios = [];
for (const file of fs
  .readdirSync(HERE)
  .filter((f) => f.endsWith('.e2e.mjs'))
  .sort()) {
  const mod = await import(path.join(HERE, file));
  for (const [name, fn] of Object.entries(mod)) if (name.endsWith('Scenario')) scenarios.push([name, fn]);
}
scenarios.sort(([, a], [, b]) => Number(Boolean(b.first)) - Number(Boolean(a.first))); // stable: file order otherwise
if (process.env.E2E_GREP) {
  const only = scenarios.filter(([name]) => new RegExp(process.env.E2E_GREP).test(name));
  scenarios.splice(0, scenarios.length, ...only);
}

fs.mkdirSync(SHOTS, { recursive: true });
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'agentrl-chromium-'));
const context = await launchChromium(profile);
let failed = 0;
try {
  const page = context.pages()[0] ?? (await context.newPage());
  await page.goto(`${base}/?folder=${encodeURIComponent(workspace)}`);
  await page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
  await page.locator('.explorer-folders-view, .explorer-viewlet').first().waitFor({ timeout: 60000 });
  lap('workbench ready');
  for (const [name, scenario] of scenarios) {
    try {
      await scenario({
        page,
        workspace,
        lap,
        runCommand,
        quickOpen,
        openFromExplorer,
        openRunReplay,
        fromRowAction,
        fromRowMenu,
        stopFromRow,
      });
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
