import { fake, TextDocument, Uri } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { commands } from 'vscode';
import { type RunEventParams } from '../../protocol/generated/rpc';
import { Commands, Succeeded } from '../../extension/commands';
import { runInfo, type FakeCtx } from './fakeCtx';
import { runCommandsWorld } from './runCommandsWorld';

describe('Try Environment', () => {
  const world = runCommandsWorld();
  let f: FakeCtx;
  let envFolder: string;
  let config: string;
  beforeEach(() => ({ f, envFolder, config } = world));

  it('Try Environment checks the env, runs the episodes, puts each failing Tool in the problems at its definition, and opens the replay', async () => {
    writeFileSync(join(envFolder, 'tools.py'), 'class Search(Tool):\n    name = "search"\n');
    f.connection.answers['env/check'] = () => ({
      ok: true,
      diagnostics: [
        { severity: 'warning', message: 'turn 0: tool call failed: KeyError: x', file: 'tools.py', line: 1 },
        { severity: 'info', message: 'scripted episode: 2 turn(s), status finished, reward 0', file: 'x.agentrl.yaml' },
      ],
    });
    f.connection.answers['run/start'] = (params) => {
      assert.deepEqual(params, {
        config: { name: 'lookup', model: { path: 'tiny' } },
        mode: 'try',
        episodes: 4,
        configDir: envFolder,
      });
      f.connection.model.upsertRun(runInfo('t1', { mode: 'try', status: 'completed', name: 'lookup' }));
      f.connection.model.applyEvent({
        runId: 't1',
        seq: 1,
        time: 1,
        type: 'trajectory',
        data: { id: 'e1', reward: 0.5, num_tool_calls: 1, num_tool_errors: 1 } as never,
      });
      return { runId: 't1' };
    };
    const failed = {
      id: 'e1',
      turns: [{ tool_calls: [{ name: 'search', error: 'KeyError: x', error_kind: 'tool' }] }],
    };
    f.connection.trajectoryRecords.set('e1', failed as never);
    f.connection.answers['trajectory/query'] = () => ({ items: [{ id: 'e1' }], total: 1, nextCursor: null }) as never;
    const openedReplays: unknown[] = [];
    commands.registerCommand(Commands.openReplay, async (target: unknown) => void openedReplays.push(target));

    assert.equal(await commands.executeCommand(Commands.tryEnvironment, config), 't1');
    assert.deepEqual(f.connection.requests[0], {
      method: 'env/check',
      params: { configDir: envFolder, configFile: 'lookup.agentrl.yaml' },
    });
    assert.deepEqual(openedReplays, [{ runId: 't1' }]);
    const problems = fake.diagnostics.get('agentRl.tryEnvironment')!;
    // the check's warning (its scripted call, 1-based line 1) and the episodes' failures, side by side
    const [fromCheck, atTool] = problems.get(Uri.file(join(envFolder, 'tools.py')))!;
    assert.deepEqual([fromCheck.range.start.line, fromCheck.source], [0, 'Agent RL: env check']);
    assert.equal(atTool.range.start.line, 1, 'the line that names the Tool');
    assert.equal(atTool.source, 'Agent RL: Try Environment');
    assert.equal(problems.get(Uri.file(config)), undefined, "the check's infos are for the log");
    const summary = fake.messages.find((m) => m.text.startsWith('Try run lookup'))!;
    assert.equal(summary.severity, 'warning');
    assert.equal(summary.text, 'Try run lookup: 1 episode, 1 tool call (1 failed), mean reward 0.50.');
    assert.deepEqual(summary.actions, ['Show Problems']);
    assert.ok(
      fake.executed.some((e) => e.command === 'setContext' && e.args[0] === Succeeded.tryEnvironment),
      'the walkthrough step ticks: the Try completed',
    );
    // the Tool fixed and saved: the problems the Try found in that file go (the next Try finds what is left)
    fake.documentSaved.fire(new TextDocument(Uri.file(join(envFolder, 'tools.py')), ''));
    assert.equal(problems.get(Uri.file(join(envFolder, 'tools.py'))), undefined);
  });

  describe('Try Environment: the env check first', () => {
    beforeEach(() => {
      writeFileSync(
        join(envFolder, 'tools.py'),
        'class Search(Tool):\n    def execute(self):\n        raise KeyError\n',
      );
      f.connection.answers['env/check'] = () => ({
        ok: false,
        diagnostics: [
          { severity: 'error', message: 'LookupEnv(**env.args) raised KeyError', file: 'tools.py', line: 3 },
          { severity: 'error', message: 'data.train: no such file' },
        ],
      });
      f.connection.answers['run/start'] = () => {
        f.connection.model.upsertRun(runInfo('t2', { mode: 'try', status: 'failed', name: 'lookup' }));
        return { runId: 't2' };
      };
    });

    it('an env that fails its check runs no episode: its errors are in the problems, and the user is told', async () => {
      assert.equal(await commands.executeCommand(Commands.tryEnvironment, config), undefined);
      assert.deepEqual(
        f.connection.requests.map((r) => r.method),
        ['env/check'],
      );
      const problems = fake.diagnostics.get('agentRl.tryEnvironment')!;
      const [raised] = problems.get(Uri.file(join(envFolder, 'tools.py')))!;
      assert.deepEqual([raised.range.start.line, raised.severity], [2, 0], 'an error at the raising line');
      const [noFile] = problems.get(Uri.file(config))!;
      assert.equal(noFile.message, 'data.train: no such file', 'a finding with no file is put on the run config');
      assert.deepEqual(fake.messages, [
        {
          severity: 'error',
          text:
            'Agent RL: the env check of ' +
            config +
            ' found 2 error(s) before any episode ran: LookupEnv(**env.args) raised KeyError',
          actions: ['Show Problems', 'Try Anyway', 'Learn more'],
        },
      ]);
    });

    it('Try Anyway runs the episodes all the same', async () => {
      fake.messageChoices = ['Try Anyway'];
      f.connection.answers['trajectory/query'] = () => ({ items: [], total: 0, nextCursor: null }) as never;
      commands.registerCommand(Commands.openReplay, async () => undefined);
      assert.equal(await commands.executeCommand(Commands.tryEnvironment, config), 't2');
      assert.deepEqual(
        f.connection.requests.map((r) => r.method),
        ['env/check', 'run/start', 'trajectory/query'],
      );
    });

    it('a remote server checks the uploaded bundle the run then starts from', async () => {
      f.connection.kind = 'remote';
      f.connection.answers['env/upload'] = () => ({ bundleId: 'b1', sha256: 'b1', files: 2 });
      f.connection.answers['env/check'] = () => ({ ok: true, diagnostics: [] });
      f.connection.answers['trajectory/query'] = () => ({ items: [], total: 0, nextCursor: null }) as never;
      commands.registerCommand(Commands.openReplay, async () => undefined);
      await commands.executeCommand(Commands.tryEnvironment, config);
      assert.deepEqual(
        f.connection.requests.slice(1, 3).map((r) => [r.method, r.params]),
        [
          ['env/check', { bundleId: 'b1', configFile: 'lookup.agentrl.yaml' }],
          [
            'run/start',
            { config: { name: 'lookup', model: { path: 'tiny' } }, mode: 'try', envBundle: 'b1', episodes: 4 },
          ],
        ],
      );
    });
  });

  it('Try Environment says in its notification what the run is doing: why it waits, loading, the episodes as they end', async () => {
    let end: (status: 'completed') => void = () => undefined;
    f.connection.startRun = async () => {
      f.connection.model.upsertRun(
        runInfo('t2', { mode: 'try', status: 'queued', name: 'lookup', message: 'starting: its process is loading' }),
      );
      return { runId: 't2', ended: new Promise((resolve) => (end = resolve)) };
    };
    f.connection.answers['env/check'] = () => ({ ok: true, diagnostics: [] });
    f.connection.answers['trajectory/query'] = () => ({ items: [], total: 0, nextCursor: null }) as never;
    commands.registerCommand(Commands.openReplay, async () => undefined);
    const tried = commands.executeCommand(Commands.tryEnvironment, config);
    const trying = (): string | undefined => fake.progress.find((title) => title.startsWith('Agent RL: trying'));
    while (!trying()) await new Promise((resolve) => setImmediate(resolve));
    let seq = 0;
    const happens = (body: object): void => {
      const event = { runId: 't2', seq: ++seq, time: seq, ...body } as RunEventParams;
      f.connection.model.applyEvent(event);
      f.connection.runEvents.fire(event);
    };
    const running = { status: 'running', step: 0, totalSteps: 0, message: null } as const;
    happens({ type: 'status', data: { status: 'running', step: 0, total_steps: 0 }, runInfo: running });
    happens({ type: 'phase', data: { phase: 'loading_model', step: 0 } });
    happens({ type: 'log', data: { level: 'info', message: 'rollout engine: hf' } });
    happens({ type: 'phase', data: { phase: 'rollouts', step: 0, done: 1, total: 4 } });
    end('completed');
    assert.equal(await tried, 't2');
    const title = trying();
    assert.deepEqual(fake.progressReports, [
      `${title}: 4 episodes with the base model, no updates`,
      `${title}: starting: its process is loading`,
      `${title}: loading the model`,
      `${title}: episodes: 1 of 4 ended`,
    ]);
  });
});
