// A Ctx for the command modules' unit tests: a trainer connection that answers requests from a table and keeps a
// real RunsModel, a log that keeps its lines, settings the test sets, and secret storage in a Map. Import after
// ./vscodeStub.
import type {
  EpisodeRerollProgressParams,
  InitializeResult,
  RpcMethods,
  RunEventParams,
  RunInfo,
  RunStartParams,
} from '../../protocol/generated/rpc';
import type { TrajectoryRecord } from '../../protocol/webview-messages';
import type { Ctx } from '../../extension/ctx';
import { RunsModel } from '../../extension/runsModel';
import type { Settings } from '../../extension/settings';
import type { HealthAlert, RunWarning, TrainerConnection } from '../../extension/trainerConnection';
import { EventEmitter, Uri } from './vscodeStub';

type Method = keyof RpcMethods;
type Answers = { [M in Method]?: (params: RpcMethods[M]['params']) => RpcMethods[M]['result'] };

export class FakeConnection {
  readonly model = new RunsModel();
  isConnected = true;
  kind: 'local' | 'remote' | undefined = 'local';
  url: string | undefined = 'ws://127.0.0.1:4242';
  state: 'idle' | 'connecting' | 'connected' | 'reconnecting' | 'closed' = 'connected';
  /** What the server said at initialize. */
  server: InitializeResult | undefined = {
    serverVersion: '0.1.0',
    protocolVersion: '2.0',
    capabilities: {},
    devices: { cpu: { name: 'x86_64', cores: 2 }, gpus: [] },
  };
  /** Every request, in order. */
  readonly requests: Array<{ method: Method; params: unknown }> = [];
  /** The server's answer to each method; a method without one fails. */
  answers: Answers = {};
  /** The local server's runs folder; undefined: a remote server (or none). */
  localRunsFolder: string | undefined = undefined;
  /** Calls of the connection's other methods, in words ("startLocal python3 /ws", "disconnect", ...). */
  readonly calls: string[] = [];
  /** Trajectory records by id, for `records.get`. */
  readonly trajectoryRecords = new Map<string, TrajectoryRecord>();
  readonly runEvents = new EventEmitter<RunEventParams>();
  readonly onRunEvent = this.runEvents.event;
  /** Fire after changing `isConnected`, as the connection says its state changed. */
  readonly stateChanges = new EventEmitter<string>();
  readonly onDidChangeState = this.stateChanges.event;
  readonly onHealthAlert = new EventEmitter<HealthAlert>().event;
  readonly onRunWarning = new EventEmitter<RunWarning>().event;
  readonly onDidChangeDevices = new EventEmitter<unknown>().event;
  readonly localServerLost = new EventEmitter<string>();
  readonly onLocalServerLost = this.localServerLost.event;
  readonly rerollProgress = new EventEmitter<EpisodeRerollProgressParams>();
  readonly onRerollProgress = this.rerollProgress.event;
  readonly records = {
    get: async (_runId: string, ids: string[]): Promise<TrajectoryRecord[]> =>
      ids.map((id) => this.trajectoryRecords.get(id)!),
  };
  /** What `startLocal` and `connectRemote` (with its token and pinned certificate) do (connect, by default). */
  connecting: (token?: string, pinnedCertificate?: string) => Promise<void> = async () => {
    this.isConnected = true;
  };

  async request<M extends Method>(method: M, params: RpcMethods[M]['params']): Promise<RpcMethods[M]['result']> {
    this.requests.push({ method, params });
    const answer = this.answers[method] as ((params: RpcMethods[M]['params']) => RpcMethods[M]['result']) | undefined;
    if (!answer) throw new Error(`the fake server has no answer to ${method}`);
    return answer(params);
  }
  async startLocal(python: string, cwd: string, runsDir: string): Promise<void> {
    this.calls.push(`startLocal ${python} ${cwd} ${runsDir}`);
    this.kind = 'local';
    await this.connecting();
  }
  async connectRemote(url: string, token: string | undefined, pinnedCertificate?: string): Promise<void> {
    const pinned = pinnedCertificate === undefined ? '' : ` pinned ${pinnedCertificate}`;
    this.calls.push(`connectRemote ${url} ${token ?? '(no token)'}${pinned}`);
    this.kind = 'remote';
    this.url = url;
    await this.connecting(token, pinnedCertificate);
  }
  async disconnect(): Promise<void> {
    this.calls.push('disconnect');
    this.isConnected = false;
  }
  async refresh(): Promise<void> {
    this.calls.push('refresh');
  }
  async follow(runId: string): Promise<void> {
    this.calls.push(`follow ${runId}`);
  }
  async startRun(params: RunStartParams): Promise<{ runId: string; ended: Promise<RunInfo['status']> }> {
    const { runId } = await this.request('run/start', params);
    return { runId, ended: Promise.resolve(this.model.run(runId)?.status ?? 'completed') };
  }
}

export class FakeLog {
  readonly lines: string[] = [];
  shown = 0;
  readonly info = (text: string): void => void this.lines.push(`info: ${text}`);
  readonly warn = (text: string): void => void this.lines.push(`warn: ${text}`);
  readonly error = (text: string): void => void this.lines.push(`error: ${text}`);
  readonly debug = (text: string): void => void this.lines.push(`debug: ${text}`);
  readonly trace = (text: string): void => void this.lines.push(`trace: ${text}`);
  readonly show = (): void => void this.shown++;
}

/** Settings as a test sets them: run configs are the stub's Uris. */
export type FakeSettings = Omit<Settings, 'findRunConfigs'> & { findRunConfigs(): Promise<Uri[]> };

export interface FakeCtx {
  ctx: Ctx;
  connection: FakeConnection;
  log: FakeLog;
  secrets: Map<string, string>;
  /** The extension context's globalState. */
  globalState: Map<string, unknown>;
  settings: FakeSettings;
  /** What was pushed to the extension context's subscriptions. */
  subscriptions: Array<{ dispose(): unknown }>;
}

/** `extensionPath` is the repository: the scaffold commands read extension/templates from it. */
export function fakeCtx(settings: Partial<FakeSettings> = {}): FakeCtx {
  const connection = new FakeConnection();
  const log = new FakeLog();
  const secrets = new Map<string, string>();
  const globalState = new Map<string, unknown>();
  const subscriptions: Array<{ dispose(): unknown }> = [];
  const root = `${__dirname}/../..`;
  const allSettings: FakeSettings = {
    workspaceRoot: () => '/workspace',
    pythonPath: () => 'python3',
    runsFolder: (folder) => `${folder}/.agentrl/runs`,
    serverUrl: () => undefined,
    tryEpisodes: () => 4,
    findRunConfigs: async () => [],
    ...settings,
  };
  const extensionContext = {
    extensionPath: root,
    extensionUri: Uri.file(root),
    subscriptions,
    asAbsolutePath: (path: string) => `${root}/${path}`,
    secrets: {
      get: async (key: string) => secrets.get(key),
      store: async (key: string, value: string) => void secrets.set(key, value),
      delete: async (key: string) => void secrets.delete(key),
    },
    globalState: {
      get: (key: string) => globalState.get(key),
      update: async (key: string, value: unknown) => void globalState.set(key, value),
    },
    extension: { id: 'agent-rl-studio.agent-rl-studio', packageJSON: { version: '0.1.0' } },
  };
  const ctx = {
    extensionContext,
    log,
    connection: connection as unknown as TrainerConnection,
    settings: allSettings,
  } as unknown as Ctx;
  return { ctx, connection, log, secrets, globalState, settings: allSettings, subscriptions };
}

/** A run as `run/list` and `run/get` give it. */
export function runInfo(runId: string, fields: Partial<RunInfo> = {}): RunInfo {
  return {
    runId,
    name: `${runId}-name`,
    mode: 'train',
    status: 'running',
    step: 3,
    totalSteps: 10,
    createdAt: '2026-11-22T10:00:00Z',
    latestMetrics: {},
    lastSeq: 0,
    hasCheckpoint: false,
    message: null,
    ...fields,
  };
}
