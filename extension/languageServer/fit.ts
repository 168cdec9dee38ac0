// Whether the configured model roughly fits the connected trainer's memory: parameters × bytes per dtype,
// from the built-ins' known shapes or a local model's config.json. An estimate, and said to be one.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import type { TrainerDevicesParams } from './protocol';

const SMOLLM2_PARAMETERS = 135e6;
const TINY_VOCAB = 300; // agentrl.models.tiny's character tokenizer, rounded up
const GIB = 2 ** 30;

interface ModelSettings {
  path?: unknown;
  dtype?: unknown;
  device?: unknown;
  tiny_layers?: unknown;
  tiny_hidden?: unknown;
  lora?: unknown;
}

/** A decoder-only transformer: embeddings (+ untied head) and, per layer, attention (4h²) and a gated MLP (3·h·i). */
function transformerParameters(
  vocab: number,
  hidden: number,
  layers: number,
  intermediate: number,
  tied: boolean,
): number {
  return vocab * hidden * (tied ? 1 : 2) + layers * (4 * hidden * hidden + 3 * hidden * intermediate);
}

export function estimateParameters(model: ModelSettings, configDir: string): number | undefined {
  const path = typeof model.path === 'string' ? model.path : 'tiny';
  if (path === 'smollm2') return SMOLLM2_PARAMETERS;
  if (path === 'tiny') {
    const hidden = typeof model.tiny_hidden === 'number' ? model.tiny_hidden : 64;
    const layers = typeof model.tiny_layers === 'number' ? model.tiny_layers : 2;
    return transformerParameters(TINY_VOCAB, hidden, layers, hidden * 2, false);
  }
  const resolved = isAbsolute(path) ? path : join(configDir, path);
  const configFile =
    existsSync(resolved) && statSync(resolved).isDirectory()
      ? join(resolved, 'config.json')
      : join(dirname(resolved), 'config.json');
  if (!existsSync(configFile)) return undefined;
  try {
    const c = JSON.parse(readFileSync(configFile, 'utf8')) as Record<string, unknown>;
    const [vocab, hidden, layers] = [c.vocab_size, c.hidden_size, c.num_hidden_layers];
    if (typeof vocab !== 'number' || typeof hidden !== 'number' || typeof layers !== 'number') return undefined;
    const intermediate = typeof c.intermediate_size === 'number' ? c.intermediate_size : 4 * hidden;
    return transformerParameters(vocab, hidden, layers, intermediate, c.tie_word_embeddings !== false);
  } catch {
    return undefined;
  }
}

function bytesPerParameter(dtype: unknown, onGpu: boolean): number {
  if (dtype === 'float32') return 4;
  if (dtype === 'bfloat16' || dtype === 'float16') return 2;
  return onGpu ? 2 : 4; // auto = bfloat16 on CUDA, float32 on CPU
}

const gib = (bytes: number): string => `${(bytes / GIB).toFixed(bytes < GIB ? 2 : 1)} GiB`;

/** Markdown lines about the connected trainer: its devices and whether the model roughly fits. */
export function devicesSummary(devices: TrainerDevicesParams, model: ModelSettings, configDir: string): string {
  const gpus = devices.gpus.map((g) => `${g.name} (${gib(g.memoryBytes)})`).join(', ');
  const lines = [
    `Connected trainer: ${devices.cpu.cores} CPU cores${devices.cpu.memoryBytes ? `, ${gib(devices.cpu.memoryBytes)} RAM` : ''}${gpus ? `; GPUs: ${gpus}` : '; no GPU'}.`,
  ];
  const parameters = estimateParameters(model, configDir);
  if (parameters === undefined) return lines[0];
  const onGpu = model.device !== 'cpu' && devices.gpus.length > 0;
  const memory = onGpu ? Math.max(...devices.gpus.map((g) => g.memoryBytes)) : devices.cpu.memoryBytes;
  const bytes = bytesPerParameter(model.dtype, onGpu);
  const weights = parameters * bytes;
  // Full fine-tuning keeps weights, gradients and two float32 Adam moments; LoRA trains a sliver of that.
  const training =
    model.lora && typeof model.lora === 'object' && (model.lora as { enabled?: unknown }).enabled
      ? weights * 1.1
      : parameters * (2 * bytes + 8);
  lines.push(
    `Model: ~${(parameters / 1e6).toFixed(1)}M parameters × ${bytes} bytes = ${gib(weights)} of weights; ~${gib(training)} to train (estimate, activations not counted).`,
  );
  if (memory) {
    lines.push(
      training <= memory
        ? `Fits the ${onGpu ? 'largest GPU' : "trainer's RAM"} (${gib(memory)}).`
        : `Likely does not fit the ${onGpu ? 'largest GPU' : "trainer's RAM"} (${gib(memory)}): consider LoRA, bfloat16 or a smaller model.`,
    );
  }
  return lines.join('\n\n');
}
