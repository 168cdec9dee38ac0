import { strict as assert } from 'node:assert';
import type { TrajectoryRecord } from '../../protocol/generated/trajectory';
import { MAX_IDS_PER_REQUEST, TrajectoryCache } from '../../extension/trajectoryCache';

function counted(): { cache: TrajectoryCache; requests: string[][] } {
  const requests: string[][] = [];
  const cache = new TrajectoryCache(async (runId, ids) => {
    requests.push(ids);
    return ids.map((id) => ({ id, run_id: runId, reward: requests.length }) as unknown as TrajectoryRecord);
  });
  return { cache, requests };
}

describe('trajectory records, fetched once', () => {
  it('fetches only what it has not seen, many ids a request, and answers in the order asked', async () => {
    const { cache, requests } = counted();
    assert.deepEqual(
      (await cache.get('r', ['1-0-0', '1-1-0'])).map((r) => r.id),
      ['1-0-0', '1-1-0'],
    );
    assert.deepEqual(
      (await cache.get('r', ['1-1-0', '2-0-0', '1-0-0'])).map((r) => r.id),
      ['1-1-0', '2-0-0', '1-0-0'],
    );
    assert.deepEqual(requests, [['1-0-0', '1-1-0'], ['2-0-0']]);
    const many = Array.from({ length: MAX_IDS_PER_REQUEST + 5 }, (_, i) => `3-${i}-0`);
    await cache.get('r', many);
    assert.deepEqual(
      requests.slice(2).map((ids) => ids.length),
      [MAX_IDS_PER_REQUEST, 5],
    );
  });

  it('fetches again what a resumed run wrote again, and nothing after a clear is kept', async () => {
    const { cache, requests } = counted();
    await cache.get('r', ['1-0-0']);
    cache.forget('r', '1-0-0');
    assert.equal((await cache.get('r', ['1-0-0']))[0].reward, 2);
    cache.clear();
    await cache.get('r', ['1-0-0']);
    assert.equal(requests.length, 3);
  });
});
