// What differs between two run configs, key by key (dotted paths), values as JSON text.
export interface ConfigDifference {
  key: string;
  base: string | undefined;
  other: string | undefined;
}

function flatten(value: unknown, prefix: string, into: Map<string, string>): Map<string, string> {
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length) {
    for (const [key, child] of Object.entries(value)) flatten(child, prefix ? `${prefix}.${key}` : key, into);
  } else {
    into.set(prefix, JSON.stringify(value));
  }
  return into;
}

export function configDiff(base: Record<string, unknown>, other: Record<string, unknown>): ConfigDifference[] {
  const a = flatten(base, '', new Map());
  const b = flatten(other, '', new Map());
  return [...new Set([...a.keys(), ...b.keys()])]
    .sort()
    .filter((key) => a.get(key) !== b.get(key))
    .map((key) => ({ key, base: a.get(key), other: b.get(key) }));
}
