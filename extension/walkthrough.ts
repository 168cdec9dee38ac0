// The Get Started walkthrough (package.json `contributes.walkthroughs`): opened once, on the extension's first
// activation, and kept told whether the configured Python has the trainer, so that its first step offers Start Local
// Server where it would work and how to install agentrl where it would not (the `agentRl.trainerMissing` context
// key picks the step). Its steps check themselves off on the commands and context keys the rest of the extension
// already has; nothing here needs to know about them.
import * as vscode from 'vscode';
import type { Ctx } from './ctx';
import { PYTHON_PATH_SETTING } from './settings';
import { checkTrainerInstall } from './trainerInstall';

/** The walkthrough's id in package.json; VS Code knows it as `<publisher>.<name>#<id>`. */
export const WALKTHROUGH_ID = 'agentRl.gettingStarted';
/** Set once the walkthrough was opened, so it opens on the first activation only (not on every window). */
export const WALKTHROUGH_SHOWN_KEY = 'agentRl.walkthroughShown';
/** True when the configured Python cannot start a local trainer; unset until checked (and in untrusted workspaces). */
export const TRAINER_MISSING_CONTEXT = 'agentRl.trainerMissing';

export function registerWalkthrough(ctx: Ctx): vscode.Disposable {
  const check = (): void => void updateTrainerMissing(ctx).catch((err) => ctx.log.warn(`Looking for agentrl: ${err}`));
  // After activation returns: activate() itself starts no process and waits on nothing (test/bench-activation.ts).
  const afterActivation = setTimeout(() => {
    void openOnFirstActivation(ctx).catch((err) => ctx.log.warn(`Opening the walkthrough: ${err}`));
    check();
  }, 0);
  return vscode.Disposable.from(
    { dispose: () => clearTimeout(afterActivation) },
    vscode.workspace.onDidChangeConfiguration((e) => e.affectsConfiguration(PYTHON_PATH_SETTING) && check()),
    vscode.workspace.onDidGrantWorkspaceTrust(check),
  );
}

/** Opens the walkthrough, once per installation. VS Code opens it by itself when the extension is
 *  installed from the Extensions view, but not when it is installed before the window opens (a .vsix from the
 *  command line, a profile, a remote); a user who turned that off (`workbench.welcomePage.walkthroughs.openOnInstall`)
 *  is not shown it either. Returns whether it opened. */
export async function openOnFirstActivation(ctx: Ctx): Promise<boolean> {
  const state = ctx.extensionContext.globalState;
  if (state.get<boolean>(WALKTHROUGH_SHOWN_KEY)) return false;
  await state.update(WALKTHROUGH_SHOWN_KEY, true);
  const wanted = vscode.workspace.getConfiguration('workbench').get<boolean>('welcomePage.walkthroughs.openOnInstall');
  if (wanted === false) return false;
  await vscode.commands.executeCommand(
    'workbench.action.openWalkthrough',
    `${ctx.extensionContext.extension.id}#${WALKTHROUGH_ID}`,
    false,
  );
  return true;
}

/** Asks the configured Python whether it has agentrl and sets the context key the walkthrough's first step reads.
 *  Running the workspace's `.venv` Python is running the workspace's code: untrusted workspaces are not asked. */
export async function updateTrainerMissing(ctx: Ctx): Promise<boolean | undefined> {
  if (!vscode.workspace.isTrusted) return undefined;
  const python = ctx.settings.pythonPath();
  const install = await checkTrainerInstall(python, ctx.settings.workspaceRoot());
  const missing = install !== 'found';
  if (install === 'missing') ctx.log.info(`${python} has no agentrl: Start Local Server needs it installed there.`);
  if (install === 'noPython')
    ctx.log.info(`${python} could not be run: set "${PYTHON_PATH_SETTING}" to start a local server.`);
  await vscode.commands.executeCommand('setContext', TRAINER_MISSING_CONTEXT, missing);
  return missing;
}
