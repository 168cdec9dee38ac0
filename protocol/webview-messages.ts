// Messages between the replay panel's host (extension/replay/) and its webview (webview/replay/). Both sides import
// only this file, never each other. Every message says who sends it and why.
import type {
  EpisodeRerollParams,
  RerollEdit,
  RerollListResult,
  RerollRecords,
  RerollSummary,
  RunStatus,
  ToolRerunCode,
  ToolRerunResult,
  TrajectorySearchParams,
} from './generated/rpc';
import type { TrajectoryRecord } from './generated/trajectory';
import type { EpisodeSource } from './episode-sources';

export type {
  EpisodeSource,
  RerollEdit,
  RerollListResult,
  RerollRecords,
  RerollSummary,
  TrajectoryRecord,
  ToolRerunCode,
  ToolRerunResult,
};

/** Webview → host, once its listener is installed: "send me what to show". */
export interface ReadyMessage {
  type: 'ready';
}

/** Host → webview, answering `ready`: the trajectories of a file or of a run. `live` when more will follow;
 * `runStatus`, for a run, its status now (absent for a file); `focusStep`, the step to show first (the Run
 * Dashboard's click on a point): the group view of that step's first group; `focusId`, an episode to open first
 * (Search Episodes' pick); `searchable`, for a run on a connected trainer: its episodes can be searched (`search`);
 * `episodeSource`, where the run's episodes came from, when the host could read its config (a run's; a file's in a
 * run folder): an adapter's tool calls (env.gym, env.methods, env.openenv) offer no re-run. */
export interface LoadMessage {
  type: 'load';
  source: string;
  records: TrajectoryRecord[];
  live: boolean;
  runStatus?: RunStatus;
  focusStep?: number;
  focusId?: string;
  searchable?: boolean;
  episodeSource?: EpisodeSource;
}

/** What the run browser's search box asks: trajectory/search's filters, for the replay's run. */
export type EpisodeQuery = Omit<TrajectorySearchParams, 'runIds' | 'sort' | 'limit' | 'cursor'>;

/** Webview → host, from the search box: the run's episodes that match `query` (`cursor`: the next page of the
 * last answer). The trainer answers from the run's search index, never by scanning its trajectories. */
export interface SearchMessage {
  type: 'search';
  query: EpisodeQuery;
  cursor?: string;
}

/** Host → webview, answering `search`: a page of matching episodes in step order (their records), how many match
 * in all, and the cursor of the next page; or why it could not search, in words to show. */
export interface SearchResultsMessage {
  type: 'searchResults';
  query: EpisodeQuery;
  /** Whether this page follows the previous one (a `cursor` was sent) or starts the results anew. */
  more: boolean;
  reply:
    | { ok: true; records: TrajectoryRecord[]; total: number; nextCursor: string | null }
    | { ok: false; message: string };
}

/** Host → webview, during a live run: trajectories of a new step. */
export interface AppendMessage {
  type: 'append';
  records: TrajectoryRecord[];
}

/** Host → webview, when the followed run's status changes: it stops being live once it completes, stops or fails. */
export interface RunStatusMessage {
  type: 'runStatus';
  live: boolean;
  runStatus: RunStatus;
}

/** Webview → host, from a tool call: open that Tool's source in the editor. */
export interface OpenToolSourceMessage {
  type: 'openToolSource';
  toolName: string;
}

/** Which recorded tool call: the trajectory's run, its id, the turn's index and the call's index in that turn. */
export interface ToolCallAddress {
  runId: string;
  trajectoryId: string;
  turn: number;
  call: number;
}

/** Webview → host, from a tool call's "Re-run with current code" (`code: 'current'`) or "Re-run with the run's code"
 * (`'snapshot'`: the files the run recorded when it started): run it again through the trainer (`tool/rerun`). It
 * names the call only: the trainer reads the tool and its arguments from the run's trajectory. */
export interface RerunToolCallMessage extends ToolCallAddress {
  type: 'rerunToolCall';
  code: ToolRerunCode;
}

/** Host → webview, answering `rerunToolCall`: the recorded and the new outcome, or why it did not run (an untrusted
 * workspace, no trainer connected, the trainer's refusal or error), in words to show as they are; `code` as asked. */
export interface ToolRerunMessage extends ToolCallAddress {
  type: 'toolRerun';
  code: ToolRerunCode;
  reply: Reply<ToolRerunResult>;
}

/** A trainer's answer relayed by the host, or why there is none (an untrusted workspace, no trainer connected, the
 * trainer's refusal or error), in words to show as they are. */
export type Reply<T> = { ok: true; result: T } | { ok: false; message: string };

/** Which recorded episode a re-roll message is about: the trajectory's run and its id. */
export interface EpisodeAddress {
  runId: string;
  trajectoryId: string;
}

/** Webview → host, when "Edit and re-roll from here" opens on an episode: the run's stored re-rolls of it and the
 * policies a new one may pick (`reroll/list`). Reading runs no code: answered in untrusted workspaces too. */
export interface ListRerollsMessage extends EpisodeAddress {
  type: 'listRerolls';
}

/** Host → webview, answering `listRerolls`. */
export interface RerollsMessage extends EpisodeAddress {
  type: 'rerolls';
  reply: Reply<RerollListResult>;
}

/** Webview → host, from the re-roll form: `episode/reroll` with these params (the host adds its progress token). It
 * runs the env's code on the trainer: refused in an untrusted workspace. */
export interface RerollEpisodeMessage {
  type: 'rerollEpisode';
  params: Omit<EpisodeRerollParams, 'progressToken'>;
}

/** Host → webview, while the re-roll it relays runs: where the trainer says it stands. */
export interface RerollProgressMessage extends EpisodeAddress {
  type: 'rerollProgress';
  message: string;
}

/** Webview → host, from the list of stored re-rolls: that one, whole (`reroll/get`). */
export interface OpenRerollMessage extends EpisodeAddress {
  type: 'openReroll';
  rerollId: string;
}

/** Host → webview, answering `rerollEpisode` and `openReroll`: the re-roll with its samples' trajectory records. */
export interface RerollMessage extends EpisodeAddress {
  type: 'reroll';
  reply: Reply<RerollRecords>;
}

/** Webview → host, from an episode of the list ("Add to Training Set", `fromTurn` 0), a turn of the episode view
 * ("Add to Training Set from This Turn", that turn's index) or the group view ("Add Group to Training Set": its
 * episodes, `fromTurn` 0): append these records (the page's own, as the host sent them: the host keeps no copy of
 * what it showed) to a training set the user picks (protocol/schemas/training-set.schema.json); the host says how it
 * went. */
export interface AddToTrainingSetMessage {
  type: 'addToTrainingSet';
  records: TrajectoryRecord[];
  fromTurn: number;
}

export type HostToWebviewMessage =
  | LoadMessage
  | AppendMessage
  | RunStatusMessage
  | ToolRerunMessage
  | SearchResultsMessage
  | RerollsMessage
  | RerollProgressMessage
  | RerollMessage;
export type WebviewToHostMessage =
  | ReadyMessage
  | OpenToolSourceMessage
  | RerunToolCallMessage
  | SearchMessage
  | ListRerollsMessage
  | RerollEpisodeMessage
  | OpenRerollMessage
  | AddToTrainingSetMessage;
