// Re-run with current code, from a run's replay (issue #17, item 4): a run records a call of a Tool that returns
// "v1"; the Tool's file is then edited to return "v2", and the button in the replay's inspector shows the recorded
// "v1" beside the new "v2", run by the connected local trainer server. The run is recorded by the real trainer into
// the server's runs folder with a scripted policy (the tiny random model never writes a call that parses), while the
// server starts; it is then opened from the Runs view as a user would. Runs before training.e2e.mjs (file order),
// which finds the server connected.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { connectLocalServer } from './training.e2e.mjs';

const RUN_ID = 'tool-rerun-e2e';
const CALL = '<tool_call>{"name": "lookup", "arguments": {"key": "3"}}</tool_call>';
const ENV = (value) => `from agentrl import Tool
from agentrl.examples.lookup.env import LookupEnv as ShippedLookupEnv


class Lookup(Tool):
    name = "lookup"
    description = "Return the value stored under a key."
    parameters = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}

    def execute(self, key):
        return "${value}"


class LookupEnv(ShippedLookupEnv):
    """agentrl's lookup example with this folder's Lookup, which the scenario edits."""

    def __init__(self, **args):
        super().__init__(**args)
        self.tools = [Lookup()]
`;
// A Try run (one episode, no update) of the config, its turns written by a ScriptedPolicy: the call, then "done".
const RECORD = `
import os
import sys
from agentrl.rollout.scripted import ScriptedPolicy
from agentrl.contract.config import load_config
from agentrl.run.trainer import train

config, runs_dir, run_id, call = sys.argv[1:]
train(load_config(config), runs_dir=runs_dir, run_id=run_id, rollout_only_episodes=1,
      config_base_dir=os.path.dirname(config), policy=ScriptedPolicy([call, "done"]))
`;

export async function toolRerunScenario({ page, workspace, lap, runCommand, openRunReplay }) {
  const folder = path.join(workspace, 'rerun-env');
  const runsDir = path.join(workspace, '.agentrl', 'runs'); // agentRl.runsFolder's default, where the server looks
  fs.rmSync(folder, { recursive: true, force: true });
  fs.rmSync(path.join(runsDir, RUN_ID), { recursive: true, force: true });
  fs.mkdirSync(folder, { recursive: true });
  fs.writeFileSync(path.join(folder, 'env.py'), ENV('v1'));
  fs.writeFileSync(path.join(folder, 'tasks.jsonl'), '{"key": "3"}\n');
  const config = path.join(folder, 'rerun-env.agentrl.yaml');
  fs.writeFileSync(
    config,
    'name: rerun-env\nmodel: {path: tiny}\nenv: {module: env.py, class_name: LookupEnv}\n' +
      'data: {train: tasks.jsonl}\nrollout: {group_size: 1, max_turns: 2, max_new_tokens: 24}\n',
  );
  const recording = promisify(execFile)(process.env.AGENTRL_PYTHON, ['-c', RECORD, config, runsDir, RUN_ID, CALL], {
    cwd: folder,
  });
  await connectLocalServer(page, runCommand, lap);
  await recording;
  const record = JSON.parse(
    fs
      .readFileSync(path.join(runsDir, RUN_ID, 'trajectories', 'step-000000.trajectories.jsonl'), 'utf8')
      .split('\n')[0],
  );
  const recorded = record.turns[0].tool_calls[0];
  if (recorded.name !== 'lookup' || recorded.result !== 'v1')
    throw new Error(`recorded call: ${JSON.stringify(recorded)}`);
  lap(`run ${RUN_ID} recorded lookup("3") -> "v1"`);

  // The Runs view lists it (the server reads its runs folder); its inline action opens the run's replay.
  await runCommand(page, 'Agent RL: Refresh Runs');
  await runCommand(page, 'Agent RL: Focus on Runs View');
  const row = page.locator('.monaco-list-row', { hasText: 'rerun-env' }).first();
  await row.waitFor({ timeout: 30000 });
  await openRunReplay(page, row, 'rerun-env');
  const view = page.locator('iframe.webview.ready:visible').first().contentFrame().frameLocator('#active-frame');
  await view.locator(`tr[data-id="${record.id}"]`).click({ timeout: 60000 });
  await view.locator('body').press('t'); // the next tool call: lookup, with "What happened" and the re-run button
  await view.locator('.happened pre', { hasText: /^v1$/ }).waitFor({ timeout: 15000 });

  fs.writeFileSync(path.join(folder, 'env.py'), ENV('v2')); // the Tool edited after the run
  await view.locator('#rerun-tool-call').click();
  const pair = view.locator('.rerun-pair');
  await pair.waitFor({ timeout: 60000 }); // a fresh process builds the env from the run's frozen config
  const before = (await pair.locator('.recorded pre').textContent()) ?? '';
  const after = (await pair.locator('.current pre').textContent()) ?? '';
  const verdict = (await view.locator('.rerun-verdict').textContent()) ?? '';
  if (before !== 'v1' || after !== 'v2' || !/changed/.test(verdict))
    throw new Error(
      `the re-run shows recorded ${JSON.stringify(before)}, current ${JSON.stringify(after)}: "${verdict}"`,
    );
  lap(`Re-run with current code: recorded "${before}", current code "${after}" (${verdict})`);
}
