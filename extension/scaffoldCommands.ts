// New Environment / New Tool / New ToolEnv: QuickPick and InputBox steps that end in scaffold.ts's pure
// renderers. Each command also takes its answers as an argument object (no prompts), for tests and for
// other extensions; it returns what it wrote.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import * as vscode from 'vscode';
import { parse } from 'yaml';
import { Commands, markSucceeded } from './commands';
import type { McpListToolsResult } from '../protocol/generated/rpc';
import { ensureConnected } from './connectionCommands';
import { registerCommands, showError, type Ctx } from './ctx';
import {
  addServerEntry,
  entryFromInput,
  findServerEntry,
  suggestServerName,
  validateServerName,
  type McpServerEntry,
} from './mcpServerEntry';
import {
  addTool,
  AGENT_FRAMEWORKS,
  parseTools,
  renderEnvironment,
  renderToolEnv,
  validateEnvName,
  validateToolName,
  type AgentFramework,
  type EnvironmentKind,
  type EnvironmentSpec,
  type ToolKind,
} from './scaffold';
import { fitScaffoldedConfig } from './scaffoldFit';
import { EditorFailure } from './troubleshooting';

/** `kind`: Tools in a ToolEnv (the default, naming `tools`), a Gym-style text game of the user's own (`gym`) or an
 * agent the user already has (`agent`, written with `framework`, the OpenAI SDK without it); `model`: the run
 * config's model.path, without it the embedded default model. */
export type NewEnvironmentArgs = { name: string; parent: string; model?: string } & (
  { kind?: 'toolenv'; tools: string[] } | { kind: 'gym' } | { kind: 'agent'; framework?: AgentFramework }
);
/** `kind`: a Tool class (the default), a function under `@tool`, or an MCP server's tools (`mcp`: `name` names
 * the server, `server` is its command line or URL, `config` the run config to add it to). */
export interface NewToolArgs {
  folder: string;
  name: string;
  kind?: ToolKind | 'mcp';
  server?: string;
  config?: string;
}

export interface NewToolEnvArgs {
  folder: string;
  name: string;
}

// The trainer gives a server 60 s to start and list its tools.
const MCP_LIST_TIMEOUT_MS = 75_000;

export function registerScaffoldCommands(ctx: Ctx): vscode.Disposable {
  return registerCommands(ctx, {
    [Commands.newEnvironment]: { title: 'New Environment', make: newEnvironment },
    [Commands.newTool]: { title: 'New Tool', make: newTool },
    [Commands.newToolEnv]: { title: 'New ToolEnv', make: newToolEnv },
  });
}

/** The templates the renderers of scaffold.ts fill in, shipped with the extension. */
const templatesDir = (ctx: Ctx): string => join(ctx.extensionContext.extensionPath, 'extension', 'templates');

function writeNewFiles(folder: string, files: Map<string, string>): void {
  const clash = [...files.keys()].find((file) => existsSync(join(folder, file)));
  if (clash) throw new Error(`${join(folder, clash)} already exists; choose another name.`);
  mkdirSync(folder, { recursive: true });
  for (const [file, content] of files) writeFileSync(join(folder, file), content, { flag: 'wx' });
}

/** New Environment: what plays the episodes, a name, the tool names (a ToolEnv's) or the framework (an agent's), the
 * model, a parent folder; writes the env and opens its run config. */
const newEnvironment =
  (ctx: Ctx) =>
  async (args?: NewEnvironmentArgs): Promise<string | undefined> => {
    const kind = args ? (args.kind ?? 'toolenv') : await pickEnvironmentKind();
    if (!kind) return undefined;
    const steps = kind === 'gym' ? 3 : 4;
    const name =
      args?.name ??
      (await vscode.window.showInputBox({
        title: `New Environment (2/${steps})`,
        prompt: 'Environment name',
        value: { toolenv: 'my-env', gym: 'my-game', agent: 'my-agent' }[kind],
        validateInput: validateEnvName,
        ignoreFocusOut: true,
      }));
    if (!name) return undefined;
    const tools = kind !== 'toolenv' ? undefined : args && 'tools' in args ? args.tools : await askToolNames();
    if (kind === 'toolenv' && !tools?.length) return undefined;
    const framework =
      kind !== 'agent' ? undefined : args ? ('framework' in args && args.framework) || 'openai' : await pickFramework();
    if (kind === 'agent' && !framework) return undefined;
    const model = args ? (args.model ?? DEFAULT_MODEL) : await pickModel(`New Environment (${steps}/${steps})`);
    if (!model) return undefined;
    const parent = args?.parent ?? (await pickParentFolder())?.fsPath;
    if (!parent) return undefined;
    const folder = join(parent, name);
    if (existsSync(folder)) throw new Error(`${folder} already exists; choose another name.`);
    const spec: EnvironmentSpec =
      kind === 'toolenv'
        ? { name, tools: tools ?? [], model }
        : kind === 'agent'
          ? { kind, name, model, framework }
          : { kind, name, model };
    writeNewFiles(folder, renderEnvironment(spec, templatesDir(ctx)));
    ctx.log.info(`New environment written to ${folder}`);
    const config = join(folder, `${name}.agentrl.yaml`);
    await fitScaffoldedConfig(ctx, name, config);
    await vscode.window.showTextDocument(vscode.Uri.file(config));
    markSucceeded('newEnvironment');
    return folder;
  };

async function pickEnvironmentKind(): Promise<EnvironmentKind | undefined> {
  const picked = await vscode.window.showQuickPick(
    [
      {
        label: 'Tools and a ToolEnv',
        description: 'Tool classes the model calls, and a ToolEnv that scores the episode',
        envKind: 'toolenv' as const,
      },
      {
        label: 'Gym-style text environment (env.gym)',
        description:
          "a text game of your own with reset/step (Gymnasium's API, gymnasium optional): the reply is the action",
        envKind: 'gym' as const,
      },
      {
        label: 'From an existing agent (OpenAI-compatible)',
        description: 'your agent code as it is: it calls the model through an OpenAI-compatible endpoint',
        envKind: 'agent' as const,
      },
    ],
    { title: 'New Environment (1/4)', placeHolder: 'What plays the episodes', ignoreFocusOut: true },
  );
  return picked?.envKind;
}

/** What an agent's agent.py is written with: each choice is that framework's own idiom, the same calculator tool. */
async function pickFramework(): Promise<AgentFramework | undefined> {
  const picked = await vscode.window.showQuickPick(
    Object.entries(AGENT_FRAMEWORKS).map(([framework, { label, packages }]) => ({
      label,
      description: `needs ${packages.split(' ').join(' and ')} in the trainer's Python`,
      framework: framework as AgentFramework,
    })),
    { title: 'New Environment (3/4)', placeHolder: 'What your agent is written with', ignoreFocusOut: true },
  );
  return picked?.framework;
}

async function askToolNames(): Promise<string[] | undefined> {
  const answer = await vscode.window.showInputBox({
    title: 'New Environment (3/4)',
    prompt: 'Tool names, comma-separated',
    value: 'search',
    ignoreFocusOut: true,
    validateInput: (v) =>
      splitTools(v).map(validateToolName).find(Boolean) ??
      (splitTools(v).length ? undefined : 'Name at least one tool.'),
  });
  return answer === undefined ? undefined : splitTools(answer);
}

/** New Tool: adds a Tool class to an env's tools.py and registers it in env.py; opens the new class. */
const newTool =
  (ctx: Ctx) =>
  async (args?: NewToolArgs): Promise<string | undefined> => {
    const folder = args?.folder ?? (await pickEnvFolder(ctx, 'New Tool (1/3)'));
    if (!folder) return undefined;
    const kind =
      args?.kind ??
      (args
        ? 'class'
        : (
            await vscode.window.showQuickPick(
              [
                {
                  label: 'Python class',
                  description: 'class Name(Tool) with execute(); full control',
                  toolKind: 'class' as const,
                },
                {
                  label: 'Python function',
                  description: '@tool on a typed function: the schema comes from its hints',
                  toolKind: 'function' as const,
                },
                {
                  label: 'From an MCP server',
                  description: "a server's tools, offered beside the env's own (env.mcp_servers)",
                  toolKind: 'mcp' as const,
                },
              ],
              { title: 'New Tool (2/3)', placeHolder: 'How to write the Tool', ignoreFocusOut: true },
            )
          )?.toolKind);
    if (!kind) return undefined;
    if (kind === 'mcp') return addMcpServer(ctx, folder, args);
    const toolsPath = join(folder, 'tools.py');
    const envPath = join(folder, 'env.py');
    const toolsPy = readFileSync(toolsPath, 'utf8');
    const taken = new Set(parseTools(toolsPy).map((t) => t.name));
    const name =
      args?.name ??
      (await vscode.window.showInputBox({
        title: 'New Tool (3/3)',
        prompt: 'Tool name, as the model calls it',
        ignoreFocusOut: true,
        validateInput: (v) =>
          validateToolName(v) ?? (taken.has(v) ? `tools.py already has a Tool named "${v}".` : undefined),
      }));
    if (!name) return undefined;
    const added = addTool(
      name,
      toolsPy,
      existsSync(envPath) ? readFileSync(envPath, 'utf8') : '',
      templatesDir(ctx),
      kind,
    );
    writeFileSync(toolsPath, added.toolsPy);
    if (added.envPy !== undefined) writeFileSync(envPath, added.envPy);
    else
      void vscode.window.showWarningMessage(
        `Added the Tool to tools.py, but env.py no longer has the "from tools import ..." and "self.tools = [...]" lines it was generated with: register ${name} in your ToolEnv yourself.`,
      );
    ctx.log.info(`New Tool "${name}" added to ${toolsPath}`);
    const document = await vscode.workspace.openTextDocument(toolsPath);
    const line = document
      .getText()
      .split('\n')
      .findIndex((l) => l.includes(kind === 'class' ? `name = "${name}"` : `def ${name}(`));
    await vscode.window.showTextDocument(document, { selection: new vscode.Range(line, 0, line, 0) });
    return toolsPath;
  };

/** New Tool > From an MCP server: its command line or URL and a name, its tools listed by the trainer, then the
 * entry written into the env's run config, which opens at it. */
async function addMcpServer(ctx: Ctx, folder: string, args?: NewToolArgs): Promise<string | undefined> {
  const input =
    args?.server ??
    (await vscode.window.showInputBox({
      title: 'New Tool from an MCP server (1/3)',
      prompt: "The command that starts the server (stdio), run in the config's folder, or its http(s) URL",
      placeHolder: 'python weather_server.py   or   http://127.0.0.1:8000/mcp',
      ignoreFocusOut: true,
      validateInput: (v) => {
        try {
          entryFromInput(v, 'mcp');
          return undefined;
        } catch (err) {
          return (err as Error).message;
        }
      },
    }));
  if (!input) return undefined;
  const name =
    args?.name ??
    (await vscode.window.showInputBox({
      title: 'New Tool from an MCP server (2/3)',
      prompt: 'A name for the server (its tools become name__tool where names collide)',
      value: suggestServerName(input),
      ignoreFocusOut: true,
      validateInput: validateServerName,
    }));
  if (!name) return undefined;
  const problem = validateServerName(name);
  if (problem) throw new Error(problem);
  const configPath = args?.config ?? (await pickConfigIn(folder));
  if (!configPath) return undefined;
  const entry = entryFromInput(input, name);
  const listed = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `Agent RL: listing the tools of MCP server "${name}"` },
    () => listMcpTools(ctx, entry),
  );
  if (!args) {
    const add = { label: `$(add) Add "${name}" to ${basename(configPath)}`, add: true };
    const picked = await vscode.window.showQuickPick(
      [
        add,
        { label: `${listed.tools.length} tool(s)`, kind: vscode.QuickPickItemKind.Separator, add: false },
        ...listed.tools.map((tool) => ({ label: tool.name, detail: tool.description, add: true })),
      ],
      { title: `New Tool from an MCP server (3/3): the tools "${name}" lists`, ignoreFocusOut: true },
    );
    if (!picked?.add) return undefined;
  }
  // Through the editor's document, so an open config (with unsaved edits, too) gets the entry where the user sees it.
  const document = await vscode.workspace.openTextDocument(configPath);
  const { yaml: updated, switchedFor } = addServerEntry(document.getText(), entry, listed.tools);
  const edit = new vscode.WorkspaceEdit();
  edit.replace(document.uri, new vscode.Range(0, 0, document.lineCount, 0), updated);
  if (!(await vscode.workspace.applyEdit(edit)) || !(await document.save()))
    throw new Error(`Could not write the server's entry into ${configPath}.`);
  ctx.log.info(
    `MCP server "${name}" added to ${configPath}: ${listed.tools.map((tool) => tool.name).join(', ') || 'no tools'}`,
  );
  if (switchedFor.length)
    void vscode.window.showInformationMessage(
      `Agent RL: ${basename(configPath)} now writes tool calls as JSON (rollout.tool_format: hermes): ` +
        `${switchedFor.join(', ')} take${switchedFor.length === 1 ? 's' : ''} more than one text argument, which ` +
        `the tag format cannot pass. Show the model a call in that format (the worked example in env.py's reset).`,
    );
  // The extension host's copy of the document hears of the edit after applyEdit resolves; a selection set before
  // that would be shifted by the edit, away from the entry.
  await documentReads(document, updated);
  const line = findServerEntry(updated, name) ?? 0;
  await vscode.window.showTextDocument(document, { selection: new vscode.Range(line, 0, line, 0) });
  return configPath;
}

/** The trainer's `mcp/listTools`: starts the server where runs would, lists its tools, stops it. */
async function listMcpTools(ctx: Ctx, entry: McpServerEntry): Promise<McpListToolsResult> {
  // The server's program runs on the trainer's machine, as it would in a run: a trusted workspace only.
  if (!vscode.workspace.isTrusted)
    throw new EditorFailure(
      'untrusted',
      "Listing an MCP server's tools starts its program; trust this workspace first.",
    );
  await ensureConnected(ctx);
  return ctx.connection.request('mcp/listTools', { server: entry }, MCP_LIST_TIMEOUT_MS);
}

/** Resolves once `document` holds `text` (or after a few seconds, when another edit got there first). */
async function documentReads(document: vscode.TextDocument, text: string): Promise<void> {
  if (document.getText() === text) return;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(done, 5_000);
    const listener = vscode.workspace.onDidChangeTextDocument((change) => {
      if (change.document === document && document.getText() === text) done();
    });
    function done(): void {
      clearTimeout(timer);
      listener.dispose();
      resolve();
    }
  });
}

/** The env folder's run config; asks when it has several. */
async function pickConfigIn(folder: string): Promise<string | undefined> {
  const configs = readdirSync(folder)
    .filter((file) => file.endsWith('.agentrl.yaml'))
    .map((file) => join(folder, file));
  if (configs.length <= 1) {
    if (!configs.length) throw new Error(`${folder} has no *.agentrl.yaml run config to add the server to.`);
    return configs[0];
  }
  const picked = await vscode.window.showQuickPick(
    configs.map((path) => ({ label: basename(path), path })),
    { title: 'New Tool from an MCP server: which run config', ignoreFocusOut: true },
  );
  return picked?.path;
}

/** New ToolEnv: another ToolEnv over an env folder's Tools, with its own run config. */
const newToolEnv =
  (ctx: Ctx) =>
  async (args?: NewToolEnvArgs): Promise<string | undefined> => {
    const folder = args?.folder ?? (await pickEnvFolder(ctx, 'New ToolEnv (1/2)'));
    if (!folder) return undefined;
    const name =
      args?.name ??
      (await vscode.window.showInputBox({
        title: 'New ToolEnv (2/2)',
        prompt: "ToolEnv name (also its run config's name)",
        value: `${basename(folder)}-v2`,
        validateInput: validateEnvName,
        ignoreFocusOut: true,
      }));
    if (!name) return undefined;
    const files = renderToolEnv(
      name,
      readFileSync(join(folder, 'tools.py'), 'utf8'),
      folderModel(folder),
      templatesDir(ctx),
    );
    writeNewFiles(folder, files);
    const module = [...files.keys()].find((f) => f.endsWith('.py'))!;
    ctx.log.info(`New ToolEnv written to ${join(folder, module)}`);
    await vscode.window.showTextDocument(vscode.Uri.file(join(folder, module)));
    return join(folder, module);
  };

const DEFAULT_MODEL = 'smollm2';

/** Which model the new environment's run config trains: a real one by default, so Try Environment shows what a
 * model does with the Tools; `tiny` only for tests (its episodes are noise). */
async function pickModel(title: string): Promise<string | undefined> {
  const choices = [
    {
      label: 'SmolLM2-135M-Instruct',
      description: 'recommended: embedded, runs on CPU, nothing to download',
      model: DEFAULT_MODEL,
    },
    {
      label: 'A local folder or Hugging Face Hub id...',
      description: 'e.g. Qwen/Qwen2.5-0.5B-Instruct',
      model: undefined,
    },
    { label: 'tiny', description: 'a random model built in code, for tests: its episodes are noise', model: 'tiny' },
  ];
  const picked = await vscode.window.showQuickPick(choices, {
    title,
    placeHolder: 'Model to train',
    ignoreFocusOut: true,
  });
  if (!picked || picked.model) return picked?.model;
  return (
    await vscode.window.showInputBox({
      title,
      prompt: 'A local model folder, a .gguf file or a Hugging Face Hub id (namespace/name)',
      ignoreFocusOut: true,
      validateInput: (v) => (v.trim() ? undefined : 'Give a folder, a file or a Hub id.'),
    })
  )?.trim();
}

/** The model of the run config beside a folder's tools.py, so a second ToolEnv trains the same one. */
function folderModel(folder: string): string {
  const config = readdirSync(folder).find((file) => file.endsWith('.agentrl.yaml'));
  const path =
    config && (parse(readFileSync(join(folder, config), 'utf8')) as { model?: { path?: unknown } } | null)?.model?.path;
  return typeof path === 'string' ? path : DEFAULT_MODEL;
}

function splitTools(value: string): string[] {
  return value
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
}

async function pickParentFolder(): Promise<vscode.Uri | undefined> {
  const folders = vscode.workspace.workspaceFolders ?? [];
  if (folders.length === 1) return folders[0].uri;
  if (folders.length > 1)
    return (await vscode.window.showWorkspaceFolderPick({ placeHolder: 'Folder to create the environment in' }))?.uri;
  return (
    await vscode.window.showOpenDialog({ canSelectFolders: true, canSelectFiles: false, openLabel: 'Create Here' })
  )?.[0];
}

/** An env folder: one holding tools.py beside a run config. The active editor's folder comes first. */
async function pickEnvFolder(ctx: Ctx, title: string): Promise<string | undefined> {
  const configs = await ctx.settings.findRunConfigs();
  const folders = [...new Set(configs.map((c) => dirname(c.fsPath)))].filter((f) => existsSync(join(f, 'tools.py')));
  const active = vscode.window.activeTextEditor?.document.uri.fsPath;
  if (folders.length === 0) {
    const create = 'New Environment';
    void showError(
      ctx,
      'No environment in this workspace (a folder with tools.py and a *.agentrl.yaml). Run "Agent RL: New Environment" first.',
      'noEnvironment',
      create,
    ).then((choice) => choice && vscode.commands.executeCommand(Commands.newEnvironment));
    return undefined;
  }
  const sorted = folders.sort(
    (a, b) => Number(!!active?.startsWith(b)) - Number(!!active?.startsWith(a)) || a.localeCompare(b),
  );
  if (sorted.length === 1) return sorted[0];
  const picked = await vscode.window.showQuickPick(
    sorted.map((f) => ({ label: basename(f), description: vscode.workspace.asRelativePath(f), folder: f })),
    { title, placeHolder: 'Environment folder' },
  );
  return picked?.folder;
}
