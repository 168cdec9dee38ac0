import './vscodeStub';
import { strict as assert } from 'node:assert';
import type { RayWorker } from '../../protocol/generated/rpc';
import { RunsModel, type WorkerNode } from '../../extension/runsModel';
import { RunsTreeProvider } from '../../extension/runsView';
import type { TrainerConnection } from '../../extension/trainerConnection';
import type { ThemeIcon, TreeItem } from './vscodeStub';

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
