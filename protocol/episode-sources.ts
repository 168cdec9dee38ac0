// Where a run's episodes come from, named once for the editor's readers of run configs: the run-config language
// server (which says `env` gives exactly one) and the replay (whose host reads a run's config, and whose panel offers
// a tool call's re-run and source by it).

/** The sections of a run config's `env` that each name where episodes come from, as the trainer's env_sources.py
 *  (ENV_SOURCES) has them: exactly one is given. `class_name` (with `module`) is a ToolEnv; `gym`, `methods` and
 *  `openenv` are environments nobody wrote for agentrl, which adapters turn into a ToolEnv. */
export const ENV_SOURCES = ['class_name', 'gym', 'methods', 'openenv'] as const;
export type EnvSource = (typeof ENV_SOURCES)[number];

/** An env source, or `agent`: the user's own agent, through the OpenAI-compatible endpoint. */
export type EpisodeSource = EnvSource | 'agent';

/** The adapters' sections: their tools are made at each episode's reset, in that episode's environment. */
export const ADAPTER_SOURCES: ReadonlySet<EpisodeSource> = new Set(['gym', 'methods', 'openenv']);

/** Where a run config's episodes come from; undefined for a config that gives none, or more than one. */
export function episodeSourceOf(config: unknown): EpisodeSource | undefined {
  if (!config || typeof config !== 'object') return undefined;
  const { env, agent } = config as Record<string, unknown>;
  if (env == null) return agent != null ? 'agent' : undefined;
  if (typeof env !== 'object' || agent != null) return undefined;
  const given = ENV_SOURCES.filter((name) => (env as Record<string, unknown>)[name] != null);
  return given.length === 1 ? given[0] : undefined;
}
