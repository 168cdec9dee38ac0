import { fake, type ThemeIcon, type TreeItem } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RayWorker } from '../../protocol/generated/rpc';
import { Commands } from '../../extension/commands';
import { RunsModel, type WorkerNode } from '../../extension/runsModel';
import { notifyRunWarningOnce, REDRAW_INTERVAL_MS, registerRunsView, RunsTreeProvider } from '../../extension/runsView';
import type { TrainerConnection } from '../../extension/trainerConnection';
import { fakeCtx, runInfo } from './fakeCtx';

describe("Runs view rows of a Ray run's workers", () => {
  const workers: RayWorker[] = [
    { role: 'rollout', index: 0, state: 'starting', restarts: 0 },
    { role: 'rollout', index: 1, state: 'ready', restarts: 0, node: '10.0.0.7' },
    { role: 'rollout', index: 2, state: 'restarting', restarts: 1, node: '10.0.0.7' },
    { role: 'learner', index: 0, state: 'dead', restarts: 0, node: '10.0.0.8' },
  ];
  const rowsOf = (status: 'running' | 'completed') => {
    const model = new RunsModel();
    model.setRuns([
      {
        runId: 'ray-1',
        name: 'lookup-ray',
        mode: 'train',
        status,
        step: 1,
        totalSteps: 2,
        createdAt: '2026-11-22T10:00:00Z',
        latestMetrics: {},
        lastSeq: 1,
        hasCheckpoint: false,
        message: null,
      },
    ]);
    model.applyEvent({ runId: 'ray-1', seq: 2, time: 2, type: 'workers', data: { workers } });
    const provider = new RunsTreeProvider({ model, follow: async () => undefined } as unknown as TrainerConnection);
    return (provider.getChildren({ kind: 'run', runId: 'ray-1' }) as WorkerNode[]).map((node) => {
      const item = provider.getTreeItem(node) as unknown as TreeItem;
      const icon = item.iconPath as ThemeIcon;
      return [item.label, item.description, icon.id, icon.color?.id, item.id, item.collapsibleState];
    });
  };

  it('shows each worker with an icon for its state, as a leaf with a stable id', () => {
    assert.deepEqual(rowsOf('running'), [
      ['rollout worker 0', 'starting', 'loading~spin', undefined, 'worker:ray-1:rollout:0', 0],
      ['rollout worker 1', 'ready · 10.0.0.7', 'vm-running', 'testing.iconPassed', 'worker:ray-1:rollout:1', 0],
      [
        'rollout worker 2',
        'restarting · 1 restart · 10.0.0.7',
        'debug-restart',
        'charts.yellow',
        'worker:ray-1:rollout:2',
        0,
      ],
      ['learner worker 0', 'dead · 10.0.0.8', 'error', 'testing.iconFailed', 'worker:ray-1:learner:0', 0],
    ]);
  });

  it('shows the workers of an ended run as ended, a dead one still dead', () => {
    assert.deepEqual(
      rowsOf('completed').map(([label, description, icon]) => [label, description, icon]),
      [
        ['rollout worker 0', 'ended', 'vm-outline'],
        ['rollout worker 1', 'ended · 10.0.0.7', 'vm-outline'],
        ['rollout worker 2', 'ended · 1 restart · 10.0.0.7', 'vm-outline'],
        ['learner worker 0', 'dead · 10.0.0.8', 'error'],
      ],
    );
  });
});

describe('Runs view row of a run whose folder is damaged', () => {
  it('says so beside the run, and its tooltip names what is damaged and where', () => {
    const model = new RunsModel();
    const damage = ['events.jsonl line 4: not a JSON line', 'run.json: a JSON list, not an object'];
    model.setRuns([
      {
        runId: 'hurt-1',
        name: 'hurt-1',
        mode: 'train',
        status: 'completed',
        step: 2,
        totalSteps: 2,
        createdAt: '',
        latestMetrics: {},
        lastSeq: 9,
        hasCheckpoint: true,
        message: null,
        damage,
      },
    ]);
    const provider = new RunsTreeProvider({ model, follow: async () => undefined } as unknown as TrainerConnection);
    const item = provider.getTreeItem({ kind: 'run', runId: 'hurt-1' }) as unknown as TreeItem;
    assert.equal(item.description, 'completed · 2/2 · ⚠ damaged folder');
    for (const line of damage) assert.ok(item.tooltip?.value.includes(`- ${line}`), item.tooltip?.value);
  });
});

describe('Runs view rows: what each offers', () => {
  const itemOf = (model: RunsModel, runId: string): TreeItem => {
    const provider = new RunsTreeProvider({ model, follow: async () => undefined } as unknown as TrainerConnection);
    return provider.getTreeItem({ kind: 'run', runId }) as unknown as TreeItem;
  };

  it('offers Delete on a run no process works on, and Stop instead on one that runs', () => {
    const model = new RunsModel();
    model.setRuns([
      runInfo('done', { status: 'stopped', hasCheckpoint: true }),
      runInfo('going', { status: 'running' }),
    ]);
    assert.equal(itemOf(model, 'done').contextValue, 'run.deletable.resumable');
    assert.equal(itemOf(model, 'going').contextValue, 'run.active');
  });

  it('shows an offline run as a leaf that opens the replay of its files, saying where it was read from', () => {
    const model = new RunsModel();
    model.setOfflineRuns([{ info: runInfo('r1', { status: 'completed' }), folder: '/ws/.agentrl/runs/r1' }]);
    const item = itemOf(model, 'r1');
    assert.equal(item.contextValue, 'offlineRun');
    assert.equal(item.collapsibleState, 0);
    assert.deepEqual(item.command, {
      command: Commands.openReplay,
      title: 'Open Replay',
      arguments: [{ runId: 'r1' }],
    });
    assert.match(item.tooltip!.value, /Offline: read from `\/ws\/\.agentrl\/runs\/r1`; no trainer server is connected/);
  });
});

describe('Runs view redraws', () => {
  it("redraws once for a burst of a run's events, showing the latest of them", async () => {
    const model = new RunsModel();
    model.setRuns([runInfo('busy', { status: 'running' })]);
    const provider = new RunsTreeProvider({ model, follow: async () => undefined } as unknown as TrainerConnection);
    let redraws = 0;
    provider.onDidChangeTreeData(() => redraws++);
    for (let seq = 2; seq < 22; seq++)
      model.applyEvent({
        runId: 'busy',
        seq,
        time: seq,
        type: 'status',
        runInfo: { status: 'running', step: seq - 1, totalSteps: 30, message: null },
        data: { status: 'running', step: seq - 1, total_steps: 30 },
      });
    assert.equal(redraws, 0);
    await new Promise((resolve) => setTimeout(resolve, REDRAW_INTERVAL_MS + 50));
    assert.equal(redraws, 1);
    assert.match(
      String((provider.getTreeItem({ kind: 'run', runId: 'busy' }) as unknown as TreeItem).description),
      /^running · 20\/30/,
    );
  });
});

describe('Runs view while no server is connected', () => {
  it("lists the runs of the workspace's runs folder, and the server's again once one connects", async () => {
    fake.reset();
    const runsDir = mkdtempSync(join(tmpdir(), 'agentrl-runs-view-'));
    mkdirSync(join(runsDir, 'r1'));
    writeFileSync(join(runsDir, 'r1', 'run.json'), JSON.stringify({ name: 'lookup', mode: 'try' }));
    const f = fakeCtx({ runsFolder: () => runsDir });
    f.connection.isConnected = false;
    f.connection.state = 'idle';
    const registration = registerRunsView(f.ctx);
    const [view] = fake.treeViews;
    const listed = async (): Promise<void> => {
      for (let i = 0; i < 100 && !f.connection.model.runIds().length; i++)
        await new Promise((resolve) => setTimeout(resolve, 5));
    };
    await listed();
    assert.deepEqual(f.connection.model.runIds(), ['r1']);
    assert.equal(f.connection.model.offlineFolder('r1'), join(runsDir, 'r1'));
    assert.match(view.message!, /^No trainer server is connected: these runs are read from .*, as their files say/);
    f.connection.isConnected = true;
    f.connection.state = 'connected';
    f.connection.stateChanges.fire('connected');
    assert.equal(view.message, undefined);
    f.connection.model.setRuns([runInfo('from-server')]);
    assert.deepEqual(f.connection.model.runIds(), ['from-server']);
    registration.dispose();
  });
});

describe("A run's warnings", () => {
  beforeEach(() => fake.reset());

  it('are each a notification once per run, with the log one click away', async () => {
    const notify = notifyRunWarningOnce();
    const plan = 'the memory plan: 40.2 GiB at the longest rows, 15.1 GiB available';
    fake.messageChoices.push('Show Logs');
    notify({ runId: 'r1', runName: 'my-env', message: plan });
    notify({ runId: 'r1', runName: 'my-env', message: plan }); // the trainer said it again: not again here
    notify({ runId: 'r2', runName: 'my-env (try 10:04:31)', message: plan });
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(
      fake.messages.map(({ severity, text }) => [severity, text]),
      [
        ['warning', `Agent RL: run my-env: ${plan}`],
        ['warning', `Agent RL: run my-env (try 10:04:31): ${plan}`],
      ],
    );
    assert.deepEqual(
      fake.executed.map(({ command }) => command),
      [Commands.showLogs],
      'Show Logs, picked on the first, opened the log',
    );
  });
});
