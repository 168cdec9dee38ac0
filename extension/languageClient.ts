// Starts the run-config language server (dist/languageServer.js) over IPC and keeps it alive: its logs go
// to the extension's LogOutputChannel, its protocol trace follows that channel's level, a crash is reported
// and the server restarted (a few times), and `agentRl.restartLanguageServer` restarts it on demand.
import { dirname } from 'node:path';
import * as vscode from 'vscode';
import {
  CloseAction,
  ErrorAction,
  LanguageClient,
  State,
  Trace,
  TransportKind,
  type CloseHandlerResult,
  type ErrorHandler,
  type ErrorHandlerResult,
  type LanguageClientOptions,
  type ServerOptions,
} from 'vscode-languageclient/node';
import { Commands } from './commands';
import { registerCommands, SHOW_LOGS, showError, type Ctx } from './ctx';
import { memoryPlanRequest, trainerDevicesNotification, type TrainerDevicesParams } from './languageServer/protocol';
import { onFirstRunConfig } from './runConfigDocuments';
import { RUN_CONFIG_GLOB } from './settings';

/** A hover waits this long for the trainer's memory plan (a config.json read, a tiny model's tokenizer built). */
const MEMORY_PLAN_TIMEOUT_MS = 5_000;
/** More crashes than this within CRASH_WINDOW_MS and the server stays down until the user restarts it. */
const MAX_CRASHES = 4;
const CRASH_WINDOW_MS = 3 * 60_000;

export interface LanguageClientHandle {
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export function traceFor(level: vscode.LogLevel): Trace {
  if (level === vscode.LogLevel.Trace) return Trace.Verbose;
  if (level === vscode.LogLevel.Debug) return Trace.Messages;
  return Trace.Off;
}

/** Restart after a crash unless the server keeps crashing; JSON-RPC errors are reported and the client goes on. */
export function crashPolicy(ctx: Ctx, now: () => number = Date.now): ErrorHandler {
  const { log } = ctx;
  const crashes: number[] = [];
  return {
    error(error, message, count): ErrorHandlerResult {
      log.error(`Run-config language server: ${error.message}${message ? ` (on ${message.jsonrpc})` : ''}`);
      return { action: (count ?? 0) <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown, handled: true };
    },
    closed(): CloseHandlerResult {
      const time = now();
      crashes.push(time);
      while (crashes.length && crashes[0] < time - CRASH_WINDOW_MS) crashes.shift();
      if (crashes.length > MAX_CRASHES) {
        const message = `The run-config language server stopped ${crashes.length} times in 3 minutes and will not be restarted. Run "Agent RL: Restart Run-Config Language Server" after fixing the cause (see the log).`;
        log.error(message);
        void showError(ctx, message, 'languageServerStopped', SHOW_LOGS).then((choice) => choice && log.show());
        return { action: CloseAction.DoNotRestart, handled: true };
      }
      log.warn('Run-config language server stopped unexpectedly; restarting it.');
      return { action: CloseAction.Restart, handled: true };
    },
  };
}

/** Starts the client (its server follows) when the window first opens a run config; the trainer connection's
 *  devices reach the server as they change. */
export function startLanguageClient(ctx: Ctx): LanguageClientHandle {
  const { extensionContext, log } = ctx;
  const module = extensionContext.asAbsolutePath('dist/languageServer.js');
  const serverOptions: ServerOptions = {
    run: { module, transport: TransportKind.ipc },
    debug: { module, transport: TransportKind.ipc, options: { execArgv: ['--nolazy', '--inspect=6011'] } },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ language: 'yaml', pattern: RUN_CONFIG_GLOB }],
    outputChannel: log,
    traceOutputChannel: log,
    errorHandler: crashPolicy(ctx),
  };
  const client = new LanguageClient(
    'agentRl.runConfig',
    'Agent RL run-config language server',
    serverOptions,
    clientOptions,
  );
  let devices: TrainerDevicesParams | null = null;

  const sendDevices = async (): Promise<void> => {
    if (client.state === State.Running) await client.sendNotification(trainerDevicesNotification, devices);
  };
  // The language server's hover asks for the trainer's memory plan through here: only the extension host holds the
  // trainer connection. A local trainer shares this filesystem, so a relative model.path resolves where the config is.
  client.onRequest(memoryPlanRequest, async ({ config, configPath }) => {
    if (!ctx.connection.isConnected) return null;
    const where = ctx.connection.kind === 'local' ? { configDir: dirname(configPath) } : {};
    try {
      return await ctx.connection.request('config/memoryPlan', { config, ...where }, MEMORY_PLAN_TIMEOUT_MS);
    } catch (err) {
      return { unavailable: err instanceof Error ? err.message : String(err) };
    }
  });
  const start = async (): Promise<void> => {
    try {
      await client.start();
      await client.setTrace(traceFor(log.logLevel));
    } catch (err) {
      log.error(`Run-config language server failed to start: ${err instanceof Error ? err.message : String(err)}`);
    }
  };

  const handle: LanguageClientHandle = {
    async restart() {
      log.info('Restarting the run-config language server.');
      if (client.isRunning()) await client.stop();
      await start();
    },
    async stop() {
      if (client.isRunning()) await client.stop();
    },
  };

  extensionContext.subscriptions.push(
    registerCommands(ctx, {
      [Commands.restartLanguageServer]: {
        title: 'Restart Run-Config Language Server',
        make: () => () => handle.restart(),
      },
    }),
    ctx.connection.onDidChangeDevices((next) => {
      devices = next;
      void sendDevices();
    }),
    log.onDidChangeLogLevel((level) => void client.setTrace(traceFor(level))),
    client.onDidChangeState((event) => {
      if (event.newState === State.Running) void sendDevices(); // a (re)started server starts without them
    }),
    { dispose: () => void handle.stop() },
    onFirstRunConfig(() => void start()),
  );
  return handle;
}
