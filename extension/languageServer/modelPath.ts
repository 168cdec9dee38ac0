// What kind of `model.path` a run config names, by the trainer's rule (agentrl/contract/config.py, `model_source`):
// the built-in names and the Hub id pattern are read from the run-config schema, where the trainer declares them.
import { existsSync, statSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { RUN_CONFIG_SCHEMA } from './schema';

export type ModelSource = 'builtin' | 'gguf' | 'folder' | 'hub' | 'missing';

const pathSchema = RUN_CONFIG_SCHEMA.$defs.ModelConfig.properties!.path as {
  'x-builtins': string[];
  'x-hub-id-pattern': string;
};
export const BUILTIN_MODELS: readonly string[] = pathSchema['x-builtins'];
const HUB_ID = new RegExp(pathSchema['x-hub-id-pattern']);

/** A path that exists (relative to the config's folder) wins over a Hub id of the same spelling. */
export function modelSource(path: string, baseDir: string): ModelSource {
  if (BUILTIN_MODELS.includes(path)) return 'builtin';
  const local = isAbsolute(path) ? path : join(baseDir, path);
  if (existsSync(local)) return statSync(local).isFile() && local.endsWith('.gguf') ? 'gguf' : 'folder';
  return HUB_ID.test(path) ? 'hub' : 'missing';
}

/** One line for the hover: which kind of path the language server saw, and what the trainer will do with it. */
export function describeModelSource(source: ModelSource): string {
  switch (source) {
    case 'builtin':
      return 'This value: a built-in model, made or unpacked by the trainer itself.';
    case 'gguf':
      return 'This value: a local .gguf file (transformers dequantizes it on load).';
    case 'folder':
      return 'This value: a local folder with a transformers model.';
    case 'hub':
      return 'This value: a Hugging Face Hub id. The trainer loads it from its Hub cache, or downloads it there when the Hub is reachable; an offline trainer without it fails at once and says so.';
    case 'missing':
      return 'This value: a local path that does not exist here (a Hub id is written namespace/name).';
  }
}
