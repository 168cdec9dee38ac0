// Diagnostics for a run config: the schema's rules at the exact YAML range, then the checks a schema
// cannot express (files that must exist, batch arithmetic, context budget).
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { isMap, isScalar, isSeq, parseDocument, type Document, type Node, type Pair } from 'yaml';
import { resolveFrom, valueNode, valueOf, type Finding } from './configDoc';
import { BUILTIN_MODELS, modelSource } from './modelPath';
import { deref, describeRange, RUN_CONFIG_SCHEMA, typeName, type SchemaNode } from './schema';
import { episodeSourceChecks, fieldsReadByEnv } from './sourceChecks';

export type { Finding, Severity } from './configDoc';

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
      const shown = Math.max(
        problems.findIndex((p) => !p!.startsWith('must be null')),
        0,
      );
      // A name from a list or your own MODULE:NAME (algorithm.name): the list's branch speaks, with its did-you-mean.
      const finding = scalarFinding(where, value, branches[shown], problems[shown]!, range(node, keyRange));
      out.push(branches[shown].enum ? finding : { ...finding, code: 'type' });
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
  const problem = value === undefined ? `must be ${typeName(schema)}` : scalarProblem(value, schema);
  if (problem) out.push(scalarFinding(where, value, schema, problem, range(node, keyRange)));
}

/** A value `schema` refuses: an enum's finding offers the closest name as its fix. */
function scalarFinding(
  where: string,
  value: unknown,
  schema: SchemaNode,
  problem: string,
  [start, end]: [number, number],
): Finding {
  const suggestion = typeof value === 'string' && schema.enum ? closest(value, schema.enum.map(String)) : undefined;
  return {
    start,
    end,
    severity: 'error',
    code: schema.enum ? 'enum' : 'value',
    message: `${where}: ${problem}`,
    fix: suggestion ? { title: `Change to '${suggestion}'`, text: suggestion } : undefined,
  };
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
