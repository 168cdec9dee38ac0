// What the run-config checks share: a finding at a range of the config's text, and how they read the YAML document.
import { isAbsolute, join } from 'node:path';
import type { Document, Node } from 'yaml';

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

export function valueNode(doc: Document, path: string[]): Node | undefined {
  const node = doc.getIn(path, true);
  return node && typeof node === 'object' ? (node as Node) : undefined;
}

export function valueOf(doc: Document, path: string[]): unknown {
  return doc.getIn(path);
}

export function resolveFrom(base: string, value: string): string {
  return isAbsolute(value) ? value : join(base, value);
}
