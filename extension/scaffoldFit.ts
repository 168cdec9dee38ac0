// A scaffolded run config made to fit the connected trainer's machine, as it is written: the trainer plans the run's
// peak memory (`config/memoryPlan`, agentrl/learning/memory_plan.py) and, where the plan does not fit, names the
// single changes that would make it fit. The first one that leaves what is learned as it is (a smaller micro-batch,
// whose gradients are accumulated to the same step; gradient checkpointing, which recomputes activations) is written
// into the config, with a comment saying why; any other change (LoRA, a shorter context) is the user's call, so it
// is only offered.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import * as vscode from 'vscode';
import { parseDocument, type Scalar } from 'yaml';
import type { MemoryPlan } from '../protocol/generated/rpc';
import type { Ctx } from './ctx';
import { readRunConfig } from './runConfig';

type WayToFit = NonNullable<MemoryPlan['waysToFit']>[number];

/** Settings a config can be fitted by without changing the run's learning: only its memory and speed. */
const LEARNING_NEUTRAL = new Set(['train.micro_batch_size', 'model.gradient_checkpointing']);

/** The plan's first way to fit that changes only learning-neutral settings (the cheapest: the trainer lists the
 *  micro-batch first). */
export function neutralWayToFit(plan: MemoryPlan): WayToFit | undefined {
  return plan.waysToFit?.find((way) => Object.keys(way.settings).every((key) => LEARNING_NEUTRAL.has(key)));
}

/** The config's text with `settings` (dotted keys) set, each with `why` as its line's comment; the rest of the text,
 *  comments included, as it was. */
export function withSettings(text: string, settings: Record<string, unknown>, why: string): string {
  const document = parseDocument(text);
  for (const [key, value] of Object.entries(settings)) {
    const path = key.split('.');
    document.setIn(path, value);
    (document.getIn(path, true) as Scalar).comment = ` ${why}`;
  }
  return document.toString();
}

const GIB = 2 ** 30;
const gib = (bytes: number): string => `${(bytes / GIB).toFixed(1)} GiB`;

export const ScaffoldFitMessages = {
  fitted: (name: string, plan: MemoryPlan, way: WayToFit) =>
    `Agent RL: ${name}'s config was fitted to the trainer's machine (${gib(plan.peakBytes)} planned at its longest episodes, ${plan.device.label}): ${way.text}.`,
  doesNotFit: (name: string, plan: MemoryPlan) =>
    `Agent RL: ${name}'s config may not fit the trainer's machine (${gib(plan.peakBytes)} planned at its longest episodes, ${plan.device.label}). ${
      plan.waysToFit?.length
        ? `To fit, change one of: ${plan.waysToFit.map((way) => way.text).join('; ')}.`
        : 'No single change makes it fit: a smaller model, or a machine with more memory.'
    }`,
  comment: (plan: MemoryPlan) => `set when written: ${gib(plan.peakBytes)} planned, over ${plan.device.label}`,
} as const;

/** A newly written config, planned by the connected trainer and fitted where it does not fit (see the top). Without a
 *  trainer, or without a plan (the model's shape unknown there), the config stays as the template wrote it: the
 *  hover on its model keys plans it once a trainer is connected. Returns what was said, if anything. */
export async function fitScaffoldedConfig(ctx: Ctx, name: string, configPath: string): Promise<string | undefined> {
  if (!ctx.connection.isConnected) return undefined;
  const where = ctx.connection.kind === 'local' ? { configDir: dirname(configPath) } : {}; // a remote one resolves it on its machine
  let plan: MemoryPlan | undefined;
  try {
    const answer = await ctx.connection.request('config/memoryPlan', { config: readRunConfig(configPath), ...where });
    plan = answer.plan;
    if (!plan) ctx.log.info(`New Environment: no memory plan for ${name}: ${answer.unavailable}`);
  } catch (err) {
    ctx.log.warn(
      `New Environment: the trainer did not plan ${name}'s memory: ${err instanceof Error ? err.message : err}`,
    );
  }
  if (!plan || plan.fits !== false) return undefined;
  const way = neutralWayToFit(plan);
  if (!way) {
    const said = ScaffoldFitMessages.doesNotFit(name, plan);
    void vscode.window.showWarningMessage(said);
    return said;
  }
  writeFileSync(
    configPath,
    withSettings(readFileSync(configPath, 'utf8'), way.settings, ScaffoldFitMessages.comment(plan)),
  );
  const said = ScaffoldFitMessages.fitted(name, plan, way);
  ctx.log.info(said);
  void vscode.window.showInformationMessage(said);
  return said;
}
