import { fake, pick, Uri, WebviewPanel } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import { parse } from 'yaml';
import { commands } from 'vscode';
import type { TrajectoryRecord } from '../../protocol/generated/trajectory';
import { Commands } from '../../extension/commands';
import { registerReplay } from '../../extension/replay';
import { listTrainingSets, whyNotName } from '../../extension/trainingSetFile';
import { registerTrainingSets, TrainingSetMessages, type AddedToSet } from '../../extension/trainingSets';
import { fakeCtx, runInfo, type FakeCtx } from './fakeCtx';

const PROTOCOL = resolve(__dirname, '..', '..', 'protocol');
const schema = (name: string) => JSON.parse(readFileSync(join(PROTOCOL, 'schemas', name), 'utf8'));
const lookup: TrajectoryRecord[] = readFileSync(
  join(PROTOCOL, 'examples', 'trajectories', 'lookup.trajectories.jsonl'),
  'utf8',
)
  .split('\n')
  .filter(Boolean)
  .map((line) => JSON.parse(line));

describe('Add to Training Set', () => {
  let f: FakeCtx;
  let root: string;
  const add = (records: TrajectoryRecord[], fromTurn?: number) =>
    commands.executeCommand(Commands.addToTrainingSet, records, fromTurn) as Promise<AddedToSet | undefined>;
  const lines = (name: string) =>
    readFileSync(join(root, 'training-sets', `${name}.jsonl`), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { episode: TrajectoryRecord; from_turn: number });

  beforeEach(() => {
    fake.reset();
    f = fakeCtx();
    root = mkdtempSync(join(tmpdir(), 'agentrl-training-sets-'));
    fake.workspaceFolders = [{ uri: Uri.file(root) }];
    registerTrainingSets(f.ctx);
  });

  it('writes a new set, a line per episode that the schema accepts, the record as its run wrote it', async () => {
    fake.answers = [pick(TrainingSetMessages.newSet), 'good-calls'];
    const added = await add(lookup.slice(0, 3));
    assert.deepEqual(
      { name: added?.name, added: added?.added, skipped: added?.skipped },
      { name: 'good-calls', added: 3, skipped: 0 },
    );
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    ajv.addSchema(schema('trajectory.schema.json'));
    const validate = ajv.compile(schema('training-set.schema.json'));
    const written = lines('good-calls');
    assert.equal(written.length, 3);
    for (const line of written) assert.ok(validate(line), ajv.errorsText(validate.errors));
    assert.deepEqual(written[0], { episode: lookup[0], from_turn: 0 });
    assert.equal(validate({ episode: lookup[0], from_turn: -1 }), false, 'the schema is checked, not waved through');
    assert.deepEqual(fake.messages.at(-1), {
      severity: 'info',
      text: 'Agent RL: Added 3 episodes to training set good-calls.',
      actions: ['Open', 'Use in a Run Config'],
    });
  });

  it('offers the sets there are; skips an episode already in the set from the same turn, and says how many', async () => {
    mkdirSync(join(root, 'training-sets'));
    writeFileSync(join(root, 'training-sets', 'seen.jsonl'), `${JSON.stringify({ episode: lookup[0], from_turn: 0 })}`);
    writeFileSync(join(root, 'training-sets', 'notes.txt'), 'not a set');
    fake.answers = [pick('seen')];
    const added = await add([lookup[0], lookup[1], lookup[1]]);
    const offered = (fake.prompts[0].options.items as Array<{ label: string }>).map((item) => item.label);
    assert.deepEqual(offered, ['seen', TrainingSetMessages.newSet]);
    assert.deepEqual([added?.added, added?.skipped], [1, 2]);
    assert.equal(
      fake.messages.at(-1)!.text,
      'Agent RL: Added 1 episode to training set seen (2 episodes already in it, from the same turn: skipped).',
    );
    fake.answers = [pick('seen')];
    await add([lookup[0]], 1); // the same episode learned from another turn is another line
    fake.answers = [pick('seen')];
    assert.equal(await add([lookup[1]], 1), undefined, 'a one-turn episode has no turn 1 to learn from');
    assert.match(
      fake.messages.at(-1)!.text,
      /episode 3-0-1 of run lookup-fixture has 1 turn\(s\): none to learn from turn 1/,
    );
    assert.deepEqual(
      lines('seen').map((line) => [line.episode.id, line.from_turn]),
      [
        ['3-0-0', 0],
        ['3-0-1', 0],
        ['3-0-0', 1],
      ],
      'the first line, written without its newline, keeps its own line',
    );
  });

  it('refuses a name that is no plain file name, and writes nothing', async () => {
    for (const bad of ['../evil', 'a/b', 'a\\b', '..', '.hidden', 'x..y', 'with space', ''])
      assert.ok(whyNotName(bad), `${JSON.stringify(bad)} should be refused`);
    for (const good of ['good-calls', 'v1.2_final', 'A9']) assert.equal(whyNotName(good), undefined, good);
    fake.answers = [pick(TrainingSetMessages.newSet), '../evil'];
    assert.equal(await add([lookup[0]]), undefined);
    assert.match(fake.messages.at(-1)!.text, /^Add to Training Set: "..\/evil" cannot name a training set/);
    assert.equal(existsSync(join(root, 'evil.jsonl')), false);
    assert.deepEqual(listTrainingSets(root), []);
  });

  it('refuses a training-sets folder that is a link, and a set file that is one', async () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'agentrl-elsewhere-'));
    symlinkSync(elsewhere, join(root, 'training-sets'));
    fake.answers = [pick(TrainingSetMessages.newSet), 'x'];
    assert.equal(await add([lookup[0]]), undefined);
    assert.match(fake.messages.at(-1)!.text, /training-sets is a symbolic link: training sets are written only into/);
    assert.deepEqual(readdirSync(elsewhere), [], 'nothing written through the link');

    const other = mkdtempSync(join(tmpdir(), 'agentrl-training-sets-'));
    fake.workspaceFolders = [{ uri: Uri.file(other) }];
    mkdirSync(join(other, 'training-sets'));
    symlinkSync(join(elsewhere, 'target.jsonl'), join(other, 'training-sets', 'linked.jsonl'));
    fake.answers = [pick(TrainingSetMessages.newSet), 'linked'];
    assert.equal(await add([lookup[0]]), undefined);
    assert.match(fake.messages.at(-1)!.text, /linked\.jsonl is a symbolic link: it is left alone/);
    assert.deepEqual(readdirSync(elsewhere), []);
  });

  it('says to open a folder first', async () => {
    fake.workspaceFolders = undefined;
    assert.equal(await add([lookup[0]]), undefined);
    assert.match(fake.messages.at(-1)!.text, /open a folder first/);
  });

  it("opens the set, and writes a run config from the episodes' run that warms up on it, never over a file", async () => {
    fake.answers = [pick(TrainingSetMessages.newSet), 'good'];
    fake.messageChoices = [TrainingSetMessages.open];
    await add([lookup[0]]);
    assert.equal(fake.shownDocuments.at(-1)!.uri.fsPath, join(root, 'training-sets', 'good.jsonl'));

    f.connection.answers['run/config'] = ({ runId }) => ({
      runId,
      config: { name: 'lookup', algorithm: { name: 'grpo' }, data: { train: '/ws/tasks.jsonl' }, train: { steps: 30 } },
    });
    for (const expected of ['good.sft.agentrl.yaml', 'good.sft-2.agentrl.yaml']) {
      fake.answers = [pick('good')];
      fake.messageChoices = [TrainingSetMessages.useInConfig];
      await add([lookup[15]], 1);
      assert.equal(fake.shownDocuments.at(-1)!.uri.fsPath, join(root, expected));
    }
    assert.deepEqual(f.connection.requests.at(-1), { method: 'run/config', params: { runId: 'lookup-fixture' } });
    const text = readFileSync(join(root, 'good.sft.agentrl.yaml'), 'utf8');
    assert.match(text, /^# Warm-start on training set good \(training-sets\/good\.jsonl/);
    const config = parse(text);
    assert.deepEqual(config.data, { train: '/ws/tasks.jsonl', sft: [{ episodes: 'training-sets/good.jsonl' }] });
    assert.deepEqual(config.train, { steps: 30, sft_steps: 5 });
    assert.equal(config.name, 'lookup-good');

    f.connection.isConnected = false; // and the run is not listed offline: its config cannot be read
    fake.answers = [pick('good')];
    fake.messageChoices = [TrainingSetMessages.useInConfig];
    await add([lookup[2]]);
    assert.match(
      fake.messages.at(-1)!.text,
      /the config of run lookup-fixture, which the new config is made from, cannot be read/,
    );
  });
});

describe("the replay's Add to Training Set", () => {
  let f: FakeCtx;
  const asked: unknown[][] = [];
  beforeEach(() => {
    fake.reset();
    asked.length = 0;
    f = fakeCtx();
    f.connection.model.setRuns([runInfo('lookup-fixture')]);
    f.connection.answers['run/get'] = ({ runId }) => runInfo(runId);
    f.connection.answers['trajectory/query'] = () =>
      ({ items: [{ id: '3-0-0' }, { id: '3-0-1' }], total: 2, nextCursor: null }) as never;
    for (const record of lookup) f.connection.trajectoryRecords.set(record.id, record);
    registerReplay(f.ctx);
    commands.registerCommand(Commands.addToTrainingSet, async (...args: unknown[]) => void asked.push(args));
  });

  it('adds the records the page sends, from the turn the page names, without fetching them again', async () => {
    await commands.executeCommand(Commands.openReplay, { runId: 'lookup-fixture' });
    const panel = fake.panels[0] as WebviewPanel;
    await panel.receive({ type: 'ready' });
    f.connection.trajectoryRecords.clear(); // what the page sends is what is added: nothing is fetched
    const message = (records: TrajectoryRecord[], fromTurn: number) =>
      panel.receive({ type: 'addToTrainingSet', records, fromTurn });
    await message([lookup[1]], 0);
    await message([lookup[0]], 1);
    await message([lookup[0], lookup[1]], 0); // a group
    assert.deepEqual(asked, [
      [[lookup[1]], 0],
      [[lookup[0]], 1],
      [[lookup[0], lookup[1]], 0],
    ]);
  });
});
