import { fake, pick, Uri, WebviewPanel } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { commands } from 'vscode';
import type { TrajectoryRecord } from '../../protocol/webview-messages';
import { Commands } from '../../extension/commands';
import { registerReplay, TRAJECTORY_EDITOR_VIEW_TYPE } from '../../extension/replay';
import { REROLL_UNTRUSTED_MESSAGE } from '../../extension/replay/reroll';
import { fakeCtx, runInfo, type FakeCtx } from './fakeCtx';

const record = (id: string) => ({ schema_version: 1, id, run_id: 'r1', step: 1 }) as unknown as TrajectoryRecord;

describe('replay panel host', () => {
  let f: FakeCtx;
  beforeEach(() => {
    fake.reset();
    f = fakeCtx();
    for (const id of ['a', 'b', 'c']) f.connection.trajectoryRecords.set(id, record(id));
    f.connection.answers['run/get'] = ({ runId }) => runInfo(runId);
    // two pages of summaries
    f.connection.answers['trajectory/query'] = ({ cursor }) =>
      (cursor
        ? { items: [{ id: 'b' }], total: 2, nextCursor: null }
        : { items: [{ id: 'a' }], total: 2, nextCursor: 'p2' }) as never;
    registerReplay(f.ctx);
  });

  it("loads a run's trajectories, every page, when the page is ready, then appends new ones as they are written", async () => {
    await commands.executeCommand(Commands.openReplay, { runId: 'r1', step: 2 });
    const [panel] = fake.panels;
    assert.equal(panel.title, `Replay: ${f.connection.model.runName('r1')} step 2`);
    assert.deepEqual(f.connection.calls, ['follow r1']);
    await panel.receive({ type: 'ready' });
    assert.deepEqual(panel.posted, [
      {
        type: 'load',
        source: 'r1',
        records: [record('a'), record('b')],
        live: true,
        runStatus: 'running',
        searchable: true, // a run's episodes, on its trainer's search index
        focusStep: 2,
      },
    ]);
    const trajectory = (id: string, seq: number) =>
      f.connection.runEvents.fire({ runId: 'r1', seq, time: seq, type: 'trajectory', data: { id } as never });
    trajectory('b', 5); // already loaded
    trajectory('c', 6);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(panel.posted.slice(1), [{ type: 'append', records: [record('c')] }]);
  });

  it("says where a run's episodes came from, read from its config (run/config): the panel offers by it", async () => {
    f.connection.answers['run/config'] = ({ runId }) => ({
      runId,
      config: { env: { module: null, class_name: null, gym: { factory: 'corridor.py:Corridor' }, openenv: null } },
    });
    await commands.executeCommand(Commands.openReplay, { runId: 'r1' });
    const [panel] = fake.panels;
    await panel.receive({ type: 'ready' });
    assert.equal((panel.posted[0] as { episodeSource?: string }).episodeSource, 'gym');
  });

  it('re-rolls an episode from the panel with its progress, only in a trusted workspace; lists stored ones in any', async () => {
    const result = { reroll: { rerollId: '20261126-100237-5c2a5c' }, records: [] } as never;
    f.connection.answers['episode/reroll'] = ({ progressToken }) => {
      f.connection.rerollProgress.fire({
        progressToken: progressToken!,
        message: 'loading the policy: the base model',
      });
      return result;
    };
    f.connection.answers['reroll/list'] = ({ runId }) => ({ runId, rerolls: [], checkpoints: [3], temperature: 1 });
    await commands.executeCommand(Commands.openReplay, { runId: 'r1' });
    const [panel] = fake.panels;
    const address = { runId: 'r1', trajectoryId: 'a' };
    const params = { ...address, turn: 0, edit: 'assistant' as const, text: 'hi', policy: 'base' as const };
    const reroll = { type: 'rerollEpisode', params: { ...params, samples: 2, temperature: 0 } };

    fake.trusted = false;
    await panel.receive(reroll);
    await panel.receive({ type: 'listRerolls', ...address });
    assert.deepEqual(
      f.connection.requests.map((r) => r.method),
      ['reroll/list'],
      'an untrusted workspace runs no re-roll, and reads stored ones',
    );
    const listed = { runId: 'r1', rerolls: [], checkpoints: [3], temperature: 1 };
    assert.deepEqual(panel.posted, [
      { type: 'reroll', ...address, reply: { ok: false, message: REROLL_UNTRUSTED_MESSAGE } },
      { type: 'rerolls', ...address, reply: { ok: true, result: listed } },
    ]);

    fake.trusted = true;
    panel.posted.length = 0;
    await panel.receive(reroll);
    assert.deepEqual(panel.posted, [
      { type: 'rerollProgress', ...address, message: 'loading the policy: the base model' },
      { type: 'reroll', ...address, reply: { ok: true, result } },
    ]);
  });

  it('says to connect a server to replay a run', async () => {
    f.connection.isConnected = false;
    await commands.executeCommand(Commands.openReplay, { runId: 'r1' });
    assert.equal(fake.panels.length, 0);
    assert.match(fake.messages[0].text, /not connected to a trainer server; start or connect one to replay a live run/);
  });

  it('replays a run listed offline (no server connected) from the trajectory files of its folder', async () => {
    f.connection.isConnected = false;
    const folder = mkdtempSync(join(tmpdir(), 'agentrl-offline-run-'));
    mkdirSync(join(folder, 'trajectories'));
    writeFileSync(join(folder, 'trajectories', 'step-000001.trajectories.jsonl'), `${JSON.stringify(record('a'))}\n`);
    writeFileSync(join(folder, 'trajectories', 'step-000002.trajectories.jsonl'), `${JSON.stringify(record('b'))}\n`);
    writeFileSync(
      join(folder, 'config.yaml'),
      'env:\n  module: null\n  class_name: null\n  methods:\n    factory: g.py:G\n',
    );
    f.connection.model.setOfflineRuns([{ info: runInfo('r9', { status: 'completed' }), folder }]);
    await commands.executeCommand(Commands.openReplay, { runId: 'r9', step: 2 });
    const [panel] = fake.panels;
    assert.equal(panel.title, 'Replay: r9-name step 2');
    await panel.receive({ type: 'ready' });
    assert.deepEqual(panel.posted, [
      {
        type: 'load',
        source: 'r9 (offline)',
        records: [record('a'), record('b')],
        live: false,
        runStatus: 'completed',
        episodeSource: 'methods', // its config.yaml's env
        focusStep: 2,
      },
    ]);
    assert.deepEqual(f.connection.requests, [], 'nothing is asked of a server');
  });

  it('from the palette (or a Runs view row redrawn as it was clicked) offers the runs, newest first, and a file', async () => {
    f.connection.model.upsertRun(runInfo('old', { name: 'lookup', createdAt: '2026-11-20T10:00:00Z' }));
    f.connection.model.upsertRun(runInfo('new', { name: 'first-hour', createdAt: '2026-11-21T10:00:00Z' }));
    fake.answers = [pick('first-hour')];
    await commands.executeCommand(Commands.openReplay);
    const [offered] = fake.prompts.map((p) => p.options as { title: string; items: { label: string }[] });
    assert.equal(offered.title, 'Open Trajectory Replay');
    assert.deepEqual(
      offered.items.map((item) => item.label),
      ['first-hour', 'lookup', '$(file) Open a trajectory file...'],
    );
    assert.equal(fake.panels[0].title, 'Replay: first-hour');

    const file = Uri.file('/tmp/picked.trajectories.jsonl');
    fake.answers = [pick('$(file) Open a trajectory file...'), [file]];
    await commands.executeCommand(Commands.openReplay);
    assert.equal(fake.prompts.at(-1)!.kind, 'openDialog');
    assert.deepEqual(fake.executed.filter((e) => e.command === 'vscode.openWith').at(-1), {
      command: 'vscode.openWith',
      args: [file, TRAJECTORY_EDITOR_VIEW_TYPE],
    });
    assert.equal(fake.panels.length, 1, 'no run panel for a file');
  });

  it('from the palette with no run listed, asks for a trajectory file at once', async () => {
    await commands.executeCommand(Commands.openReplay);
    assert.deepEqual(
      fake.prompts.map((p) => p.kind),
      ['openDialog'],
    );
    assert.equal(fake.panels.length, 0);
  });

  it('opens a trajectory file in the custom editor, which loads its records and counts the unreadable lines', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'agentrl-replay-')), 'a.trajectories.jsonl');
    writeFileSync(file, `${JSON.stringify(record('a'))}\nnot json\n`);
    await commands.executeCommand(Commands.openReplay, Uri.file(file));
    assert.deepEqual(
      fake.executed.filter((e) => e.command !== 'setContext'),
      [{ command: 'vscode.openWith', args: [Uri.file(file), TRAJECTORY_EDITOR_VIEW_TYPE] }],
    );
    const editor = fake.customEditors.get(TRAJECTORY_EDITOR_VIEW_TYPE) as {
      resolveCustomEditor(document: { uri: Uri }, panel: WebviewPanel): void;
    };
    const panel = new WebviewPanel(TRAJECTORY_EDITOR_VIEW_TYPE, 'a.trajectories.jsonl');
    editor.resolveCustomEditor({ uri: Uri.file(file) }, panel);
    await panel.receive({ type: 'ready' });
    assert.deepEqual(panel.posted, [{ type: 'load', source: file, records: [record('a')], live: false }]);
    assert.match(fake.messages[0].text, /^1 line\(s\) of .* hold no trajectory and were skipped/);
  });

  it("a step's file in a run folder says where the run's episodes came from, as the run's config.yaml does", async () => {
    const folder = mkdtempSync(join(tmpdir(), 'agentrl-run-'));
    mkdirSync(join(folder, 'trajectories'));
    writeFileSync(join(folder, 'config.yaml'), 'env:\n  openenv:\n    url: http://127.0.0.1:8000\n');
    const file = join(folder, 'trajectories', 'step-000001.trajectories.jsonl');
    writeFileSync(file, `${JSON.stringify(record('a'))}\n`);
    const editor = fake.customEditors.get(TRAJECTORY_EDITOR_VIEW_TYPE) as {
      resolveCustomEditor(document: { uri: Uri }, panel: WebviewPanel): void;
    };
    const panel = new WebviewPanel(TRAJECTORY_EDITOR_VIEW_TYPE, 'step-000001.trajectories.jsonl');
    editor.resolveCustomEditor({ uri: Uri.file(file) }, panel);
    await panel.receive({ type: 'ready' });
    assert.deepEqual(panel.posted, [
      { type: 'load', source: file, records: [record('a')], live: false, episodeSource: 'openenv' },
    ]);
  });

  const openFile = async (name: string, text: string): Promise<{ file: string; panel: WebviewPanel }> => {
    const file = join(mkdtempSync(join(tmpdir(), 'agentrl-replay-')), name);
    writeFileSync(file, text);
    const editor = fake.customEditors.get(TRAJECTORY_EDITOR_VIEW_TYPE) as {
      resolveCustomEditor(document: { uri: Uri }, panel: WebviewPanel): void;
    };
    const panel = new WebviewPanel(TRAJECTORY_EDITOR_VIEW_TYPE, name);
    editor.resolveCustomEditor({ uri: Uri.file(file) }, panel);
    await panel.receive({ type: 'ready' });
    return { file, panel };
  };

  it("opens an ATIF file (Harbor's trajectory.json) as the records it reads as", async () => {
    const atif = join(__dirname, '..', '..', 'protocol', 'examples', 'atif');
    const { file, panel } = await openFile(
      'trajectory.json',
      readFileSync(join(atif, 'harbor-style.atif.json'), 'utf8'),
    );
    const expected = JSON.parse(readFileSync(join(atif, 'harbor-style.trajectories.jsonl'), 'utf8'));
    assert.deepEqual(panel.posted, [{ type: 'load', source: file, records: [expected], live: false }]);
    assert.equal(fake.messages.length, 0);
  });

  it('says what a file in neither format holds, and which formats it expected', async () => {
    const { panel } = await openFile('other.jsonl', '{"name": "x", "value": 1}\n{"name": "y", "value": 2}\n');
    assert.deepEqual(panel.posted, []);
    assert.match(
      fake.messages[0].text,
      /^Agent RL: could not load trajectories: .*other\.jsonl: line 1 has keys \{name, value\}: neither an Agent RL trajectory record \(schema_version 1, id, turns, \.\.\.\) nor an ATIF trajectory \(schema_version "ATIF-v1\.x", steps, \.\.\.\) \(and 1 more line\(s\)\)$/,
    );
  });
});
