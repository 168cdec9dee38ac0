// Where a Tool is defined in a Python file (the replay's "open tool source", the Problems panel's Tool failures), kept
// free of `vscode` so unit tests run without VS Code.

/** The 0-based line that defines the Tool called `toolName`: its `name = "..."` line (or `@tool(name="...")`), else
 * `class <Name>(Tool)`, else the `def` of a function decorated with `@tool`, else a method `def <name>(self, ...)`
 * (an env.methods environment's tools are its public methods). */
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
  if (byFunction >= 0) return byFunction;
  const methodLine = new RegExp(`^\\s+(async\\s+)?def\\s+${escaped}\\s*\\(\\s*self\\b`);
  const byMethod = lines.findIndex((l) => methodLine.test(l));
  return byMethod >= 0 ? byMethod : undefined;
}
