// New Environment > From an existing agent (issue #31): the palette writes an OpenAI-SDK agent, its reward, tasks and
// a run config with `agent:`; Try Environment on that config plays its episodes through the trainer's endpoint with
// the packaged SmolLM2 (which copies the worked example's calculator call), and the replay opens on them: each
// episode's prompt the agent's own messages, a tool step the call the model made and the result the agent's own
// calculator returned.
import fs from 'node:fs';
import path from 'node:path';
import { answer } from './scaffold.e2e.mjs';
import { connectLocalServer } from './training.e2e.mjs';

export async function newAgentTriedScenario({ page, workspace, lap, runCommand }) {
  const folder = path.join(workspace, 'palette-agent');
  fs.rmSync(folder, { recursive: true, force: true });
  await runCommand(page, 'Agent RL: New Environment');
  await answer(page, '(1/4)', 'From an existing agent');
  await answer(page, '(2/4)', 'palette-agent');
  await answer(page, '(3/4)', 'OpenAI SDK'); // the framework agent.py is written with: a plain OpenAI-SDK loop
  await answer(page, '(4/4)', 'SmolLM2');
  await page.locator('.tab.active', { hasText: 'palette-agent.agentrl.yaml' }).waitFor({ timeout: 30000 });
  for (const file of ['agent.py', 'reward.py', 'tasks.jsonl', 'palette-agent.agentrl.yaml'])
    if (!fs.existsSync(path.join(folder, file))) throw new Error(`New Environment did not write ${file}`);
  if (
    !/^agent:\n {2}module: agent\.py$/m.test(fs.readFileSync(path.join(folder, 'palette-agent.agentrl.yaml'), 'utf8'))
  )
    throw new Error('the run config has no agent: section naming agent.py');
  lap('New Environment > From an existing agent wrote agent.py, reward.py, tasks.jsonl and the run config');

  await connectLocalServer(page, runCommand, lap);
  await page.locator('.tab', { hasText: 'palette-agent.agentrl.yaml' }).first().click();
  await page.mouse.move(700, 400); // off the tab: its hover can make the palette's input inert
  await runCommand(page, 'Agent RL: Try Environment');
  const asked = page.locator('.quick-input-widget .quick-input-title', { hasText: 'Try Environment' });
  if (
    await asked.waitFor({ timeout: 3000 }).then(
      () => true,
      () => false,
    )
  )
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'palette-agent' }).first().click();

  // Try Environment opens the try run's replay when its episodes are done.
  const view = page.locator('iframe.webview.ready:visible').first().contentFrame().frameLocator('#active-frame');
  const rows = view.locator('tbody tr');
  await rows.nth(3).waitFor({ timeout: 180000 }); // agentRl.tryEpisodes: 4
  const cells = await rows.evaluateAll((trs) =>
    trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent?.trim() ?? '')),
  );
  const errors = cells.filter((row) => /error/.test(row[3]));
  if (errors.length) throw new Error(`episodes that ended in an error: ${JSON.stringify(errors)}`);
  const calls = cells.map((row) => Number(row[5]));
  lap(`the replay lists the agent's ${cells.length} episodes (tool calls: ${calls.join(', ')})`);
  const withCall = calls.findIndex((count) => count > 0);
  if (withCall < 0) throw new Error(`no episode called the calculator: ${JSON.stringify(cells)}`);

  await rows.nth(withCall).click();
  await view.locator('#position', { hasText: /^step 1 \// }).waitFor({ timeout: 15000 });
  // The prompt is the agent's first request: its system prompt and its worked example of a calculator call, written
  // as the model writes a call (rollout.tool_format: tags).
  await view.locator('.io pre', { hasText: 'Solve the problem with the calculator.' }).waitFor({ timeout: 15000 });
  await view.locator('.io pre', { hasText: '<calculator>24 * 37</calculator>' }).first().waitFor({ timeout: 15000 });
  lap("an episode opens on the agent's own prompt, its worked example's call in it");
  await view.locator('body').press('t'); // the next tool call: the model's calculator call and what the agent returned
  await view.locator('.happened pre', { hasText: /\S/ }).first().waitFor({ timeout: 15000 });
  const happened = (await view.locator('.happened pre').first().textContent()) ?? '';
  lap(`a tool step shows the model's calculator call and what the agent's calculator returned: ${happened.trim()}`);
}
