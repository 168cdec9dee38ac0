// The whole loop on a real trainer server (the repo's .venv via AGENTRL_PYTHON): scaffold an env, start a
// local server, train the generated config to completion, try the env, and stop a longer run gracefully.
// What happened is read from the run folders the server writes (`agentRl.runsFolder`), not from the extension.
import { strict as assert } from 'node:assert';
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as vscode from 'vscode';
import {
  allTabs,
  extension,
  lastStatus,
  runEvents,
  runsFolder,
  screenshot,
  waitFor,
  waitForStatus,
  workspaceFolder,
} from './util';

interface Trajectory {
  id: string;
  status: string;
  status_reason: string | null;
  stats: { num_turns: number; response_tokens: number };
}

function trajectories(runId: string): Trajectory[] {
  const dir = join(runsFolder(), runId, 'trajectories');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.trajectories.jsonl'))
    .flatMap((f) =>
      readFileSync(join(dir, f), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Trajectory),
    );
}

/** Every episode got as far as the model generating: none was cut before its first turn (e.g. a prompt
 * over rollout.max_context), which would make a run "complete" without training on anything. */
function assertGenerated(episodes: Trajectory[]): void {
  const empty = episodes.filter((t) => t.stats.response_tokens === 0);
  assert.deepEqual(
    empty.map((t) => `${t.id}: ${t.status} (${t.status_reason}), ${t.stats.num_turns} turns`),
    [],
    'episodes in which the model generated nothing',
  );
}

describe('training on a local trainer server', function () {
  this.timeout(240_000);
  let config: vscode.Uri;
  let trainedRunId: string;

  before(async () => {
    await extension();
    const parent = workspaceFolder().uri.fsPath;
    const folder = await vscode.commands.executeCommand<string>('agentRl.newEnvironment', {
      name: 'train-env',
      tools: ['search', 'calculator'],
      parent,
      model: 'tiny',
    });
    assert.ok(folder, 'New Environment returned nothing');
    config = vscode.Uri.file(join(folder, 'train-env.agentrl.yaml'));
  });

  it('agentRl.startLocalServer starts a server and returns its WebSocket URL', async () => {
    const url = await vscode.commands.executeCommand<string | undefined>('agentRl.startLocalServer');
    assert.match(url ?? 'undefined (see the Agent RL log)', /^ws:\/\/127\.0\.0\.1:\d+/);
  });

  it("once connected, a hover on the config's model says what the server reported about its devices", async () => {
    const document = await vscode.workspace.openTextDocument(config);
    await vscode.window.showTextDocument(document);
    const onModelKey = new vscode.Position(
      document
        .getText()
        .split('\n')
        .findIndex((l) => l.startsWith('model:')),
      1,
    );
    const hoverText = async (): Promise<string> => {
      const hovers = await vscode.commands.executeCommand<vscode.Hover[]>(
        'vscode.executeHoverProvider',
        config,
        onModelKey,
      );
      return hovers
        .flatMap((h) => h.contents)
        .map((c) => (typeof c === 'string' ? c : c.value))
        .join('\n');
    };
    const text = await waitFor(
      async () => {
        const t = await hoverText();
        return /Connected trainer:/.test(t) ? t : undefined;
      },
      'a hover naming the connected trainer',
      30_000,
      500,
    );
    assert.match(text, /Connected trainer: \d+ CPU cores/);
  });

  it('agentRl.startTraining trains the generated config to completion', async () => {
    const runId = await vscode.commands.executeCommand<string | undefined>('agentRl.startTraining', config);
    assert.ok(runId, 'Start Training returned no run id (see the Agent RL log)');
    await waitForStatus(runId, 'completed', 180_000);
    const events = runEvents(runId);
    const steps = new Set(events.flatMap((e) => (e.type === 'metrics' ? [e.data.step] : [])));
    assert.deepEqual([...steps].sort(), [1, 2], "a metrics event for each of the config's 2 steps");
    assert.ok(
      events.some((e) => e.type === 'checkpoint'),
      'a checkpoint was written',
    );
    const episodes = trajectories(runId);
    assert.equal(episodes.length, 16, '2 steps x batch_size 8 trajectories');
    assertGenerated(episodes);
    assert.equal(JSON.parse(readFileSync(join(runsFolder(), runId, 'run.json'), 'utf8')).mode, 'train');
    trainedRunId = runId;
  });

  it('agentRl.exportModel writes the trained model where the user picks: a folder transformers loads', async () => {
    const destination = mkdtempSync(join(tmpdir(), 'export-'));
    const folder = await vscode.commands.executeCommand<string | undefined>('agentRl.exportModel', {
      runId: trainedRunId,
      mergeLora: false,
      destination,
    });
    assert.equal(folder, join(destination, 'train-env-step-2'));
    for (const file of ['config.json', 'model.safetensors', 'tokenizer.json', 'README.md'])
      assert.ok(existsSync(join(folder!, file)), `the export has ${file}`);
    const first = await vscode.commands.executeCommand<string | undefined>('agentRl.exportModel', {
      runId: trainedRunId,
      step: 1,
      mergeLora: false,
      destination,
    });
    assert.equal(first, join(destination, 'train-env-step-1'), "a chosen checkpoint (a step row's Export Model)");
  });

  it('agentRl.tryEnvironment runs episodes with no updates and opens their replay', async () => {
    const runId = await vscode.commands.executeCommand<string | undefined>('agentRl.tryEnvironment', config);
    assert.ok(runId, 'Try Environment returned no run id (see the Agent RL log)');
    await waitForStatus(runId, 'completed', 180_000);
    const episodes = trajectories(runId);
    const wanted = vscode.workspace.getConfiguration('agentRl').get<number>('tryEpisodes') ?? 4;
    assert.equal(episodes.length, wanted, `agentRl.tryEpisodes (${wanted}) trajectories`);
    assertGenerated(episodes);
    assert.equal(
      runEvents(runId).filter((e) => e.type === 'checkpoint').length,
      0,
      'a try run never updates or checkpoints',
    );
    const run = JSON.parse(readFileSync(join(runsFolder(), runId, 'run.json'), 'utf8'));
    assert.equal(run.mode, 'try');
    // The tab names the run as the editor does: its name, and its mode and start time beside a namesake (the
    // training run above).
    const title = (label: string) => label === `Replay: ${run.name}` || label.startsWith(`Replay: ${run.name} (try `);
    await waitFor(
      () => allTabs().find((t) => t.input instanceof vscode.TabInputWebview && title(t.label)),
      `a replay tab for ${runId}`,
      30_000,
    );
    await screenshot('try-replay', 'tbody tr', 'webview');
  });

  it('agentRl.newTool from an MCP server lists its tools through the trainer and adds its entry to the config', async () => {
    // The repo's own test server, written with the MCP SDK, started by the connected trainer as a run would.
    const server = join((await extension()).extensionPath, 'trainer-server', 'tests', 'mcp_server.py');
    const python = process.env.AGENTRL_PYTHON ?? 'python3';
    const written = await vscode.commands.executeCommand<string | undefined>('agentRl.newTool', {
      folder: dirname(config.fsPath),
      kind: 'mcp',
      name: 'math',
      server: `${python} ${server}`,
      config: config.fsPath,
    });
    assert.equal(written, config.fsPath);
    const text = readFileSync(config.fsPath, 'utf8');
    assert.match(text, /mcp_servers:\n\s+- name: math\n\s+command: /);
    assert.match(text, /mcp_servers:[\s\S]*args:\n\s+- .*mcp_server\.py/);
    // The extension host hears of the edit asynchronously: wait for its copy of the document to have it.
    const editor = await waitFor(() => {
      const active = vscode.window.activeTextEditor;
      return active?.document.uri.fsPath === config.fsPath && active.document.getText().includes('name: math')
        ? active
        : undefined;
    }, 'the run config opened with the new entry');
    assert.match(editor.document.lineAt(editor.selection.active.line).text, /- name: math/);
    // A server that does not start adds nothing (the command shows the trainer's reason).
    const refused = await vscode.commands.executeCommand<string | undefined>('agentRl.newTool', {
      folder: dirname(config.fsPath),
      kind: 'mcp',
      name: 'gone',
      server: '/nonexistent/mcp-server',
      config: config.fsPath,
    });
    assert.equal(refused, undefined);
    assert.doesNotMatch(readFileSync(config.fsPath, 'utf8'), /name: gone/);
  });

  it('a NaN reward stops the run, and its non_finite alert is an error on the run config with a quick fix to the replay', async () => {
    const folder = dirname(config.fsPath);
    writeFileSync(
      join(folder, 'nan_env.py'),
      'from agentrl import EpisodeScore\nfrom agentrl.examples.lookup.env import LookupEnv\n\n\n' +
        'class NanLookup(LookupEnv):\n    def score(self, final_text):\n        return EpisodeScore(reward=float("nan"))\n',
    );
    writeFileSync(
      join(folder, 'lookup_tasks.jsonl'),
      ['0', '1', '2', '3'].map((key) => JSON.stringify({ id: `key-${key}`, key })).join('\n') + '\n',
    );
    const nan = vscode.Uri.file(join(folder, 'train-env-nan.agentrl.yaml'));
    writeFileSync(
      nan.fsPath,
      readFileSync(config.fsPath, 'utf8')
        .replace(/^name: .*$/m, 'name: train-env-nan')
        .replace(/^ {2}module: .*$/m, '  module: nan_env.py')
        .replace(/^ {2}class_name: .*$/m, '  class_name: NanLookup')
        .replace(/^ {2}train: tasks\.jsonl$/m, '  train: lookup_tasks.jsonl'),
    );
    const runId = await vscode.commands.executeCommand<string | undefined>('agentRl.startTraining', nan);
    assert.ok(runId, 'Start Training returned no run id (see the Agent RL log)');
    await waitForStatus(runId, 'failed', 180_000);
    const problem = await waitFor(
      () => vscode.languages.getDiagnostics(nan).find((d) => d.source === 'Agent RL health' && d.code === 'non_finite'),
      'a non_finite problem on the run config',
      30_000,
      500,
    );
    assert.equal(problem.severity, vscode.DiagnosticSeverity.Error);
    assert.match(problem.message, /^train-env-nan: Step 1: /);
    const actions = await vscode.commands.executeCommand<vscode.CodeAction[]>(
      'vscode.executeCodeActionProvider',
      nan,
      problem.range,
    );
    const open = actions.find((a) => a.command?.command === 'agentRl.openReplay');
    assert.deepEqual(open?.command?.arguments, [{ runId, step: 1 }]);
  });

  it('agentRl.stopTraining stops a longer run gracefully at a checkpoint', async () => {
    const long = vscode.Uri.file(config.fsPath.replace(/\.agentrl\.yaml$/, '-long.agentrl.yaml'));
    writeFileSync(
      long.fsPath,
      // the MCP server added above switched the config to hermes, whose tool schemas and the template's worked
      // example fill a prompt to about 2,080 tokens: past the template's max_context, which the run refuses
      readFileSync(config.fsPath, 'utf8')
        .replace(/^ {2}steps: \d+$/m, '  steps: 1000')
        .replace(/^ {2}max_context: \d+$/m, '  max_context: 4096')
        .replace(/^name: .*$/m, 'name: train-env-long'),
    );
    const runId = await vscode.commands.executeCommand<string | undefined>('agentRl.startTraining', long);
    assert.ok(runId, 'Start Training returned no run id (see the Agent RL log)');
    await waitFor(() => runEvents(runId).some((e) => e.type === 'metrics'), `a first step of ${runId}`, 120_000, 500);
    const stopped = await vscode.commands.executeCommand<string | undefined>('agentRl.stopTraining', {
      runId,
      mode: 'graceful',
    });
    assert.ok(stopped === 'stopping' || stopped === 'stopped', `stopTraining answered ${stopped}`);
    await waitForStatus(runId, 'stopped', 120_000);
    const events = runEvents(runId);
    assert.ok(lastStatus(runId)!.step < 1000, 'it stopped before the end');
    assert.ok(
      events.some((e) => e.type === 'checkpoint'),
      'a graceful stop leaves a checkpoint',
    );
    await screenshot('runs');
  });
});
