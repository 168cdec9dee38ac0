// The one-line query Search Episodes reads: words the episodes must hold, and filters written as `tool:NAME`,
// `error:KIND`, `reward>=N`, `reward<=N`, `turns>=N`, `turns<=N`, `step>=N`, `step<=N`, `status:STATUS` and
// `health:CODE`, in any order. Pure (no `vscode`): unit-tested.
import type { HealthCode, TrajectorySearchParams } from '../protocol/generated/rpc';

export type EpisodeFilters = Omit<TrajectorySearchParams, 'runIds' | 'sort' | 'limit' | 'cursor'>;

const STATUSES = ['finished', 'truncated', 'error'] as const;
type Bounded = 'reward' | 'turns' | 'step';

/** The filters `line` writes; an Error naming the part it cannot read, and what it expected. */
export function parseSearchQuery(line: string): EpisodeFilters {
  const filters: EpisodeFilters = {};
  const words: string[] = [];
  for (const part of line.match(/"[^"]*"|\S+/g) ?? []) {
    const named = /^(tool|error|status|health):(.+)$/.exec(part);
    const bound = /^(reward|turns|step)(>=|<=)(-?\d+(?:\.\d+)?)$/.exec(part);
    if (named) {
      const [, key, value] = named;
      if (key === 'tool') filters.tool = value;
      else if (key === 'error') filters.errorKind = value;
      else if (key === 'health') filters.healthCode = value as HealthCode;
      else if ((STATUSES as readonly string[]).includes(value)) filters.status = value as (typeof STATUSES)[number];
      else throw new Error(`status:${value}: a status is ${STATUSES.join(', ')}`);
    } else if (bound) {
      const [, key, op, value] = bound as unknown as [string, Bounded, string, string];
      const number = Number(value);
      if (key !== 'reward' && !Number.isInteger(number)) throw new Error(`${part}: ${key} is a whole number`);
      const range = { ...(filters[key] ?? {}), [op === '>=' ? 'min' : 'max']: number };
      (filters as Record<string, unknown>)[key] = range;
    } else if (/^(tool|error|status|health):$|^(reward|turns|step)[<>=]/.test(part)) {
      throw new Error(
        `${part}: write tool:NAME, error:KIND, status:STATUS, health:CODE, or reward, turns or step with >= or <= and a number`,
      );
    } else {
      words.push(part);
    }
  }
  if (words.length) filters.text = words.join(' ');
  return filters;
}
