// What a user sees while training: Start Local Server and Start Training from the palette on the config the
// New Environment scenario wrote (palette-env), the status bar item following the run, and the Runs view
// (activity bar "Agent RL") listing it as completed with its steps; then a long run's replay opened from the Runs
// view while it trains, and its Stop; another long run's Run Dashboard growing as it trains; and a NaN reward's
// alert in a run's dashboard. Runs after scaffold.e2e.mjs (file order).
import fs from 'node:fs';
import path from 'node:path';

/** Start Training runs the active editor's run config, and asks which one when the workbench has not yet made the
 * just-opened file the active editor (it happens on a loaded machine): then pick `relativePath`, as a user would. */
async function pickRunConfigIfAsked(page, relativePath) {
  const title = page.locator('.quick-input-widget .quick-input-title', { hasText: 'Start Training' });
  if (
    await title.waitFor({ timeout: 3000 }).then(
      () => true,
      () => false,
    )
  ) {
    await page.locator('.quick-input-list .monaco-list-row', { hasText: relativePath }).first().click();
  }
}

/** Starts a local trainer server from the palette unless connected already: connected, the status bar item
 * shows a beaker (or a spinning run) instead of the server state. (Also used by toolRerun.e2e.mjs.) */
export async function connectLocalServer(page, runCommand, lap) {
  // The item is there once the extension is active: "Agent RL" with its server state, or the run it follows.
  const item = await page.waitForFunction(
    () =>
      [...document.querySelectorAll('.statusbar-item')].find(
        (e) => /Agent RL/.test(e.textContent ?? '') || e.querySelector('.codicon-beaker, .codicon-sync'),
      ),
    null,
    { timeout: 30000 },
  );
  if (await item.evaluate((e) => !!e.querySelector('.codicon-beaker, .codicon-sync'))) return;
  await runCommand(page, 'Agent RL: Start Local Server');
  // The server takes a few seconds to import torch (over a minute on a loaded 2-core machine).
  await page.waitForFunction(
    () =>
      [...document.querySelectorAll('.statusbar-item')].some((e) => e.querySelector('.codicon-beaker, .codicon-sync')),
    null,
    { timeout: 180000 },
  );
  lap('local trainer server connected');
}

export async function trainingScenario({ page, workspace, lap, runCommand }) {
  const config = path.join(workspace, 'palette-env', 'palette-env.agentrl.yaml');
  if (!fs.existsSync(config)) throw new Error('needs the env that newEnvironmentScenario writes (palette-env)');
  await connectLocalServer(page, runCommand, lap);

  await page.locator('.tab', { hasText: 'palette-env.agentrl.yaml' }).first().click();
  // Off the tab: its hover, opening half a second later, made the palette's input inert in some runs.
  await page.mouse.move(700, 400);
  await runCommand(page, 'Agent RL: Start Training');
  const runItem = page.locator('.statusbar-item', { hasText: 'palette-env' }).first();
  await runItem.waitFor({ timeout: 60000 });
  lap(`status bar follows the run: "${(await runItem.textContent())?.trim()}"`);
  await page.locator('.statusbar-item', { hasText: 'palette-env 2/2' }).first().waitFor({ timeout: 180000 });

  const runRow = page.locator('.monaco-list-row', { hasText: 'palette-env' }).filter({ hasText: 'completed' }).first();
  await runRow.waitFor({ timeout: 60000 });
  const description = (await runRow.locator('.label-description').textContent())?.trim() ?? '';
  if (!/^completed · 2\/2 · (just now|\d+ min ago) · reward /.test(description))
    throw new Error(`the run's row says "${description}"`);
  await runRow.click(); // expand: its steps, newest first
  const steps = page.locator('.monaco-list-row', { hasText: /^step \d/ });
  await steps.first().waitFor({ timeout: 30000 });
  const labels = await steps.locator('.label-name').allTextContents();
  if (labels.join(',') !== 'step 2,step 1') throw new Error(`step rows: ${labels.join(', ')}`);
  await page.locator('.monaco-list-row', { hasText: 'step 2' }).first().click();
  await page
    .locator('.monaco-list-row', { hasText: /^group 0/ })
    .first()
    .waitFor({ timeout: 30000 });
  lap(`Runs view: "palette-env ${description}", ${labels.join(', ')}`);
}

// A long run followed live: Open Replay from its row in the Runs view while it trains (the panel says "live"
// and new episodes appear), then Stop from the row's inline action, gracefully, to "stopped".
export async function trainingStoppedFromTheRunsViewScenario({
  page,
  workspace,
  lap,
  runCommand,
  openFromExplorer,
  openRunReplay,
  stopFromRow,
}) {
  const source = path.join(workspace, 'palette-env', 'palette-env.agentrl.yaml');
  if (!fs.existsSync(source)) throw new Error('needs the env that newEnvironmentScenario writes (palette-env)');
  const long = path.join(workspace, 'palette-env', 'palette-long.agentrl.yaml');
  fs.writeFileSync(
    long,
    fs
      .readFileSync(source, 'utf8')
      .replace(/^name: .*$/m, 'name: palette-long')
      .replace(/^ {2}steps: \d+$/m, '  steps: 1000'),
  );
  await connectLocalServer(page, runCommand, lap);

  await openFromExplorer(page, 'palette-env/palette-long.agentrl.yaml');
  await page.locator('.tab.active', { hasText: 'palette-long.agentrl.yaml' }).waitFor({ timeout: 30000 });
  lap('opened palette-long.agentrl.yaml');
  await runCommand(page, 'Agent RL: Start Training');

  const row = page.locator('.monaco-list-row', { hasText: 'palette-long' }).first(); // Start Training reveals the Runs view
  await row.filter({ hasText: 'running' }).waitFor({ timeout: 90000 });
  lap('the Runs view lists palette-long as running');
  await openRunReplay(page, row, /palette-long.*running/);
  const view = page.locator('iframe.webview.ready:visible').first().contentFrame().frameLocator('#active-frame');
  await view.locator('text=live').first().waitFor({ timeout: 60000 });
  // The list draws 100 rows a page: the episodes it holds are counted beside its filters ("104 of 104").
  const held = async () => Number(/of (\d+)/.exec((await view.locator('.count').textContent()) ?? '')?.[1] ?? 0);
  await view.locator('tbody tr').first().waitFor({ timeout: 60000 });
  const before = await held();
  const deadline = Date.now() + 60000;
  while ((await held()) <= before) {
    if (Date.now() > deadline) throw new Error(`the live replay stayed at ${before} episodes`);
    await page.waitForTimeout(500);
  }
  lap(`replay opened from the Runs view follows the live run: ${before} -> ${await held()} episodes`);

  await stopFromRow(page, row, /palette-long.*running/, 'Graceful');
  await row.filter({ hasText: 'stopped' }).waitFor({ timeout: 120000 });
  await view.locator('.run-status-badge', { hasText: 'stopped' }).waitFor({ timeout: 30000 }); // no longer "live"
  lap(`stopped gracefully from the Runs view: "${(await row.locator('.label-description').textContent())?.trim()}"`);
}

// (Scenarios run in the alphabetical order of their names: this one after the two above.)
// The Run Dashboard of a long run, opened from its row in the Runs view while it trains: its charts grow with
// the run (the reward chart's latest step, read from its text alternative, goes up), and a click on a point
// opens the replay at that step's group view. Then the run is stopped at once, and compared with palette-long in one
// dashboard from the row's context menu.
export async function trainingWatchedInTheDashboardScenario({
  page,
  workspace,
  lap,
  runCommand,
  openFromExplorer,
  fromRowAction,
  fromRowMenu,
  stopFromRow,
}) {
  const source = path.join(workspace, 'palette-env', 'palette-env.agentrl.yaml');
  if (!fs.existsSync(source)) throw new Error('needs the env that newEnvironmentScenario writes (palette-env)');
  const config = path.join(workspace, 'palette-env', 'palette-dash.agentrl.yaml');
  fs.writeFileSync(
    config,
    fs
      .readFileSync(source, 'utf8')
      .replace(/^name: .*$/m, 'name: palette-dash')
      .replace(/^ {2}steps: \d+$/m, '  steps: 1000'),
  );
  await connectLocalServer(page, runCommand, lap);
  await openFromExplorer(page, 'palette-env/palette-dash.agentrl.yaml');
  await page.locator('.tab.active', { hasText: 'palette-dash.agentrl.yaml' }).waitFor({ timeout: 30000 });
  await runCommand(page, 'Agent RL: Start Training');

  const row = page.locator('.monaco-list-row', { hasText: 'palette-dash' }).first();
  await row.filter({ hasText: 'running' }).waitFor({ timeout: 90000 });
  await fromRowAction(page, row, 'Open Run Dashboard', /palette-dash.*running/);
  await page.locator('.tab.active', { hasText: 'Dashboard: palette-dash' }).waitFor({ timeout: 30000 });
  const dashboard = page.locator('iframe.webview.ready:visible').first().contentFrame().frameLocator('#active-frame');
  const latestStep = dashboard.locator(
    'section.chart[data-chart="reward"] tr[data-series="reward/mean"] td:nth-child(3)',
  );
  await latestStep.waitFor({ state: 'attached', timeout: 90000 });
  const first = Number(await latestStep.textContent());
  const deadline = Date.now() + 90000;
  while (Number(await latestStep.textContent()) <= first) {
    if (Date.now() > deadline) throw new Error(`the dashboard stayed at step ${first}`);
    await page.waitForTimeout(500);
  }
  const charts = await dashboard.locator('section.chart canvas').count();
  lap(
    `dashboard opened from the Runs view grows with the live run: step ${first} -> ${await latestStep.textContent()}, ${charts} charts`,
  );

  await dashboard.locator('section.chart[data-chart="reward"] .u-over').click({ position: { x: 5, y: 50 } }); // the first step's point
  await page.locator('.tab.active', { hasText: /Replay: palette-dash.* step 1\b/ }).waitFor({ timeout: 30000 });
  const replay = page.locator('iframe.webview.ready:visible').first().contentFrame().frameLocator('#active-frame');
  await replay.locator('.group-view', { hasText: 'step 1 · group 0' }).waitFor({ timeout: 60000 });
  lap('a click on the chart opened the replay at step 1, group view');

  await stopFromRow(page, row, /palette-dash.*running/, 'Immediate');
  await row.filter({ hasText: 'stopped' }).waitFor({ timeout: 60000 });

  // Compare in Dashboard from the row's context menu: every run listed with this one ticked; tick palette-long.
  await fromRowMenu(page, row, 'Compare in Dashboard', page.locator('.quick-input-widget').getByText('1 Selected'));
  await page.locator('.quick-input-list .monaco-list-row', { hasText: 'palette-long' }).first().click();
  await page.keyboard.press('Enter');
  await page.locator('.tab.active', { hasText: 'Compare: palette-dash, palette-long' }).waitFor({ timeout: 30000 });
  const compare = page.locator('iframe.webview.ready:visible').first().contentFrame().frameLocator('#active-frame');
  await compare.locator('.run-legend .run', { hasText: 'palette-long' }).waitFor({ timeout: 60000 });
  await compare.locator('#toggle-config-diff').click();
  const caption = (await compare.locator('#config-diff [data-run]').first().textContent({ timeout: 30000 })) ?? '';
  if (!/^palette-long against palette-dash: \d+ difference/.test(caption))
    throw new Error(`config diff says "${caption}"`);
  lap(`Compare in Dashboard overlays the two runs: "${caption}"`);
}

// A run whose env scores every episode NaN (issue #15): the trainer stops it before the optimizer step with a
// non_finite alert, and the run's Run Dashboard, opened from its row, lists that alert as an error with a link to
// its step's episodes. (The extension-host test of the same run checks the Problems panel.) Self-contained: it
// writes its own env, tasks and config.
export async function trainingStoppedByANaNRewardScenario({ page, workspace, lap, runCommand, openFromExplorer }) {
  const folder = path.join(workspace, 'nan-env');
  fs.mkdirSync(folder, { recursive: true });
  fs.writeFileSync(
    path.join(folder, 'nan_env.py'),
    'from agentrl import EpisodeScore\nfrom agentrl.examples.lookup.env import LookupEnv\n\n\n' +
      'class NanLookup(LookupEnv):\n    def score(self, final_text):\n        return EpisodeScore(reward=float("nan"))\n',
  );
  fs.writeFileSync(
    path.join(folder, 'tasks.jsonl'),
    ['0', '1', '2', '3'].map((key) => JSON.stringify({ id: `key-${key}`, key })).join('\n') + '\n',
  );
  fs.writeFileSync(
    path.join(folder, 'nan-alert.agentrl.yaml'),
    [
      'name: nan-alert',
      'model: {path: tiny}',
      'env: {module: nan_env.py, class_name: NanLookup}',
      'data: {train: tasks.jsonl}',
      'rollout: {group_size: 4, max_turns: 2, max_new_tokens: 16, max_context: 512}',
      'train: {steps: 2, batch_size: 8, micro_batch_size: 8}',
      '',
    ].join('\n'),
  );
  await connectLocalServer(page, runCommand, lap);
  await openFromExplorer(page, 'nan-env/nan-alert.agentrl.yaml');
  await page.locator('.tab.active', { hasText: 'nan-alert.agentrl.yaml' }).waitFor({ timeout: 30000 });
  await runCommand(page, 'Agent RL: Start Training');
  await pickRunConfigIfAsked(page, 'nan-env/nan-alert.agentrl.yaml');

  const row = page.locator('.monaco-list-row', { hasText: 'nan-alert' }).first();
  await row.filter({ hasText: 'failed' }).waitFor({ timeout: 180000 });
  lap('the NaN reward stopped the run: the Runs view says failed');
  await row.hover();
  await row.locator('.action-label[aria-label*="Dashboard"]').click();
  await page.locator('.tab.active', { hasText: 'Dashboard: nan-alert' }).waitFor({ timeout: 30000 });
  const dashboard = page.locator('iframe.webview.ready:visible').first().contentFrame().frameLocator('#active-frame');
  const alert = dashboard.locator('li.alert.severity-error[data-code="non_finite"]');
  await alert.waitFor({ timeout: 60000 });
  const text = (await alert.textContent()) ?? '';
  if (!/step 1 · non_finite \(error\).*Fix: /.test(text))
    throw new Error(`the dashboard's non_finite alert says "${text}"`);
  if ((await alert.locator('button.link[data-step="1"]').count()) !== 1) throw new Error('the alert links to no step');
  lap(`the Run Dashboard lists the NaN alert: "${text.slice(0, 120)}"`);
}
