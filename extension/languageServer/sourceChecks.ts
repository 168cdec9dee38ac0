// The run config's episode source, checked against the user's files: env (a ToolEnv, or exactly one of env.gym,
// env.methods and env.openenv) or agent, each module it names found and defining what the config says, and the fields
// those modules read from a task record.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { isMap, isScalar, type Document, type Node, type Pair } from 'yaml';
import { ENV_SOURCES } from '../../protocol/episode-sources';
import { resolveFrom, valueNode, valueOf, type Finding } from './configDoc';

/** Fields the env reads from a task record: `task["x"]`, `task['x']` and `task.get("x")` in its source. */
export function fieldsReadByEnv(source: string): string[] {
  const found = new Set<string>();
  for (const match of source.matchAll(/task(?:\[\s*["']([^"']+)["']\s*\]|\.get\(\s*["']([^"']+)["'])/g))
    found.add(match[1] ?? match[2]);
  return [...found];
}

/** A dotted module (`pkg.env`) as a file in the config's folder or any folder above it (the workspace, or
 *  `trainer-server/` for the `agentrl` package the trainer ships). */
export function findDottedModule(module: string, from: string): string | undefined {
  const relative = module.split('.').join('/');
  for (let dir = from; ; dir = dirname(dir)) {
    for (const root of [dir, join(dir, 'trainer-server')]) {
      for (const candidate of [join(root, `${relative}.py`), join(root, relative, '__init__.py')]) {
        if (existsSync(candidate)) return candidate;
      }
    }
    if (dirname(dir) === dir) return undefined;
  }
}

/** The source of the Python module a config names (env.module, agent.module, agent.reward's module) at `key`, or
 * undefined with a finding: a file that does not exist (error), a dotted module found nowhere (warning). */
function moduleSource(
  module: string,
  key: string,
  base: string,
  [start, end]: [number, number],
  out: Finding[],
): string | undefined {
  const isFile = isFileModule(module);
  const file = isFile ? resolveFrom(base, module) : findDottedModule(module, base);
  const code = key.replace(/\./g, '-');
  if (isFile && !existsSync(file!)) {
    out.push({ start, end, severity: 'error', code, message: `${key}: ${file} does not exist` });
    return undefined;
  }
  if (!file) {
    out.push({
      start,
      end,
      severity: 'warning',
      code,
      message: `${key}: no ${module.replace(/\./g, '/')}.py (or package) in the folders above this config; the trainer must be able to import it from its Python environment`,
    });
    return undefined;
  }
  return readFileSync(file, 'utf8');
}

const definesFunction = (source: string, name: string): boolean =>
  new RegExp(`^(async\\s+)?def\\s+${name.replace(/[^\w]/g, '')}\\s*\\(`, 'm').test(source);

/** Whether a module the config names is a Python file (relative to the config) rather than a dotted module name, as
 * the trainer tells them apart (env_sources.py's env_module_is_file). */
const isFileModule = (module: string): boolean =>
  module.endsWith('.py') || module.includes('/') || module.includes('\\');

/** Whether a module's source defines `name` at its top level: a class, a function or an assignment. */
const definesName = (source: string, name: string): boolean => {
  const word = name.replace(/[^\w]/g, '');
  return new RegExp(`^(class\\s+${word}\\b|(async\\s+)?def\\s+${word}\\s*\\(|${word}\\s*(:[^=]*)?=[^=])`, 'm').test(
    source,
  );
};

/** Where a key itself is written (its name, not its value): findings about a key being there go on it. */
function keyRange(doc: Document, path: string[]): [number, number] | undefined {
  const parent = path.length > 1 ? doc.getIn(path.slice(0, -1), true) : doc.contents;
  if (!isMap(parent)) return undefined;
  const pair = (parent.items as Pair<Node, unknown>[]).find(
    (p) => isScalar(p.key) && String(p.key.value) === path[path.length - 1],
  );
  return pair?.key.range ? [pair.key.range[0], pair.key.range[1]] : undefined;
}

/** env: a ToolEnv (module and class_name) or exactly one of env.gym, env.methods and env.openenv, as env_sources.py's
 * EnvConfig says; the user's files each names found and defining what it names (a factory's or reward's MODULE when
 * it is a .py file; a dotted one may be installed in the trainer's Python). Returns the ToolEnv's source, which reads
 * the task records. */
function envChecks(doc: Document, base: string, at: (path: string[]) => [number, number], out: Finding[]): string[] {
  if (!isMap(valueNode(doc, ['env']))) return [];
  const onKey = (path: string[]): [number, number] => keyRange(doc, path) ?? at(path);
  const error = (where: [number, number], code: string, message: string): void => {
    out.push({ start: where[0], end: where[1], severity: 'error', code, message });
  };
  const given = ENV_SOURCES.filter((name) => valueOf(doc, ['env', name]) != null);
  const toolEnvKeys = (['module', 'class_name'] as const).filter((name) => valueOf(doc, ['env', name]) != null);
  if (toolEnvKeys.length === 1)
    error(
      onKey(['env', toolEnvKeys[0]]),
      'env-source',
      'env: module and class_name go together (the file or module, and the ToolEnv in it)',
    );
  else if (given.length !== 1)
    error(
      onKey(given.length > 1 ? ['env', given[1]] : ['env']),
      'env-source',
      `env: give exactly one of class_name (with module: a ToolEnv), gym, methods or openenv; this gives ${given.length ? given.join(', ') : 'none'}`,
    );
  const args = valueNode(doc, ['env', 'args']);
  if (given.length === 1 && given[0] !== 'class_name' && isMap(args) && args.items.length)
    error(onKey(['env', 'args']), 'env-args', `env.args are the ToolEnv's; give them as env.${given[0]}.args`);
  if (valueOf(doc, ['env', 'methods']) != null && valueOf(doc, ['rollout', 'tool_isolation']) === 'process')
    error(
      at(['rollout', 'tool_isolation']),
      'env-methods-isolation',
      "rollout.tool_isolation: process runs Tools in a worker process, but env.methods' tools change the environment object that the reward reads here: use tool_isolation: thread",
    );
  for (const section of ['gym', 'methods'] as const) {
    const factory = valueOf(doc, ['env', section, 'factory']);
    if (typeof factory === 'string')
      namedChecks(
        factory,
        `env.${section}.factory`,
        'a class or function that makes the environment',
        base,
        at(['env', section, 'factory']),
        out,
      );
  }
  const reward = valueOf(doc, ['env', 'methods', 'reward']);
  if (typeof reward === 'string' && reward.includes(':'))
    namedChecks(
      reward,
      'env.methods.reward',
      'a function called as function(environment, task, final_text)',
      base,
      at(['env', 'methods', 'reward']),
      out,
    );
  const cwd = valueOf(doc, ['env', 'openenv', 'cwd']);
  if (typeof cwd === 'string' && valueOf(doc, ['env', 'openenv', 'command']) != null) {
    const folder = resolveFrom(base, cwd);
    if (!existsSync(folder) || !statSync(folder).isDirectory())
      error(at(['env', 'openenv', 'cwd']), 'env-openenv-cwd', `env.openenv.cwd: ${folder} is not a folder`);
  }
  const sources: string[] = [];
  const module = valueOf(doc, ['env', 'module']);
  if (typeof module === 'string') {
    const source = moduleSource(module, 'env.module', base, at(['env', 'module']), out);
    const className = valueOf(doc, ['env', 'class_name']);
    if (source !== undefined) sources.push(source);
    if (
      source !== undefined &&
      typeof className === 'string' &&
      !new RegExp(`^class\\s+${className.replace(/[^\w]/g, '')}\\b`, 'm').test(source)
    ) {
      const [start, end] = at(['env', 'class_name']);
      out.push({
        start,
        end,
        severity: 'error',
        code: 'env-class',
        message: `env.class_name: ${module} defines no class ${className}`,
      });
    }
  }
  return sources;
}

/** A config's MODULE:NAME (env.gym.factory, env.methods.factory and reward): when MODULE is a .py file, it exists
 * and defines NAME's first part at its top level (`what` says what NAME must be). */
function namedChecks(
  named: string,
  key: string,
  what: string,
  base: string,
  where: [number, number],
  out: Finding[],
): void {
  const [module, name] = splitNamed(named);
  if (!module || !name || !isFileModule(module)) return;
  const source = moduleSource(module, key, base, where, out);
  const first = name.split('.')[0];
  if (source !== undefined && !definesName(source, first))
    out.push({
      start: where[0],
      end: where[1],
      severity: 'error',
      code: key.replace(/\./g, '-'),
      message: `${key}: ${module} defines no ${first} (${what})`,
    });
}

/** env (a ToolEnv) or agent (the user's own agent): exactly one, its modules found and defining what the config
 * names; returns the sources that read the task records (the env; the agent and its reward function). */
export function episodeSourceChecks(
  doc: Document,
  base: string,
  at: (path: string[]) => [number, number],
  top: [number, number],
  out: Finding[],
): string[] {
  const env = valueOf(doc, ['env']);
  const agent = valueOf(doc, ['agent']);
  if ((env == null) === (agent == null)) {
    const [start, end] = env != null ? at(['agent']) : top;
    out.push({
      start,
      end,
      severity: 'error',
      code: 'episode-source',
      message:
        env != null
          ? 'give either env (a ToolEnv) or agent (an OpenAI-compatible agent), not both'
          : 'the config names no episodes: add env (a ToolEnv that gives them) or agent (an OpenAI-compatible agent run through the endpoint)',
    });
  }
  const sources = envChecks(doc, base, at, out);
  const agentModule = valueOf(doc, ['agent', 'module']);
  if (typeof agentModule === 'string') {
    const source = moduleSource(agentModule, 'agent.module', base, at(['agent', 'module']), out);
    const fn = valueOf(doc, ['agent', 'function']) ?? 'run';
    if (source !== undefined) sources.push(source);
    if (source !== undefined && typeof fn === 'string' && !definesFunction(source, fn)) {
      const [start, end] = valueNode(doc, ['agent', 'function']) ? at(['agent', 'function']) : at(['agent', 'module']);
      out.push({
        start,
        end,
        severity: 'error',
        code: 'agent-function',
        message: `agent.function: ${agentModule} defines no function ${fn} (the trainer calls ${fn}(task, base_url, api_key))`,
      });
    }
  }
  const reward = valueOf(doc, ['agent', 'reward']);
  const [rewardModule, rewardFunction] = typeof reward === 'string' ? splitNamed(reward) : [];
  if (rewardModule && rewardFunction) {
    const where = at(['agent', 'reward']);
    const source = moduleSource(rewardModule, 'agent.reward', base, where, out);
    if (source !== undefined) sources.push(source);
    if (source !== undefined && !definesFunction(source, rewardFunction)) {
      out.push({
        start: where[0],
        end: where[1],
        severity: 'error',
        code: 'agent-reward',
        message: `agent.reward: ${rewardModule} defines no function ${rewardFunction} (the trainer calls ${rewardFunction}(task, result))`,
      });
    }
  }
  return sources;
}

/** 'reward.py:score' -> ['reward.py', 'score'] (the last colon: a Windows path may hold one). */
function splitNamed(reward: string): [string, string] | [] {
  const colon = reward.lastIndexOf(':');
  return colon > 0 ? [reward.slice(0, colon), reward.slice(colon + 1)] : [];
}
