// Renders a new environment folder from extension/templates (their only home). Pure functions:
// the command in extension.ts asks the questions and writes what these return.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface EnvironmentSpec {
  /** Folder and run name: lower-case letters, digits, '-' or '_'. */
  name: string;
  /** Tool names as the model calls them: snake_case identifiers. */
  tools: string[];
}

const ENV_NAME = /^[a-z][a-z0-9_-]{0,63}$/;
const TOOL_NAME = /^[a-z][a-z0-9_]{0,63}$/;

/** Why a name cannot be used, or undefined when it can (InputBox validateInput shape). */
export function validateEnvName(name: string): string | undefined {
  return ENV_NAME.test(name) ? undefined : 'Use lower-case letters, digits, "-" or "_", starting with a letter.';
}

export function validateToolName(name: string): string | undefined {
  return TOOL_NAME.test(name) ? undefined : 'Use a snake_case identifier such as "search" or "run_sql".';
}

export function pascalCase(name: string): string {
  return name.split(/[-_]+/).filter(Boolean).map((p) => p[0].toUpperCase() + p.slice(1)).join('');
}

function fill(template: string, values: Record<string, string>): string {
  return template.replace(/\{\{(\w+)\}\}/g, (_, key: string) => {
    if (!(key in values)) throw new Error(`template placeholder {{${key}}} has no value`);
    return values[key];
  });
}

/** File path (relative to the new folder) -> content. */
export function renderEnvironment(spec: EnvironmentSpec, templatesDir: string): Map<string, string> {
  const problems = [validateEnvName(spec.name), ...spec.tools.map(validateToolName)].filter(Boolean);
  if (problems.length) throw new Error(problems.join(' '));
  if (spec.tools.length === 0) throw new Error('An environment needs at least one tool.');
  if (new Set(spec.tools).size !== spec.tools.length) throw new Error('Tool names must be distinct.');

  const read = (file: string) => readFileSync(join(templatesDir, file), 'utf8');
  const toolClasses = spec.tools.map((t) => pascalCase(t));
  const values = {
    envName: spec.name,
    envClass: pascalCase(spec.name).replace(/(Env)?$/, 'Env'), // 'web-qa' -> WebQaEnv, 'math-env' -> MathEnv
    firstToolName: spec.tools[0],
    toolImports: toolClasses.join(', '),
    toolInstances: toolClasses.map((c) => `${c}()`).join(', '),
    toolClasses: spec.tools.map((t, i) => fill(read('tool-class.py.tmpl'), { toolClass: toolClasses[i], toolName: t })).join('\n').trimEnd(),
  };
  return new Map([
    ['tools.py', fill(read('tools.py.tmpl'), values)],
    ['env.py', fill(read('env.py.tmpl'), values)],
    ['reward.py', fill(read('reward.py.tmpl'), values)],
    ['tasks.jsonl', read('tasks.jsonl.tmpl')],
    [`${spec.name}.agentrl.yaml`, fill(read('run.agentrl.yaml.tmpl'), values)],
    ['test_env.py', fill(read('test_env.py.tmpl'), values)],
  ]);
}
