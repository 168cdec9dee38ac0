// New Environment > From an existing agent (issue #31): the palette writes an OpenAI-SDK agent, its reward, tasks and
// a run config with `agent:`; Try Environment on that config plays its episodes through the trainer's endpoint, and
// the replay opens on them, each episode's prompt the agent's own messages. The random `tiny` model keeps the run
// short; it never writes a call that parses (see toolRerun.e2e.mjs), so the scenario reads the calls column as the
// replay lists it rather than expecting calls.
import fs from 'node:fs';
import path from 'node:path';
import { answer } from './scaffold.e2e.mjs';
import { connectLocalServer } from './training.e2e.mjs';

export async function newAgentTriedScenario({ page, workspace, lap, runCommand }) {
  const folder = path.join(workspace, 'palette-agent');
  fs.rmSync(folder, { recursive: true, force: true });
  await runCommand(page, 'Agent RL: New Environment');
  await answer(page, '(1/4)', 'From an existing agent');
  await answer(page, '(2/3)', 'palette-agent');
  await answer(page, '(3/3)', 'tiny');
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
  lap(`the replay lists the agent's ${cells.length} episodes (tool calls: ${cells.map((row) => row[5]).join(', ')})`);

  await rows.first().click();
  await view.locator('#position', { hasText: /^step 1 \// }).waitFor({ timeout: 15000 });
  // The prompt is the agent's first request: its system prompt and its worked example of a calculator call.
  await view
    .locator('.io pre', { hasText: 'Use the calculator, then answer with the number.' })
    .waitFor({ timeout: 15000 });
  lap("an episode opens on the agent's own prompt");
}
