import { fake } from './vscodeStub';
import { strict as assert } from 'node:assert';
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
      ['lookup-2 · step 2 · 2-0-1', 'lookup · step 2 · 2-0-3'],
    );
    assert.match(listed[0].description, /^reward 0\.900 · finished · 2 turns · 1 tool call \(1 failed\)$/);
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
});
