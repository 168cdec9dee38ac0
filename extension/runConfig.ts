// Reads a run config file into the object `run/start` carries. No `vscode` import.
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';

/** Reads a run config as the server wants it (an object); YAML errors name the line. */
export function readRunConfig(path: string): Record<string, unknown> {
  let config: unknown;
  try {
    config = parseYaml(readFileSync(path, 'utf8'), { prettyErrors: true });
  } catch (err) {
    throw new Error(`${path} is not valid YAML: ${(err as Error).message}`);
  }
  if (!config || typeof config !== 'object' || Array.isArray(config))
    throw new Error(`${path} must be a YAML mapping of run-config keys.`);
  return config as Record<string, unknown>;
}
