// An `env.mcp_servers` entry of a run config: read from what the user types in New Tool > From an MCP server,
// written into the config's YAML (its comments and layout kept), and found again by name so a Try run's MCP
// tool failures land on it in the Problems panel. Pure (no `vscode`).
import { isMap, isSeq, LineCounter, parseDocument, type Document, type YAMLMap } from 'yaml';

/** One entry, as run-config.schema.json's McpServerConfig defines it (the trainer checks it with that). */
export type McpServerEntry = { name: string; timeout_s?: number } & (
  { command: string; args: string[] } | { url: string; headers?: Record<string, string> }
);

const SERVER_NAME = /^[A-Za-z0-9_-]{1,64}$/;

export function validateServerName(name: string): string | undefined {
  return SERVER_NAME.test(name)
    ? undefined
    : 'Letters, digits, "_" and "-" (at most 64): it names the server in errors.';
}

/** Splits a command line as a POSIX shell would for plain words and quotes (no variables, no globs). */
export function splitCommandLine(line: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < line.length; i++) {
    const char = line[i];
    if (quote) {
      if (char === quote) quote = undefined;
      else if (char === '\\' && quote === '"' && i + 1 < line.length) word += line[++i];
      else word += char;
    } else if (char === '"' || char === "'") {
      quote = char;
      inWord = true;
    } else if (char === '\\' && i + 1 < line.length) {
      word += line[++i];
      inWord = true;
    } else if (/\s/.test(char)) {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else {
      word += char;
      inWord = true;
    }
  }
  if (quote) throw new Error(`The command line has an unclosed ${quote} quote.`);
  if (inWord) words.push(word);
  return words;
}

/** What New Tool asks: a stdio server's command line, or a streamable HTTP server's URL. */
export function entryFromInput(input: string, name: string): McpServerEntry {
  const text = input.trim();
  if (/^https?:\/\//.test(text)) {
    if (/\s/.test(text)) throw new Error('A URL has no spaces.');
    return { name, url: text };
  }
  const [command, ...args] = splitCommandLine(text);
  if (!command) throw new Error('Give the command that starts the server (e.g. python server.py) or its http(s) URL.');
  return { name, command, args };
}

/** A name for the entry from what was typed: the URL's host or the script's file name, else "mcp". */
export function suggestServerName(input: string): string {
  const text = input.trim();
  let stem: string | undefined;
  if (/^https?:\/\//.test(text)) {
    try {
      stem = new URL(text).hostname.split('.')[0];
    } catch {
      stem = undefined;
    }
  } else {
    let words: string[] = [];
    try {
      words = splitCommandLine(text);
    } catch {
      words = [];
    }
    const script = [...words].reverse().find((w) => !w.startsWith('-')) ?? '';
    stem = script
      .split('/')
      .pop()
      ?.replace(/\.[^.]*$/, '');
  }
  const cleaned = (stem ?? '').replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64);
  return cleaned && !validateServerName(cleaned) ? cleaned : 'mcp';
}

function serversOf(document: Document): YAMLMap[] {
  const servers = document.getIn(['env', 'mcp_servers']);
  return isSeq(servers) ? servers.items.filter(isMap) : [];
}

/** A listed tool as far as the call format cares: its input's JSON Schema. */
export interface ListedTool {
  name: string;
  parameters?: { properties?: Record<string, { type?: unknown }> };
}

/** Whether the tag call format (`<name>text</name>`) can call `tool`: exactly one string parameter. */
function tagsCanCall(tool: ListedTool): boolean {
  const properties = Object.values(tool.parameters?.properties ?? {});
  return properties.length === 1 && properties[0].type === 'string';
}

/** The run config's YAML with `entry` appended to env.mcp_servers (the list made when there is none); and, when the
 *  config writes calls as tags (`rollout.tool_format: tags`, New Environment's default) and one of the server's
 *  `tools` has not exactly one string parameter, tool_format switched to hermes (JSON arguments), which calls any
 *  tool: a run would otherwise fail at start. `switchedFor`: the tools that made it switch. */
export function addServerEntry(
  configYaml: string,
  entry: McpServerEntry,
  tools: ListedTool[] = [],
): { yaml: string; switchedFor: string[] } {
  const document = parseDocument(configYaml);
  if (document.errors.length) throw new Error(`The run config is not valid YAML: ${document.errors[0].message}`);
  if (!isMap(document.get('env'))) throw new Error('The run config has no env: section to add the server to.');
  if (serversOf(document).some((server) => server.get('name') === entry.name))
    throw new Error(`env.mcp_servers already has a server named "${entry.name}".`);
  if (!isSeq(document.getIn(['env', 'mcp_servers']))) document.setIn(['env', 'mcp_servers'], document.createNode([]));
  document.addIn(['env', 'mcp_servers'], document.createNode(entry));
  const switchedFor =
    document.getIn(['rollout', 'tool_format']) === 'tags'
      ? tools.filter((t) => !tagsCanCall(t)).map((t) => t.name)
      : [];
  if (switchedFor.length) document.setIn(['rollout', 'tool_format'], 'hermes');
  return { yaml: document.toString(), switchedFor };
}

/** The 0-based line of the env.mcp_servers entry named `server`, if the config has one. */
export function findServerEntry(configYaml: string, server: string): number | undefined {
  const lines = new LineCounter();
  const document = parseDocument(configYaml, { lineCounter: lines });
  const entry = serversOf(document).find((item) => item.get('name') === server);
  const offset = entry?.range?.[0];
  return offset === undefined ? undefined : lines.linePos(offset).line - 1;
}
