// Diagnostics for a run config: the schema's rules at the exact YAML range, then the checks a schema
// cannot express (files that must exist, batch arithmetic, context budget).
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { isMap, isScalar, isSeq, parseDocument, type Document, type Node, type Pair } from 'yaml';
import { ENV_SOURCES } from '../../protocol/episode-sources';
import { BUILTIN_MODELS, modelSource } from './modelPath';
import { deref, describeRange, RUN_CONFIG_SCHEMA, typeName, type SchemaNode } from './schema';

export type Severity = 'error' | 'warning' | 'information';

export interface Finding {
  start: number;
  end: number;
  message: string;
  severity: Severity;
  code: string;
  /** A replacement text for [start, end) that fixes it, offered as a quick fix. */
  fix?: { title: string; text: string };
}

const CHARS_PER_TOKEN = 4;

export function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0];
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const saved = row[j];
      row[j] = Math.min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] === b[j - 1] ? 0 : 1));
      previous = saved;
    }
  }
  return row[b.length];
}

export function closest(word: string, candidates: string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const distance = editDistance(word.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  return best !== undefined && bestDistance <= Math.max(2, Math.floor(word.length / 3)) ? best : undefined;
}

function range(node: Node | null | undefined, fallback: [number, number]): [number, number] {
  return node?.range ? [node.range[0], node.range[1]] : fallback;
}

function scalarType(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function matchesType(value: unknown, type: string | undefined): boolean {
  const actual = scalarType(value);
  return !type || type === actual || (type === 'number' && actual === 'integer');
}

/** Schema errors of one value, without position: used to pick the anyOf branch that fits. */
function scalarProblem(value: unknown, schema: SchemaNode): string | undefined {
  if (schema.enum && !schema.enum.includes(value)) {
    const hint = typeof value === 'string' ? closest(value, schema.enum.map(String)) : undefined;
    return `must be ${typeName(schema)}; got ${JSON.stringify(value)}${hint ? ` (did you mean ${JSON.stringify(hint)}?)` : ''}`;
  }
  if (schema.const !== undefined && value !== schema.const) return `must be ${JSON.stringify(schema.const)}`;
  if (!matchesType(value, schema.type))
    return `must be ${schema.type === 'integer' ? 'an integer' : `a ${schema.type}`}; got ${scalarType(value)} ${JSON.stringify(value)}`;
  if (typeof value === 'number') {
    const outOf =
      (schema.minimum !== undefined && value < schema.minimum) ||
      (schema.maximum !== undefined && value > schema.maximum) ||
      (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) ||
      (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum);
    if (outOf) return `${value} is out of range: must be ${describeRange(schema)}`;
  }
  if (typeof value === 'string') {
    if (schema.pattern !== undefined && !new RegExp(schema.pattern, 'u').test(value))
      return `must match ${schema.pattern}${schema.pattern.startsWith('^.+:') ? ' (MODULE:NAME, e.g. env.py:make_env)' : ''}; got ${JSON.stringify(value)}`;
    if (schema.minLength !== undefined && value.length < schema.minLength)
      return `must have at least ${schema.minLength} character(s)`;
    if (schema.maxLength !== undefined && value.length > schema.maxLength)
      return `must have at most ${schema.maxLength} characters`;
  }
  return undefined;
}

function checkNode(
  node: Node | null,
  schemaIn: SchemaNode,
  path: string[],
  keyRange: [number, number],
  out: Finding[],
): void {
  const schema = deref(schemaIn);
  const where = path.join('.') || 'the config';
  if (schema.anyOf) {
    const branches = schema.anyOf.map(deref);
    const value = isScalar(node) ? node.value : node === null ? null : undefined;
    if (value !== undefined) {
      const problems = branches.map((b) => (b.properties ? 'must be a mapping' : scalarProblem(value, b)));
      if (problems.some((p) => p === undefined)) return;
      const [start, end] = range(node, keyRange);
      out.push({
        start,
        end,
        severity: 'error',
        code: 'type',
        message: `${where}: ${problems.find((p) => !p!.startsWith('must be null')) ?? problems[0]}`,
      });
      return;
    }
    const objectBranch = branches.find((b) => b.properties);
    if (objectBranch) checkNode(node, objectBranch, path, keyRange, out);
    return;
  }
  if (schema.properties) {
    if (!isMap(node)) {
      const [start, end] = range(node, keyRange);
      out.push({ start, end, severity: 'error', code: 'type', message: `${where}: must be a mapping of keys` });
      return;
    }
    const seen = new Set<string>();
    for (const pair of node.items as Pair<Node, Node | null>[]) {
      const key = isScalar(pair.key) ? String(pair.key.value) : '';
      const [start, end] = range(pair.key, keyRange);
      seen.add(key);
      const child = schema.properties[key];
      if (!child) {
        if (schema.additionalProperties !== false) continue;
        const known = Object.keys(schema.properties);
        const suggestion = closest(key, known);
        out.push({
          start,
          end,
          severity: 'error',
          code: 'unknown-key',
          message: `${path.length ? `${where}: ` : ''}unknown key '${key}'${suggestion ? `; did you mean '${suggestion}'?` : `; allowed: ${known.join(', ')}`}`,
          fix: suggestion ? { title: `Change '${key}' to '${suggestion}'`, text: suggestion } : undefined,
        });
        continue;
      }
      checkNode(pair.value, child, [...path, key], [start, end], out);
    }
    for (const key of schema.required ?? []) {
      if (!seen.has(key)) {
        out.push({
          start: keyRange[0],
          end: keyRange[1],
          severity: 'error',
          code: 'missing-key',
          message: `${where}: required key '${key}' is missing`,
        });
      }
    }
    return;
  }
  if (schema.type === 'object') {
    if (node !== null && !isMap(node)) {
      const [start, end] = range(node, keyRange);
      out.push({ start, end, severity: 'error', code: 'type', message: `${where}: must be a mapping` });
    }
    return;
  }
  if (schema.type === 'array') {
    if (!isSeq(node)) {
      const [start, end] = range(node, keyRange);
      out.push({ start, end, severity: 'error', code: 'type', message: `${where}: must be a list` });
      return;
    }
    node.items.forEach((item, i) =>
      checkNode(item as Node, schema.items ?? {}, [...path, String(i)], range(item as Node, keyRange), out),
    );
    return;
  }
  const value = isScalar(node) ? node.value : node === null ? null : undefined;
  const [start, end] = range(node, keyRange);
  const problem = value === undefined ? `must be ${typeName(schema)}` : scalarProblem(value, schema);
  if (problem) {
    const suggestion = typeof value === 'string' && schema.enum ? closest(value, schema.enum.map(String)) : undefined;
    out.push({
      start,
      end,
      severity: 'error',
      code: schema.enum ? 'enum' : 'value',
      message: `${where}: ${problem}`,
      fix: suggestion ? { title: `Change to '${suggestion}'`, text: suggestion } : undefined,
    });
  }
}

function valueNode(doc: Document, path: string[]): Node | undefined {
  const node = doc.getIn(path, true);
  return node && typeof node === 'object' ? (node as Node) : undefined;
}

function valueOf(doc: Document, path: string[]): unknown {
  return doc.getIn(path);
}

function resolveFrom(base: string, value: string): string {
  return isAbsolute(value) ? value : join(base, value);
}

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
 * the trainer tells them apart (config.py's env_module_is_file). */
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

/** env: a ToolEnv (module and class_name) or exactly one of env.gym, env.methods and env.openenv, as config.py's
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
function episodeSourceChecks(
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

/** `top`: where a finding about the whole config goes (its first line). */
function semanticChecks(doc: Document, configPath: string, top: [number, number], out: Finding[]): void {
  const base = dirname(configPath);
  const at = (path: string[]): [number, number] => range(valueNode(doc, path), [0, 0]);
  const batch = valueOf(doc, ['train', 'batch_size']) ?? 8;
  const group = valueOf(doc, ['rollout', 'group_size']) ?? 4;
  if (typeof batch === 'number' && typeof group === 'number' && group > 0 && batch % group !== 0) {
    const [start, end] = at(['train', 'batch_size']);
    const fixed = Math.max(group, Math.round(batch / group) * group);
    out.push({
      start,
      end,
      severity: 'error',
      code: 'batch-group',
      message: `train.batch_size (${batch}) must be divisible by rollout.group_size (${group})`,
      fix: { title: `Change to ${fixed}`, text: String(fixed) },
    });
  }
  const taskReaders = episodeSourceChecks(doc, base, at, top, out);
  const reader = valueOf(doc, ['agent']) != null ? 'the agent' : 'the env';
  const model = valueOf(doc, ['model', 'path']);
  if (typeof model === 'string' && modelSource(model, base) === 'missing') {
    const [start, end] = at(['model', 'path']);
    out.push({
      start,
      end,
      severity: 'error',
      code: 'model-path',
      message: `model.path: ${resolveFrom(base, model)} does not exist (built-ins: ${BUILTIN_MODELS.join(', ')}; a Hugging Face Hub id is written namespace/name)`,
    });
  }
  let promptChars = 0;
  for (const key of ['train', 'eval']) {
    const data = valueOf(doc, ['data', key]);
    if (typeof data !== 'string') continue;
    const file = resolveFrom(base, data);
    const [start, end] = at(['data', key]);
    if (!existsSync(file) || !statSync(file).isFile()) {
      out.push({ start, end, severity: 'error', code: 'data-file', message: `data.${key}: ${file} does not exist` });
      continue;
    }
    const firstLine = readFileSync(file, 'utf8')
      .split('\n')
      .find((l) => l.trim());
    let record: Record<string, unknown>;
    try {
      record = JSON.parse(firstLine ?? '');
    } catch {
      out.push({
        start,
        end,
        severity: 'error',
        code: 'data-file',
        message: `data.${key}: the first line of ${file} is not a JSON object`,
      });
      continue;
    }
    promptChars = Math.max(promptChars, JSON.stringify(record).length);
    const missing = [...new Set(taskReaders.flatMap(fieldsReadByEnv))].filter((f) => !(f in record));
    if (missing.length) {
      out.push({
        start,
        end,
        severity: 'warning',
        code: 'data-fields',
        message: `data.${key}: the first record has no ${missing.map((m) => `'${m}'`).join(', ')}, which ${reader} reads from each task`,
      });
    }
  }
  const context = valueOf(doc, ['rollout', 'max_context']) ?? 1024;
  const turns = valueOf(doc, ['rollout', 'max_turns']) ?? 4;
  const perTurn = valueOf(doc, ['rollout', 'max_new_tokens']) ?? 64;
  if (typeof context === 'number' && typeof turns === 'number' && typeof perTurn === 'number') {
    const prompt = Math.ceil(promptChars / CHARS_PER_TOKEN);
    const needed = prompt + turns * perTurn;
    if (context < needed) {
      const node = valueNode(doc, ['rollout', 'max_context']);
      const [start, end] = range(node, at(['rollout']));
      out.push({
        start,
        end,
        severity: 'warning',
        code: 'context-budget',
        message: `rollout.max_context (${context}) < prompt (~${prompt} tokens, estimated at ${CHARS_PER_TOKEN} characters a token) + max_turns × max_new_tokens (${turns} × ${perTurn}) = ${needed}: episodes will be truncated`,
      });
    }
  }
}

export function validateRunConfig(text: string, configPath: string): Finding[] {
  const doc = parseDocument(text, { prettyErrors: false });
  const out: Finding[] = doc.errors.map((err) => ({
    start: err.pos[0],
    end: err.pos[1],
    severity: 'error',
    code: 'yaml',
    message: `YAML: ${err.message.split('\n')[0]}`,
  }));
  if (doc.errors.length) return out;
  const contents = doc.contents as Node | null;
  const firstLine: [number, number] = [0, text.indexOf('\n') >= 0 ? text.indexOf('\n') : text.length];
  checkNode(contents, RUN_CONFIG_SCHEMA, [], firstLine, out);
  if (!out.some((f) => f.code === 'type' && f.message.startsWith('the config')))
    semanticChecks(doc, configPath, firstLine, out);
  return out;
}
