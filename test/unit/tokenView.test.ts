import { strict as assert } from 'node:assert';
import { packRows } from '../../webview/replay/tokenView';

describe('token rows', () => {
  it('wraps tokens as text wraps: a row ends before the token that would not fit, gaps counted', () => {
    // 30 + 2 + 30 + 2 + 30 = 94 fits in 100; the fourth would need 126
    assert.deepEqual(packRows([30, 30, 30, 30, 30], 100, 2), [0, 3]);
    assert.deepEqual(packRows([50, 48, 50], 100, 2), [0, 2], 'exactly full is full');
  });

  it('gives a token wider than a row a row of its own, and no tokens no rows', () => {
    assert.deepEqual(packRows([10, 140, 10], 100, 2), [0, 1, 2]);
    assert.deepEqual(packRows([], 100, 2), []);
  });
});
