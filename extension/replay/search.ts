// The replay host's relay for the run browser's search box: a webview's `search` becomes the trainer's
// `trajectory/search` over the replayed run, and the matching page comes back as records (through the connection's
// record cache: those the panel already holds are not fetched again). No `vscode` import: the trainer is injected.
import { ErrorCode, type RpcMethods } from '../../protocol/generated/rpc';
import type { SearchMessage, SearchResultsMessage, TrajectoryRecord } from '../../protocol/webview-messages';
import { TrainerRequestError } from '../trainerClient';

/** Episodes a page of results holds: the records of a page travel into the panel whole. */
export const SEARCH_PAGE = 200;

/** What trajectory/search says while a run's search index is built anew (deleted, or found damaged and moved aside):
 *  it lists nothing until then, rather than part of the run. */
export function rebuildingMessage(rebuilding: { done: number; total: number }): string {
  return (
    `The run's search index is being rebuilt (it was missing or damaged): ${rebuilding.done} of ` +
    `${rebuilding.total} steps indexed. Search again in a moment.`
  );
}

/** The part of a trainer connection the search uses. */
export interface SearchTrainer {
  request<M extends keyof RpcMethods>(method: M, params: RpcMethods[M]['params']): Promise<RpcMethods[M]['result']>;
  readonly records: { get(runId: string, ids: string[]): Promise<TrajectoryRecord[]> };
}

export async function relaySearch(
  message: SearchMessage,
  runId: string,
  trainer: SearchTrainer | undefined,
): Promise<SearchResultsMessage> {
  const answer = (reply: SearchResultsMessage['reply']): SearchResultsMessage => ({
    type: 'searchResults',
    query: message.query,
    more: message.cursor !== undefined,
    reply,
  });
  if (!trainer) return answer({ ok: false, message: 'Not connected to a trainer server: connect to search the run.' });
  try {
    const page = await trainer.request('trajectory/search', {
      ...message.query,
      runIds: [runId],
      sort: 'step',
      limit: SEARCH_PAGE,
      ...(message.cursor ? { cursor: message.cursor } : {}),
    });
    if (page.rebuilding) return answer({ ok: false, message: rebuildingMessage(page.rebuilding) });
    const records = await trainer.records.get(
      runId,
      page.items.map((item) => item.summary.id),
    );
    return answer({ ok: true, records, total: page.total, nextCursor: page.nextCursor });
  } catch (err) {
    const older = err instanceof TrainerRequestError && err.code === ErrorCode.METHOD_NOT_FOUND;
    return answer({
      ok: false,
      message: older
        ? 'The connected trainer server is older than trajectory/search; update agentrl on it to search episodes.'
        : (err as Error).message,
    });
  }
}
