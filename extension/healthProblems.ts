// A run's health alerts as problems on the run config that started it. Pure (no `vscode`): healthDiagnostics.ts
// turns these into Diagnostics and their quick fixes.
import { isMap, parseDocument, type Node } from 'yaml';
import type { HealthEvent } from '../protocol/generated/rpc';

export interface HealthProblem {
  code: string;
  severity: 'error' | 'warning';
  message: string;
  /** Character offsets in the config of the key the alert's fix names (or of the run's `name`). */
  start: number;
  end: number;
  /** The step whose episodes show the problem, to open in the replay. */
  step: number;
}

// The run-config keys a fix names, e.g. "raise rollout.temperature or rollout.group_size".
const CONFIG_KEY = /\b(?:model|env|data|rollout|algorithm|train|health|logging)(?:\.[a-z_]+)+/g;

function rangeOf(node: Node | null | undefined): [number, number] | undefined {
  return node?.range ? [node.range[0], node.range[1]] : undefined;
}

/** Where a key sits in the config: the key itself if present, else the nearest section present above it. */
function keyRange(text: string, dotted: string): [number, number] | undefined {
  const document = parseDocument(text);
  let path = dotted.split('.');
  while (path.length) {
    const parent = path.length > 1 ? document.getIn(path.slice(0, -1), true) : document.contents;
    if (isMap(parent)) {
      const pair = parent.items.find(
        (item) => (item.key as { value?: unknown } | null)?.value === path[path.length - 1],
      );
      const range = rangeOf(pair?.key as Node | undefined);
      if (range) return range;
    }
    path = path.slice(0, -1);
  }
  return undefined;
}

export function healthProblems(alerts: HealthEvent[], configText: string): HealthProblem[] {
  return alerts.map((alert) => {
    const keys = [...alert.fix.matchAll(CONFIG_KEY)].map((m) => m[0]);
    const range = keys.map((key) => keyRange(configText, key)).find(Boolean) ?? keyRange(configText, 'name') ?? [0, 0];
    const shown = alert.trajectory_ids.length ? ` Episodes that show it: ${alert.trajectory_ids.join(', ')}.` : '';
    return {
      code: alert.code,
      severity: alert.severity === 'error' ? 'error' : 'warning',
      message: `Step ${alert.step}: ${alert.message} Fix: ${alert.fix}${shown}`,
      start: range[0],
      end: range[1],
      step: alert.step,
    };
  });
}
