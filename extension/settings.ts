// The extension's settings (package.json `contributes.configuration`), read in one place, and where the
// workspace keeps what they are about (its root, its run configs). Commands read them through their Ctx's
// `settings`, so a unit test gives its own.
import { existsSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import * as vscode from 'vscode';

const SECTION = 'agentRl';
/** The setting naming the Python a local trainer server is started with (the walkthrough and the errors name it). */
export const PYTHON_PATH_SETTING = `${SECTION}.pythonPath`;

export interface Settings {
  /** The first workspace folder's path; undefined with no folder open. */
  workspaceRoot(): string | undefined;
  pythonPath(): string;
  runsFolder(root: string): string;
  serverUrl(): string | undefined;
  tryEpisodes(): number;
  findRunConfigs(): Thenable<vscode.Uri[]>;
}

function workspaceRoot(): string | undefined {
  return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
}

/** The Python used when nothing names one: Install the Trainer makes the workspace a .venv with it rather than install
 *  into it (a distribution's own Python refuses pip installs: PEP 668). */
export const FALLBACK_PYTHON = 'python3';

/** `agentRl.pythonPath`, else $AGENTRL_PYTHON, else the workspace's .venv, else `python3` on PATH. */
function pythonPath(): string {
  const configured = vscode.workspace.getConfiguration(SECTION).get<string>('pythonPath')?.trim();
  if (configured) return configured;
  if (process.env.AGENTRL_PYTHON) return process.env.AGENTRL_PYTHON;
  const root = workspaceRoot();
  const venv = root && join(root, '.venv', 'bin', 'python');
  return venv && existsSync(venv) ? venv : FALLBACK_PYTHON;
}

/** Where a local server keeps its run folders: `agentRl.runsFolder` (relative to the workspace) or `.agentrl/runs`. */
function runsFolder(root: string): string {
  const configured =
    vscode.workspace.getConfiguration(SECTION).get<string>('runsFolder')?.trim() || join('.agentrl', 'runs');
  return isAbsolute(configured) ? configured : join(root, configured);
}

/** `agentRl.serverUrl`: empty means "start a local server". */
function serverUrl(): string | undefined {
  return vscode.workspace.getConfiguration(SECTION).get<string>('serverUrl')?.trim() || undefined;
}

function tryEpisodes(): number {
  return vscode.workspace.getConfiguration(SECTION).get<number>('tryEpisodes') ?? 4;
}

/** Tokens live in SecretStorage, one per server URL, never in settings. */
export const tokenKey = (url: string): string => `agentRl.serverToken:${url}`;

/** Run configs are `*.agentrl.yaml` (the language server, the CodeLens and the pickers all use this). */
export const RUN_CONFIG_GLOB = '**/*.agentrl.yaml';

/** The workspace's run configs, outside dependency, virtual-env and run folders. */
function findRunConfigs(): Thenable<vscode.Uri[]> {
  return vscode.workspace.findFiles(RUN_CONFIG_GLOB, '{**/node_modules/**,**/.venv/**,**/.agentrl/**}', 200);
}

/** The settings as the user and the workspace have them. */
export const workspaceSettings: Settings = {
  workspaceRoot,
  pythonPath,
  runsFolder,
  serverUrl,
  tryEpisodes,
  findRunConfigs,
};
