// Start Training and Try Environment on a run config the run-config language server finds errors in: said in the
// editor's words, with the way to the Problems panel and the choice to go on, instead of sending the config to the
// trainer to fail there. Errors only: a warning (a context budget that looks short, say) does not stop a run.
import * as vscode from 'vscode';
import { showError, type Ctx } from './ctx';
import { RUN_CONFIG_DIAGNOSTIC_SOURCE } from './languageServer/protocol';

/** The language server checks the documents open in the editor: a config started from the Explorer or the palette is
 *  opened (not shown) and its first check awaited this long at most; past it, the run starts unchecked. */
const FIRST_CHECK_MS = 3000;
/** The problems the message names; the Problems panel lists them all. */
const NAMED = 3;

/** The answers a run's problems offer (the config's here, the env check's and a Try's Tool failures in runCommands.ts):
 *  go to the Problems panel, or run it as it is, in the command's words. */
export const SHOW_PROBLEMS = 'Show Problems';
export const RUN_ANYWAY = { train: 'Start Anyway', try: 'Try Anyway' } as const;

/** Whether to go on with `mode` on the config at `uri`: yes when the language server finds no error in it, else
 *  what the user answers to the problems, named (`action` is the command's title, the message's first words). */
export async function acceptConfigProblems(
  ctx: Ctx,
  uri: vscode.Uri,
  mode: 'train' | 'try',
  action: string,
): Promise<boolean> {
  const errors = (await languageServerProblems(uri)).filter((d) => d.severity === vscode.DiagnosticSeverity.Error);
  if (errors.length === 0) return true;
  const named = errors.slice(0, NAMED).map((d) => `line ${d.range.start.line + 1}: ${d.message}`);
  const more = errors.length > NAMED ? ` (and ${errors.length - NAMED} more)` : '';
  const count = `${errors.length} problem${errors.length === 1 ? '' : 's'}`;
  const choice = await showError(
    ctx,
    `${action}: ${vscode.workspace.asRelativePath(uri)} has ${count}: ${named.join('; ')}${more}.`,
    'configInvalid',
    SHOW_PROBLEMS,
    RUN_ANYWAY[mode],
  );
  if (choice === SHOW_PROBLEMS) void vscode.commands.executeCommand('workbench.actions.view.problems');
  return choice === RUN_ANYWAY[mode];
}

async function languageServerProblems(uri: vscode.Uri): Promise<vscode.Diagnostic[]> {
  const key = uri.toString();
  if (!vscode.workspace.textDocuments.some((d) => d.uri.toString() === key)) {
    // listening before the open: the check may land before openTextDocument returns
    let done = (): void => undefined;
    const checked = new Promise<void>((resolve) => {
      const timer = setTimeout(() => done(), FIRST_CHECK_MS);
      const changes = vscode.languages.onDidChangeDiagnostics(
        (e) => e.uris.some((u) => u.toString() === key) && done(),
      );
      done = () => {
        clearTimeout(timer);
        changes.dispose();
        resolve();
      };
    });
    await vscode.workspace.openTextDocument(uri);
    await checked;
  }
  return vscode.languages.getDiagnostics(uri).filter((d) => d.source === RUN_CONFIG_DIAGNOSTIC_SOURCE);
}
