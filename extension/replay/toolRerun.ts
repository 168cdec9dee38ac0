// The replay host's relay for "Re-run with current code" and "Re-run with the run's code": a webview's
// `rerunToolCall` becomes the trainer's `tool/rerun`, and every way it can fail becomes words the panel shows
// (describeFailure, which the re-roll's relays share: reroll.ts). No `vscode` import: the workspace's trust
// and the trainer are injected, so the relay is tested without an editor.
import { ErrorCode, type RpcMethods } from '../../protocol/generated/rpc';
import type { RerunToolCallMessage, ToolRerunMessage } from '../../protocol/webview-messages';
import { TrainerRequestError } from '../trainerClient';

/** Building the env on the trainer may take up to 120 s before the Tool's own timeout starts (toolrerun.py). */
export const TOOL_RERUN_TIMEOUT_MS = 180_000;

/** The part of a trainer connection the replay's relays use. */
export interface ReplayTrainer {
  request<M extends keyof RpcMethods>(
    method: M,
    params: RpcMethods[M]['params'],
    timeoutMs?: number,
  ): Promise<RpcMethods[M]['result']>;
}

export interface ToolRerunDeps {
  /** vscode.workspace.isTrusted: a re-run executes the workspace's Tool code. */
  isTrusted: () => boolean;
  /** The connected trainer, else undefined. */
  trainer: () => ReplayTrainer | undefined;
}

export const UNTRUSTED_MESSAGE =
  'Re-running a tool call runs the Tool code of this workspace, which is not trusted. ' +
  'Trust the workspace (Manage Workspace Trust) to re-run; replaying works without trust.';
export const NOT_CONNECTED_MESSAGE =
  'Not connected to a trainer server: run "Agent RL: Start Local Server" or "Agent RL: Connect to Server", then re-run.';

export async function relayToolRerun(message: RerunToolCallMessage, deps: ToolRerunDeps): Promise<ToolRerunMessage> {
  const address = { runId: message.runId, trajectoryId: message.trajectoryId, turn: message.turn, call: message.call };
  const answer = (reply: ToolRerunMessage['reply']): ToolRerunMessage => ({
    type: 'toolRerun',
    ...address,
    code: message.code,
    reply,
  });
  const refuse = (text: string): ToolRerunMessage => answer({ ok: false, message: text });
  if (!deps.isTrusted()) return refuse(UNTRUSTED_MESSAGE);
  const trainer = deps.trainer();
  if (!trainer) return refuse(NOT_CONNECTED_MESSAGE);
  try {
    // Today's code is what a server that predates the choice runs: it is asked for only by leaving `code` out.
    const params = message.code === 'current' ? address : { ...address, code: message.code };
    const result = await trainer.request('tool/rerun', params, TOOL_RERUN_TIMEOUT_MS);
    return answer({ ok: true, result });
  } catch (err) {
    return refuse(describeFailure(err as Error, 'tool/rerun', 're-run tool calls'));
  }
}

/** A relayed request's failure in words: the trainer's refusal, a run it does not have, a server older than `method`
 * (`purpose`: what the user wanted of it, "re-run tool calls"), else the trainer's own message. */
export function describeFailure(err: Error, method: keyof RpcMethods, purpose: string): string {
  if (!(err instanceof TrainerRequestError)) return err.message;
  switch (err.code) {
    case ErrorCode.CODE_NOT_ALLOWED:
      return `The trainer server refused: ${err.message}`;
    case ErrorCode.RUN_NOT_FOUND:
      return `The connected trainer server does not have this run: ${err.message}`;
    case ErrorCode.METHOD_NOT_FOUND:
      return `The connected trainer server is older than ${method}; update agentrl on it to ${purpose}.`;
    default:
      return err.message;
  }
}
