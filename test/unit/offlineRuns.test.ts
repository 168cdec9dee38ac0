import { strict as assert } from 'node:assert';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { readOfflineRun, readOfflineRuns, readRunTrajectories } from '../../extension/offlineRuns';

const ROOT = resolve(__dirname, '..', '..');
const line = (seq: number, type: string, data: object): string => `${JSON.stringify({ seq, time: seq, type, data })}\n`;

/** A run folder as the trainer writes it (protocol/README.md, "The run folder"). */
function runFolder(runsDir: string, runId: string, record: object, log: string): string {
  const folder = join(runsDir, runId);
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, 'run.json'), JSON.stringify(record));
  writeFileSync(join(folder, 'events.jsonl'), log);
  return folder;
}

describe('offline runs (the Runs view while no server is connected)', () => {
  let runsDir: string;
  beforeEach(() => {
    runsDir = mkdtempSync(join(tmpdir(), 'agentrl-offline-runs-'));
  });

  it('lists each run folder from its run.json and the latest status and metrics of its log, newest first', async () => {
    const trained = runFolder(
      runsDir,
      'lookup-1',
      { run_id: 'lookup-1', created_at: '2026-11-22T10:00:00+00:00', name: 'lookup', mode: 'train' },
      line(1, 'status', { status: 'running', step: 0, total_steps: 3 }) +
        line(2, 'metrics', { step: 1, metrics: { 'reward/mean': 0.25 } }) +
        line(3, 'status', { status: 'running', step: 1, total_steps: 3 }) +
        line(4, 'phase', { phase: 'rollouts', step: 2 }) +
        'not json\n' + // a damaged line is skipped, as the server skips it
        '{"seq": 6, "time": 6, "type": "status", "da', // torn: still being written when read
    );
    mkdirSync(join(trained, 'checkpoints', 'step-000001'), { recursive: true });
    runFolder(
      runsDir,
      'lookup-2',
      { run_id: 'lookup-2', created_at: '2026-11-23T09:00:00+00:00', name: 'lookup', mode: 'try' },
      line(1, 'status', { status: 'completed', step: 0, total_steps: 0 }),
    );
    mkdirSync(join(runsDir, '.logs')); // the server's own folders are not runs
    mkdirSync(join(runsDir, 'no-run-json'));
    const runs = await readOfflineRuns(runsDir);
    assert.deepEqual(
      runs.map((run) => run.folder),
      [join(runsDir, 'lookup-2'), trained],
    );
    assert.deepEqual(runs[1].info, {
      runId: 'lookup-1',
      name: 'lookup',
      mode: 'train',
      status: 'running',
      step: 1,
      totalSteps: 3,
      createdAt: '2026-11-22T10:00:00+00:00',
      latestMetrics: { 'reward/mean': 0.25 },
      lastSeq: 4,
      hasCheckpoint: true,
      message: null,
    });
    assert.equal(runs[0].info.mode, 'try');
    assert.equal(runs[0].info.hasCheckpoint, false);
  });

  it('reads a long log from its end: the latest status of a real run, a line split across read blocks', async () => {
    const events = readFileSync(join(ROOT, 'protocol', 'examples', 'run-logs', 'lookup-lr-high.events.jsonl'), 'utf8');
    const info = JSON.parse(
      readFileSync(join(ROOT, 'protocol', 'examples', 'run-logs', 'lookup-lr-high.run-info.json'), 'utf8'),
    );
    // last, a message of multi-byte characters longer than a read block, so block edges fall inside characters
    const wide = line(info.lastSeq + 1, 'log', { level: 'info', message: 'é→'.repeat(40_000) });
    const folder = runFolder(runsDir, 'lookup-lr-high', { name: 'lookup', created_at: info.createdAt }, events + wide);
    const run = await readOfflineRun(folder);
    assert.equal(run?.info.status, info.status);
    assert.equal(run?.info.step, info.step);
    assert.deepEqual(run?.info.latestMetrics, info.latestMetrics);
    assert.equal(run?.info.lastSeq, info.lastSeq + 1);
  });

  it('shows a run whose log says nothing yet as queued, under its folder name when run.json names none', async () => {
    const folder = runFolder(runsDir, 'fresh', { mode: 'nonsense' }, '');
    assert.deepEqual((await readOfflineRun(folder))?.info, {
      runId: 'fresh',
      name: 'fresh',
      mode: 'train',
      status: 'queued',
      step: 0,
      totalSteps: 0,
      latestMetrics: {},
      lastSeq: 0,
      hasCheckpoint: false,
      message: null,
    });
    writeFileSync(join(folder, 'run.json'), '[1, 2]'); // damaged: still listed, under its folder's name
    assert.equal((await readOfflineRun(folder))?.info.name, 'fresh');
    assert.equal(await readOfflineRun(join(runsDir, 'missing')), undefined);
    assert.deepEqual(await readOfflineRuns(join(runsDir, 'missing')), []);
  });

  it("reads a run's trajectory files in step order for the replay, and names each unreadable line", async () => {
    const folder = runFolder(runsDir, 'r', { name: 'r' }, '');
    mkdirSync(join(folder, 'trajectories'));
    const record = (id: string) => JSON.stringify({ schema_version: 1, id, step: Number(id[0]) });
    writeFileSync(join(folder, 'trajectories', 'step-000002.trajectories.jsonl'), `${record('2-0-0')}\noops\n`);
    writeFileSync(join(folder, 'trajectories', 'step-000001.trajectories.jsonl'), `${record('1-0-0')}\n`);
    writeFileSync(join(folder, 'trajectories', 'step-000001.tmp'), 'half written');
    const { records, errors } = await readRunTrajectories(folder);
    assert.deepEqual(
      records.map((r) => r.id),
      ['1-0-0', '2-0-0'],
    );
    assert.deepEqual(errors.length, 1);
    assert.match(errors[0], /^step-000002\.trajectories\.jsonl line 2: /);
  });
});
