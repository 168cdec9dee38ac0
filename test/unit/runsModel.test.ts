import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type {
  HealthEvent,
  RayWorker,
  RunEventParams,
  RunInfo,
  StatusRunInfo,
  TrajectorySummary,
} from '../../protocol/generated/rpc';
import { describeAge, describeHealth, describePhase, RunsModel } from '../../extension/runsModel';

/** The event log of a Ray run (2 rollout workers, 1 learner worker) whose rollout worker 0 was killed in step 1:
 *  the run folder of tests/test_cluster.py's test_a_rollout_worker_killed_mid_step_is_restarted_and_its_episodes_run_once
 *  (pytest --basetemp=DIR -k killed: DIR/test_a_rollout_worker_killed_m0/runs/killed/events.jsonl). */
const RAY_KILLED = 'lookup-ray-rollout-killed';

/** The clock the rows' ages are read against: two and a half hours after `run()` started. */
const NOW = Date.parse('2026-11-22T12:30:00Z');

const run = (overrides: Partial<RunInfo> = {}): RunInfo => ({
  runId: 'lookup-1',
  name: 'lookup-tiny',
  mode: 'train',
  status: 'running',
  step: 1,
  totalSteps: 4,
  createdAt: '2026-11-22T10:00:00Z',
  latestMetrics: {},
  lastSeq: 3,
  hasCheckpoint: false,
  message: null,
  ...overrides,
});

const summary = (
  step: number,
  group: number,
  sample: number,
  reward: number,
  extra: Partial<TrajectorySummary> = {},
): TrajectorySummary => ({
  id: `${step}-${group}-${sample}`,
  step,
  group,
  sample,
  task_id: `task-${group}`,
  status: 'finished',
  reward,
  advantage: 0,
  num_turns: 2,
  num_tool_calls: 1,
  num_tool_errors: 0,
  response_tokens: 10,
  file: 'x',
  ...extra,
});

const health = (code: HealthEvent['code'], step: number, resolved = false): HealthEvent => ({
  code,
  severity: 'warning',
  resolved,
  step,
  since_step: step - 1,
  message: resolved ? `${code}: resolved` : `${code} since step ${step - 1}`,
  fix: `raise rollout.group_size`,
  metrics: {},
  trajectory_ids: resolved ? [] : [`${step}-0-0`],
});

/** An event as the server streams it, less what the stream numbers: `{type, data}` (and a status event's runInfo). */
type EventBody<E = RunEventParams> = E extends RunEventParams ? Omit<E, 'runId' | 'seq' | 'time'> : never;
let seq = 10;
const event = (runId: string, body: EventBody): RunEventParams => ({ runId, seq: ++seq, time: seq, ...body });
/** A status event with the RunInfo fields the server computes from it. */
const status = (runInfo: StatusRunInfo, superseded_from_seq?: number): EventBody => ({
  type: 'status',
  runInfo,
  data: {
    status: runInfo.status,
    step: runInfo.step,
    total_steps: runInfo.totalSteps,
    ...(runInfo.message ? { message: runInfo.message } : {}),
    ...(superseded_from_seq ? { superseded_from_seq } : {}),
  },
});

describe('RunsModel (the Runs view and status bar)', () => {
  it('builds run -> step -> group -> trajectory from streamed events, newest step first', () => {
    const model = new RunsModel();
    model.setRuns([run()]);
    for (const s of [
      summary(1, 0, 1, 1),
      summary(1, 0, 0, 0),
      summary(1, 1, 0, 0.5),
      summary(1, 1, 1, 0.5),
      summary(2, 0, 0, 1, { num_tool_errors: 2 }),
    ]) {
      model.applyEvent(event('lookup-1', { type: 'trajectory', data: s }));
    }
    const [runNode] = model.children();
    assert.deepEqual(runNode, { kind: 'run', runId: 'lookup-1' });
    const steps = model.children(runNode);
    assert.deepEqual(
      steps.map((s) => model.label(s)),
      ['step 2', 'step 1'],
    );
    assert.equal(model.description(steps[0]), 'reward 1 · 1 episode · 2 tool errors');
    const groups = model.children(steps[1]);
    assert.deepEqual(
      groups.map((g) => model.label(g)),
      ['group 0 · task-0', 'group 1 · task-1'],
    );
    assert.equal(model.description(groups[0]), 'reward 0.50');
    assert.equal(model.description(groups[1]), 'reward 0.50 · zero variance');
    const samples = model.children(groups[0]);
    assert.deepEqual(
      samples.map((t) => model.label(t)),
      ['sample 0', 'sample 1'],
    );
    assert.equal(model.description(samples[1]), 'reward 1 · finished · 1 tool call');
  });

  it('lists runs newest first, as the Runs view shows them, for every run picker', () => {
    const model = new RunsModel(() => NOW);
    model.setRuns([
      run({ runId: 'try-1', mode: 'try', createdAt: '2026-11-22T09:00:00Z' }),
      run({ runId: 'try-2', mode: 'try', createdAt: '2026-11-22T09:30:00Z' }),
      run({ runId: 'train-1', createdAt: '2026-11-22T10:00:00Z' }),
    ]);
    assert.deepEqual(model.runIds(), ['train-1', 'try-2', 'try-1']); // Open Run Dashboard's Enter: the newest
    assert.deepEqual(
      model.children().map((node) => (node.kind === 'run' ? node.runId : '')),
      model.runIds(),
    );
  });

  it('names a run by its name, and by its mode and start time where another run has the same name', () => {
    const model = new RunsModel(() => NOW);
    const tryStart = '2026-11-22T09:04:31Z';
    model.setRuns([
      run({ runId: 'a', name: 'my-env', mode: 'try', createdAt: tryStart }),
      run({ runId: 'b', name: 'my-env', mode: 'train', createdAt: '2026-11-22T09:30:00Z' }),
      run({ runId: 'c', name: 'other' }),
    ]);
    const local = new Date(tryStart);
    const time = [local.getHours(), local.getMinutes(), local.getSeconds()].map((n) => String(n).padStart(2, '0'));
    assert.equal(model.runName('a'), `my-env (try ${time.join(':')})`);
    assert.match(model.runName('b'), /^my-env \(train \d\d:\d\d:\d\d\)$/);
    assert.equal(model.runName('c'), 'other');
    assert.equal(model.label({ kind: 'run', runId: 'a' }), model.runName('a')); // the Runs view says the same
    assert.equal(model.runName('gone'), 'gone');
  });

  it('follows status, metrics and checkpoints, and says which runs can be stopped or resumed', () => {
    const model = new RunsModel(() => NOW);
    const changes: Array<string | undefined> = [];
    model.onDidChange((id) => changes.push(id));
    model.setRuns([run(), run({ runId: 'old', name: 'old', status: 'completed', createdAt: '2026-11-21T10:00:00Z' })]);
    model.applyEvent(event('lookup-1', { type: 'metrics', data: { step: 2, metrics: { 'reward/mean': 0.25 } } }));
    model.applyEvent(event('lookup-1', status({ status: 'running', step: 2, totalSteps: 4, message: null })));
    assert.equal(model.description({ kind: 'run', runId: 'lookup-1' }), 'running · 2/4 · 2 h ago · reward 0.25');
    assert.equal(model.focusRun()?.runId, 'lookup-1');
    assert.ok(model.isActive('lookup-1'));
    assert.ok(!model.isResumable('lookup-1'));
    model.applyEvent(event('lookup-1', { type: 'checkpoint', data: { step: 2, path: 'x' } }));
    model.applyEvent(
      event('lookup-1', status({ status: 'stopped', step: 2, totalSteps: 4, message: 'stopped by the user' })),
    );
    assert.ok(model.isResumable('lookup-1'));
    assert.ok(!model.isActive('lookup-1'));
    assert.equal(model.run('lookup-1')?.message, 'stopped by the user');
    assert.equal(model.focusRun()?.runId, 'lookup-1', 'no active run: the newest');
    model.applyEvent(event('unknown-run', status({ status: 'running', step: 0, totalSteps: 0, message: null }))); // not listed: ignored
    assert.deepEqual(changes, [undefined, 'lookup-1', 'lookup-1', 'lookup-1', 'lookup-1']);
  });

  it('keeps the latest record of a trajectory id (a resumed run re-emits superseded steps)', () => {
    const model = new RunsModel();
    model.setRuns([run()]);
    model.applyEvent(event('lookup-1', { type: 'trajectory', data: summary(3, 0, 0, 0) }));
    model.applyEvent(event('lookup-1', { type: 'trajectory', data: summary(3, 0, 0, 1) }));
    assert.deepEqual(
      model.trajectories('lookup-1').map((t) => t.reward),
      [1],
    );
    model.setRuns([run({ status: 'completed' })]); // a refreshed list keeps what was streamed
    assert.equal(model.trajectories('lookup-1').length, 1);
  });

  it("labels a try run's episodes and its progress as a try", () => {
    const model = new RunsModel(() => NOW);
    model.setRuns([run({ runId: 'try-1', mode: 'try', status: 'completed', step: 0, totalSteps: 0 })]);
    model.applyEvent(event('try-1', { type: 'trajectory', data: summary(0, 0, 0, 0.5) }));
    const [stepNode] = model.children({ kind: 'run', runId: 'try-1' });
    assert.equal(model.label(stepNode), 'episodes');
    assert.equal(model.description({ kind: 'run', runId: 'try-1' }), 'completed · try · 2 h ago');
  });

  it('shows the health alerts in force on the run, and forgets those a resume superseded', () => {
    const model = new RunsModel(() => NOW);
    model.setRuns([run({ step: 2, latestMetrics: { 'reward/mean': 0 } })]);
    const row = { kind: 'run', runId: 'lookup-1' } as const;
    model.applyEvent(event('lookup-1', { type: 'health', data: health('zero_variance_groups', 2) }));
    model.applyEvent(event('lookup-1', { type: 'health', data: health('no_tool_calls', 2) }));
    assert.deepEqual(
      model.healthAlerts('lookup-1').map((a) => a.code),
      ['zero_variance_groups', 'no_tool_calls'],
    );
    assert.equal(model.description(row), 'running · 2/4 · 2 h ago · reward 0 · ⚠ zero_variance_groups, no_tool_calls');
    const checkpointSeq = seq + 1;
    model.applyEvent(event('lookup-1', { type: 'checkpoint', data: { step: 2, path: 'x' } }));
    model.applyEvent(event('lookup-1', { type: 'health', data: health('no_tool_calls', 4, true) }));
    model.applyEvent(event('lookup-1', { type: 'health', data: health('all_truncated', 4) }));
    assert.deepEqual(
      model.healthAlerts('lookup-1').map((a) => a.code),
      ['zero_variance_groups', 'all_truncated'],
    );
    model.setRuns([run()]); // a refreshed list keeps what was streamed
    assert.equal(model.healthAlerts('lookup-1').length, 2);
    model.applyEvent(
      event('lookup-1', status({ status: 'running', step: 2, totalSteps: 4, message: null }, checkpointSeq)),
    );
    assert.deepEqual(
      model.healthAlerts('lookup-1').map((a) => a.code),
      ['zero_variance_groups', 'no_tool_calls'],
      "back to the checkpoint's alerts",
    );
    model.applyEvent(event('lookup-1', { type: 'health', data: health('zero_variance_groups', 5, true) }));
    model.applyEvent(event('lookup-1', { type: 'health', data: health('no_tool_calls', 5, true) }));
    assert.deepEqual(model.healthAlerts('lookup-1'), []);
    assert.equal(model.description(row), 'running · 2/4 · 2 h ago');
  });

  it('says what a working run is doing, why a queued one waits, and nothing once it has ended', () => {
    const model = new RunsModel(() => NOW);
    const row = { kind: 'run', runId: 'lookup-1' } as const;
    model.setRuns([run({ status: 'queued', step: 0, message: 'starting: its process is loading' })]);
    assert.equal(model.description(row), 'queued · 0/4 · starting: its process is loading · 2 h ago');
    model.applyEvent(event('lookup-1', status({ status: 'running', step: 0, totalSteps: 4, message: null })));
    assert.equal(model.description(row), 'running · 0/4 · 2 h ago', 'no phase said yet');
    model.applyEvent(event('lookup-1', { type: 'phase', data: { phase: 'loading_model', step: 0 } }));
    assert.equal(model.description(row), 'running · 0/4 · loading the model · 2 h ago');
    model.applyEvent(event('lookup-1', { type: 'phase', data: { phase: 'rollouts', step: 1, done: 8, total: 32 } }));
    assert.equal(model.activity('lookup-1'), 'rollouts of step 1: 8 of 32 episodes ended');
    // a graceful stop: the phase goes on while the run is stopping
    model.applyEvent(
      event('lookup-1', status({ status: 'stopping', step: 0, totalSteps: 4, message: 'after the step' })),
    );
    assert.equal(model.description(row), 'stopping · 0/4 · rollouts of step 1: 8 of 32 episodes ended · 2 h ago');
    model.applyEvent(event('lookup-1', { type: 'phase', data: { phase: 'checkpointing', step: 1 } }));
    model.applyEvent(event('lookup-1', status({ status: 'stopped', step: 1, totalSteps: 4, message: null })));
    assert.equal(model.run('lookup-1')?.phase, undefined, 'a status other than running or stopping ends the phase');
    assert.equal(model.description(row), 'stopped · 1/4 · 2 h ago');
    // a resume: where it continues from, at once
    model.applyEvent(
      event(
        'lookup-1',
        status({
          status: 'queued',
          step: 1,
          totalSteps: 4,
          message: 'resume requested: from the checkpoint at step 1',
        }),
      ),
    );
    assert.equal(model.description(row), 'queued · 1/4 · resume requested: from the checkpoint at step 1 · 2 h ago');
  });

  it('puts each phase in words: the episodes of a Try run, a step of a training run', () => {
    assert.deepEqual(
      [
        { phase: 'starting_engine', step: 0 },
        { phase: 'restoring_checkpoint', step: 4 },
        { phase: 'rollouts', step: 0, done: 2, total: 4 },
        { phase: 'rollouts', step: 5 },
        { phase: 'updating', step: 5 },
        { phase: 'evaluating', step: 5 },
        { phase: 'checkpointing', step: 5 },
      ].map((phase) => describePhase(phase as Parameters<typeof describePhase>[0])),
      [
        'starting the rollout engine',
        'restoring the checkpoint of step 4',
        'episodes: 2 of 4 ended',
        'rollouts of step 5',
        'updating step 5',
        'evaluating after step 5',
        'writing the checkpoint of step 5',
      ],
    );
  });

  it('says when a run started, coarser as it ages', () => {
    const started = '2026-11-22T10:00:00Z';
    const after = (minutes: number) => Date.parse(started) + minutes * 60_000;
    assert.deepEqual(
      [0.5, 12, 150, 3 * 24 * 60, 8 * 24 * 60].map((minutes) => describeAge(started, after(minutes))),
      ['just now', '12 min ago', '2 h ago', '3 d ago', '2026-11-22'],
    );
    assert.equal(describeAge('', NOW), undefined);
    assert.equal(describeAge('not a date', NOW), undefined);
  });

  it('lists the runs read from a runs folder as offline, each with its folder and no steps', () => {
    const model = new RunsModel(() => NOW);
    model.setRuns([run({ runId: 'from-server' })]);
    model.setOfflineRuns([
      { info: run({ runId: 'a', status: 'completed', step: 4, mode: 'train' }), folder: '/runs/a' },
      { info: run({ runId: 'b', mode: 'try', status: 'running', step: 0, totalSteps: 0 }), folder: '/runs/b' },
    ]);
    assert.deepEqual(model.runIds(), ['b', 'a'], 'the offline list replaces the one a server gave');
    assert.equal(model.offlineFolder('a'), '/runs/a');
    assert.equal(model.description({ kind: 'run', runId: 'a' }), 'offline · completed · 4/4 · 2 h ago');
    assert.equal(model.description({ kind: 'run', runId: 'b' }), 'offline · running · try · 2 h ago');
    assert.deepEqual(model.children({ kind: 'run', runId: 'a' }), []);
    model.setRuns([run({ runId: 'from-server' })]); // a server connected again
    assert.equal(model.offlineFolder('from-server'), undefined);
  });

  it('puts a health alert in words with its fix, and a resolution without one', () => {
    assert.equal(
      describeHealth(health('all_truncated', 3)),
      'all_truncated since step 2. Fix: raise rollout.group_size. Trajectories that show it: 3-0-0',
    );
    assert.equal(describeHealth(health('all_truncated', 6, true)), 'all_truncated: resolved');
  });
});

describe('RunsModel worker restarts (a run on a Ray cluster)', () => {
  it('lists each restarted rollout worker in words, keeps them through a resume, and leaves the tree alone', () => {
    const model = new RunsModel();
    model.setRuns([run()]);
    const restarted = {
      step: 1,
      worker: 0,
      restarts: 1,
      episodes_rerun: 8,
      rerun_on: 1,
      message: 'rollout worker 0 died (ActorDiedError); Ray restarts it and its 8 episodes run again on worker 1',
    };
    model.applyEvent(event('lookup-1', { type: 'worker_restarted', data: restarted }));
    model.applyEvent(event('lookup-1', status({ status: 'running', step: 1, totalSteps: 4, message: null }, 1)));
    assert.deepEqual(model.workerRestarts('lookup-1'), [
      'step 1: rollout worker 0 restarted; its 8 episodes ran on worker 1',
    ]);
    assert.deepEqual(model.children({ kind: 'run', runId: 'lookup-1' }), []);
    assert.deepEqual(model.workerRestarts('unknown'), []);
  });
});

describe('RunsModel workers (a run on a Ray cluster)', () => {
  const worker = (role: RayWorker['role'], index: number, state: RayWorker['state'], restarts = 0): RayWorker => ({
    role,
    index,
    state,
    restarts,
    ...(state === 'starting' ? {} : { node: '10.0.0.7' }),
  });
  const rows = (model: RunsModel, runId: string) =>
    model
      .children({ kind: 'run', runId })
      .filter((node) => node.kind === 'worker')
      .map((node) => `${model.label(node)}: ${model.description(node)}`);

  it('lists the workers of the latest workers event before the steps, each with its state and restarts', () => {
    const model = new RunsModel();
    model.setRuns([run()]);
    model.applyEvent(event('lookup-1', { type: 'workers', data: { workers: [worker('rollout', 0, 'starting')] } }));
    assert.deepEqual(rows(model, 'lookup-1'), ['rollout worker 0: starting']);
    model.applyEvent(event('lookup-1', { type: 'trajectory', data: summary(1, 0, 0, 1) }));
    const workers = [worker('rollout', 0, 'restarting', 1), worker('learner', 0, 'ready')];
    model.applyEvent(event('lookup-1', { type: 'workers', data: { workers } }));
    assert.deepEqual(
      model.children({ kind: 'run', runId: 'lookup-1' }).map((node) => model.label(node)),
      ['rollout worker 0', 'learner worker 0', 'step 1'],
    );
    assert.deepEqual(rows(model, 'lookup-1'), [
      'rollout worker 0: restarting · 1 restart · 10.0.0.7',
      'learner worker 0: ready · 10.0.0.7',
    ]);
    model.setRuns([run()]); // a refreshed list keeps what was streamed
    assert.equal(rows(model, 'lookup-1').length, 2);
  });

  it('shows the workers of an ended run as ended, except one that died', () => {
    const model = new RunsModel();
    model.setRuns([run()]);
    const workers = [worker('rollout', 0, 'ready', 2), worker('learner', 0, 'ready'), worker('learner', 1, 'dead')];
    model.applyEvent(event('lookup-1', { type: 'workers', data: { workers } }));
    model.applyEvent(event('lookup-1', status({ status: 'failed', step: 1, totalSteps: 4, message: 'learner died' })));
    assert.deepEqual(rows(model, 'lookup-1'), [
      'rollout worker 0: ended · 2 restarts · 10.0.0.7',
      'learner worker 0: ended · 10.0.0.7',
      'learner worker 1: dead · 10.0.0.7',
    ]);
  });

  it('follows the workers events a real run wrote whose rollout worker was killed (tests/test_cluster.py)', () => {
    const dir = join(__dirname, '..', '..', 'protocol', 'examples', 'run-logs');
    const lines = readFileSync(join(dir, `${RAY_KILLED}.events.jsonl`), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Omit<RunEventParams, 'runId'>);
    const model = new RunsModel();
    model.setRuns([run({ runId: RAY_KILLED })]); // running: its workers show their own states
    const seen = new Map<string, string[]>();
    for (const line of lines) {
      if (line.type !== 'workers' && line.type !== 'worker_restarted') continue;
      model.applyEvent({ ...line, runId: RAY_KILLED } as RunEventParams);
      for (const row of rows(model, RAY_KILLED)) {
        const [name, description] = row.split(': ');
        const states = seen.get(name) ?? [];
        const state = description.split(' · ')[0];
        if (states.at(-1) !== state) seen.set(name, [...states, state]);
      }
    }
    assert.deepEqual(Object.fromEntries(seen), {
      'rollout worker 0': ['starting', 'ready', 'restarting', 'ready'],
      'rollout worker 1': ['starting', 'ready'],
      'learner worker 0': ['starting', 'ready'],
    });
    assert.match(rows(model, RAY_KILLED)[0], /^rollout worker 0: ready · 1 restart · \d+\.\d+\.\d+\.\d+$/);
    assert.deepEqual(model.workerRestarts(RAY_KILLED), [
      'step 1: rollout worker 0 restarted; its 8 episodes ran on worker 1',
    ]);
  });
});

describe('RunsModel timeline (what the Run Dashboard draws from)', () => {
  it('keeps status, metrics and health events in the order they came, and leaves out trajectories and logs', () => {
    const model = new RunsModel();
    model.setRuns([run()]);
    const events = [
      event('lookup-1', status({ status: 'running', step: 0, totalSteps: 4, message: null })),
      event('lookup-1', { type: 'trajectory', data: summary(1, 0, 0, 1) }),
      event('lookup-1', { type: 'metrics', data: { step: 1, metrics: { 'reward/mean': 0.5 } } }),
      event('lookup-1', { type: 'log', data: { level: 'info', message: 'hello' } }),
      event('lookup-1', { type: 'health', data: health('no_tool_calls', 2) }),
    ];
    events.forEach((e) => model.applyEvent(e));
    assert.deepEqual(
      model.timeline('lookup-1').map((e) => e.type),
      ['status', 'metrics', 'health'],
    );
    model.setRuns([run()]); // a refreshed list keeps what was streamed
    assert.equal(model.timeline('lookup-1').length, 3);
    assert.deepEqual(model.timeline('unknown'), []);
  });
});

describe('RunsModel fed the stream a real server sent (protocol/examples/run-logs/*.run-events.jsonl)', () => {
  const recorded = (runId: string) => {
    const dir = join(__dirname, '..', '..', 'protocol', 'examples', 'run-logs');
    const events = readFileSync(join(dir, `${runId}.run-events.jsonl`), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as RunEventParams);
    const info = JSON.parse(readFileSync(join(dir, `${runId}.run-info.json`), 'utf8')) as RunInfo;
    return { events, info };
  };

  for (const runId of ['lookup-lr-high', 'lookup-lr-low']) {
    it(`${runId}: folding the stream from seq 1 ends where the server's run/get says the run is`, () => {
      const { events, info } = recorded(runId);
      const model = new RunsModel(() => Date.parse(info.createdAt!) + 5 * 60_000);
      model.setRuns([{ ...info, status: 'queued', step: 0, latestMetrics: {}, lastSeq: 0, hasCheckpoint: false }]);
      events.forEach((e) => model.applyEvent(e));
      assert.deepEqual(model.run(runId), info);
      const trajectories = events.filter((e) => e.type === 'trajectory');
      assert.equal(model.trajectories(runId).length, trajectories.length);
      const steps = new Set(model.trajectories(runId).map((t) => t.step));
      assert.equal(steps.size, info.totalSteps, 'trajectories of every step');
      const lastMetrics = events.filter((e) => e.type === 'metrics').at(-1)!;
      assert.equal(lastMetrics.type === 'metrics' && lastMetrics.data.step, info.step);
      assert.match(
        model.description({ kind: 'run', runId }),
        new RegExp(`^completed · ${info.step}/${info.totalSteps} · 5 min ago · reward `),
      );
      const inForce = new Map<string, boolean>();
      for (const e of events) if (e.type === 'health') inForce.set(e.data.code, !e.data.resolved);
      const checkpointed = new Set(events.flatMap((e) => (e.type === 'checkpoint' ? [e.data.step] : [])));
      assert.ok(checkpointed.size > 0, 'the recorded run wrote checkpoints');
      for (const node of model.children({ kind: 'run', runId })) {
        if (node.kind !== 'step') continue;
        assert.equal(model.hasCheckpointAt(runId, node.step), checkpointed.has(node.step), `step ${node.step}`);
        assert.equal(
          model.description(node).endsWith(' · checkpoint'),
          checkpointed.has(node.step),
          `step ${node.step}`,
        );
      }
      assert.deepEqual(
        model.healthAlerts(runId).map((a) => a.code),
        [...inForce].filter(([, active]) => active).map(([code]) => code),
      );
    });
  }
});
