// What a user sees while training: Start Local Server and Start Training from the palette on the config the
// New Environment scenario wrote (palette-env), the status bar item following the run, and the Runs view
// (activity bar "Agent RL") listing it as completed with its steps. Runs after scaffold.e2e.mjs (file order).
import fs from 'node:fs';
import path from 'node:path';

export async function trainingScenario({ page, workspace, lap, runCommand }) {
  const config = path.join(workspace, 'palette-env', 'palette-env.agentrl.yaml');
  if (!fs.existsSync(config)) throw new Error('needs the env that newEnvironmentScenario writes (palette-env)');
  const status = page.locator('.statusbar-item', { hasText: 'Agent RL' }).first();
  await status.waitFor({ timeout: 30000 });

  await runCommand(page, 'Agent RL: Start Local Server');
  // Connected: the item stops saying "connecting" (the server takes a few seconds to import torch).
  await page.waitForFunction(() => [...document.querySelectorAll('.statusbar-item')].some((e) => /Agent RL/.test(e.textContent ?? '') && !/connecting/.test(e.textContent ?? '') && e.querySelector('.codicon-beaker')), null, { timeout: 90000 });
  lap('local trainer server connected');

  await page.locator('.tab', { hasText: 'palette-env.agentrl.yaml' }).first().click();
  await runCommand(page, 'Agent RL: Start Training');
  const runItem = page.locator('.statusbar-item', { hasText: 'palette-env' }).first();
  await runItem.waitFor({ timeout: 60000 });
  lap(`status bar follows the run: "${(await runItem.textContent())?.trim()}"`);
  await page.locator('.statusbar-item', { hasText: 'palette-env 2/2' }).first().waitFor({ timeout: 180000 });

  const runRow = page.locator('.monaco-list-row', { hasText: 'palette-env' }).filter({ hasText: 'completed' }).first();
  await runRow.waitFor({ timeout: 60000 });
  const description = (await runRow.locator('.label-description').textContent())?.trim() ?? '';
  if (!/^completed · 2\/2 · reward /.test(description)) throw new Error(`the run's row says "${description}"`);
  await runRow.click();  // expand: its steps, newest first
  const steps = page.locator('.monaco-list-row', { hasText: /^step \d/ });
  await steps.first().waitFor({ timeout: 30000 });
  const labels = await steps.locator('.label-name').allTextContents();
  if (labels.join(',') !== 'step 2,step 1') throw new Error(`step rows: ${labels.join(', ')}`);
  await page.locator('.monaco-list-row', { hasText: 'step 2' }).first().click();
  await page.locator('.monaco-list-row', { hasText: /^group 0/ }).first().waitFor({ timeout: 30000 });
  lap(`Runs view: "palette-env ${description}", ${labels.join(', ')}`);
}
