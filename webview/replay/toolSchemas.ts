// The tools an episode's model was shown, read from the record's OpenAI function schemas
// (protocol/schemas/trajectory.schema.json `tools`) into what a reader wants of each: its name, what it is for, and
// each parameter's name, type, whether it is required and what it means. The records come from user code and MCP
// servers: any field may be missing or of another shape, and reads as absent then.
import type { TrajectoryRecord } from '../../protocol/webview-messages';

export interface ToolParameter {
  name: string;
  /** The JSON Schema type in words: `string`, `integer | null`, `array of string`, `one of "a", "b"`. */
  type: string;
  required: boolean;
  description: string;
}

export interface ToolDescription {
  name: string;
  description: string;
  parameters: ToolParameter[];
  /** The parameters' whole JSON Schema, for what the list above does not say (nesting, bounds, formats). */
  schema: unknown;
}

type Json = Record<string, unknown>;
const object = (value: unknown): Json =>
  value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : {};
const text = (value: unknown): string => (typeof value === 'string' ? value : '');

/** A JSON Schema's type, in words. */
export function typeInWords(schema: unknown): string {
  const s = object(schema);
  if (Array.isArray(s.enum)) return `one of ${s.enum.map((v) => JSON.stringify(v)).join(', ')}`;
  const alternatives = Array.isArray(s.anyOf) ? s.anyOf : Array.isArray(s.oneOf) ? s.oneOf : undefined;
  if (alternatives) return alternatives.map(typeInWords).join(' | ');
  const types = Array.isArray(s.type) ? s.type.map(text) : [text(s.type)];
  return (
    types
      .filter(Boolean)
      .map((t) => (t === 'array' && s.items ? `array of ${typeInWords(s.items)}` : t))
      .join(' | ') || 'any'
  );
}

export function describeTools(tools: TrajectoryRecord['tools']): ToolDescription[] {
  return tools.map((tool) => {
    // OpenAI's `{type: "function", function: {...}}`, or the function itself
    const entry = object(tool);
    const fn = 'function' in entry ? object(entry.function) : entry;
    const parameters = object(fn.parameters);
    const required = new Set(Array.isArray(parameters.required) ? parameters.required.map(text) : []);
    return {
      name: text(fn.name) || '(unnamed)',
      description: text(fn.description),
      parameters: Object.entries(object(parameters.properties)).map(([name, schema]) => ({
        name,
        type: typeInWords(schema),
        required: required.has(name),
        description: text(object(schema).description),
      })),
      schema: fn.parameters ?? null,
    };
  });
}
