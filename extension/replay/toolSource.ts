// Pure helpers of the replay host, kept free of `vscode` so unit tests run without VS Code.
import type { TrajectoryRecord } from '../../protocol/webview-messages';

/** Parses a `*.trajectories.jsonl` text; a bad line is reported with its number, never dropped silently. */
export function parseTrajectories(text: string): { records: TrajectoryRecord[]; errors: string[] } {
  const records: TrajectoryRecord[] = [];
  const errors: string[] = [];
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    try {
      records.push(JSON.parse(line) as TrajectoryRecord);
    } catch (err) {
      errors.push(`line ${i + 1}: ${(err as Error).message}`);
    }
  });
  return { records, errors };
}

/** The 0-based line that defines the Tool called `toolName`: its `name = "..."` line (or `@tool(name="...")`), else
 * `class <Name>(Tool)`, else the `def` of a function decorated with `@tool`. */
export function findToolDefinition(source: string, toolName: string): number | undefined {
  const lines = source.split('\n');
  const escaped = toolName.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const nameLine = new RegExp(`^\\s*(@(\\w+\\.)?tool\\(.*\\b)?name\\s*(:\\s*\\w+\\s*)?=\\s*["']${escaped}["']`);
  const byName = lines.findIndex((l) => nameLine.test(l));
  if (byName >= 0) return byName;
  const className = toolName
    .split(/[_\-\s]+/)
    .map((p) => p.charAt(0).toUpperCase() + p.slice(1))
    .join('');
  const classLine = new RegExp(`^\\s*class\\s+(${escaped}|${className})\\s*\\(\\s*(\\w+\\.)?Tool\\s*\\)`, 'i');
  const byClass = lines.findIndex((l) => classLine.test(l));
  if (byClass >= 0) return byClass;
  const functionLine = new RegExp(`^\\s*(async\\s+)?def\\s+${escaped}\\s*\\(`);
  const byFunction = lines.findIndex((l, i) => functionLine.test(l) && /^\s*@(\w+\.)?tool\b/.test(lines[i - 1] ?? ''));
  return byFunction >= 0 ? byFunction : undefined;
}
