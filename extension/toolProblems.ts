// What a Try run says about the user's env, as problems where they are: the env check's findings (its scripted
// episode, before any model runs) and each failing Tool at its definition. Pure (no `vscode`): runCommands.ts turns
// these into Diagnostics.
import { isAbsolute, join } from 'node:path';
import { episodeSourceOf } from '../protocol/episode-sources';
import type { Diagnostic as CheckDiagnostic } from '../protocol/generated/rpc';
import type { TrajectoryRecord } from '../protocol/generated/trajectory';
import { findServerEntry } from './mcpServerEntry';
import { findToolDefinition } from './replay/toolSource';
import { counted } from './counted';

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

/** The adapters whose model may act by its reply rather than by calling a tool, with their `action` default as the
 * run-config schema gives it (GymEnvConfig, OpenEnvConfig). */
export const ACTION_DEFAULTS: ReadonlyArray<readonly ['gym' | 'openenv', 'text' | 'tool']> = [
  ['gym', 'text'],
  ['openenv', 'tool'],
];

/** The section of a run config (`env.gym`, `env.openenv`) whose model acts by its reply (`action: text`): its
 * episodes call no tool, and a Try run of it that made no tool call is as it should be. Undefined otherwise. */
export function repliesAreActions(config: Record<string, unknown>): string | undefined {
  const env = config.env;
  if (!env || typeof env !== 'object') return undefined;
  for (const [section, byDefault] of ACTION_DEFAULTS) {
    const value = (env as Record<string, unknown>)[section];
    if (value && typeof value === 'object' && ((value as Record<string, unknown>).action ?? byDefault) === 'text')
      return `env.${section}`;
  }
  return undefined;
}

/** How a run config's model acts: by calling the env's tools, by its reply (`section`: env.gym or env.openenv with
 * action: text), or as the user's own agent, whose tools are its own code's. */
export type ModelActs = { by: 'tools' } | { by: 'reply'; section: string } | { by: 'agent' };

export function howTheModelActs(config: Record<string, unknown>): ModelActs {
  if (episodeSourceOf(config) === 'agent') return { by: 'agent' };
  const section = repliesAreActions(config);
  return section !== undefined ? { by: 'reply', section } : { by: 'tools' };
}

/** What a completed Try run says in its notification: its episodes, the tool calls they made and how many failed,
 * and its mean reward; a warning when no episode called a tool at all (then "0 Tool errors" reassured a user whose
 * Tools had never run), unless the model acts by its reply. */
export function trySummary(
  name: string,
  episodes: Array<{ reward: number; num_tool_calls: number }>,
  failedCalls: number,
  acts: ModelActs = { by: 'tools' },
): { text: string; warning: boolean } {
  const calls = episodes.reduce((sum, episode) => sum + episode.num_tool_calls, 0);
  const reward = episodes.length ? episodes.reduce((sum, e) => sum + e.reward, 0) / episodes.length : 0;
  if (calls === 0 && acts.by === 'reply') {
    return {
      text:
        `Try run ${name}: ${counted(episodes.length, 'episode')}, mean reward ${reward.toFixed(2)} (the model acts by its ` +
        `reply, ${acts.section}.action: text: no tool calls).`,
      warning: false,
    };
  }
  if (calls === 0 && acts.by === 'agent') {
    return {
      text:
        `Try run ${name}: 0 tool calls in ${counted(episodes.length, 'episode')}: the model never called your agent's tools. ` +
        `It wrote no call the run config's rollout.tool_format reads: show it one in the agent's messages (a worked ` +
        `example, as the New Environment agent template's EXAMPLE does), pass tool_choice: "required" where a call ` +
        `must come, or use a model trained on tool calling.`,
      warning: true,
    };
  }
  if (calls === 0) {
    return {
      text:
        `Try run ${name}: 0 tool calls in ${counted(episodes.length, 'episode')}: your Tools were never used. The model wrote ` +
        `no call the run config's rollout.tool_format reads: show it one (a worked example in the ToolEnv's reset, ` +
        `as the New Environment template does) or use a model trained on tool calling.`,
      warning: true,
    };
  }
  return {
    text:
      `Try run ${name}: ${counted(episodes.length, 'episode')}, ${counted(calls, 'tool call')} (${failedCalls} failed), ` +
      `mean reward ${reward.toFixed(2)}.`,
    warning: failedCalls > 0,
  };
}

/** A problem to show in the Problems panel: a file on this machine and a 0-based line. */
export interface ProblemAt {
  path: string;
  line: number;
  error: boolean;
  message: string;
}

/** The env check's errors and warnings where they belong on this machine: a file the server names relative to the
 *  env folder it checked (an uploaded bundle's, or the folder itself) is that file of `envFolder`; one it names
 *  absolutely is used when it exists here (a local server), and the rest, with no file, are put on the run config.
 *  Its infos (the scripted episode's outcome, each MCP server's tools) are for the log, not the Problems panel. */
export function envCheckProblems(
  diagnostics: CheckDiagnostic[],
  envFolder: string,
  configPath: string,
  existsHere: (path: string) => boolean,
): ProblemAt[] {
  return diagnostics
    .filter((d) => d.severity !== 'info')
    .map((d) => {
      const file = d.file === undefined ? undefined : isAbsolute(d.file) ? d.file : join(envFolder, d.file);
      const here = file !== undefined && existsHere(file);
      return {
        path: here ? file : configPath,
        line: here && d.line !== undefined ? Math.max(d.line - 1, 0) : 0,
        error: d.severity === 'error',
        message: d.message,
      };
    });
}
