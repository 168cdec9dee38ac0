// Warm-start from these: a run config that fine-tunes on the episodes a search found (the run's folder and the
// search's filters as data.sft's `run` and `where`) for train.sft_steps steps, then goes on with RL, made from the
// searched run's own frozen config (run/config); a training set's config is made the same way (trainingSets.ts).
// Imitate episodes like these: the same run config trained by expert iteration with the search as its filter
// (algorithm.rft_where). No `vscode`: unit-tested; searchCommands.ts offers both.
import * as fs from 'node:fs';
import * as path from 'node:path';
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
  return warmUpConfig(
    frozen,
    [{ run: runFolder, where: whereOf(filters) }],
    'warm-start',
    (algorithm) =>
      `# Warm-start from ${matched} episode(s) of ${runFolder}${describe(filters)}: train.sft_steps steps of sft on\n` +
      `# them (data.sft), then ${algorithm} on rollouts, in one run. Made from that run's frozen config.\n`,
  );
}

/** The YAML of a run's frozen config made to warm up on `sft` (data.sft's sources) for train.sft_steps steps, then
 *  go on with its algorithm (grpo after a run that was all sft), named `<its name>-<suffix>`, under `header` (a
 *  comment, given the algorithm RL goes on with). Warm-start from these and a training set's Use in a Run Config. */
export function warmUpConfig(
  frozen: Record<string, unknown>,
  sft: Array<Record<string, unknown>>,
  suffix: string,
  header: (algorithm: string) => string,
): string {
  const config = structuredClone(frozen) as Record<string, Record<string, unknown>> & { name?: unknown };
  const algorithm = { ...(config.algorithm ?? {}) };
  if (algorithm.name === 'sft') Object.assign(algorithm, { name: 'grpo', policy_loss: 'clipped' });
  const train = { ...(config.train ?? {}) };
  const steps = typeof train.steps === 'number' ? train.steps : 10;
  train.sft_steps = Math.min(WARM_START_STEPS, Math.max(1, steps - 1));
  train.steps = Math.max(steps, (train.sft_steps as number) + 1);
  const name = `${String(config.name ?? 'run')}-${suffix}`.slice(0, 100);
  const data = { ...(config.data ?? {}), sft };
  return header(String(algorithm.name)) + stringify({ ...config, name, algorithm, data, train });
}

/** The filters a search can ask that algorithm.rft_where cannot: a new run's steps are not the searched run's, and a
 *  step's health alerts come after its update. */
const NOT_PER_ROUND = ['step', 'health_code'];

/** The YAML of the searched run's frozen config trained by expert iteration instead: each step imitates its own
 *  episodes that the search would list (algorithm.rft_where; rft's default pick among them, each group's best, unless
 *  the run set rft_min_reward), by their likelihood. A search's step and health filters are left out, and said. */
export function imitateConfig(frozen: Record<string, unknown>, filters: EpisodeFilters, matched: number): string {
  const config = structuredClone(frozen) as Record<string, Record<string, unknown>> & { name?: unknown };
  const where = whereOf(filters);
  const left = NOT_PER_ROUND.filter((key) => key in where);
  for (const key of left) delete where[key];
  const algorithm = { ...(config.algorithm ?? {}), name: 'rft', policy_loss: 'nll', rft_where: where };
  const name = `${String(config.name ?? 'run')}-rft`.slice(0, 100);
  const header =
    `# Imitate episodes like the ${matched} a search found${describe(filters)}: each step samples rollouts and\n` +
    `# fine-tunes on those that pass algorithm.rft_where (rounds of sample, filter, sft). Made from that run's frozen\n` +
    `# config.${left.length ? ` Left out of the filter: ${left.join(' and ')} (a new run's steps, and alerts that come after an update).` : ''}\n`;
  return header + stringify({ ...config, name, algorithm });
}

/** Writes `text` to `<root>/<stem>.agentrl.yaml`, or `<stem>-2.agentrl.yaml`, ... where that is taken: never over a
 *  file, one that appears meanwhile included. Returns the file written. */
export function writeNewConfig(root: string, stem: string, text: string): string {
  let file = path.join(root, `${stem}.agentrl.yaml`);
  for (let n = 2; fs.existsSync(file); n++) file = path.join(root, `${stem}-${n}.agentrl.yaml`);
  fs.writeFileSync(file, text, { flag: 'wx' });
  return file;
}

function describe(filters: EpisodeFilters): string {
  const where = whereOf(filters);
  return Object.keys(where).length ? ` that pass ${JSON.stringify(where)}` : '';
}
