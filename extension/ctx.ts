// The context every module of the extension is given, and the one way its commands are registered. rust-analyzer's
// editors/code `Ctx` is the model: one object holds VS Code's extension context, the log channel, the trainer
// connection and the settings, every `register*` takes it and nothing else, and each command is a small function of
// it, so a unit test builds a Ctx from fakes and runs any command against it.
import * as vscode from 'vscode';
import type { CommandId } from './commands';
import type { Settings } from './settings';
import type { TrainerConnection } from './trainerConnection';

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

/** A failure that knows its fixes: the command it fails, whichever that is (Start Training through the local server it
 *  starts, say), offers them in its error notification before Show Logs. */
export class ActionableError extends Error {
  constructor(
    message: string,
    readonly actions: ReadonlyArray<{ readonly title: string; run(): unknown }>,
  ) {
    super(message);
    this.name = 'ActionableError';
  }
}

/** Registers each command under its id. A failure reaches the user: logged, and shown with its fixes (an
 *  ActionableError's) and a way to the logs, instead of a rejected promise that VS Code reports without context. */
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
          void vscode.window
            .showErrorMessage(`${title}: ${message}`, ...fixes.map((fix) => fix.title), 'Show Logs')
            .then((choice) => {
              if (choice === 'Show Logs') ctx.log.show();
              else fixes.find((fix) => fix.title === choice)?.run();
            });
          return undefined;
        }
      });
    }),
  );
}

/** Whether `action`, which runs code from the workspace, may: only in a trusted workspace (the manifest's
 *  `enablement` says so too, but a command can also be run from code). Says why not, with the way to trust it. */
export function requireTrust(action: string): boolean {
  if (vscode.workspace.isTrusted) return true;
  void vscode.window
    .showErrorMessage(
      `${action} runs code from this workspace, which is not trusted. Replaying trajectory files works without trust.`,
      'Manage Workspace Trust',
    )
    .then((choice) => choice && vscode.commands.executeCommand('workbench.trust.manage'));
  return false;
}
