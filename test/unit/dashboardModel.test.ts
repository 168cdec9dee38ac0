import { strict as assert } from 'node:assert';
import type { DashboardEvent } from '../../protocol/dashboard-messages';
import { buildChartData, latestPoints } from '../../webview/dashboard/chartData';
import { configDiff } from '../../webview/dashboard/configDiff';
import { chartSpecs, metricGroup, metricUnit } from '../../webview/dashboard/metricGroups';
import { RunTimeline } from '../../webview/dashboard/runTimeline';
import { ema } from '../../webview/dashboard/smoothing';
import { runFixture } from '../browser/harness';

const metrics = (seq: number, step: number, values: Record<string, number>): DashboardEvent => ({
  seq,
  time: 1000 + step * 10,
  type: 'metrics',
  data: { step, metrics: values },
});
const status = (seq: number, step: number, superseded_from_seq?: number): DashboardEvent => ({
  seq,
  time: 1000 + seq,
  type: 'status',
  data: { status: 'running', step, total_steps: 10, ...(superseded_from_seq ? { superseded_from_seq } : {}) },
});
const health = (seq: number, step: number, code = 'zero_variance_groups'): DashboardEvent => ({
  seq,
  time: 1000 + seq,
  type: 'health',
  data: { code, resolved: false, step, since_step: step - 1, message: 'm', fix: 'f', metrics: {} },
});
const steps = (timeline: RunTimeline, name: string) => timeline.metrics.get(name)?.steps;
const values = (timeline: RunTimeline, name: string) => timeline.metrics.get(name)?.values;

describe('Run Dashboard data model', () => {
  describe('RunTimeline: merging the event stream', () => {
    it('folds metrics into one series per name, in step order', () => {
      const t = new RunTimeline();
      assert.equal(
        t.apply([
          status(1, 0),
          metrics(2, 1, { 'reward/mean': 0.1, 'loss/policy': 2 }),
          metrics(3, 2, { 'reward/mean': 0.3 }),
        ]),
        true,
      );
      assert.deepEqual(steps(t, 'reward/mean'), [1, 2]);
      assert.deepEqual(values(t, 'reward/mean'), [0.1, 0.3]);
      assert.deepEqual(steps(t, 'loss/policy'), [1]);
      assert.equal(t.latestStep, 2);
      assert.equal(t.startTime, 1001);
    });

    it('keeps one event per seq: the history re-sent after live events (a reload, a reconnect) changes nothing', () => {
      const t = new RunTimeline();
      const history = [status(1, 0), metrics(2, 1, { 'reward/mean': 0.1 }), health(3, 1)];
      t.apply(history);
      t.apply([metrics(4, 2, { 'reward/mean': 0.2 })]);
      assert.equal(t.apply([...history, metrics(4, 2, { 'reward/mean': 0.2 })]), false);
      assert.deepEqual(values(t, 'reward/mean'), [0.1, 0.2]);
      assert.equal(t.health.length, 1);
    });

    it('fills a gap that arrives late in seq order', () => {
      const t = new RunTimeline();
      t.apply([metrics(1, 1, { a: 1 }), metrics(3, 3, { a: 3 })]);
      t.apply([metrics(2, 2, { a: 2 })]);
      assert.deepEqual(steps(t, 'a'), [1, 2, 3]);
      assert.deepEqual(values(t, 'a'), [1, 2, 3]);
    });

    it('forgets what a resume superseded: the steps after the checkpoint are drawn once, from the resumed process', () => {
      const t = new RunTimeline();
      t.apply([status(1, 0), metrics(2, 1, { a: 1 }), metrics(3, 2, { a: 2 }), health(4, 3), metrics(5, 3, { a: 3 })]);
      // checkpoint after step 2 (seq 3): seq 4 and 5 are superseded by the resumed process
      t.apply([status(6, 2, 4), metrics(7, 3, { a: 30 }), metrics(8, 4, { a: 40 })]);
      assert.deepEqual(steps(t, 'a'), [1, 2, 3, 4]);
      assert.deepEqual(values(t, 'a'), [1, 2, 30, 40]);
      assert.equal(t.health.length, 0);
      assert.equal(t.status?.step, 2);
    });

    it('keeps health alerts of any code, with the optional fields newer trainers send', () => {
      const t = new RunTimeline();
      const alert: DashboardEvent = {
        seq: 1,
        time: 1,
        type: 'health',
        data: {
          code: 'reward_hacking',
          resolved: false,
          step: 4,
          since_step: 3,
          message: 'm',
          fix: 'f',
          metrics: {},
          severity: 'error',
          trajectory_ids: ['4-0-1'],
        },
      };
      t.apply([alert, health(2, 5)]);
      assert.deepEqual(
        t.health.map((h) => h.alert.code),
        ['reward_hacking', 'zero_variance_groups'],
      );
      assert.equal(t.health[0].alert.severity, 'error');
    });

    it('folds a recorded run: every metrics event of its log, up to its last step', () => {
      const { events } = runFixture('lookup-lr-high');
      const t = new RunTimeline();
      t.apply(events);
      const metricEvents = events.filter((e) => e.type === 'metrics');
      const last = metricEvents[metricEvents.length - 1];
      assert.equal(t.latestStep, last.data.step);
      for (const [name, value] of Object.entries(last.data.metrics)) assert.equal(values(t, name)?.at(-1), value);
      assert.equal(t.status?.status, 'completed');
      const recorded = events.filter((e) => e.type === 'health').map((e) => e.data.code);
      assert.ok(recorded.length > 0, 'the recorded run raised health alerts');
      assert.deepEqual(t.health.map((h) => h.alert.code).sort(), recorded.sort());
    });
  });

  describe('grouping', () => {
    it('puts a metric in the group its prefix names, tools/* in tool, unknown prefixes in other', () => {
      assert.equal(metricGroup('reward/answered'), 'reward');
      assert.equal(metricGroup('tools/lookup/failure_rate'), 'tool');
      assert.equal(metricGroup('adv/std'), 'adv');
      assert.equal(metricGroup('steps/anchor_group_size_mean'), 'steps');
      assert.equal(metricGroup('episode/turns_mean'), 'other');
      assert.equal(metricGroup('novel'), 'other');
    });

    it('gives metrics of different units their own chart, groups in a fixed order', () => {
      assert.equal(metricUnit('perf/step_time_s'), 'seconds');
      assert.equal(metricUnit('perf/rollout_tokens_per_s'), 'per second');
      assert.equal(metricUnit('perf/peak_memory_mb'), 'MB');
      assert.equal(metricUnit('tools/calc/failure_rate'), 'fraction');
      assert.equal(metricUnit('reward/mean'), '');
      const specs = chartSpecs([
        'perf/step_time_s',
        'reward/mean',
        'perf/train_time_s',
        'tools/calc/failure_rate',
        'tools/calls',
        'episode/turns_mean',
        'reward/answered',
      ]);
      assert.deepEqual(
        specs.map((s) => s.title),
        ['reward', 'tool', 'tool (fraction)', 'perf (seconds)', 'other'],
      );
      assert.deepEqual(specs[0].metrics, ['reward/answered', 'reward/mean']);
      assert.deepEqual(specs[3].metrics, ['perf/step_time_s', 'perf/train_time_s']);
    });

    it("charts the trainer's per-step metrics in a steps group after adv, its shares and rates on a 0-1 axis", () => {
      const specs = chartSpecs([
        'tools/calls',
        'steps/multi_call_share',
        'steps/calls_max',
        'steps/retry_rate',
        'steps/state_changes_mean',
        'steps/anchor_group_size_mean',
        'steps/advantage_spread',
        'adv/std',
      ]);
      assert.deepEqual(
        specs.map((s) => [s.title, s.metrics]),
        [
          ['adv', ['adv/std']],
          [
            'steps',
            ['steps/advantage_spread', 'steps/anchor_group_size_mean', 'steps/calls_max', 'steps/state_changes_mean'],
          ],
          ['steps (fraction)', ['steps/multi_call_share', 'steps/retry_rate']],
          ['tool', ['tools/calls']],
        ],
      );
    });
  });

  describe('smoothing', () => {
    it('is a debiased EMA: weight 0 is the data, a constant stays constant, a step is approached', () => {
      assert.deepEqual(ema([1, 2, 3], 0), [1, 2, 3]);
      assert.deepEqual(
        ema([5, 5, 5], 0.9).map((v) => Number(v.toFixed(9))),
        [5, 5, 5],
      );
      const smoothed = ema([0, 1, 1, 1], 0.5);
      assert.equal(smoothed[0], 0);
      assert.ok(smoothed[1] > 0.6 && smoothed[1] < 0.7); // (0.5 * 0.5 + 0.5) / 0.75 = 0.667
      assert.ok(smoothed[3] > smoothed[2] && smoothed[3] < 1);
      assert.ok(Number.isNaN(ema([1, Number.NaN, 1], 0.5)[1]));
    });
  });

  describe('chart data', () => {
    it("aligns runs of different steps on one x axis, null where a run has no point, and remembers each point's step", () => {
      const a = new RunTimeline();
      a.apply([metrics(1, 1, { 'reward/mean': 1 }), metrics(2, 2, { 'reward/mean': 2 })]);
      const b = new RunTimeline();
      b.apply([metrics(1, 2, { 'reward/mean': 20 }), metrics(2, 3, { 'reward/mean': 30 })]);
      const data = buildChartData(
        ['reward/mean'],
        [
          { name: 'a', timeline: a },
          { name: 'b', timeline: b },
        ],
        'step',
        0,
      );
      assert.deepEqual(data.x, [1, 2, 3]);
      assert.deepEqual(data.ys, [
        [1, 2, null],
        [null, 20, 30],
      ]);
      assert.deepEqual(
        data.series.map((s) => s.label),
        ['reward/mean · a', 'reward/mean · b'],
      );
      assert.deepEqual(
        latestPoints(
          ['reward/mean'],
          [
            { name: 'a', timeline: a },
            { name: 'b', timeline: b },
          ],
        ).map(({ step, value }) => ({ step, value })),
        [
          { step: 2, value: 2 },
          { step: 3, value: 30 },
        ],
      );
      const byTime = buildChartData(['reward/mean'], [{ name: 'a', timeline: a }], 'time', 0);
      assert.deepEqual(byTime.x, [0, 10]); // seconds since the run's first event
      assert.deepEqual(byTime.steps, [[1, 2]]);
    });

    it("smooths each run's own series, leaving the latest values unsmoothed", () => {
      const t = new RunTimeline();
      t.apply([metrics(1, 1, { x: 0 }), metrics(2, 2, { x: 1 })]);
      const data = buildChartData(['x'], [{ name: 'a', timeline: t }], 'step', 0.5);
      assert.ok((data.ys[0][1] as number) < 1);
      assert.deepEqual(
        latestPoints(['x'], [{ name: 'a', timeline: t }]).map(({ step, value }) => ({ step, value })),
        [{ step: 2, value: 1 }],
      );
    });
  });

  describe('config diff', () => {
    it('lists every key whose value differs, by dotted path, with absent keys', () => {
      const differences = configDiff(
        { name: 'a', train: { lr: 0.01, steps: 10 }, rollout: { group_size: 8 }, tags: [1] },
        { name: 'b', train: { lr: 0.001, steps: 10 }, rollout: { group_size: 8, temperature: 1 }, tags: [1] },
      );
      assert.deepEqual(differences, [
        { key: 'name', base: '"a"', other: '"b"' },
        { key: 'rollout.temperature', base: undefined, other: '1' },
        { key: 'train.lr', base: '0.01', other: '0.001' },
      ]);
    });

    it('finds what the recorded runs were made to differ in', () => {
      const keys = configDiff(runFixture('lookup-lr-high').run.config!, runFixture('lookup-lr-low').run.config!).map(
        (d) => d.key,
      );
      assert.deepEqual(keys, ['rollout.group_size', 'train.batch_size', 'train.lr']);
    });
  });
});
