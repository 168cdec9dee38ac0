// What a Try run says about the user's Tools, as problems at each Tool's definition. Pure (no `vscode`):
// runCommands.ts turns these into Diagnostics.
import type { TrajectoryRecord } from '../protocol/generated/trajectory';
import { findServerEntry } from './mcpServerEntry';
import { findToolDefinition } from './replay/toolSource';

/** Tool error kinds that point at the user's Tool code; the others (unknown_tool, bad_json) are the model's. */
const TOOL_FAULTS: ReadonlySet<string> = new Set(['exception', 'timeout', 'schema', 'bad_result']);

export interface ToolProblem {
  tool: string;
  /** Failed calls of this Tool over all the episodes given. */
  count: number;
  message: string;
  /** True when the Tool's own code failed (error), false when the model called it wrongly (warning). */
  faultOfTool: boolean;
  /** Where the Tool is defined, when one of the sources defines it. */
  location?: { path: string; line: number };
}

/** One problem per Tool that failed in `records` (the episodes with tool errors, `episodesWithErrors` in all): at
 * its definition in `sources`, or, for an MCP server's tool, at the server's entry in the run `config`. */
export function toolProblems(
  records: TrajectoryRecord[],
  episodesWithErrors: number,
  sources: Array<{ path: string; text: string }>,
  config?: { path: string; text: string },
): ToolProblem[] {
  const byTool = new Map<
    string,
    { count: number; episodes: Set<string>; kinds: Set<string>; first: string; server?: string }
  >();
  for (const record of records) {
    for (const call of record.turns.flatMap((t) => t.tool_calls)) {
      if (!call.error) continue;
      const entry = byTool.get(call.name) ?? {
        count: 0,
        episodes: new Set(),
        kinds: new Set(),
        first: call.error,
        server: record.tool_servers?.[call.name],
      };
      entry.count++;
      entry.episodes.add(record.id);
      entry.kinds.add(call.error_kind ?? 'error');
      byTool.set(call.name, entry);
    }
  }
  return [...byTool].map(([tool, entry]) => {
    const serverLine = entry.server !== undefined && config ? findServerEntry(config.text, entry.server) : undefined;
    const defined =
      serverLine !== undefined
        ? { path: config!.path, line: serverLine }
        : sources
            .map((s) => ({ path: s.path, line: findToolDefinition(s.text, tool) }))
            .find((s) => s.line !== undefined);
    const what = entry.server !== undefined ? `MCP server "${entry.server}"'s tool "${tool}"` : `Tool "${tool}"`;
    return {
      tool,
      count: entry.count,
      message: `${tool ? what : 'A call naming no tool'} failed ${entry.count} time(s) in ${entry.episodes.size} of ${episodesWithErrors} episode(s) with errors (${[...entry.kinds].join(', ')}): ${entry.first}`,
      faultOfTool: [...entry.kinds].some((k) => TOOL_FAULTS.has(k)),
      location: defined?.line !== undefined ? { path: defined.path, line: defined.line } : undefined,
    };
  });
}

/** What a completed Try run says in its notification: its episodes, the tool calls they made and how many failed,
 * and its mean reward; a warning when no episode called a Tool at all (then "0 Tool errors" reassured a user whose
 * Tools had never run). */
export function trySummary(
  name: string,
  episodes: Array<{ reward: number; num_tool_calls: number }>,
  failedCalls: number,
): { text: string; warning: boolean } {
  const calls = episodes.reduce((sum, episode) => sum + episode.num_tool_calls, 0);
  const reward = episodes.length ? episodes.reduce((sum, e) => sum + e.reward, 0) / episodes.length : 0;
  if (calls === 0) {
    return {
      text:
        `Try run ${name}: 0 tool calls in ${episodes.length} episodes: your Tools were never used. The model wrote ` +
        `no call the run config's rollout.tool_format reads: show it one (a worked example in the ToolEnv's reset, ` +
        `as the New Environment template does) or use a model trained on tool calling.`,
      warning: true,
    };
  }
  return {
    text:
      `Try run ${name}: ${episodes.length} episodes, ${calls} tool calls (${failedCalls} failed), ` +
      `mean reward ${reward.toFixed(2)}.`,
    warning: failedCalls > 0,
  };
}
