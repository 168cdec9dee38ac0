// The trajectory records the editor has fetched, by run and id, so the replay panel and Try Environment's Tool
// problems never fetch the same record twice. Records are fetched many ids to a request (`trajectory/get`).
// Pure (no `vscode`): trainerConnection.ts owns one and feeds it the stream's trajectory events.
import type { TrajectoryRecord } from '../protocol/generated/trajectory';

/** The most ids one `trajectory/get` takes (rpc.schema.json, trajectory/get.params). */
export const MAX_IDS_PER_REQUEST = 1000;

export type FetchRecords = (runId: string, ids: string[]) => Promise<TrajectoryRecord[]>;

export class TrajectoryCache {
  private readonly runs = new Map<string, Map<string, TrajectoryRecord>>();

  constructor(private readonly fetchRecords: FetchRecords) {}

  /** The records of `ids`, in that order: cached ones at once, the others fetched (in as few requests as fit). */
  async get(runId: string, ids: string[]): Promise<TrajectoryRecord[]> {
    const cached = this.runs.get(runId) ?? new Map<string, TrajectoryRecord>();
    this.runs.set(runId, cached);
    const missing = [...new Set(ids.filter((id) => !cached.has(id)))];
    for (let start = 0; start < missing.length; start += MAX_IDS_PER_REQUEST) {
      for (const record of await this.fetchRecords(runId, missing.slice(start, start + MAX_IDS_PER_REQUEST))) {
        cached.set(record.id, record);
      }
    }
    return ids.map((id) => {
      const record = cached.get(id);
      if (!record) throw new Error(`run ${runId}: the trainer sent no trajectory ${id}`);
      return record;
    });
  }

  /** A resumed run writes a superseded id again: the next `get` fetches its new record. */
  forget(runId: string, id: string): void {
    this.runs.get(runId)?.delete(id);
  }

  clear(): void {
    this.runs.clear();
  }
}
