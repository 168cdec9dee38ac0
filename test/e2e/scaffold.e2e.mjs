// New Environment from the palette writes a working env into the open folder and opens its run config.
import fs from 'node:fs';
import path from 'node:path';

/** Answers the quick input step whose title holds `step` (an InputBox's value, or a QuickPick's filter) with Enter.
 * (Also used by agent.e2e.mjs.) */
export async function answer(page, step, value) {
  // The quick input widget is reused between steps: wait for this step's title, or the next step's
  // default value lands after (and over) what we type.
  await page.locator('.quick-input-widget .quick-input-title', { hasText: step }).waitFor({ state: 'visible' });
  const input = page.locator('.quick-input-widget input');
  await input.fill(value);
  await page.keyboard.press('Enter');
}

export async function newEnvironmentScenario({ page, workspace, runCommand }) {
  const folder = path.join(workspace, 'palette-env');
  fs.rmSync(folder, { recursive: true, force: true });
  await runCommand(page, 'Agent RL: New Environment');
  await answer(page, '(1/4)', 'Tools and a ToolEnv');
  await answer(page, '(2/4)', 'palette-env');
  await answer(page, '(3/4)', 'search, calculator');
  await answer(page, '(4/4)', 'tiny'); // the model pick, filtered to the random test model (the default is SmolLM2)
  const config = path.join(folder, 'palette-env.agentrl.yaml');
  await page.locator('.tab', { hasText: 'palette-env.agentrl.yaml' }).waitFor({ timeout: 30000 });
  for (const file of [
    'tools.py',
    'codes.json',
    'env.py',
    'reward.py',
    'tasks.jsonl',
    'held-out.jsonl',
    'test_env.py',
    config,
  ]) {
    if (!fs.existsSync(path.resolve(folder, file))) throw new Error(`New Environment did not write ${file}`);
  }
  if (!/class Calculator\(Tool\)/.test(fs.readFileSync(path.join(folder, 'tools.py'), 'utf8')))
    throw new Error('tools.py lacks the Calculator tool');
  if (!/^  path: tiny$/m.test(fs.readFileSync(config, 'utf8')))
    throw new Error('the run config does not train the model picked (tiny)');
}
