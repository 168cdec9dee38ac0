import { strict as assert } from 'node:assert';
import { forgetSupersededEvents } from '../../protocol/superseded-events';

describe('the resume rule both readers of run events share', () => {
  const kept = () => new Map([2, 3, 4, 5, 6].map((seq) => [seq, `event ${seq}`]));

  it("forgets the events from the resumed run's superseded_from_seq up to its status event", () => {
    const bySeq = kept();
    assert.equal(forgetSupersededEvents(bySeq, { seq: 6, data: { superseded_from_seq: 4 } }), true);
    assert.deepEqual([...bySeq.keys()], [2, 3, 6]);
  });

  it('leaves everything to a status event that is not a resume', () => {
    const bySeq = kept();
    assert.equal(forgetSupersededEvents(bySeq, { seq: 6, data: {} }), false);
    assert.deepEqual([...bySeq.keys()], [2, 3, 4, 5, 6]);
  });
});
