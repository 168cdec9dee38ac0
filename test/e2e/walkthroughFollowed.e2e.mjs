// The first hour, as a newcomer follows the Get Started walkthrough: its progress reset (earlier scenarios already
// did what its steps ask), each step's own button clicked in the walkthrough, and each step ticked on the real event:
// a trainer connected, an environment written with the recommended embedded model (SmolLM2-135M-Instruct), its Try
// showing the model calling the Tool and what came back, a training run (one step, to keep the test short) that
// completes, its dashboard, its replay. Then a Tool that raises is found by Try before any episode runs: the env
// check's finding at the Tool's definition in the Problems panel. It writes its own envs (first-hour/,
// raising-tool/), and runs last (file order).
import fs from 'node:fs';
import path from 'node:path';
import { answer } from './scaffold.e2e.mjs';

// The walkthrough's tab: "Walkthrough: Agent RL Studio" while it shows the walkthrough, "Welcome" once it went back to the
// list of walkthroughs.
const walkthroughTab = (page) => page.locator('.tab', { hasText: /Walkthrough: Agent RL|Welcome/ }).first();

/** The walkthrough's page in front: its tab, and, when the Welcome page shows its list of walkthroughs instead (it
 * goes back to the list when another editor took the focus), this walkthrough picked from the list. */
async function showWalkthrough(page) {
  await walkthroughTab(page).click();
  // Which of the two is in front shows once its slide has come in: the steps, or the list (the other's buttons are
  // disabled while their slide is off screen).
  const enabled = '.getting-started-step:not([disabled]), .getting-started-category:not([disabled])';
  await page.waitForFunction((selector) => document.querySelector(selector), enabled, { timeout: 30000 });
  if (!(await page.locator('.getting-started-step:not([disabled])').count()))
    await page
      .locator('.getting-started-category:not([disabled])', { hasText: 'Get Started with Agent RL' })
      .first()
      .click();
  await page.waitForFunction(() => document.querySelector('.getting-started-step:not([disabled])'), null, {
    timeout: 30000,
  });
}

/** The walkthrough's step `id`, expanded by a click (as a user reads it) unless it is already. */
async function openStep(page, id) {
  await showWalkthrough(page);
  const step = page.locator(`.getting-started-step[data-step-id$="${id}"]`);
  await step.waitFor({ state: 'visible', timeout: 30000 });
  if ((await step.getAttribute('aria-expanded')) !== 'true') await step.click();
  return step;
}

/** Clicks the button a step's description offers (a `[Label](command:...)` link, which the walkthrough renders as a
 * button). */
async function clickStepButton(page, id, label) {
  const step = await openStep(page, id);
  await step.locator('.button-container button, a.codicon-link, a', { hasText: label }).first().click();
}

async function waitTicked(page, id, lap) {
  await showWalkthrough(page);
  await page
    .locator(`.getting-started-step[data-step-id$="${id}"][aria-checked="true"]`)
    .waitFor({ timeout: 60000 })
    .catch(async (err) => {
      await page.screenshot({ path: path.join('test-results', 'e2e', `walkthrough-${id}-unticked.png`) });
      throw new Error(`the walkthrough's step ${id} did not tick: ${err.message}`);
    });
  lap(`walkthrough: "${id}" ticked`);
}

/** Picks the quick input's row holding `text` as a user does with the keyboard: types it into the filter, Enter
 * (a click on a row that is still being laid out can miss it). */
async function pickRow(page, text) {
  await page.locator('.quick-input-list .monaco-list-row', { hasText: text }).first().waitFor({ timeout: 30000 });
  await page.locator('.quick-input-widget input').fill(text, { timeout: 10000 });
  await page.locator('.quick-input-list .monaco-list-row', { hasText: text }).first().waitFor({ timeout: 10000 });
  await page.keyboard.press('Enter');
}

/** Runs `command` and, in each quick input it opens in turn, picks the row showing `text` (once the input's title
 * shows `title`, where given). A quick input can close right under the pick, its focus taken back by a view still
 * restoring (after a reload) or by a webview (seen on a loaded machine): the command then starts over. */
async function runCommandAndPick(page, runCommand, lap, command, picks) {
  for (let attempt = 1; ; attempt++) {
    try {
      await runCommand(page, command);
      for (const { title, text } of picks) {
        if (title) await page.locator('.quick-input-widget .quick-input-title', { hasText: title }).waitFor();
        await pickRow(page, text);
      }
      return;
    } catch (err) {
      if (attempt === 3) throw err;
      lap(`${command}: its quick input closed under the pick (${err.message.split('\n')[0]}); again`);
      await page.keyboard.press('Escape');
    }
  }
}

/** A command that asks which config (or run) only when it cannot tell: the row showing `text` is picked if its
 *  quick input, titled `title`, opens within 5 s. */
async function pickRowIfAsked(page, title, text) {
  const asked = page.locator('.quick-input-widget .quick-input-title', { hasText: title });
  if (
    await asked.waitFor({ timeout: 5000 }).then(
      () => true,
      () => false,
    )
  )
    await pickRow(page, text);
}

const replayView = (page) =>
  page.locator('iframe.webview.ready:visible').first().contentFrame().frameLocator('#active-frame');

export async function walkthroughFollowedToATrainedRunScenario({ page, workspace, lap, runCommand, openRunReplay }) {
  const folder = path.join(workspace, 'first-hour');
  fs.rmSync(folder, { recursive: true, force: true });
  await runCommand(page, 'Developer: Reset Welcome Page Walkthrough Progress');
  // A fresh window, as a newcomer's first: VS Code ticks a step on an event only the first time that event happens in
  // a window (its getting-started service remembers the session's events), and the earlier scenarios already
  // connected a trainer and ran every command these steps wait for.
  // Closed first, so that the window does not come back with the Welcome page an earlier scenario left open in the
  // middle of its slide to the list of walkthroughs.
  await runCommand(page, 'View: Close All Editors');
  await page.reload();
  await page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
  await page.locator('.statusbar-item', { hasText: 'Agent RL' }).first().waitFor({ timeout: 60000 }); // activated
  lap('window reloaded');
  await runCommandAndPick(page, runCommand, lap, 'Welcome: Open Walkthrough...', [
    { text: 'Get Started with Agent RL' },
  ]);
  const steps = page.locator('.getting-started-step[aria-checked="true"]');
  await page.locator('.getting-started-step').first().waitFor({ state: 'visible', timeout: 30000 });
  // Connected already (an earlier scenario started the local server): that is the step's event, a context key.
  if ((await steps.count()) === 0) await clickStepButton(page, 'connectTrainer', 'Start Local Server');
  await waitTicked(page, 'connectTrainer', lap);

  await clickStepButton(page, 'newEnvironment', 'New Environment');
  await answer(page, '(1/4)', 'Tools and a ToolEnv');
  await answer(page, '(2/4)', 'first-hour');
  await answer(page, '(3/4)', 'search');
  await answer(page, '(4/4)', 'SmolLM2'); // the recommended, embedded model
  const config = path.join(folder, 'first-hour.agentrl.yaml');
  await page.locator('.tab', { hasText: 'first-hour.agentrl.yaml' }).waitFor({ timeout: 30000 });
  await waitTicked(page, 'newEnvironment', lap);

  // Try from the walkthrough: the config is the workspace's newest, so it asks which; pick first-hour's.
  await clickStepButton(page, 'tryEnvironment', 'Try Environment');
  await pickRowIfAsked(page, 'Try Environment', 'first-hour');
  const summary = page.locator('.notification-list-item-message', { hasText: /^Try run first-hour: / }).first();
  await summary.waitFor({ timeout: 300000 });
  const said = (await summary.textContent()) ?? '';
  lap(`Try on the embedded model: "${said}"`);
  const calls = Number(/(\d+) tool calls?\b/.exec(said)?.[1] ?? 0);
  if (calls < 1) throw new Error(`a fresh env's Try on the embedded model called no Tool: ${said}`);
  const view = replayView(page);
  const rows = view.locator('tbody tr');
  await rows.first().waitFor({ timeout: 60000 });
  const cells = await rows.evaluateAll((trs) =>
    trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent?.trim() ?? '')),
  );
  const withCall = cells.findIndex((row) => Number(row[5]) > 0);
  if (withCall < 0) throw new Error(`the replay lists no episode with a tool call: ${JSON.stringify(cells)}`);
  await rows.nth(withCall).click();
  await view.locator('body').press('t'); // the first tool call: the model's call and what the Tool returned
  await view.locator('.happened pre', { hasText: /\S/ }).first().waitFor({ timeout: 15000 });
  lap(
    `the replay shows the call and its result: ${((await view.locator('.happened pre').first().textContent()) ?? '').trim()}`,
  );
  await page.screenshot({ path: path.join('test-results', 'e2e', 'first-try-replay.png') });
  await waitTicked(page, 'tryEnvironment', lap);

  // One step of training, to keep the test short (the scaffold's 20 train the model).
  fs.writeFileSync(config, fs.readFileSync(config, 'utf8').replace(/^ {2}steps: \d+$/m, '  steps: 1'));
  await clickStepButton(page, 'startTraining', 'Start Training');
  await pickRowIfAsked(page, 'Start Training', 'first-hour');
  const row = page.locator('.monaco-list-row', { hasText: 'first-hour' }).filter({ hasText: 'completed · 1/1' });
  await row.first().waitFor({ timeout: 600000 });
  lap(`trained: "${((await row.first().locator('.label-description').textContent()) ?? '').trim()}"`);
  await waitTicked(page, 'startTraining', lap);

  // The dashboard and the replay from the run's row (the steps' buttons run the same commands, with no run given:
  // they ask which, and the replay for a file): each step ticks on its command. (F1 does not reach the palette
  // while the walkthrough's page has the focus: an editor takes it first.)
  await page.locator('.tab', { hasText: 'first-hour.agentrl.yaml' }).first().click();
  await runCommand(page, 'Agent RL: Focus on Runs View');
  const trainedRow = page.locator('.monaco-list-row', { hasText: 'first-hour' }).filter({ hasText: '1/1' }).first();
  await trainedRow.hover();
  await trainedRow.locator('.action-label[aria-label*="Dashboard"]').click();
  await page
    .locator('.tab', { hasText: /Dashboard/ })
    .first()
    .waitFor({ timeout: 30000 });
  await waitTicked(page, 'openDashboard', lap);

  await page.locator('.tab', { hasText: 'first-hour.agentrl.yaml' }).first().click();
  await runCommand(page, 'Agent RL: Focus on Runs View');
  await openRunReplay(page, trainedRow, /first-hour.*1\/1/);
  await replayView(page).locator('tbody tr').first().waitFor({ timeout: 60000 });
  await waitTicked(page, 'openReplay', lap); // the walkthrough in front, every step ticked
  const ticked = await steps.count();
  await page.screenshot({ path: path.join('test-results', 'e2e', 'walkthrough-completed.png') });
  if (ticked < 6) throw new Error(`${ticked} of the walkthrough's 6 steps ticked`);
}

export async function walkthroughFollowedTryFindsARaisingToolScenario({
  page,
  workspace,
  lap,
  runCommand,
  openFromExplorer,
}) {
  const source = path.join(workspace, 'first-hour');
  if (!fs.existsSync(source)) throw new Error('needs the env the walkthrough scenario writes (first-hour)');
  const folder = path.join(workspace, 'raising-tool');
  fs.rmSync(folder, { recursive: true, force: true });
  fs.cpSync(source, folder, { recursive: true });
  fs.renameSync(path.join(folder, 'first-hour.agentrl.yaml'), path.join(folder, 'raising-tool.agentrl.yaml'));
  const config = path.join(folder, 'raising-tool.agentrl.yaml');
  fs.writeFileSync(config, fs.readFileSync(config, 'utf8').replace(/^name: .*$/m, 'name: raising-tool'));
  const tools = path.join(folder, 'tools.py');
  fs.writeFileSync(
    tools,
    fs
      .readFileSync(tools, 'utf8')
      .replace(/(def execute\(self[^)]*\)[^:]*:\n)/, '$1        raise RuntimeError("the search tool is broken")\n'),
  );
  if (!/the search tool is broken/.test(fs.readFileSync(tools, 'utf8'))) throw new Error('could not break tools.py');
  await openFromExplorer(page, 'raising-tool/raising-tool.agentrl.yaml');
  await page.locator('.tab.active', { hasText: 'raising-tool.agentrl.yaml' }).waitFor({ timeout: 30000 });
  await runCommand(page, 'Agent RL: Try Environment'); // the active editor's run config
  await runCommand(page, 'View: Focus Problems (Errors, Warnings, Infos)');
  const problem = page.locator('.markers-panel .monaco-list-row', { hasText: 'the search tool is broken' }).first();
  await problem.waitFor({ timeout: 120000 });
  const file = page.locator('.markers-panel .monaco-list-row', { hasText: 'tools.py' }).first();
  await file.waitFor({ timeout: 10000 });
  lap(`the Problems panel: "${((await problem.textContent()) ?? '').trim()}"`);
  await page.screenshot({ path: path.join('test-results', 'e2e', 'try-raising-tool-problems.png') });
  // The Try goes on after the check (a Tool failing on the scripted call is a warning): stop it, it is not needed.
  await page.keyboard.press('Escape');
}

// (After the two above, by name.) The debugger on the runs the first hour left: the raising-tool Try's replay
// searched for episodes whose tool call raised, one opened at its failed call; then Compare Code on the first-hour
// run and the raising-tool run: the diff of the Tool they trained with.
export async function walkthroughFollowedUpInTheDebuggerScenario({ page, lap, runCommand, openRunReplay }) {
  const tried = page.locator('.monaco-list-row', { hasText: 'raising-tool' }).filter({ hasText: 'completed' }).first();
  await runCommand(page, 'Agent RL: Focus on Runs View');
  await tried.waitFor({ timeout: 300000 });
  await openRunReplay(page, tried, /raising-tool.*completed/);
  const view = replayView(page);
  await view.locator('#search-text').waitFor({ timeout: 60000 });
  await view.locator('#search-error').selectOption('exception');
  await view.locator('#search-run').click();
  const results = view.locator('#search-results');
  await results.filter({ hasText: /match/ }).waitFor({ timeout: 60000 });
  const said = ((await results.textContent()) ?? '').trim();
  lap(`search in the replay: "${said}"`);
  if (!/^[1-9]\d* episodes? match error exception/.test(said)) throw new Error(`the search found none: ${said}`);
  await view.locator('tbody tr').first().click();
  await view.locator('body').press('e'); // the next error: the call that raised
  await view.locator('.happened', { hasText: 'the search tool is broken' }).first().waitFor({ timeout: 15000 });
  await page.screenshot({ path: path.join('test-results', 'e2e', 'debugger-search.png') });
  lap('a match opens at its failed call');

  await page.locator('.tab.active').first().click(); // the editor, not the replay's webview, has the focus
  await runCommandAndPick(page, runCommand, lap, 'Agent RL: Compare Code', [
    { text: 'first-hour' },
    { title: 'compare with', text: 'raising-tool' },
  ]);
  await page
    .locator('.tab', { hasText: /Code: .*first-hour|Code: .*raising-tool/ })
    .first()
    .waitFor({ timeout: 30000 });
  await page.getByText('the search tool is broken').first().waitFor({ timeout: 30000 });
  await page.screenshot({ path: path.join('test-results', 'e2e', 'debugger-compare-code.png') });
  lap('Compare Code: the diff of the Tool the two runs trained with');
}

// (After the debugger scenario, before the server dies, by name.) What if: the first-hour run's replay, an
// observation edited (an assistant turn where no episode called the Tool) and re-rolled 4 times from the run's
// checkpoint; the original and the 4 re-rolls side by side.
export async function walkthroughFollowedUpReRolledScenario({ page, lap, runCommand, openRunReplay }) {
  await page.locator('.tab.active').first().click(); // an editor has the focus: F1 reaches the palette
  await runCommand(page, 'Agent RL: Focus on Runs View');
  const trained = page.locator('.monaco-list-row', { hasText: 'first-hour' }).filter({ hasText: '1/1' }).first();
  await openRunReplay(page, trained, /first-hour.*1\/1/);
  const view = replayView(page);
  await view.locator('#search-text').waitFor({ timeout: 60000 });
  await view.locator('#search-tool').selectOption('search');
  await view.locator('#search-run').click();
  await view.locator('#search-results').filter({ hasText: /match/ }).waitFor({ timeout: 60000 });
  const withCall = (await view.locator('tbody tr').count()) > 0;
  if (!withCall) await view.locator('#search-clear').click();
  await view.locator('tbody tr').first().click();
  const edit = withCall ? 'observation' : 'assistant';
  await view.locator(`.step.kind-${edit}`).first().click();
  await view.locator('#reroll-here').click();
  await view.locator('#reroll-text').fill(edit === 'observation' ? 'Error: the search tool is down' : 'I do not know.');
  const policies = await view.locator('#reroll-policy option').allTextContents();
  const checkpoint = policies.find((text) => /^checkpoint \d+/.test(text));
  if (!checkpoint) throw new Error(`no checkpoint of the run to re-roll from: ${policies}`);
  await view.locator('#reroll-policy').selectOption({ label: checkpoint });
  await view.locator('#reroll-samples').fill('4');
  await view.locator('#reroll-temperature').fill('0.7');
  await view.locator('#reroll-run').click();
  await view.locator('#reroll-compare').waitFor({ timeout: 600000 });
  const columns = await view.locator('.reroll-column').count();
  lap(`re-rolled an edited ${edit} 4 times from ${checkpoint}: ${columns} columns side by side`);
  await page.screenshot({ path: path.join('test-results', 'e2e', 'reroll.png') });
  if (columns !== 5) throw new Error(`expected the original and 4 re-rolls, found ${columns} columns`);
}

// (Last, by name.) The local server killed while the editor is open: the user is told, with Restart, and the runs
// of the workspace stay listed, read from its runs folder, marked offline, until a server is connected again.
export async function walkthroughFollowedUpWhenTheServerDiesScenario({ page, workspace, lap, runCommand }) {
  const servers = fs
    .readdirSync('/proc')
    .filter((pid) => /^\d+$/.test(pid))
    .filter((pid) => {
      try {
        const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        return (
          cmdline.includes('agentrl.cli\0serve') && fs.realpathSync(`/proc/${pid}/cwd`) === fs.realpathSync(workspace)
        );
      } catch {
        return false; // a process that ended meanwhile, or another user's
      }
    });
  if (servers.length !== 1) throw new Error(`expected the workspace's one local server, found pids ${servers}`);
  process.kill(Number(servers[0]), 'SIGKILL');
  lap(`killed the local server (pid ${servers[0]})`);
  const told = page.locator('.notification-list-item', { hasText: 'Its runs go on in their own processes' });
  await told.first().waitFor({ timeout: 60000 });
  if (!(await told.first().locator('.monaco-button', { hasText: 'Restart' }).count()))
    throw new Error('the notification offers no Restart');
  await runCommand(page, 'Agent RL: Focus on Runs View');
  const offline = page.locator('.monaco-list-row', { hasText: 'first-hour' }).filter({ hasText: 'offline' });
  await offline.first().waitFor({ timeout: 60000 });
  lap(`the runs stay listed: "${((await offline.first().textContent()) ?? '').trim()}"`);
  await page.screenshot({ path: path.join('test-results', 'e2e', 'server-killed-runs-offline.png') });
}
