import { fake } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { pick, Uri } from './vscodeStub';
import { commands } from 'vscode';
import { Commands } from '../../extension/commands';
import { registerSearchCommands } from '../../extension/searchCommands';
import { fakeCtx, runInfo, type FakeCtx } from './fakeCtx';

describe('Search Episodes', () => {
  let f: FakeCtx;
  const opened: unknown[] = [];
  beforeEach(() => {
    fake.reset();
    opened.length = 0;
    f = fakeCtx();
    f.connection.model.setRuns([runInfo('r1', { name: 'lookup' }), runInfo('r2', { name: 'lookup-2' })]);
    registerSearchCommands(f.ctx);
    commands.registerCommand(Commands.openReplay, async (target: unknown) => void opened.push(target));
  });

  const summary = (id: string, reward: number) =>
    ({
      id,
      step: 2,
      group: 0,
      sample: 1,
      task_id: 't',
      status: 'finished',
      reward,
      advantage: null,
      num_turns: 2,
      num_tool_calls: 1,
      num_tool_errors: 1,
      response_tokens: 9,
      file: 'f',
    }) as never;

  it("searches the runs picked with the line's words and filters, and opens the episode picked in its run's replay", async () => {
    f.connection.answers['trajectory/search'] = () => ({
      items: [
        { runId: 'r2', summary: summary('2-0-1', 0.9) },
        { runId: 'r1', summary: summary('2-0-3', 0.1) },
      ],
      total: 2,
      nextCursor: null,
    });
    fake.answers = [
      (items: readonly { label: string }[]) => items, // both runs
      'paris tool:search error:timeout',
      (items: readonly { label: string }[]) => items.find((item) => item.label.includes('2-0-3')),
    ];
    assert.deepEqual(await commands.executeCommand(Commands.searchEpisodes), { runId: 'r1', id: '2-0-3' });
    assert.deepEqual(f.connection.requests, [
      {
        method: 'trajectory/search',
        params: {
          text: 'paris',
          tool: 'search',
          errorKind: 'timeout',
          runIds: ['r2', 'r1'],
          sort: '-reward',
          limit: 200,
        },
      },
    ]);
    const listed = fake.prompts[2].options.items as Array<{ label: string; description: string }>;
    assert.deepEqual(
      listed.map((item) => item.label),
      ['$(add) Add these 2 episodes to a training set', 'lookup-2 · step 2 · 2-0-1', 'lookup · step 2 · 2-0-3'],
    );
    assert.match(listed[1].description, /^reward 0\.900 · finished · 2 turns · 1 tool call \(1 failed\)$/);
    assert.deepEqual(opened, [{ runId: 'r1', trajectoryId: '2-0-3' }]);
  });

  it('offers the newest run picked, and says so when OK is pressed with none picked', async () => {
    fake.answers = [() => []];
    await commands.executeCommand(Commands.searchEpisodes);
    const offered = fake.prompts[0].options.items as Array<{ runId: string; picked: boolean }>;
    assert.deepEqual(
      offered.map((item) => [item.runId, item.picked]),
      [
        ['r2', true],
        ['r1', false],
      ],
    );
    assert.deepEqual(f.connection.requests, []);
    assert.match(fake.messages.at(-1)!.text, /searched nothing: no run was picked/);
  });

  it("from a run's row searches that run; says so when nothing matches or the index is rebuilt; refuses while disconnected", async () => {
    f.connection.answers['trajectory/search'] = () => ({ items: [], total: 0, nextCursor: null });
    fake.answers = ['zebra'];
    await commands.executeCommand(Commands.searchEpisodes, { kind: 'run', runId: 'r2' });
    assert.deepEqual((f.connection.requests[0].params as { runIds: string[] }).runIds, ['r2']);
    assert.deepEqual(fake.messages.at(-1), {
      severity: 'info',
      text: 'Agent RL: no episode matches "zebra".',
      actions: [],
    });
    f.connection.answers['trajectory/search'] = () => ({
      items: [],
      total: 0,
      nextCursor: null,
      rebuilding: { done: 0, total: 40 },
    });
    fake.answers = ['zebra'];
    await commands.executeCommand(Commands.searchEpisodes, { kind: 'run', runId: 'r2' });
    assert.match(fake.messages.at(-1)!.text, /search index is being rebuilt .*: 0 of 40 steps indexed/);
    f.connection.isConnected = false;
    await commands.executeCommand(Commands.searchEpisodes);
    assert.match(fake.messages.at(-1)!.text, /Search Episodes: not connected to a trainer server/);
  });

  /** A new workspace folder, and a trainer whose search finds 7 episodes of run r1, whose frozen config is `config`. */
  function workspaceSearchingRun1(config: Record<string, unknown>): string {
    const root = mkdtempSync(join(tmpdir(), 'agentrl-search-'));
    fake.workspaceFolders = [{ uri: Uri.file(root) }];
    f.connection.answers['trajectory/search'] = () => ({
      items: [{ runId: 'r1', summary: summary('2-0-1', 1.5) }],
      total: 7,
      nextCursor: null,
    });
    f.connection.answers['run/config'] = () => ({ runId: 'r1', config });
    return root;
  }

  it("writes a config that warm-starts on one run's episodes found, beside the workspace's configs, never over one", async () => {
    const root = workspaceSearchingRun1({
      name: 'lookup',
      data: { train: '/ws/tasks.jsonl' },
      algorithm: { name: 'grpo' },
      train: { steps: 20 },
    });
    writeFileSync(join(root, 'lookup-warm-start.agentrl.yaml'), 'mine\n');
    f.connection.localRunsFolder = '/ws/.agentrl/runs';
    const warmStart = (items: readonly { label: string }[]) => items[0];
    fake.answers = ['reward>=1 tool:lookup', warmStart];
    await commands.executeCommand(Commands.searchEpisodes, { kind: 'run', runId: 'r1' });
    const listed = fake.prompts[1].options.items as Array<{ label: string }>;
    assert.deepEqual(
      listed.map((item) => item.label),
      [
        '$(mortar-board) Warm-start from these 7 episodes',
        '$(sync) Imitate episodes like these',
        '$(add) Add these 7 episodes to a training set',
        'lookup · step 2 · 2-0-1',
      ],
    );
    const written = join(root, 'lookup-warm-start-2.agentrl.yaml');
    assert.equal(readFileSync(join(root, 'lookup-warm-start.agentrl.yaml'), 'utf8'), 'mine\n');
    const config = parse(readFileSync(written, 'utf8'));
    assert.deepEqual(config.data.sft, [{ run: '/ws/.agentrl/runs/r1', where: { reward: { min: 1 }, tool: 'lookup' } }]);
    assert.deepEqual(config.train, { steps: 20, sft_steps: 5 });
    assert.equal(fake.shownDocuments.at(-1)!.uri.fsPath, written);
    assert.match(fake.messages.at(-1)!.text, /fine-tunes on the 7 episodes for train.sft_steps steps/);

    f.connection.localRunsFolder = undefined; // a remote trainer: the run's folder is on its machine
    fake.answers = ['reward>=1', warmStart];
    await commands.executeCommand(Commands.searchEpisodes, { kind: 'run', runId: 'r1' });
    assert.match(
      fake.messages.at(-1)!.text,
      /which is on the trainer's machine: with a remote trainer, write data.sft/,
    );
  });

  it("writes a config that keeps imitating episodes like a run's search, from a remote trainer too", async () => {
    const root = workspaceSearchingRun1({
      name: 'lookup',
      algorithm: { name: 'grpo', policy_loss: 'clipped' },
      train: { steps: 20 },
    });
    f.connection.localRunsFolder = undefined; // no run folder named: a remote trainer's run gives one as well
    fake.answers = ['"the key" reward>=1 tool:lookup step<=3', pick('$(sync) Imitate episodes like these')];
    await commands.executeCommand(Commands.searchEpisodes, { kind: 'run', runId: 'r1' });
    const written = join(root, 'lookup-rft.agentrl.yaml');
    const text = readFileSync(written, 'utf8');
    assert.match(text, /^# Imitate episodes like the 7 a search found that pass /);
    assert.match(text, /Left out of the filter: step \(a new run's steps/);
    const config = parse(text);
    assert.equal(config.name, 'lookup-rft');
    assert.deepEqual(config.algorithm, {
      name: 'rft',
      policy_loss: 'nll',
      rft_where: { text: '"the key"', reward: { min: 1 }, tool: 'lookup' },
    });
    assert.deepEqual(config.train, { steps: 20 });
    assert.equal(fake.shownDocuments.at(-1)!.uri.fsPath, written);
    assert.match(fake.messages.at(-1)!.text, /each step fine-tunes on its own episodes that pass this search/);
  });

  it('adds every episode a search matches, every page, whole, to a training set through its command', async () => {
    const asked: unknown[][] = [];
    commands.registerCommand(Commands.addToTrainingSet, async (...args: unknown[]) => void asked.push(args));
    const record = (runId: string, id: string) => ({ run_id: runId, id, step: 2 }) as never;
    for (const id of ['2-0-1', '2-0-2', '2-0-3']) f.connection.trajectoryRecords.set(id, record('r?', id));
    const fetched: Array<[string, string[]]> = [];
    f.connection.records.get = async (runId: string, ids: string[]) => {
      fetched.push([runId, ids]);
      return ids.map((id) => record(runId, id));
    };
    f.connection.answers['trajectory/search'] = ({ cursor }) =>
      cursor
        ? { items: [{ runId: 'r1', summary: summary('2-0-3', 0.2) }], total: 3, nextCursor: null }
        : {
            items: [
              { runId: 'r1', summary: summary('2-0-1', 0.9) },
              { runId: 'r2', summary: summary('2-0-2', 0.5) },
            ],
            total: 3,
            nextCursor: 'page-2',
          };
    fake.answers = [
      (items: readonly { label: string }[]) => items,
      'paris',
      pick('$(add) Add these 3 episodes to a training set'),
    ];
    assert.equal(await commands.executeCommand(Commands.searchEpisodes), undefined);
    assert.deepEqual(
      f.connection.requests.map((r) => (r.params as { cursor?: string }).cursor ?? null),
      [null, null, 'page-2'],
      'the listing, then every page of the same search',
    );
    assert.deepEqual(fetched, [
      ['r1', ['2-0-1', '2-0-3']],
      ['r2', ['2-0-2']],
    ]);
    assert.deepEqual(asked, [[[record('r1', '2-0-1'), record('r2', '2-0-2'), record('r1', '2-0-3')], 0]]);
  });
});
