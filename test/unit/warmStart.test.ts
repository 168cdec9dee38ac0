import { strict as assert } from 'node:assert';
import { parse } from 'yaml';
import { parseSearchQuery } from '../../extension/searchQuery';
import { warmStartConfig, whereOf } from '../../extension/warmStart';

const frozen = {
  name: 'lookup',
  env: { module: '/ws/env.py', class_name: 'LookupEnv' },
  agent: null,
  data: { train: '/ws/tasks.jsonl', eval: null, sft: [] },
  algorithm: { name: 'grpo', policy_loss: 'clipped' },
  train: { steps: 30, sft_steps: 0, lr: 1e-5 },
};

describe('Warm-start from these', () => {
  it("writes Search Episodes' filters as the run config's where, in its snake_case keys", () => {
    assert.deepEqual(whereOf(parseSearchQuery('paris tool:search error:timeout reward>=1 health:no_tool_calls')), {
      text: 'paris',
      tool: 'search',
      error_kind: 'timeout',
      reward: { min: 1 },
      health_code: 'no_tool_calls',
    });
  });

  it("makes the searched run's frozen config sft on the picked episodes for a few steps, then its algorithm", () => {
    const text = warmStartConfig(frozen, '/ws/.agentrl/runs/lookup-1', parseSearchQuery('reward>=1 tool:lookup'), 12);
    assert.match(text, /^# Warm-start from 12 episode\(s\) of \/ws\/.agentrl\/runs\/lookup-1 that pass /);
    const config = parse(text);
    assert.equal(config.name, 'lookup-warm-start');
    assert.deepEqual(config.data.sft, [
      { run: '/ws/.agentrl/runs/lookup-1', where: { reward: { min: 1 }, tool: 'lookup' } },
    ]);
    assert.deepEqual(config.train, { steps: 30, sft_steps: 5, lr: 1e-5 });
    assert.deepEqual(config.algorithm, { name: 'grpo', policy_loss: 'clipped' });
    assert.equal(config.data.train, '/ws/tasks.jsonl');
    assert.deepEqual(frozen.data.sft, []); // the run's own config is left as it was
  });

  it('goes on with grpo after a run that was all sft, and leaves a step for it after a short one', () => {
    const config = parse(
      warmStartConfig(
        { ...frozen, algorithm: { name: 'sft', policy_loss: 'nll' }, train: { steps: 1 } },
        '/runs/r',
        {},
        3,
      ),
    );
    assert.deepEqual(config.algorithm, { name: 'grpo', policy_loss: 'clipped' });
    assert.deepEqual(config.train, { steps: 2, sft_steps: 1 });
    assert.deepEqual(config.data.sft, [{ run: '/runs/r', where: {} }]);
  });
});
