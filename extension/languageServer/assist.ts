// Completion and hover for run configs, from the same schema the diagnostics use.
import { deref, describeRange, schemaAt, typeName, type SchemaNode } from './schema';

/** The key path that a line of block YAML sits in, found by indentation: the keys above it that are less
 *  indented. `ownKey` is the key written on the line itself, if any. */
export function pathAt(
  text: string,
  offset: number,
): { parent: string[]; ownKey?: string; afterColon: boolean; partial: string } {
  const lineStart = text.lastIndexOf('\n', offset - 1) + 1;
  const lineEnd = text.indexOf('\n', offset) === -1 ? text.length : text.indexOf('\n', offset);
  const line = text.slice(lineStart, lineEnd);
  const upToCursor = text.slice(lineStart, offset);
  const indent = line.length - line.trimStart().length;
  const parent: string[] = [];
  let level = indent;
  const lines = text.slice(0, lineStart).split('\n');
  for (let i = lines.length - 1; i >= 0 && level > 0; i--) {
    const match = /^(\s*)([A-Za-z_][\w-]*)\s*:\s*(#.*)?$/.exec(lines[i]);
    if (match && match[1].length < level) {
      parent.unshift(match[2]);
      level = match[1].length;
    }
  }
  const own = /^\s*([A-Za-z_][\w-]*)\s*:/.exec(line);
  const colon = upToCursor.indexOf(':');
  return {
    parent,
    ownKey: own?.[1],
    afterColon: colon >= 0,
    partial: colon >= 0 ? upToCursor.slice(colon + 1).trim() : upToCursor.trim(),
  };
}

export interface Suggestion {
  label: string;
  kind: 'key' | 'value';
  detail: string;
  documentation?: string;
  insertText: string;
}

function objectProperties(node: SchemaNode | undefined): Record<string, SchemaNode> {
  if (!node) return {};
  const resolved = deref(node);
  return resolved.properties ?? resolved.anyOf?.map(deref).find((n) => n.properties)?.properties ?? {};
}

export function complete(text: string, offset: number): Suggestion[] {
  const at = pathAt(text, offset);
  if (at.afterColon && at.ownKey) {
    const schema = schemaAt([...at.parent, at.ownKey]);
    if (!schema) return [];
    const options =
      schema.enum ??
      (schema.type === 'boolean' ? [true, false] : (schema.anyOf?.flatMap((n) => deref(n).enum ?? []) ?? []));
    return options.map((v) => ({ label: String(v), kind: 'value', detail: typeName(schema), insertText: String(v) }));
  }
  const properties = objectProperties(at.parent.length ? schemaAt(at.parent) : schemaAt([]));
  return Object.entries(properties).map(([key, child]) => {
    const resolved = deref(child);
    const nested = Boolean(objectProperties(resolved) && Object.keys(objectProperties(resolved)).length);
    return {
      label: key,
      kind: 'key',
      detail: typeName(resolved),
      documentation: resolved.description,
      insertText: nested ? `${key}:\n  ` : `${key}: `,
    };
  });
}

/** The full key path of the key written on the line at `offset` (what a hover there describes), if any. */
export function hoveredKey(text: string, offset: number): string[] | undefined {
  const at = pathAt(text, offset);
  return at.ownKey ? [...at.parent, at.ownKey] : undefined;
}

/** `devices`: the connected trainer's, shown on model keys; `modelPathNote`: what kind of path `model.path` is. */
export function hoverText(text: string, offset: number, devices?: string, modelPathNote?: string): string | undefined {
  const path = hoveredKey(text, offset);
  if (!path) return undefined;
  const schema = schemaAt(path);
  if (!schema) return undefined;
  const lines = [`**${path.join('.')}**: ${typeName(schema)}`];
  if (schema.description) lines.push('', schema.description);
  const range = describeRange(schema) ?? schema.anyOf?.map((n) => describeRange(deref(n))).find(Boolean);
  if (range) lines.push('', `Allowed: ${range}`);
  if (schema.default !== undefined) lines.push('', `Default: \`${JSON.stringify(schema.default)}\``);
  if (modelPathNote && path.join('.') === 'model.path') lines.push('', modelPathNote);
  if (devices && path[0] === 'model') lines.push('', '---', devices);
  return lines.join('\n');
}
