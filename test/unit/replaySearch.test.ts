import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ErrorCode } from '../../protocol/generated/rpc';
import type { TrajectoryRecord } from '../../protocol/webview-messages';
import { relaySearch, SEARCH_PAGE, type SearchTrainer } from '../../extension/replay/search';
import { TrainerRequestError } from '../../extension/trainerClient';
import { ERROR_KINDS, HEALTH_CODES } from '../../webview/replay/searchBox';

const ROOT = join(__dirname, '..', '..');

function trainer(answer: () => unknown): SearchTrainer & { asked: unknown[]; fetched: string[][] } {
  const asked: unknown[] = [];
  const fetched: string[][] = [];
  return {
    asked,
    fetched,
    request: async (method, params) => {
      asked.push({ method, params });
      return answer() as never;
    },
    records: { get: async (_runId, ids) => (fetched.push(ids), ids.map((id) => ({ id }) as TrajectoryRecord)) },
  };
}

describe('the replay host: search', () => {
  it("asks trajectory/search for the replayed run's page in step order and answers with the page's records", async () => {
    const fake = trainer(() => ({
      items: [
        { runId: 'r', summary: { id: '1-0-0' } },
        { runId: 'r', summary: { id: '2-1-3' } },
      ],
      total: 7,
      nextCursor: '2',
    }));
    const reply = await relaySearch({ type: 'search', query: { text: 'paris' }, cursor: '5' }, 'r', fake);
    assert.deepEqual(fake.asked, [
      {
        method: 'trajectory/search',
        params: { text: 'paris', runIds: ['r'], sort: 'step', limit: SEARCH_PAGE, cursor: '5' },
      },
    ]);
    assert.deepEqual(fake.fetched, [['1-0-0', '2-1-3']]);
    assert.deepEqual(reply, {
      type: 'searchResults',
      query: { text: 'paris' },
      more: true,
      reply: { ok: true, records: [{ id: '1-0-0' }, { id: '2-1-3' }], total: 7, nextCursor: '2' },
    });
  });

  it('says why it could not search: no trainer, an older trainer, a refusal', async () => {
    const query = { type: 'search' as const, query: { tool: 'x' } };
    assert.match(((await relaySearch(query, 'r', undefined)).reply as { message: string }).message, /Not connected/);
    const older = trainer(() => {
      throw new TrainerRequestError('trajectory/search', ErrorCode.METHOD_NOT_FOUND, 'method not found');
    });
    assert.match(((await relaySearch(query, 'r', older)).reply as { message: string }).message, /older than/);
    const refused = trainer(() => {
      throw new TrainerRequestError('trajectory/search', ErrorCode.INVALID_PARAMS, 'text: give at least one word');
    });
    assert.deepEqual((await relaySearch(query, 'r', refused)).reply, {
      ok: false,
      message: 'text: give at least one word',
    });
  });

  it("says a run's index is being rebuilt, and how far, rather than show an empty page (issue #44)", async () => {
    const rebuilding = trainer(() => ({ items: [], total: 0, nextCursor: null, rebuilding: { done: 3, total: 12 } }));
    const reply = await relaySearch({ type: 'search', query: { text: 'paris' } }, 'r', rebuilding);
    assert.deepEqual(reply.reply, {
      ok: false,
      message:
        "The run's search index is being rebuilt (it was missing or damaged): 3 of 12 steps indexed. Search again in a moment.",
    });
    assert.deepEqual(rebuilding.fetched, []);
  });

  it('offers every error kind and health code the protocol declares, and no other', () => {
    const trajectory = JSON.parse(readFileSync(join(ROOT, 'protocol/schemas/trajectory.schema.json'), 'utf8'));
    const kinds = trajectory.$defs.toolCall.properties.error_kind.enum.filter((k: string | null) => k !== null);
    assert.deepEqual([...ERROR_KINDS].sort(), [...kinds].sort());
    const rpc = JSON.parse(readFileSync(join(ROOT, 'protocol/schemas/rpc.schema.json'), 'utf8'));
    const codes = rpc.$defs.healthCode.oneOf.map((c: { const: string }) => c.const);
    assert.deepEqual([...HEALTH_CODES].sort(), [...codes].sort());
  });
});
