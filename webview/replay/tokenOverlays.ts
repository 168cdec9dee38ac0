// What colours the token view's chips: the token advantage, or what the learner read of each sampled token beside
// what the engine reported while sampling (trajectory.schema.json's tokens: trainer_logprob, entropy, is_weight,
// one entry per sampled token, i.e. per token with a rollout logprob; present on the episodes of a training step,
// absent on Try and eval runs). Pure: no DOM.
import type { TrajectoryRecord } from '../../protocol/webview-messages';
import { ADVANTAGE } from './advantage';

export type TokenOverlay = 'advantage' | 'mismatch' | 'entropy' | 'is_weight';

export interface OverlaySpec {
  label: string;
  /** What the colour means, for the legend and the control's tooltip. */
  help: string;
  /** Signed values colour by sign (the advantage's two colours); unsigned ones by size alone. */
  signed: boolean;
  /** The token's value, or null where it has none. */
  value(tokens: Tokens, index: number): number | null;
  /** Whether the episode carries what this overlay shows. */
  available(tokens: Tokens): boolean;
}

type Tokens = TrajectoryRecord['tokens'];

/** Each token's place among the sampled tokens (-1: not sampled), computed once per episode. */
const sampledPlaces = new WeakMap<Tokens, Int32Array>();
function sampledPlace(tokens: Tokens, index: number): number {
  let places = sampledPlaces.get(tokens);
  if (!places) {
    places = new Int32Array(tokens.logprob.length);
    let next = 0;
    tokens.logprob.forEach((logprob, i) => (places![i] = logprob === null ? -1 : next++));
    sampledPlaces.set(tokens, places);
  }
  return places[index] ?? -1;
}

/** A learner figure of token `index` (its arrays hold one entry per sampled token), or null. */
function at(values: Array<number | null> | undefined, tokens: Tokens, index: number): number | null {
  const place = values ? sampledPlace(tokens, index) : -1;
  return place < 0 ? null : (values![place] ?? null);
}

/** trainer logprob − rollout logprob of a sampled token: ~0 when the engine and the learner agree on the weights
 *  that sampled (docs/token-pipeline.md, rule 5). */
export function mismatch(tokens: Tokens, index: number): number | null {
  const trainer = at(tokens.trainer_logprob, tokens, index);
  const rollout = tokens.logprob[index];
  return trainer === null || rollout === null ? null : trainer - rollout;
}

/** The learner's figure `name` of token `index`, or null (not sampled, or a row the update skipped). */
export function learnerFigure(
  tokens: Tokens,
  name: 'trainer_logprob' | 'entropy' | 'is_weight',
  index: number,
): number | null {
  return at(tokens[name], tokens, index);
}

export const OVERLAYS: Record<TokenOverlay, OverlaySpec> = {
  advantage: {
    label: ADVANTAGE.token.label,
    help: ADVANTAGE.token.help,
    signed: true,
    value: (tokens, i) => tokens.advantage[i] ?? null,
    available: () => true,
  },
  mismatch: {
    label: 'trainer − rollout logprob',
    help:
      "the learner's logprob of the sampled token, for the weights that sampled it, minus the engine's: green where " +
      'the learner finds the token likelier than the engine did, red where less likely; ~0 everywhere when they agree',
    signed: true,
    value: mismatch,
    available: (tokens) => Array.isArray(tokens.trainer_logprob),
  },
  entropy: {
    label: 'entropy',
    help: "the entropy (nats) of the learner's next-token distribution where the token was sampled: darker, less sure",
    signed: false,
    value: (tokens, i) => at(tokens.entropy, tokens, i),
    available: (tokens) => Array.isArray(tokens.entropy),
  },
  is_weight: {
    label: 'importance weight − 1',
    help:
      'algorithm.rollout_is: the truncated weight min(π_trainer/π_rollout, cap) the loss multiplied the token by, ' +
      'minus 1: red where the engine was surer than the learner (the token counts less), green where less sure',
    signed: true,
    value: (tokens, i) => {
      const weight = at(tokens.is_weight, tokens, i);
      return weight === null ? null : weight - 1;
    },
    available: (tokens) => Array.isArray(tokens.is_weight),
  },
};

/** The overlays this episode can show, the advantage first. */
export function availableOverlays(record: TrajectoryRecord): TokenOverlay[] {
  return (Object.keys(OVERLAYS) as TokenOverlay[]).filter((id) => OVERLAYS[id].available(record.tokens));
}

export interface Mismatch {
  recordId: string;
  index: number;
  text: string;
  /** trainer − rollout logprob. */
  gap: number;
}

/** The `count` sampled tokens whose trainer and rollout logprobs differ most, over `records`, largest first. */
export function largestMismatches(records: readonly TrajectoryRecord[], count = 10): Mismatch[] {
  const found: Mismatch[] = [];
  for (const record of records) {
    const tokens = record.tokens;
    if (!Array.isArray(tokens.trainer_logprob)) continue;
    for (let index = 0; index < tokens.ids.length; index++) {
      const gap = mismatch(tokens, index);
      if (gap !== null) found.push({ recordId: record.id, index, text: tokens.text[index], gap });
    }
  }
  return found.sort((a, b) => Math.abs(b.gap) - Math.abs(a.gap)).slice(0, count);
}
