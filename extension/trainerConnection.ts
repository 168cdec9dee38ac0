// The one connection to a trainer server the extension holds: a local server it started (and stops), or a
// remote URL with a token from SecretStorage. Feeds the Runs model from `run/list` and the event stream,
// forwards run logs and health alerts into the log channel by level, announces the health alerts that start
// while it watches, and the devices the server has (for the language server).
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import {
  ENDED_RUN_STATUSES,
  type EpisodeRerollProgressParams,
  type HealthEvent,
  type InitializeResult,
  type RpcMethods,
  type RunEventParams,
  type RunInfo,
  type RunStartParams,
} from '../protocol/generated/rpc';
import { startLocalServer, type LocalServer } from './localServer';
import { describeHealth, RunsModel } from './runsModel';
import { TrainerClient, TrainerRequestError, type ConnectionState } from './trainerClient';
import { TrajectoryCache } from './trajectoryCache';
import { webSocketFactory } from './webSocket';

export type ServerKind = 'local' | 'remote';

export interface HealthAlert {
  runId: string;
  runName: string;
  alert: HealthEvent;
}

/** A warning in a run's log, as the trainer wrote it. */
export interface RunWarning {
  runId: string;
  runName: string;
  message: string;
}

/** A run this client started: its id, and its end (its final status; undefined if the connection ends first). */
export interface RunHandle {
  runId: string;
  ended: Promise<RunInfo['status'] | undefined>;
}

export class TrainerConnection implements vscode.Disposable {
  readonly model = new RunsModel();
  /** Trajectory records fetched so far: every reader of records goes through it. */
  readonly records = new TrajectoryCache(
    async (runId, ids) => (await this.request('trajectory/get', { runId, ids })).records,
  );
  private client: TrainerClient | undefined;
  private localServer: LocalServer | undefined;
  private localRunsDir: string | undefined;
  private kindValue: ServerKind | undefined;
  /** Per run: events up to this seq happened before we looked, so their logs and alerts are not replayed. */
  private readonly announceAfter = new Map<string, number>();
  private readonly stateEmitter = new vscode.EventEmitter<ConnectionState>();
  private readonly runEventEmitter = new vscode.EventEmitter<RunEventParams>();
  private readonly healthAlertEmitter = new vscode.EventEmitter<HealthAlert>();
  private readonly runWarningEmitter = new vscode.EventEmitter<RunWarning>();
  private readonly devicesEmitter = new vscode.EventEmitter<InitializeResult['devices'] | null>();
  private readonly localServerLostEmitter = new vscode.EventEmitter<string>();
  private readonly rerollProgressEmitter = new vscode.EventEmitter<EpisodeRerollProgressParams>();
  /** The connection's state, including 'idle' after a disconnect. */
  readonly onDidChangeState = this.stateEmitter.event;
  readonly onRunEvent = this.runEventEmitter.event;
  /** A health alert that started while this client watched the run (not one from its history). */
  readonly onHealthAlert = this.healthAlertEmitter.event;
  /** A warning a run logged while this client watched it (the memory plan's, the config's, an engine's fallback):
   *  what the trainer says only in the run's log otherwise. */
  readonly onRunWarning = this.runWarningEmitter.event;
  /** The server's devices after each initialize, and null when the connection ends (the language server's hovers
   *  say what a run would have to work with). */
  readonly onDidChangeDevices = this.devicesEmitter.event;
  /** The local server this connection started exited without being asked to (killed, crashed): why, in words. Its
   *  runs go on in their own processes; the Runs view empties with the connection. */
  readonly onLocalServerLost = this.localServerLostEmitter.event;
  /** Where a re-roll this client asked for with a progress token stands (`episode/rerollProgress`). */
  readonly onRerollProgress = this.rerollProgressEmitter.event;

  constructor(
    private readonly extensionContext: vscode.ExtensionContext,
    private readonly log: vscode.LogOutputChannel,
  ) {}

  get state(): ConnectionState {
    return this.client?.state ?? 'idle';
  }

  get kind(): ServerKind | undefined {
    return this.kindValue;
  }

  get url(): string | undefined {
    return this.client?.url;
  }

  get server(): InitializeResult | undefined {
    return this.client?.server;
  }

  get isConnected(): boolean {
    return this.client?.state === 'connected';
  }

  request<M extends keyof RpcMethods>(
    method: M,
    params: RpcMethods[M]['params'],
    timeoutMs?: number,
  ): Promise<RpcMethods[M]['result']> {
    if (!this.client)
      return Promise.reject(
        new TrainerRequestError(
          method,
          'not-connected',
          'Not connected to a trainer server. Run "Agent RL: Start Local Server" or "Agent RL: Connect to Server".',
        ),
      );
    return this.client.request(method, params, timeoutMs);
  }

  /** Streams a run's events (once per run; a reconnect resubscribes by itself). */
  async follow(runId: string): Promise<void> {
    if (!this.client) return;
    await this.client.subscribe(runId);
  }

  /** Starts `agentrl serve` with `python` and connects to it; the server lives until disconnect or deactivate. */
  async startLocal(python: string, cwd: string, runsDir: string, signal?: AbortSignal): Promise<InitializeResult> {
    await this.disconnect();
    const tokenFile = this.localTokenFile();
    const server = await startLocalServer({
      python,
      cwd,
      runsDir,
      tokenFile: tokenFile.path,
      log: this.log,
      signal,
    });
    this.localServer = server;
    this.localRunsDir = runsDir;
    void server.exited.then(({ code, signal: killed }) => {
      if (this.localServer !== server) return;
      this.localServer = undefined;
      const why = `the local trainer server exited (${killed ?? `exit code ${code}`})`;
      this.log.error(`${why[0].toUpperCase()}${why.slice(1)}.`);
      void this.disconnect().then(() => this.localServerLostEmitter.fire(why));
    });
    try {
      return await this.open('local', server.url, tokenFile.token);
    } catch (err) {
      await this.disconnect();
      throw err;
    }
  }

  /** The run folders' folder of the local server this window started, while it runs; undefined for a remote one
   *  (its runs are on another machine). */
  get localRunsFolder(): string | undefined {
    return this.localServer ? this.localRunsDir : undefined;
  }

  /** Connects to `url` with `token`; a wss:// server's certificate must be the one whose SHA-256 fingerprint is
   *  `pinnedCertificate`, or, none given, one a certificate authority vouches for (serverCertificates.ts). */
  async connectRemote(url: string, token: string | undefined, pinnedCertificate?: string): Promise<InitializeResult> {
    await this.disconnect();
    return this.open('remote', url, token, pinnedCertificate);
  }

  /** Closes the connection; a local server is asked to shut down, then terminated, then killed. */
  async disconnect(): Promise<void> {
    const client = this.client;
    const server = this.localServer;
    this.client = undefined;
    this.localServer = undefined;
    this.kindValue = undefined;
    if (client) {
      if (server && client.state === 'connected')
        await client.request('server/shutdown', {}, 2000).catch(() => undefined);
      client.dispose();
    }
    if (server) {
      await Promise.race([server.exited, new Promise((resolve) => setTimeout(resolve, 3000))]);
      await server.stop(5000);
    }
    this.model.clear();
    this.records.clear();
    this.announceAfter.clear();
    this.devicesEmitter.fire(null);
    this.stateEmitter.fire('idle');
  }

  /** Re-reads the run list (after a start, on reconnect) and follows every run that is still going. */
  async refresh(): Promise<void> {
    const { runs } = await this.request('run/list', {});
    for (const run of runs) if (!this.announceAfter.has(run.runId)) this.announceAfter.set(run.runId, run.lastSeq);
    this.model.setRuns(runs);
    await Promise.all(runs.filter((r) => this.model.isActive(r.runId)).map((r) => this.follow(r.runId)));
  }

  /** Starts a run and follows it from its first event; the handle's `ended` settles when it reaches a final status. */
  async startRun(params: RunStartParams): Promise<RunHandle> {
    const { runId } = await this.request('run/start', params);
    await this.adopt(runId);
    return { runId, ended: this.ended(runId) };
  }

  private ended(runId: string): Promise<RunInfo['status'] | undefined> {
    return new Promise((resolve) => {
      const finalStatus = (): RunInfo['status'] | undefined => {
        const status = this.model.run(runId)?.status;
        return status && ENDED_RUN_STATUSES.has(status) ? status : undefined;
      };
      const done = (status: RunInfo['status'] | undefined): void => {
        events.dispose();
        states.dispose();
        resolve(status);
      };
      const events = this.onRunEvent((event) => {
        if (event.runId === runId && event.type === 'status' && finalStatus()) done(finalStatus());
      });
      const states = this.onDidChangeState((state) => {
        if (state === 'idle' || state === 'closed') done(undefined);
      });
      if (finalStatus()) done(finalStatus());
    });
  }

  /** Registers a run this client just started: shown at once, followed from its first event. */
  async adopt(runId: string): Promise<void> {
    this.announceAfter.set(runId, 0);
    this.model.upsertRun(await this.request('run/get', { runId }));
    await this.follow(runId);
  }

  dispose(): void {
    void this.disconnect();
    this.stateEmitter.dispose();
    this.runEventEmitter.dispose();
    this.healthAlertEmitter.dispose();
    this.runWarningEmitter.dispose();
    this.devicesEmitter.dispose();
    this.rerollProgressEmitter.dispose();
  }

  private async open(
    kind: ServerKind,
    url: string,
    token: string | undefined,
    pinnedCertificate?: string,
  ): Promise<InitializeResult> {
    const client = new TrainerClient({
      url,
      openSocket: webSocketFactory(token, pinnedCertificate),
      clientInfo: {
        name: 'agent-rl-studio',
        version: String(this.extensionContext.extension.packageJSON.version ?? '0'),
      },
    });
    this.client = client;
    this.kindValue = kind;
    client.onStateChange(({ state, reason }) => {
      if (this.client !== client) return;
      if (state === 'reconnecting') this.log.warn(`Lost the trainer server at ${url} (${reason}); reconnecting.`);
      if (state === 'closed' && reason && reason !== 'closed by the client')
        this.log.error(`Trainer server connection closed: ${reason}`);
      if (state === 'closed' || state === 'reconnecting') this.devicesEmitter.fire(null);
      this.stateEmitter.fire(state);
    });
    client.onInitialized((result) => {
      this.log.info(
        `Connected to trainer server ${result.serverVersion} at ${url} (protocol ${result.protocolVersion}; ${describeDevices(result.devices)})`,
      );
      this.devicesEmitter.fire(result.devices);
      void this.refresh().catch((err: Error) => this.log.error(`Could not list runs: ${err.message}`));
    });
    client.onRunEvent((event) => {
      this.model.applyEvent(event);
      if (event.type === 'trajectory') this.records.forget(event.runId, event.data.id);
      if (event.seq > (this.announceAfter.get(event.runId) ?? 0)) this.announce(event);
      this.runEventEmitter.fire(event);
    });
    client.onNotification((notification) => {
      if (notification.method === 'episode/rerollProgress') this.rerollProgressEmitter.fire(notification.params);
      if (notification.method === 'run/behind') {
        const { runId, sentSeq, latestSeq } = notification.params;
        const message = `Run ${runId}: the event stream is ${latestSeq - sentSeq} events behind the trainer; the Runs view catches up as they arrive.`;
        // Replaying a finished run's long log from its start is expected; falling behind a live run is worth a warning.
        if (this.model.isActive(runId)) this.log.warn(message);
        else this.log.info(message);
      }
    });
    return client.connect();
  }

  /** An event that happened while we watched: logs into the channel, and a health alert to its listeners too. */
  private announce(event: RunEventParams): void {
    const name = this.model.runName(event.runId);
    if (event.type === 'log') {
      const text = `[${name}] ${event.data.message}`;
      switch (event.data.level) {
        case 'trace':
          this.log.trace(text);
          break;
        case 'debug':
          this.log.debug(text);
          break;
        case 'warning':
          this.log.warn(text);
          this.runWarningEmitter.fire({ runId: event.runId, runName: name, message: event.data.message });
          break;
        case 'error':
          this.log.error(text);
          break;
        default:
          this.log.info(text);
      }
    } else if (event.type === 'status') {
      const { status, step, totalSteps, message } = event.runInfo;
      const text = `[${name}] ${status} at step ${step}/${totalSteps}${message ? `: ${message}` : ''}`;
      if (status === 'failed') this.log.error(`${text}${event.data.traceback ? `\n${event.data.traceback}` : ''}`);
      else this.log.info(text);
    } else if (event.type === 'worker_restarted') {
      this.log.warn(`[${name}] step ${event.data.step}: ${event.data.message}`);
    } else if (event.type === 'health') {
      const alert = event.data;
      const text = `[${name}] step ${alert.step}: ${alert.code}: ${describeHealth(alert)}`;
      if (alert.resolved) {
        this.log.info(text);
      } else {
        if (alert.severity === 'error') this.log.error(text);
        else this.log.warn(text);
        this.healthAlertEmitter.fire({ runId: event.runId, runName: name, alert });
      }
    }
  }

  /** A fresh random token per server start, in a file only this user can read (never on a command line). */
  private localTokenFile(): { path: string; token: string } {
    const dir = this.extensionContext.globalStorageUri.fsPath;
    if (!existsSync(dir)) mkdirSync(dir, { recursive: true });
    const path = join(dir, 'local-server.token');
    const token = randomBytes(32).toString('hex');
    writeFileSync(path, token, { mode: 0o600 });
    chmodSync(path, 0o600);
    return { path, token };
  }
}

export function describeDevices(devices: InitializeResult['devices']): string {
  const gib = (bytes?: number) => (bytes ? ` ${(bytes / 2 ** 30).toFixed(0)} GiB` : '');
  const gpus = devices.gpus.map((g) => `${g.name}${gib(g.memoryBytes)}`);
  return `CPU ${devices.cpu.cores} cores${gib(devices.cpu.memoryBytes)}${gpus.length ? `, GPU ${gpus.join(', ')}` : ', no GPU'}`;
}
