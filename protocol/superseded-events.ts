// The protocol's resume rule (README.md, "The run folder"), written once for every reader of a run's events: the
// Runs model in the extension host and the Run Dashboard in the webview. A resumed run goes on from its latest
// checkpoint and re-emits what came after it, so its first status event names the first superseded seq; the events
// from there up to that status event no longer stand.
import type { StatusEvent } from './generated/rpc';

/** Deletes from `bySeq` (a reader's events, or what it folded from them, keyed by seq) the entries `event`
 *  supersedes when it is a resumed run's status event; says whether it is one (what was folded must be redone). */
export function forgetSupersededEvents<T>(
  bySeq: Map<number, T>,
  event: { seq: number; data: Pick<StatusEvent, 'superseded_from_seq'> },
): boolean {
  const from = event.data.superseded_from_seq;
  if (from === undefined) return false;
  for (const seq of [...bySeq.keys()]) if (seq >= from && seq < event.seq) bySeq.delete(seq);
  return true;
}
