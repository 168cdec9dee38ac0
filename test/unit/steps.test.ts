import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { TrajectoryRecord } from '../../protocol/webview-messages';
import { buildSteps, hasZeroVariance, nextStep } from '../../webview/replay/steps';

const records = readFileSync(
  join(resolve(__dirname, '..', '..'), 'protocol', 'examples', 'trajectories', 'tool-errors.trajectories.jsonl'),
  'utf8',
)
  .split('\n')
  .filter(Boolean)
  .map((l) => JSON.parse(l) as TrajectoryRecord);

describe('episode steps', () => {
  it('lists prompt, turns, each tool call, observations and the reward in order', () => {
    const steps = buildSteps(records[0]);
    assert.equal(steps[0].kind, 'prompt');
    assert.equal(steps.at(-1)!.kind, 'reward');
    const calls = steps.filter((s) => s.kind === 'tool');
    assert.equal(calls.length, records[0].stats.num_tool_calls);
    assert.equal(calls.filter((s) => s.status === 'error').length, records[0].stats.num_tool_errors);
  });

  it('jumps to the next match and wraps around', () => {
    const steps = buildSteps(records[0]);
    const firstTool = nextStep(steps, 0, 'tool');
    assert.equal(steps[firstTool].kind, 'tool');
    const firstError = nextStep(steps, 0, 'error');
    assert.equal(steps[firstError].status, 'error');
    assert.equal(nextStep(steps, steps.length - 1, 'tool'), firstTool);
  });

  it('marks a truncated episode and a zero-variance group', () => {
    assert.equal(buildSteps(records[1]).at(-1)!.status, 'truncated');
    assert.equal(hasZeroVariance([records[0], { ...records[1], reward: records[0].reward }]), true);
    assert.equal(hasZeroVariance([records[0]]), false);
  });
});
