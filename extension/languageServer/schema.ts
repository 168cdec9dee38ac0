// The run-config JSON Schema the trainer exports (`agentrl schema`); esbuild inlines this one file, so the
// language server and the trainer can never disagree about what a key means.
import schemaJson from '../../protocol/schemas/run-config.schema.json';

export interface SchemaNode {
  $ref?: string;
  type?: string;
  title?: string;
  description?: string;
  default?: unknown;
  properties?: Record<string, SchemaNode>;
  required?: string[];
  additionalProperties?: boolean | SchemaNode;
  anyOf?: SchemaNode[];
  enum?: unknown[];
  const?: unknown;
  items?: SchemaNode;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
}

export const RUN_CONFIG_SCHEMA = schemaJson as SchemaNode & { $defs: Record<string, SchemaNode> };

export function deref(node: SchemaNode): SchemaNode {
  if (!node.$ref) return node;
  const name = node.$ref.replace('#/$defs/', '');
  const target = RUN_CONFIG_SCHEMA.$defs[name];
  if (!target) throw new Error(`run-config schema: unresolved ${node.$ref}`);
  return { ...target, ...Object.fromEntries(Object.entries(node).filter(([k]) => k !== '$ref')) };
}

/** The schema of the value at `path` (keys from the root), or undefined for unknown keys. */
export function schemaAt(path: string[]): SchemaNode | undefined {
  let node: SchemaNode | undefined = RUN_CONFIG_SCHEMA;
  for (const key of path) {
    if (!node) return undefined;
    const resolved: SchemaNode = deref(node);
    const object: SchemaNode | undefined = resolved.properties
      ? resolved
      : resolved.anyOf?.map(deref).find((n) => n.properties);
    node = object?.properties?.[key];
  }
  return node ? deref(node) : undefined;
}

/** `{minimum: 1, maximum: 64}` -> ">= 1 and <= 64". */
export function describeRange(node: SchemaNode): string | undefined {
  const parts: string[] = [];
  if (node.minimum !== undefined) parts.push(`>= ${node.minimum}`);
  if (node.exclusiveMinimum !== undefined) parts.push(`> ${node.exclusiveMinimum}`);
  if (node.maximum !== undefined) parts.push(`<= ${node.maximum}`);
  if (node.exclusiveMaximum !== undefined) parts.push(`< ${node.exclusiveMaximum}`);
  return parts.length ? parts.join(' and ') : undefined;
}

export function typeName(node: SchemaNode): string {
  if (node.enum) return `one of ${node.enum.map((v) => JSON.stringify(v)).join(', ')}`;
  if (node.anyOf) return node.anyOf.map((n) => typeName(deref(n))).join(' or ');
  if (node.properties) return 'a mapping';
  return node.type ?? 'any value';
}
