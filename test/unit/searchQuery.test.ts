import { strict as assert } from 'node:assert';
import { parseSearchQuery } from '../../extension/searchQuery';

describe('Search Episodes: the query line', () => {
  it('reads words and phrases, and every filter in any order', () => {
    assert.deepEqual(
      parseSearchQuery(
        'tool:search "capital of" paris error:timeout reward>=0.5 reward<=1 turns>=2 status:error health:logprob_gap step<=40',
      ),
      {
        text: '"capital of" paris',
        tool: 'search',
        errorKind: 'timeout',
        reward: { min: 0.5, max: 1 },
        turns: { min: 2 },
        status: 'error',
        healthCode: 'logprob_gap',
        step: { max: 40 },
      },
    );
    assert.deepEqual(parseSearchQuery('   '), {});
  });

  it('names the part it cannot read and what it expected', () => {
    assert.throws(() => parseSearchQuery('status:done'), /status:done: a status is finished, truncated, error/);
    assert.throws(() => parseSearchQuery('turns>=1.5'), /turns>=1.5: turns is a whole number/);
    assert.throws(() => parseSearchQuery('reward>=x'), /reward>=x: write tool:NAME/);
    assert.throws(() => parseSearchQuery('tool:'), /tool:: write tool:NAME/);
  });
});
