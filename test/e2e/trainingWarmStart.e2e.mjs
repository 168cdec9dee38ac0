// Teach before you reinforce, from the editor: Search Episodes on the palette-env run (from its row's context menu),
// Warm-start from these, the config it writes opened, and Start Training on it: the Runs view lists the warm-started
// run completed; and Add to Training Set from the replay. Runs after training.e2e.mjs (file order), whose first
// scenario trained palette-env.
import fs from 'node:fs';
import path from 'node:path';
import { connectLocalServer } from './training.e2e.mjs';

/** The palette-env run's row: its name exactly (the runs warmed up from it are named palette-env-...). */
const paletteEnvRow = (page) =>
  page
    .locator('.monaco-list-row')
    .filter({ has: page.locator('.label-name', { hasText: /^palette-env$/ }) })
    .filter({ hasText: 'completed' })
    .first();

/** Search Episodes on the palette-env run, from its row's context menu, for `query`: its matches are then listed. */
async function searchPaletteEnv({ page, lap, runCommand, fromRowMenu }, query) {
  await connectLocalServer(page, runCommand, lap);
  await runCommand(page, 'Agent RL: Focus on Runs View');
  const row = paletteEnvRow(page);
  await row.waitFor({ timeout: 30000 });
  const askedForWords = page.locator('.quick-input-widget .quick-input-title', { hasText: 'Search Episodes of' });
  await fromRowMenu(page, row, 'Search Episodes', askedForWords);
  await page.locator('.quick-input-widget input').fill(query);
  await page.keyboard.press('Enter');
}

export async function trainingWarmStartedFromASearchScenario(scenario) {
  const { page, workspace, lap, runCommand } = scenario;
  await searchPaletteEnv(scenario, 'reward>=0');
  const warmStart = page.locator('.quick-input-list .monaco-list-row', { hasText: 'Warm-start from these' }).first();
  await warmStart.waitFor({ timeout: 60000 });
  lap(`Search Episodes lists "${(await warmStart.textContent())?.trim()}" above the matches`);
  await warmStart.click();
  await page.locator('.tab.active', { hasText: 'palette-env-warm-start.agentrl.yaml' }).waitFor({ timeout: 30000 });
  const written = fs.readFileSync(path.join(workspace, 'palette-env-warm-start.agentrl.yaml'), 'utf8');
  if (!/sft_steps: 1\b/.test(written) || !/where:\s*\n\s+reward:\s*\n\s+min: 0/.test(written))
    throw new Error(`the warm-start config says:\n${written}`);
  lap(
    'Warm-start from these wrote palette-env-warm-start.agentrl.yaml (data.sft: the run and the filter) and opened it',
  );

  await page.mouse.move(700, 400);
  await runCommand(page, 'Agent RL: Start Training');
  // its row in the Runs view (a notification also says it completed, in other words)
  const started = page.locator('.monaco-list-row', { hasText: /palette-env-warm-start\s*completed · / });
  await started.first().waitFor({ timeout: 240000 });
  lap(`the warm-started run trained: "${(await started.first().textContent())?.trim()}"`);
}

// Imitate episodes like these: the same search, and the config it writes (the run's, by expert iteration with the
// search as algorithm.rft_where) opened and trained. (Scenarios of a file run in the alphabetical order of their
// names: this one first.)
export async function trainingImitatingASearchScenario(scenario) {
  const { page, workspace, lap, runCommand } = scenario;
  await searchPaletteEnv(scenario, 'reward>=0 step<=1');
  const imitate = page
    .locator('.quick-input-list .monaco-list-row', { hasText: 'Imitate episodes like these' })
    .first();
  await imitate.waitFor({ timeout: 60000 });
  await imitate.click();
  await page.locator('.tab.active', { hasText: 'palette-env-rft.agentrl.yaml' }).waitFor({ timeout: 30000 });
  const written = fs.readFileSync(path.join(workspace, 'palette-env-rft.agentrl.yaml'), 'utf8');
  if (!/name: rft\b/.test(written) || !/rft_where:\s*\n\s+reward:\s*\n\s+min: 0/.test(written) || /step:/.test(written))
    throw new Error(`the expert-iteration config says:\n${written}`);
  lap('Imitate episodes like these wrote palette-env-rft.agentrl.yaml (rft, the search as rft_where, step left out)');
  await page.mouse.move(700, 400);
  await runCommand(page, 'Agent RL: Start Training');
  const trained = page.locator('.monaco-list-row', { hasText: /palette-env-rft\s*completed · / });
  await trained.first().waitFor({ timeout: 240000 });
  lap(`the run imitating episodes like the search's trained: "${(await trained.first().textContent())?.trim()}"`);
}

// (Scenarios of a file run in the alphabetical order of their names: this one after the one above.)
// Add to Training Set from the replay: the first episode of the palette-env run, from its row's button, into a new set
// named in the editor (training-sets/good-calls.jsonl, one line); Use in a Run Config writes a config that warms up on
// the set and opens it, and Start Training on it completes.
export async function trainingWarmStartedFromATrainingSetScenario({ page, workspace, lap, runCommand, openRunReplay }) {
  await connectLocalServer(page, runCommand, lap);
  await runCommand(page, 'Agent RL: Focus on Runs View');
  const row = paletteEnvRow(page);
  await row.waitFor({ timeout: 30000 });
  await openRunReplay(page, row, /^palette-env\s*completed/);
  const view = page.locator('iframe.webview.ready:visible').first().contentFrame().frameLocator('#active-frame');
  const first = view.locator('tbody tr').first();
  await first.waitFor({ timeout: 60000 });
  const episode = await first.getAttribute('data-id');
  await first.locator('button.add-to-set').click();
  const newSet = page.locator('.quick-input-list .monaco-list-row', { hasText: 'New Training Set' }).first();
  await newSet.waitFor({ timeout: 30000 });
  await page
    .locator('.quick-input-widget .quick-input-title', { hasText: 'Add 1 episode to a training set' })
    .waitFor();
  await newSet.click();
  await page.locator('.quick-input-widget .quick-input-title', { hasText: 'New Training Set for 1 episode' }).waitFor();
  await page.locator('.quick-input-widget input').fill('good-calls');
  await page.keyboard.press('Enter');
  const told = page.locator('.notification-toast', { hasText: 'Added 1 episode to training set good-calls' });
  await told.waitFor({ timeout: 30000 });
  const lines = fs
    .readFileSync(path.join(workspace, 'training-sets', 'good-calls.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line));
  if (lines.length !== 1 || lines[0].episode?.id !== episode || lines[0].from_turn !== 0)
    throw new Error(`training-sets/good-calls.jsonl holds ${JSON.stringify(lines).slice(0, 300)}`);
  lap(`Add to Training Set wrote episode ${episode} of palette-env into training-sets/good-calls.jsonl`);

  await told.locator('.monaco-button', { hasText: 'Use in a Run Config' }).click();
  await page.locator('.tab.active', { hasText: 'good-calls.sft.agentrl.yaml' }).waitFor({ timeout: 30000 });
  const written = fs.readFileSync(path.join(workspace, 'good-calls.sft.agentrl.yaml'), 'utf8');
  if (!/episodes: training-sets\/good-calls\.jsonl/.test(written) || !/sft_steps: 1\b/.test(written))
    throw new Error(`the config written for the set says:\n${written}`);
  lap('Use in a Run Config wrote good-calls.sft.agentrl.yaml (data.sft: the set) and opened it');
  await page.mouse.move(700, 400);
  await runCommand(page, 'Agent RL: Start Training');
  const trained = page.locator('.monaco-list-row', { hasText: /palette-env-good-calls\s*completed · / });
  await trained.first().waitFor({ timeout: 240000 });
  lap(`the run warmed up on the set trained: "${(await trained.first().textContent())?.trim()}"`);
}
