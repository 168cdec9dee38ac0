// The replay host's relays for "Edit and re-roll from here": a webview's `rerollEpisode` becomes the trainer's
// `episode/reroll`, its progress relayed as the trainer reports it; `listRerolls` and `openReroll` read the stored
// re-rolls (`reroll/list`, `reroll/get`). Every way one can fail becomes words the panel shows. No `vscode` import: the
// workspace's trust and the trainer are injected, so the relays are tested without an editor.
import type { EpisodeRerollProgressParams, RpcMethods } from '../../protocol/generated/rpc';
import type {
  ListRerollsMessage,
  OpenRerollMessage,
  RerollEpisodeMessage,
  RerollMessage,
  RerollProgressMessage,
  RerollsMessage,
  Reply,
} from '../../protocol/webview-messages';
import { describeFailure, type ReplayTrainer } from './toolRerun';

/** The trainer gives a re-roll 30 minutes (REROLL_TIMEOUT_S, server/reroll.py), then answers why it ended it. */
export const REROLL_TIMEOUT_MS = 32 * 60_000;

export const REROLL_UNTRUSTED_MESSAGE =
  "Re-rolling an episode runs its run's Tools and ToolEnv on the trainer, and this workspace is not trusted. " +
  'Trust the workspace (Manage Workspace Trust) to re-roll; replaying and opening stored re-rolls work without trust.';
export const REROLL_NOT_CONNECTED_MESSAGE =
  'Not connected to a trainer server: run "Agent RL: Start Local Server" or "Agent RL: Connect to Server" (the ' +
  "server that has this episode's run), then re-roll.";

/** The part of a trainer connection the re-roll relay uses: requests, and the progress notifications. */
export interface RerollTrainer extends ReplayTrainer {
  onRerollProgress(listener: (progress: EpisodeRerollProgressParams) => void): { dispose(): void };
}

export interface RerollDeps {
  /** vscode.workspace.isTrusted: a re-roll executes the env's code. */
  isTrusted: () => boolean;
  /** The connected trainer, else undefined. */
  trainer: () => RerollTrainer | undefined;
}

/** Each re-roll's progress token, unique on this connection (the server sends a token's progress to its asker only). */
let progressTokens = 0;

export async function relayReroll(
  message: RerollEpisodeMessage,
  deps: RerollDeps,
  progress: (message: RerollProgressMessage) => void,
): Promise<RerollMessage> {
  const address = { runId: message.params.runId, trajectoryId: message.params.trajectoryId };
  if (!deps.isTrusted()) return { type: 'reroll', ...address, reply: { ok: false, message: REROLL_UNTRUSTED_MESSAGE } };
  const trainer = deps.trainer();
  const progressToken = `reroll-${++progressTokens}`;
  const listening = trainer?.onRerollProgress((said) => {
    if (said.progressToken === progressToken) progress({ type: 'rerollProgress', ...address, message: said.message });
  });
  try {
    const params = { ...message.params, progressToken };
    return { type: 'reroll', ...address, reply: await ask(trainer, 'episode/reroll', params, REROLL_TIMEOUT_MS) };
  } finally {
    listening?.dispose();
  }
}

/** The run's stored re-rolls of the episode, its checkpoints and its temperature: reading, allowed without trust. */
export async function relayRerollList(
  message: ListRerollsMessage,
  trainer: ReplayTrainer | undefined,
): Promise<RerollsMessage> {
  const address = { runId: message.runId, trajectoryId: message.trajectoryId };
  return { type: 'rerolls', ...address, reply: await ask(trainer, 'reroll/list', address) };
}

/** A stored re-roll, whole: reading, allowed without trust. */
export async function relayRerollGet(
  message: OpenRerollMessage,
  trainer: ReplayTrainer | undefined,
): Promise<RerollMessage> {
  const address = { runId: message.runId, trajectoryId: message.trajectoryId };
  const params = { runId: message.runId, rerollId: message.rerollId };
  return { type: 'reroll', ...address, reply: await ask(trainer, 'reroll/get', params) };
}

/** `method`'s answer from the trainer, or why there is none, in words. */
async function ask<M extends keyof RpcMethods>(
  trainer: ReplayTrainer | undefined,
  method: M,
  params: RpcMethods[M]['params'],
  timeoutMs?: number,
): Promise<Reply<RpcMethods[M]['result']>> {
  if (!trainer) return { ok: false, message: REROLL_NOT_CONNECTED_MESSAGE };
  try {
    return { ok: true, result: await trainer.request(method, params, timeoutMs) };
  } catch (err) {
    return { ok: false, message: describeFailure(err as Error, method, 're-roll episodes') };
  }
}
