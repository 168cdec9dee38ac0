import { fake } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { Commands } from '../../extension/commands';
import { registerStatusBar } from '../../extension/statusBar';
import { fakeCtx, runInfo } from './fakeCtx';

describe('status bar', () => {
  beforeEach(() => fake.reset());

  it('without a server: a click starts a local one, and the tooltip offers the others', () => {
    const f = fakeCtx();
    f.connection.isConnected = false;
    Object.defineProperty(f.connection, 'state', { value: 'idle' });
    registerStatusBar(f.ctx);
    const [item] = fake.statusBarItems;
    assert.equal(item.text, '$(circle-slash) Agent RL');
    assert.equal(item.command, Commands.startLocalServer);
    assert.match(item.tooltip!.value, /Trainer server: \*\*idle\*\*/);
    assert.match(item.tooltip!.value, /\[Connect to Server\]\(command:agentRl\.connectServer\)/);
    assert.ok(item.visible);
  });

  it('follows the newest active run as it trains: step, mean reward, a warning while an alert is in force', () => {
    const f = fakeCtx();
    Object.defineProperty(f.connection, 'state', { value: 'connected' });
    registerStatusBar(f.ctx);
    const [item] = fake.statusBarItems;
    assert.equal(item.text, '$(beaker) Agent RL', 'connected, no runs yet');
    f.connection.model.setRuns([
      runInfo('old', { status: 'completed', createdAt: '2026-11-21T10:00:00Z' }),
      runInfo('r1', { name: 'lookup', latestMetrics: { 'reward/mean': 0.25 } }),
    ]);
    assert.equal(item.text, '$(sync~spin) lookup 3/10 · r 0.25');
    assert.equal(item.command, 'agentRl.runs.focus');
    f.connection.model.applyEvent({
      runId: 'r1',
      seq: 1,
      time: 1,
      type: 'health',
      data: {
        code: 'zero_variance_groups',
        severity: 'warning',
        resolved: false,
        step: 3,
        since_step: 2,
        message: 'every group had the same reward',
        fix: 'raise temperature',
        metrics: {},
        trajectory_ids: [],
      },
    });
    assert.equal(item.text, '$(sync~spin) lookup 3/10 · r 0.25 $(warning)');
    assert.match(item.tooltip!.value, /\*\*zero_variance_groups\*\*: every group had the same reward/);
    assert.match(item.tooltip!.value, /\[Stop\]\(command:agentRl\.stopTraining\?/);
    assert.equal(item.accessibilityInformation?.label, 'lookup 3/10 · r 0.25 ');
  });
});
