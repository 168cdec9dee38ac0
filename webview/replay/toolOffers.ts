// What a recorded tool call offers in the replay (re-running it, opening its source) and how the panel heads what
// the env made of it, by where the run's episodes came from. Pure: no DOM, unit-tested in Node.
import { ADAPTER_SOURCES, type EpisodeSource } from '../../protocol/episode-sources';

/** The tool env.gym and env.openenv offer in their tool form (the trainer's adapters/external.py, ACT_TOOL): agentrl's
 * own, which steps the episode's env, so no file of the workspace defines it. */
export const ACT_TOOL = 'act';

export interface ToolCallOffers {
  /** Why the call cannot be re-run on its own, or undefined when it can. */
  noRerun?: string;
  /** Whether "open tool source" can find a definition in the workspace. */
  openSource: boolean;
  /** What says what the call's outcome means: the ToolEnv, or the adapter's section of the run config; undefined for
   * an agent's own tool, which the agent's code ran and read itself (no re-run, no "what it means"). */
  interpreter?: string;
}

/** `source`: where the run's episodes came from, when the host knows it; `fromServer`: the tool is an MCP server's. */
export function toolCallOffers(
  source: EpisodeSource | undefined,
  toolName: string,
  fromServer: boolean,
): ToolCallOffers {
  if (source === 'agent') return { openSource: false }; // its tools are the agent's code, found by no Tool's name
  if (source === undefined || !ADAPTER_SOURCES.has(source)) return { openSource: !fromServer, interpreter: 'ToolEnv' };
  const adapterAct = toolName === ACT_TOOL && source !== 'methods';
  const what = adapterAct
    ? `${ACT_TOOL} steps the env of its own episode`
    : "it is a method of its own episode's environment object";
  return {
    noRerun:
      `The tools of env.${source} are made at each episode's reset (${what}), so a recorded call cannot be run again ` +
      'on its own. Edit and re-roll from here plays the episode again instead.',
    openSource: !fromServer && !adapterAct,
    interpreter: `env.${source}`,
  };
}
