// Teach before you reinforce, from the editor: Search Episodes on the palette-env run (from its row's context menu),
// Warm-start from these, the config it writes opened, and Start Training on it: the Runs view lists the warm-started
// run completed. Runs after training.e2e.mjs (file order), whose first scenario trained palette-env.
import fs from 'node:fs';
import path from 'node:path';
import { connectLocalServer } from './training.e2e.mjs';

export async function trainingWarmStartedFromASearchScenario({ page, workspace, lap, runCommand, fromRowMenu }) {
  await connectLocalServer(page, runCommand, lap);
  await runCommand(page, 'Agent RL: Focus on Runs View');
  const row = page.locator('.monaco-list-row', { hasText: 'palette-env' }).filter({ hasText: 'completed' }).first();
  await row.waitFor({ timeout: 30000 });
  const askedForWords = page.locator('.quick-input-widget .quick-input-title', { hasText: 'Search Episodes of' });
  await fromRowMenu(page, row, 'Search Episodes', askedForWords);
  await page.locator('.quick-input-widget input').fill('reward>=0');
  await page.keyboard.press('Enter');
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
