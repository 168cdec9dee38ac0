// Renders a new environment folder (a ToolEnv over Tools, a Gym-style text game of the user's own, or an agent the
// user already has) from extension/templates (their only home). Pure functions: the commands in scaffoldCommands.ts ask the questions and write what these return.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** How a new environment's episodes are played: Tools in a ToolEnv, a text game with Gymnasium's reset/step (run
 * config `env.gym`: the model's reply is the action), or an agent the user already has (run config `agent:`),
 * calling the model through the trainer's OpenAI-compatible endpoint. */
export type EnvironmentKind = 'toolenv' | 'gym' | 'agent';

interface EnvironmentBase {
  /** Folder and run name: lower-case letters, digits, '-' or '_'. */
  name: string;
  /** The run config's model.path: a built-in (`smollm2`, `tiny`), a local folder or a Hugging Face Hub id. */
  model: string;
}

export type EnvironmentSpec =
  | (EnvironmentBase & {
      kind?: 'toolenv';
      /** Tool names as the model calls them: snake_case identifiers. */
      tools: string[];
    })
  | (EnvironmentBase & { kind: 'gym' })
  | (EnvironmentBase & {
      kind: 'agent';
      /** What agent.py is written with; the OpenAI SDK when not given. */
      framework?: AgentFramework;
    });

/** The frameworks an agent scaffold is written with, each in its own idiom (agent-<framework>.py.tmpl): the same
 * calculator tool (agent-calculator.py.tmpl) and the same worked example before the task. */
export type AgentFramework = 'openai' | 'agents-sdk' | 'langgraph' | 'pydantic-ai';

/** Each framework's name as New Environment offers it, and the packages its agent.py needs in the trainer's Python. */
export const AGENT_FRAMEWORKS: Record<AgentFramework, { label: string; packages: string }> = {
  openai: { label: 'OpenAI SDK', packages: 'openai' },
  'agents-sdk': { label: 'OpenAI Agents SDK', packages: 'openai-agents' },
  langgraph: { label: 'LangGraph', packages: 'langgraph langchain-openai' },
  'pydantic-ai': { label: 'Pydantic AI', packages: 'pydantic-ai-slim[openai]' },
};

/** The random `tiny` model (tests) needs a large learning rate to move at all and has nothing to say in many
 * tokens; a real model fine-tunes at a small rate and needs room to write a call and an answer. */
function modelValues(model: string): Record<string, string> {
  const tiny = model === 'tiny';
  return {
    modelPath: /^[\w./~-]+$/.test(model) ? model : JSON.stringify(model), // a JSON string is a YAML string too
    learningRate: tiny ? '0.01' : '1.0e-5',
    maxNewTokens: tiny ? '16' : '128',
    // a small instruct model rambles at temperature 1; the random one needs every bit of spread it has
    temperature: tiny ? '1.0' : '0.7',
    steps: tiny ? '2' : '20',
    checkpointEvery: tiny ? '1' : '5',
  };
}

const ENV_NAME = /^[a-z][a-z0-9_-]{0,63}$/;
const TOOL_NAME = /^[a-z][a-z0-9_]{0,63}$/;

/** Why a name cannot be used, or undefined when it can (InputBox validateInput shape). */
export function validateEnvName(name: string): string | undefined {
  return ENV_NAME.test(name) ? undefined : 'Use lower-case letters, digits, "-" or "_", starting with a letter.';
}

export function validateToolName(name: string): string | undefined {
  return TOOL_NAME.test(name) ? undefined : 'Use a snake_case identifier such as "search" or "run_sql".';
}

export function pascalCase(name: string): string {
  return name
    .split(/[-_]+/)
    .filter(Boolean)
    .map((p) => p[0].toUpperCase() + p.slice(1))
    .join('');
}

function fill(template: string, values: Record<string, string>): string {
  return template.replace(/\{\{(\w+)\}\}/g, (_, key: string) => {
    if (!(key in values)) throw new Error(`template placeholder {{${key}}} has no value`);
    return values[key];
  });
}

const envClassName = (name: string): string => pascalCase(name).replace(/(Env)?$/, 'Env'); // 'web-qa' -> WebQaEnv, 'math-env' -> MathEnv
const gameClassName = (name: string): string => pascalCase(name).replace(/(Game)?$/, 'Game'); // 'coin' -> CoinGame
const reader =
  (templatesDir: string) =>
  (file: string): string =>
    readFileSync(join(templatesDir, file), 'utf8');

function checkTools(tools: string[]): void {
  const problems = tools.map(validateToolName).filter(Boolean);
  if (problems.length) throw new Error(problems.join(' '));
  if (tools.length === 0) throw new Error('An environment needs at least one tool.');
  if (new Set(tools).size !== tools.length) throw new Error('Tool names must be distinct.');
}

/** A Tool tools.py defines: the name the model calls, the Python name env.py imports, and how env.py lists it. */
export interface ParsedTool {
  name: string;
  symbol: string;
  kind: ToolKind;
}

/** A Tool class (`class Search(Tool)`) or a function decorated with `@tool`. */
export type ToolKind = 'class' | 'function';

const instance = (tool: ParsedTool): string => (tool.kind === 'class' ? `${tool.symbol}()` : tool.symbol);

/** The values env.py.tmpl and episodes-toolenv.yaml.tmpl need for a ToolEnv over `tools`. */
function envValues(envName: string, envModule: string, tools: ParsedTool[]): Record<string, string> {
  return {
    envName,
    envClass: envClassName(envName),
    envModule,
    firstToolName: tools[0].name,
    toolImports: tools.map((t) => t.symbol).join(', '),
    toolInstances: tools.map(instance).join(', '),
  };
}

/** The run config: the shared model and training settings around how `kind` plays its episodes (its section,
 * data and rollout settings, from episodes-<kind>.yaml.tmpl). */
function runConfig(kind: EnvironmentKind, values: Record<string, string>, read: (file: string) => string): string {
  const episodes = fill(read(`episodes-${kind}.yaml.tmpl`), values).trimEnd();
  // a ToolEnv's held-out words (data.eval) scored as it trains: the dashboard's eval/reward says it learned
  const evaluation = kind === 'toolenv' ? '\n  eval_every: 10' : '';
  return fill(read('run.agentrl.yaml.tmpl'), { ...values, episodes, evaluation });
}

/** File path (relative to the new folder) -> content. */
export function renderEnvironment(spec: EnvironmentSpec, templatesDir: string): Map<string, string> {
  const problem = validateEnvName(spec.name);
  if (problem) throw new Error(problem);
  const read = reader(templatesDir);
  const config = `${spec.name}.agentrl.yaml`;
  if (spec.kind === 'gym') {
    const values = { envName: spec.name, gameClass: gameClassName(spec.name), ...modelValues(spec.model) };
    return new Map([
      ['game.py', fill(read('gym-game.py.tmpl'), values)],
      ['tasks.jsonl', read('gym-tasks.jsonl.tmpl')],
      [config, runConfig('gym', values, read)],
      ['test_game.py', fill(read('test_game.py.tmpl'), values)],
    ]);
  }
  if (spec.kind === 'agent') {
    const values = { envName: spec.name, ...modelValues(spec.model) };
    const framework = spec.framework ?? 'openai';
    if (!Object.hasOwn(AGENT_FRAMEWORKS, framework))
      throw new Error(`No agent template for "${framework}": ${Object.keys(AGENT_FRAMEWORKS).join(', ')}.`);
    const calculator = read('agent-calculator.py.tmpl').trimEnd();
    return new Map([
      ['agent.py', fill(read(`agent-${framework}.py.tmpl`), { ...values, calculator })],
      ['reward.py', fill(read('agent-reward.py.tmpl'), values)],
      ['tasks.jsonl', read('agent-tasks.jsonl.tmpl')],
      [config, runConfig('agent', values, read)],
    ]);
  }
  checkTools(spec.tools);
  const tools = spec.tools.map((name): ParsedTool => ({ name, symbol: pascalCase(name), kind: 'class' }));
  const values = {
    ...envValues(spec.name, 'env.py', tools),
    ...modelValues(spec.model),
    // the first Tool looks words up in codes.json, which is what the tasks ask; the others echo, to be rewritten
    toolClasses: tools
      .map((t, i) =>
        fill(read(i === 0 ? 'tool-lookup.py.tmpl' : 'tool-class.py.tmpl'), { toolClass: t.symbol, toolName: t.name }),
      )
      .join('\n')
      .trimEnd(),
  };
  return new Map([
    ['tools.py', fill(read('tools.py.tmpl'), values)],
    ['codes.json', read('codes.json.tmpl')],
    ['env.py', fill(read('env.py.tmpl'), values)],
    ['reward.py', fill(read('reward.py.tmpl'), values)],
    ['tasks.jsonl', fill(read('tasks.jsonl.tmpl'), values)],
    ['held-out.jsonl', fill(read('held-out.jsonl.tmpl'), values)],
    [config, runConfig('toolenv', values, read)],
    ['test_env.py', fill(read('test_env.py.tmpl'), values)],
  ]);
}

/** The Tools a tools.py defines, in order: `class <Cls>(Tool)` with its `name = "..."`, and `@tool` functions
 * (named by the function, or by the decorator's `name=`). */
export function parseTools(toolsPy: string): ParsedTool[] {
  const found: Array<{ at: number; tool: ParsedTool }> = [];
  for (const match of toolsPy.matchAll(/^class\s+(\w+)\s*\(\s*Tool\s*\)\s*:/gm)) {
    const body = toolsPy.slice(match.index! + match[0].length);
    const name = /^\s+name\s*(?::\s*\w+\s*)?=\s*["']([^"']+)["']/m.exec(body.split(/^\S/m)[0]);
    found.push({
      at: match.index!,
      tool: { symbol: match[1], name: name?.[1] ?? match[1].toLowerCase(), kind: 'class' },
    });
  }
  for (const match of toolsPy.matchAll(/^@tool(\(.*\))?\s*\n(?:async\s+)?def\s+(\w+)\s*\(/gm)) {
    const named = /\bname\s*=\s*["']([^"']+)["']/.exec(match[1] ?? '');
    found.push({ at: match.index!, tool: { symbol: match[2], name: named?.[1] ?? match[2], kind: 'function' } });
  }
  return found.sort((a, b) => a.at - b.at).map((f) => f.tool);
}

export interface AddedTool {
  toolsPy: string;
  /** env.py with the Tool imported and instantiated, or undefined when env.py was edited beyond recognition. */
  envPy: string | undefined;
}

/** New Tool: appends a Tool class to tools.py and registers it in env.py (its import and `self.tools = [...]`). */
export function addTool(
  toolName: string,
  toolsPy: string,
  envPy: string,
  templatesDir: string,
  kind: ToolKind = 'class',
): AddedTool {
  const problem = validateToolName(toolName);
  if (problem) throw new Error(problem);
  const added: ParsedTool = { name: toolName, symbol: kind === 'class' ? pascalCase(toolName) : toolName, kind };
  const clash = parseTools(toolsPy).find((t) => t.name === toolName || t.symbol === added.symbol);
  if (clash) throw new Error(`tools.py already defines a Tool named "${clash.name}" (${clash.kind} ${clash.symbol}).`);
  const template = kind === 'class' ? 'tool-class.py.tmpl' : 'tool-function.py.tmpl';
  const code = fill(reader(templatesDir)(template), { toolClass: added.symbol, toolName }).trimEnd();
  // a function Tool needs the decorator imported beside Tool
  const imports =
    kind === 'function'
      ? toolsPy.replace(/^from agentrl import ([\w, ]+)$/m, (line, names: string) =>
          names
            .split(',')
            .map((n) => n.trim())
            .includes('tool')
            ? line
            : `from agentrl import ${names.trim()}, tool`,
        )
      : toolsPy;
  const nextToolsPy = `${imports.trimEnd()}\n\n\n${code}\n`;
  const importLine = /^from tools import ([\w, ]+)$/m;
  const toolList = /^(\s+self\.tools = \[)([^\]\n]*)(\])$/m;
  if (!importLine.test(envPy) || !toolList.test(envPy)) return { toolsPy: nextToolsPy, envPy: undefined };
  const nextEnvPy = envPy
    .replace(importLine, (_, names: string) => `from tools import ${names.trim()}, ${added.symbol}`)
    .replace(
      toolList,
      (_, open: string, items: string, close: string) =>
        `${open}${items.trim() ? `${items.trim()}, ` : ''}${instance(added)}${close}`,
    );
  return { toolsPy: nextToolsPy, envPy: nextEnvPy };
}

/** New ToolEnv: another ToolEnv over the folder's Tools (`<name>_env.py`) and a run config that trains it. */
export function renderToolEnv(name: string, toolsPy: string, model: string, templatesDir: string): Map<string, string> {
  const problem = validateEnvName(name);
  if (problem) throw new Error(problem);
  const tools = parseTools(toolsPy);
  if (tools.length === 0)
    throw new Error('tools.py defines no Tools (class Name(Tool), or a function under @tool); add a Tool first.');
  const module = `${name.replace(/-/g, '_')}_env.py`;
  const values = { ...envValues(name, module, tools), ...modelValues(model) };
  const read = reader(templatesDir);
  return new Map([
    [module, fill(read('env.py.tmpl'), values)],
    [`${name}.agentrl.yaml`, runConfig('toolenv', values, read)],
  ]);
}
