import { CodeLens, Diagnostic, DiagnosticSeverity, fake, pick, Range, TextDocument, Uri } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { commands } from 'vscode';
import { ErrorCode, type RunEventParams } from '../../protocol/generated/rpc';
import { Commands, Succeeded } from '../../extension/commands';
import { TrainerRequestError } from '../../extension/trainerClient';
import { runInfo, type FakeCtx } from './fakeCtx';
import { runCommandsWorld } from './runCommandsWorld';

describe('run commands', () => {
  const world = runCommandsWorld();
  let f: FakeCtx;
  let envFolder: string;
  let config: string;
  beforeEach(() => ({ f, envFolder, config } = world));
  const problem = (line: number, message: string, severity = DiagnosticSeverity.Error, source = 'agent-rl') =>
    Object.assign(new Diagnostic(new Range(line, 0, line, 4), message, severity), { source });

  describe('Start Training', () => {
    beforeEach(() => {
      f.connection.answers['run/start'] = () => ({ runId: 'r1' });
    });

    it("starts the workspace's one run config on a local server, with the config's folder to resolve paths in", async () => {
      assert.equal(await commands.executeCommand(Commands.startTraining), 'r1');
      assert.deepEqual(f.connection.requests, [
        {
          method: 'run/start',
          params: { config: { name: 'lookup', model: { path: 'tiny' } }, mode: 'train', configDir: envFolder },
        },
      ]);
      assert.deepEqual(
        fake.executed.map((e) => e.command),
        ['agentRl.runs.focus', 'setContext'], // the walkthrough's step: training started
      );
      assert.deepEqual(fake.messages, [
        { severity: 'info', text: 'Agent RL: training r1 started.', actions: ['Open Dashboard'] },
        // the fake run ends at once: its end is said too
        { severity: 'info', text: 'Agent RL: training r1 completed.', actions: ['Open Dashboard', 'Open Replay'] },
      ]);
    });

    it('says when a training run it started ends, how far it got and why', async () => {
      f.connection.startRun = async () => {
        f.connection.model.upsertRun(
          runInfo('r9', { name: 'lookup', status: 'failed', step: 3, totalSteps: 10, message: 'CUDA out of memory' }),
        );
        return { runId: 'r9', ended: Promise.resolve('failed' as const) };
      };
      await commands.executeCommand(Commands.startTraining);
      await new Promise((resolve) => setImmediate(resolve));
      const ended = fake.messages.find((m) => m.text.includes('failed'))!;
      assert.deepEqual(ended, {
        severity: 'warning',
        text: 'Agent RL: training lookup failed at step 3/10: CUDA out of memory.',
        actions: ['Open Dashboard', 'Open Replay'],
      });
    });

    it('says in a notification what the run is doing until it ends', async () => {
      f.connection.startRun = async () => {
        f.connection.model.upsertRun(runInfo('r3', { name: 'lookup', status: 'running', step: 0 }));
        return { runId: 'r3', ended: new Promise(() => undefined) }; // it trains on
      };
      await commands.executeCommand(Commands.startTraining);
      let seq = 0;
      const happens = (body: object): void => {
        const event = { runId: 'r3', seq: ++seq, time: seq, ...body } as RunEventParams;
        f.connection.model.applyEvent(event);
        f.connection.runEvents.fire(event);
      };
      happens({ type: 'phase', data: { phase: 'loading_model', step: 0 } });
      happens({ type: 'phase', data: { phase: 'rollouts', step: 1, done: 16, total: 32 } });
      happens({ type: 'phase', data: { phase: 'updating', step: 1 } });
      happens({ type: 'metrics', data: { step: 1, metrics: {} } });
      await new Promise((resolve) => setImmediate(resolve));
      happens({ type: 'phase', data: { phase: 'rollouts', step: 2 } }); // and on, step after step
      assert.deepEqual(fake.progress, ['Agent RL: training lookup']);
      assert.deepEqual(fake.progressReports, [
        'Agent RL: training lookup: loading the model',
        'Agent RL: training lookup: rollouts of step 1: 16 of 32 episodes ended',
        'Agent RL: training lookup: updating step 1',
        'Agent RL: training lookup: rollouts of step 2',
      ]);
    });

    it("uploads the config's folder to a remote server and starts the run from the bundle", async () => {
      f.connection.kind = 'remote';
      writeFileSync(join(envFolder, 'env.py'), 'print(1)\n');
      f.connection.answers['env/upload'] = () => ({ bundleId: 'b7', sha256: '0f', files: 2, bytes: 10 });
      assert.equal(await commands.executeCommand(Commands.startTraining, config), 'r1');
      assert.deepEqual(
        f.connection.requests.map((r) => r.method),
        ['env/upload', 'run/start'],
      );
      assert.equal((f.connection.requests[1].params as { envBundle: string }).envBundle, 'b7');
      assert.equal((f.connection.requests[1].params as { configDir?: string }).configDir, undefined);
    });

    it('saves an unsaved config first, and starts a local server when none is connected', async () => {
      const document = new TextDocument(Uri.file(config), '');
      document.isDirty = true;
      fake.textDocuments = [document];
      f.connection.isConnected = false;
      await commands.executeCommand(Commands.startTraining, Uri.file(config));
      assert.equal(document.isDirty, false);
      assert.deepEqual(f.connection.calls, ['startLocal python3 /workspace /workspace/.agentrl/runs']);
    });

    it('asks which config when the workspace has several, and does nothing when dismissed', async () => {
      f.settings.findRunConfigs = async () => [Uri.file(config), Uri.file(join(envFolder, 'other.agentrl.yaml'))];
      assert.equal(await commands.executeCommand(Commands.startTraining), undefined);
      assert.equal(fake.prompts[0].options.title, 'Start Training');
      assert.deepEqual(f.connection.requests, []);
    });

    it("takes only a run config as its argument: a Runs view row (the title's Start with a step selected) asks", async () => {
      const stepRow = { runId: 'r0', step: 3, label: 'step 3' };
      assert.equal(await commands.executeCommand(Commands.startTraining, stepRow), 'r1');
      assert.equal((f.connection.requests[0].params as { configDir: string }).configDir, envFolder);
      assert.equal(await commands.executeCommand(Commands.startTraining, join(envFolder, 'notes.txt')), 'r1');
    });

    it("says a config's errors in the editor's words and offers the Problems panel, sending the trainer nothing", async () => {
      fake.workspaceFolders = [{ uri: Uri.file(tmpdir()) }];
      world.configProblems = [
        problem(2, 'unknown key "lr" (did you mean "train.lr"?)'),
        problem(4, 'rollout.max_context 64 is below prompt + turns × new tokens', DiagnosticSeverity.Warning),
        problem(6, 'env.module: no file env.py next to the config'),
      ];
      fake.messageChoices = ['Show Problems'];
      assert.equal(await commands.executeCommand(Commands.startTraining, config), undefined);
      assert.deepEqual(fake.messages, [
        {
          severity: 'error',
          text: `Start Training: ${join(basename(envFolder), 'lookup.agentrl.yaml')} has 2 problems: line 3: unknown key "lr" (did you mean "train.lr"?); line 7: env.module: no file env.py next to the config.`,
          actions: ['Show Problems', 'Start Anyway', 'Learn more'],
        },
      ]);
      assert.deepEqual(
        fake.executed.map((e) => e.command),
        ['workbench.actions.view.problems'],
      );
      assert.deepEqual(f.connection.requests, []);

      fake.messageChoices = ['Start Anyway']; // the config is open now: its problems are known without waiting
      assert.equal(await commands.executeCommand(Commands.startTraining, config), 'r1');
      fake.messages = [];
      assert.equal(await commands.executeCommand(Commands.tryEnvironment, config), undefined, 'dismissed');
      assert.ok(!fake.executed.some((e) => e.command === 'setContext' && e.args[0] === Succeeded.tryEnvironment));
      assert.deepEqual(fake.messages[0].actions, ['Show Problems', 'Try Anyway', 'Learn more']);
    });

    it("names three problems at most; warnings, and errors that are not the run config's (a health alert), let it start", async () => {
      world.configProblems = [1, 2, 3, 4, 5].map((line) => problem(line, `problem ${line}`));
      await commands.executeCommand(Commands.startTraining, config);
      assert.match(
        fake.messages[0].text,
        /has 5 problems: line 2: problem 1; line 3: problem 2; line 4: problem 3 \(and 2 more\)\.$/,
      );
      fake.messages = [];
      world.configProblems.splice(
        0,
        5,
        problem(1, 'a warning', DiagnosticSeverity.Warning),
        problem(1, 'non_finite: the run stopped', DiagnosticSeverity.Error, 'Agent RL health'),
      );
      fake.textDocuments = []; // checked again as it opens
      assert.equal(await commands.executeCommand(Commands.startTraining, config), 'r1');
      assert.equal(fake.messages.filter((m) => m.severity === 'error').length, 0);
    });

    it('refuses in an untrusted workspace', async () => {
      fake.trusted = false;
      assert.equal(await commands.executeCommand(Commands.startTraining, config), undefined);
      assert.match(fake.messages[0].text, /^Training runs code from this workspace/);
      assert.deepEqual(f.connection.requests, []);
    });

    it('says where to start when the workspace has no run config', async () => {
      f.settings.findRunConfigs = async () => [];
      await commands.executeCommand(Commands.startTraining);
      assert.match(fake.messages[0].text, /^Start Training: No run config \(\*\.agentrl\.yaml\) in this workspace/);
    });
  });

  describe('Delete Run', () => {
    beforeEach(() => {
      f.connection.model.setRuns([runInfo('r1', { name: 'lookup', status: 'completed' }), runInfo('r2')]);
      f.connection.answers['run/delete'] = ({ runId }) => ({ runId });
    });

    it('asks first, in a modal that names the run and what goes with it, then deletes it and re-reads the runs', async () => {
      fake.messageChoices = ['Delete'];
      assert.equal(await commands.executeCommand(Commands.deleteRun, { kind: 'run', runId: 'r1' }), 'r1');
      const [asked] = fake.messages;
      assert.equal(asked.severity, 'warning');
      assert.equal(asked.options?.modal, true);
      assert.deepEqual(asked.actions, ['Delete']);
      assert.match(asked.text, /^Delete the run lookup \(completed · 3\/10 · .*\)\?$/);
      assert.match(
        asked.options?.detail ?? '',
        /checkpoints, trajectories, exports and logs\. This cannot be undone\./,
      );
      assert.deepEqual(f.connection.requests, [{ method: 'run/delete', params: { runId: 'r1' } }]);
      assert.deepEqual(f.connection.calls, ['refresh']);
    });

    it('deletes nothing when the question is dismissed', async () => {
      assert.equal(await commands.executeCommand(Commands.deleteRun, { kind: 'run', runId: 'r1' }), undefined);
      assert.deepEqual(f.connection.requests, []);
    });

    it('from the palette: offers only the runs no process works on', async () => {
      fake.messageChoices = ['Delete'];
      assert.equal(await commands.executeCommand(Commands.deleteRun), 'r1');
      assert.deepEqual(fake.prompts, [], 'the one deletable run is taken without asking which');
    });
  });

  describe('Stop Training', () => {
    beforeEach(() => {
      f.connection.model.setRuns([runInfo('r1'), runInfo('r2', { status: 'completed' })]);
      f.connection.answers['run/stop'] = ({ runId }) => ({ runId, status: 'stopping' });
    });

    it('stops the run and mode it is given', async () => {
      assert.equal(
        await commands.executeCommand(Commands.stopTraining, { runId: 'r2', mode: 'immediate' }),
        'stopping',
      );
      assert.deepEqual(f.connection.requests, [{ method: 'run/stop', params: { runId: 'r2', mode: 'immediate' } }]);
    });

    it('from the palette: takes the only active run and asks how to stop it', async () => {
      fake.answers = [pick('Graceful')];
      assert.equal(await commands.executeCommand(Commands.stopTraining), 'stopping');
      assert.deepEqual(f.connection.requests, [{ method: 'run/stop', params: { runId: 'r1', mode: 'graceful' } }]);
      assert.equal(fake.prompts[0].options.title, 'Stop r1-name');
    });

    it('says so when no run is active', async () => {
      f.connection.model.setRuns([runInfo('r2', { status: 'completed' })]);
      await commands.executeCommand(Commands.stopTraining);
      assert.equal(fake.messages[0].text, 'Stop Training: No run to stop.');
    });
  });

  describe('Resume Training', () => {
    it('resumes the run, re-reads the runs and follows it', async () => {
      f.connection.answers['run/resume'] = ({ runId }) => ({ runId, status: 'queued' });
      assert.equal(await commands.executeCommand(Commands.resumeTraining, { runId: 'r1' }), 'r1');
      assert.deepEqual(f.connection.calls, ['refresh', 'follow r1']);
    });

    it('explains a run-state conflict: which runs resume', async () => {
      f.connection.answers['run/resume'] = () => {
        throw new TrainerRequestError('run/resume', ErrorCode.RUN_STATE_CONFLICT, 'run r1 is running');
      };
      assert.equal(await commands.executeCommand(Commands.resumeTraining, { runId: 'r1' }), undefined);
      assert.match(
        fake.messages[0].text,
        /^Resume Training: run r1 is running \(only a training run with a checkpoint resumes, once it is /,
      );
    });
  });

  describe('Export Model', () => {
    let exported: string;
    beforeEach(() => {
      exported = mkdtempSync(join(tmpdir(), 'agentrl-export-'));
      writeFileSync(join(exported, 'config.json'), '{}');
      f.connection.model.setRuns([runInfo('r1', { name: 'lookup' })]);
      f.connection.answers['run/export'] = ({ step }) => ({
        runId: 'r1',
        step: step ?? 9,
        path: exported,
        weights: 'full',
      });
    });

    it("copies a local server's export into the folder given, named after the run and step", async () => {
      const destination = mkdtempSync(join(tmpdir(), 'agentrl-destination-'));
      const folder = await commands.executeCommand(Commands.exportModel, { runId: 'r1', mergeLora: true, destination });
      assert.equal(folder, join(destination, 'lookup-step-9-merged'));
      assert.equal(readFileSync(join(destination, 'lookup-step-9-merged', 'config.json'), 'utf8'), '{}');
      assert.deepEqual(f.connection.requests[0].params, { runId: 'r1', mergeLora: true });
    });

    it("exports a step row's checkpoint, and refuses to overwrite a folder", async () => {
      const destination = mkdtempSync(join(tmpdir(), 'agentrl-destination-'));
      mkdirSync(join(destination, 'lookup-step-5'));
      fake.answers = [pick('As trained'), [Uri.file(destination)]];
      await commands.executeCommand(Commands.exportModel, { kind: 'step', runId: 'r1', step: 5 });
      assert.deepEqual(f.connection.requests[0].params, { runId: 'r1', mergeLora: false, step: 5 });
      assert.match(fake.messages[0].text, /lookup-step-5 already exists; pick another folder\./);
    });

    it("gives a remote server's export path, which stays on the server", async () => {
      f.connection.kind = 'remote';
      assert.equal(await commands.executeCommand(Commands.exportModel, { runId: 'r1', mergeLora: false }), exported);
      assert.ok(existsSync(exported));
      assert.deepEqual(fake.prompts, [], 'no folder is asked for');
      assert.deepEqual(fake.messages[0].actions, ['Copy Path']);
    });
  });

  it('Refresh Runs re-reads the run list', async () => {
    assert.equal(await commands.executeCommand(Commands.refreshRuns), true);
    assert.deepEqual(f.connection.calls, ['refresh']);
  });

  it('puts Start Training and Try Environment above the first line of a run config', () => {
    const uri = Uri.file(config);
    const lenses: CodeLens[] = fake.codeLensProviders[0].provideCodeLenses(new TextDocument(uri, ''));
    assert.deepEqual(
      lenses.map((lens) => [lens.range.start.line, lens.command?.command, lens.command?.arguments]),
      [
        [0, Commands.startTraining, [uri]],
        [0, Commands.tryEnvironment, [uri]],
      ],
    );
  });
});
