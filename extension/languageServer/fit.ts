// Whether the configured run fits the connected trainer: its devices, and the peak memory the trainer plans for the
// run (`config/memoryPlan`, agentrl/learning/memory_plan.py: the one place the formula lives). Only formatting here.
import type { MemoryPlan } from '../../protocol/generated/rpc';
import type { MemoryPlanResult, TrainerDevicesParams } from './protocol';

const GIB = 2 ** 30;

const gib = (bytes: number): string => `${(bytes / GIB).toFixed(bytes < GIB ? 2 : 1)} GiB`;

/** One Markdown line: the connected trainer's devices. */
export function devicesSummary(devices: TrainerDevicesParams): string {
  const gpus = devices.gpus.map((g) => `${g.name} (${gib(g.memoryBytes)})`).join(', ');
  return `Connected trainer: ${devices.cpu.cores} CPU cores${devices.cpu.memoryBytes ? `, ${gib(devices.cpu.memoryBytes)} RAM` : ''}${gpus ? `; GPUs: ${gpus}` : '; no GPU'}.`;
}

function planLines(plan: MemoryPlan): string[] {
  const parts = [...plan.parts]
    .filter((part) => part.bytes > 0)
    .sort((a, b) => b.bytes - a.bytes)
    .map((part) => `- ${part.name}: ${gib(part.bytes)} (${part.detail})`);
  const memory = plan.device.memoryBytes ?? Infinity;
  const verdict =
    plan.fits === undefined
      ? `on ${plan.device.label}`
      : plan.fits
        ? `fits ${plan.device.label}`
        : (plan.shortestPeakBytes ?? 0) > memory
          ? `**does not fit** ${plan.device.label}, even for episodes without a prompt (${gib(plan.shortestPeakBytes ?? 0)}): the run would be refused at start (train.memory_check)`
          : `**may not fit** ${plan.device.label} at its longest episodes (${plan.rowPositions} positions a row); the run would start with a warning`;
  const lines = [
    `Planned peak memory: ${gib(plan.peakBytes)}, ${verdict}. ${(plan.parameters / 1e6).toFixed(1)}M parameters (${plan.shapeSource}), ${(plan.trainableParameters / 1e6).toFixed(2)}M trained.`,
    parts.join('\n'),
  ];
  if (plan.waysToFit?.length) lines.push(`To fit, change one of: ${plan.waysToFit.map((way) => way.text).join('; ')}.`);
  return lines;
}

/** Markdown about the connected trainer: its devices, and the plan it made for this run (or why there is none). */
export function fitSummary(devices: TrainerDevicesParams, planned: MemoryPlanResult | null): string {
  const lines = [devicesSummary(devices)];
  if (planned?.plan) lines.push(...planLines(planned.plan));
  else if (planned?.unavailable) lines.push(`No memory plan: ${planned.unavailable}.`);
  return lines.join('\n\n');
}
