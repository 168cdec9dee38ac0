// The context every module of the extension is given, and the one way its commands are registered. rust-analyzer's
// editors/code `Ctx` is the model: one object holds VS Code's extension context, the log channel, the trainer
// connection and the settings, every `register*` takes it and nothing else, and each command is a small function of
// it, so a unit test builds a Ctx from fakes and runs any command against it.
import * as vscode from 'vscode';
import type { CommandId } from './commands';
import type { Settings } from './settings';
import type { TrainerConnection } from './trainerConnection';
import { EditorFailure, sectionFor, TROUBLESHOOTING_PAGE, type FailureKind } from './troubleshooting';

export interface Ctx {
  /** VS Code's context of this extension: its folder, secret and global storage, subscriptions. */
  readonly extensionContext: vscode.ExtensionContext;
  readonly log: vscode.LogOutputChannel;
  /** The one connection to a trainer server, connected or not. */
  readonly connection: TrainerConnection;
  readonly settings: Settings;
}

/** A command's handler: called with the arguments VS Code passes (none from the palette; a Uri, a Runs-view row or
 *  an argument object otherwise); what it returns is the command's result, which tests and other extensions read. */
export type Cmd = (...args: never[]) => Promise<unknown>;

/** A command: its title, which a failure is reported under, and its handler made from the context. */
export interface CommandSpec {
  readonly title: string;
  readonly make: (ctx: Ctx) => Cmd;
}

/** A failure that knows its fixes and its kind: the command it fails, whichever that is (Start Training through the
 *  local server it starts, say), offers the fixes in its error notification before Show Logs, and Learn more opens the
 *  kind's section of the troubleshooting page. */
export class ActionableError extends EditorFailure {
  constructor(
    kind: FailureKind,
    message: string,
    readonly actions: ReadonlyArray<{ readonly title: string; run(): unknown }>,
  ) {
    super(kind, message);
    this.name = 'ActionableError';
  }
}

/** Registers each command under its id. A failure reaches the user: logged, and shown with its fixes (an
 *  ActionableError's), a way to the logs and to its section of the troubleshooting page, instead of a rejected promise
 *  that VS Code reports without context. */
export function registerCommands(ctx: Ctx, commands: Partial<Record<CommandId, CommandSpec>>): vscode.Disposable {
  return vscode.Disposable.from(
    ...Object.entries(commands).map(([id, { title, make }]) => {
      // VS Code's arguments are untyped: each handler declares what it accepts.
      const handler = make(ctx) as (...args: unknown[]) => Promise<unknown>;
      return vscode.commands.registerCommand(id, async (...args: unknown[]) => {
        try {
          return await handler(...args);
        } catch (err) {
          const message = err instanceof Error ? err.message : String(err);
          const fixes = err instanceof ActionableError ? err.actions : [];
          ctx.log.error(`${title}: ${message}`);
          void showError(ctx, `${title}: ${message}`, err, ...fixes.map((fix) => fix.title), SHOW_LOGS).then(
            (choice) => {
              if (choice === SHOW_LOGS) ctx.log.show();
              else fixes.find((fix) => fix.title === choice)?.run();
            },
          );
          return undefined;
        }
      });
    }),
  );
}

export const SHOW_LOGS = 'Show Logs';
/** The button every error notification has. */
const LEARN_MORE = 'Learn more';

/** An error notification with `actions` and Learn more, which opens the section of the troubleshooting page about
 *  `cause` (the error, or its FailureKind: troubleshooting.ts). Resolves to the action chosen, other than Learn more. */
export async function showError(
  ctx: Ctx,
  message: string,
  cause: unknown,
  ...actions: string[]
): Promise<string | undefined> {
  const choice = await vscode.window.showErrorMessage(message, ...actions, LEARN_MORE);
  if (choice !== LEARN_MORE) return choice;
  await openTroubleshooting(ctx, sectionFor(cause));
  return undefined;
}

/** The troubleshooting page the extension ships, in the Markdown preview, scrolled to `section`: it needs no network
 *  and no docs site (there is none to link to), and works where the extension runs (a remote machine too). */
async function openTroubleshooting(ctx: Ctx, section: string): Promise<void> {
  const page = vscode.Uri.joinPath(ctx.extensionContext.extensionUri, TROUBLESHOOTING_PAGE);
  await vscode.commands.executeCommand('markdown.showPreview', page.with({ fragment: section }));
}

/** Whether `action`, which runs code from the workspace, may: only in a trusted workspace (the manifest's
 *  `enablement` says so too, but a command can also be run from code). Says why not, with the way to trust it. */
export function requireTrust(ctx: Ctx, action: string): boolean {
  if (vscode.workspace.isTrusted) return true;
  const manage = 'Manage Workspace Trust';
  const message = `${action} runs code from this workspace, which is not trusted. Replaying trajectory files works without trust.`;
  void showError(ctx, message, 'untrusted', manage).then(
    (choice) => choice && vscode.commands.executeCommand('workbench.trust.manage'),
  );
  return false;
}
