import { strict as assert } from 'node:assert';
import type { HealthEvent } from '../../protocol/generated/rpc';
import { healthProblems } from '../../extension/healthProblems';

const CONFIG =
  'name: qa\nmodel:\n  path: smollm2\nrollout:\n  group_size: 4\n  temperature: 0.7\ntrain:\n  lr: 1.0e-5\n';

function alert(fields: Partial<HealthEvent>): HealthEvent {
  return {
    code: 'zero_variance_groups',
    severity: 'warning',
    resolved: false,
    step: 3,
    since_step: 2,
    message: 'All samples scored alike.',
    fix: 'raise rollout.temperature or rollout.group_size',
    metrics: {},
    trajectory_ids: ['3-0-0', '3-1-0'],
    ...fields,
  } as HealthEvent;
}

const at = (problem: { start: number; end: number }): string => CONFIG.slice(problem.start, problem.end);

describe('health alerts as problems on the run config', () => {
  it('sit on the first key the fix names that the config has, and say the step, the fix and the episodes', () => {
    const [problem] = healthProblems([alert({})], CONFIG);
    assert.equal(at(problem), 'temperature');
    assert.equal(problem.severity, 'warning');
    assert.equal(problem.step, 3);
    assert.equal(
      problem.message,
      'Step 3: All samples scored alike. Fix: raise rollout.temperature or rollout.group_size Episodes that show it: 3-0-0, 3-1-0.',
    );
  });

  it('fall back to the nearest section the config has, then to its name; an error alert is an error', () => {
    const [section, named] = healthProblems(
      [
        alert({ code: 'high_truncation', fix: 'raise rollout.max_new_tokens' }),
        alert({ code: 'non_finite', severity: 'error', fix: 'lower the learning rate', trajectory_ids: [] }),
      ],
      CONFIG,
    );
    assert.equal(at(section), 'rollout');
    assert.equal(at(named), 'name');
    assert.equal(named.severity, 'error');
    assert.doesNotMatch(named.message, /Episodes that show it/);
  });
});
