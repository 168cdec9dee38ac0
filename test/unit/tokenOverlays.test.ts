import { strict as assert } from 'node:assert';
import type { TrajectoryRecord } from '../../protocol/webview-messages';
import { availableOverlays, largestMismatches, mismatch, OVERLAYS } from '../../webview/replay/tokenOverlays';

function record(id: string, tokens: Partial<TrajectoryRecord['tokens']>): TrajectoryRecord {
  const base = { ids: [1, 2, 3], text: ['a', 'b', 'c'], logprob: [null, -1, -2], advantage: [null, 0.5, -0.5] };
  return { id, tokens: { ...base, ...tokens } } as unknown as TrajectoryRecord;
}

describe('token overlays', () => {
  it('offers only what the episode carries: the advantage always, the learner figures on a training step', () => {
    assert.deepEqual(availableOverlays(record('try', {})), ['advantage']);
    const trained = record('t', { trainer_logprob: [-1.1, -2], entropy: [0.3, 2] });
    assert.deepEqual(availableOverlays(trained), ['advantage', 'mismatch', 'entropy']);
    assert.deepEqual(availableOverlays(record('w', { trainer_logprob: [], entropy: [], is_weight: [] })), [
      'advantage',
      'mismatch',
      'entropy',
      'is_weight',
    ]);
  });

  it('reads the learner figures one per sampled token: trainer minus rollout logprob, the weight minus 1', () => {
    // tokens 1 and 2 were sampled (they have a rollout logprob); token 2's row was skipped by the update
    const tokens = record('t', { trainer_logprob: [-1.25, null], is_weight: [0.75, null] }).tokens;
    assert.deepEqual(
      [0, 1, 2].map((i) => mismatch(tokens, i)),
      [null, -0.25, null],
    );
    assert.equal(OVERLAYS.is_weight.value(tokens, 1), -0.25);
    assert.equal(OVERLAYS.is_weight.value(tokens, 0), null);
  });

  it("lists a step's largest mismatches over its episodes, by size whatever the sign", () => {
    const found = largestMismatches(
      [
        record('a', { trainer_logprob: [-0.9, -2.05] }),
        record('b', { trainer_logprob: [-1.5, -2] }),
        record('try', {}),
      ],
      2,
    );
    assert.deepEqual(
      found.map((m) => [m.recordId, m.index, m.text, Number(m.gap.toFixed(2))]),
      [
        ['b', 1, 'b', -0.5],
        ['a', 1, 'b', 0.1],
      ],
    );
  });
});
