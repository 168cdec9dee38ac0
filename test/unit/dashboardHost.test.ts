import { fake, pick } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { commands } from 'vscode';
import type { RunEventParams } from '../../protocol/generated/rpc';
import { Commands } from '../../extension/commands';
import { registerDashboard } from '../../extension/dashboard';
import { fakeCtx, runInfo, type FakeCtx } from './fakeCtx';

describe('Run Dashboard host', () => {
  let f: FakeCtx;
  const metrics = (seq: number): RunEventParams => ({
    runId: 'r1',
    seq,
    time: seq,
    type: 'metrics',
    data: { step: seq, metrics: { 'reward/mean': seq / 10 } },
  });

  beforeEach(() => {
    fake.reset();
    f = fakeCtx();
    f.connection.model.setRuns([runInfo('r1', { name: 'lookup' }), runInfo('r2', { name: 'qa' })]);
    f.connection.answers['run/config'] = ({ runId }) => ({ runId, config: { name: runId } });
    f.connection.answers['run/code'] = ({ runId }) => ({ runId, manifest: null });
    registerDashboard(f.ctx);
  });

  it("opens a run's dashboard, follows it, and answers the page's ready with the run and its history", async () => {
    f.connection.model.applyEvent(metrics(1));
    assert.deepEqual(await commands.executeCommand(Commands.openDashboard, { runId: 'r1' }), ['r1']);
    const [panel] = fake.panels;
    assert.equal(panel.title, 'Dashboard: lookup');
    assert.deepEqual(f.connection.calls, ['follow r1']);
    await panel.receive({ type: 'ready' });
    assert.deepEqual(panel.posted, [
      { type: 'runs', runs: [{ runId: 'r1', name: 'lookup', config: { name: 'r1' }, code: null }] },
      { type: 'events', runId: 'r1', events: [{ seq: 1, time: 1, type: 'metrics', data: metrics(1).data }] },
    ]);
  });

  it('sends live events after the history, batched, and only for its runs', async () => {
    await commands.executeCommand(Commands.openDashboard, { runId: 'r1' });
    const [panel] = fake.panels;
    f.connection.runEvents.fire(metrics(2)); // before ready: in the history the page is about to get
    await panel.receive({ type: 'ready' });
    panel.posted.length = 0;
    f.connection.runEvents.fire(metrics(3));
    f.connection.runEvents.fire({ ...metrics(4), runId: 'r2' });
    f.connection.runEvents.fire(metrics(5));
    await new Promise((resolve) => setTimeout(resolve, 80));
    assert.deepEqual(panel.posted, [
      {
        type: 'events',
        runId: 'r1',
        events: [3, 5].map((seq) => ({ seq, time: seq, type: 'metrics', data: metrics(seq).data })),
      },
    ]);
  });

  it('shows the open dashboard of the same runs again instead of a second one', async () => {
    await commands.executeCommand(Commands.openDashboard, { runId: 'r1' });
    await commands.executeCommand(Commands.openDashboard, { kind: 'run', runId: 'r1' });
    assert.equal(fake.panels.length, 1);
    assert.equal(fake.panels[0].revealed, 1);
  });

  it('Compare in Dashboard overlays the runs ticked, the one it came from first', async () => {
    fake.answers = [(items: readonly { label: string }[]) => items];
    assert.deepEqual(await commands.executeCommand(Commands.compareRuns, { runId: 'r2' }), ['r2', 'r1']);
    assert.deepEqual(
      (fake.prompts[0].options.items as Array<{ runId: string; picked: boolean }>).map((i) => [i.runId, i.picked]),
      [
        ['r2', true],
        ['r1', false],
      ],
    );
    assert.equal(fake.panels[0].title, 'Compare: qa, lookup');
  });

  it("leaves out what the trainer cannot give (an older server's code) and logs it", async () => {
    delete f.connection.answers['run/code'];
    await commands.executeCommand(Commands.openDashboard, { runId: 'r1' });
    await fake.panels[0].receive({ type: 'ready' });
    assert.deepEqual(fake.panels[0].posted[0], {
      type: 'runs',
      runs: [{ runId: 'r1', name: 'lookup', config: { name: 'r1' }, code: undefined }],
    });
    assert.deepEqual(f.log.lines, ['warn: dashboard: no code for r1: the fake server has no answer to run/code']);
  });

  it('opens Compare Code on the two runs the page names', async () => {
    fake.answers = [(items: readonly { label: string }[]) => items];
    await commands.executeCommand(Commands.compareRuns, { runId: 'r1' });
    await fake.panels[0].receive({ type: 'compareCode', runId: 'r1', otherRunId: 'r2' });
    assert.deepEqual(
      fake.executed.filter((e) => e.command !== 'setContext'),
      [{ command: Commands.compareCode, args: [{ runId: 'r1' }, [{ runId: 'r1' }, { runId: 'r2' }]] }],
    );
  });

  it('opens the replay at a step the page asks for', async () => {
    await commands.executeCommand(Commands.openDashboard, { runId: 'r1' });
    await fake.panels[0].receive({ type: 'openReplay', runId: 'r1', step: 3 });
    assert.deepEqual(
      fake.executed.filter((e) => e.command !== 'setContext'),
      [{ command: Commands.openReplay, args: [{ runId: 'r1', step: 3 }] }],
    );
  });

  it('from the palette: picks the run; without a server, says to connect one', async () => {
    fake.answers = [pick('qa')];
    assert.deepEqual(await commands.executeCommand(Commands.openDashboard), ['r2']);
    f.connection.isConnected = false;
    assert.equal(await commands.executeCommand(Commands.openDashboard, { runId: 'r1' }), undefined);
    assert.equal(
      fake.messages[0].text,
      'Open Run Dashboard: not connected to a trainer server; start or connect one to see its runs',
    );
  });
});
