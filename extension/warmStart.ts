// Warm-start from these: a run config that fine-tunes on the episodes a search found (the run's folder and the
// search's filters as data.sft's `run` and `where`) for train.sft_steps steps, then goes on with RL, made from the
// searched run's own frozen config (run/config). Pure (no `vscode`): unit-tested; searchCommands.ts offers it.
import { stringify } from 'yaml';
import type { EpisodeFilters } from './searchQuery';

/** The warm start's steps, unless the searched run had fewer steps to give. */
export const WARM_START_STEPS = 5;

/** Search Episodes' filters as the run config's `where` (data.sft[].where: the same filters, snake_case keys). */
export function whereOf(filters: EpisodeFilters): Record<string, unknown> {
  const names: Record<string, string> = { textIn: 'text_in', errorKind: 'error_kind', healthCode: 'health_code' };
  return Object.fromEntries(
    Object.entries(filters)
      .filter(([, value]) => value !== undefined)
      .map(([key, value]) => [names[key] ?? key, value]),
  );
}

/** The YAML of a run config that warms up on the picked episodes of `runFolder` (the searched run's folder on the
 *  trainer's machine) and then trains as the searched run did: its frozen config, renamed, with data.sft and
 *  train.sft_steps set. A searched run that was all sft goes on with grpo. */
export function warmStartConfig(
  frozen: Record<string, unknown>,
  runFolder: string,
  filters: EpisodeFilters,
  matched: number,
): string {
  const config = structuredClone(frozen) as Record<string, Record<string, unknown>> & { name?: unknown };
  const algorithm = { ...(config.algorithm ?? {}) };
  if (algorithm.name === 'sft') Object.assign(algorithm, { name: 'grpo', policy_loss: 'clipped' });
  const train = { ...(config.train ?? {}) };
  const steps = typeof train.steps === 'number' ? train.steps : 10;
  train.sft_steps = Math.min(WARM_START_STEPS, Math.max(1, steps - 1));
  train.steps = Math.max(steps, (train.sft_steps as number) + 1);
  const name = `${String(config.name ?? 'run')}-warm-start`.slice(0, 100);
  const data = { ...(config.data ?? {}), sft: [{ run: runFolder, where: whereOf(filters) }] };
  const header =
    `# Warm-start from ${matched} episode(s) of ${runFolder}${describe(filters)}: train.sft_steps steps of sft on\n` +
    `# them (data.sft), then ${String(algorithm.name)} on rollouts, in one run. Made from that run's frozen config.\n`;
  return header + stringify({ ...config, name, algorithm, data, train });
}

function describe(filters: EpisodeFilters): string {
  const where = whereOf(filters);
  return Object.keys(where).length ? ` that pass ${JSON.stringify(where)}` : '';
}
