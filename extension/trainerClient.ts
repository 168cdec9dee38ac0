// The extension's side of the trainer protocol (protocol/rpc.md): JSON-RPC 2.0 over one WebSocket, typed by
// protocol/generated/rpc.ts. No `vscode` import: the socket and the timers are injected, so the connection
// state machine, heartbeats, reconnect with backoff and resubscription are unit-tested with fakes.
//
//   idle --connect()--> connecting --initialize ok--> connected --socket lost--> reconnecting --(backoff)--> connecting
//     any state --dispose()--> closed;  connecting --401/403 or protocol mismatch--> closed (retrying cannot help)
import {
  ErrorCode,
  PROTOCOL_VERSION,
  type InitializeResult,
  type RpcMethods,
  type RpcNotification,
  type RunEventParams,
} from '../protocol/generated/rpc';

export type ConnectionState = 'idle' | 'connecting' | 'connected' | 'reconnecting' | 'closed';

/** What the client needs of a WebSocket; `ws` is adapted to it in trainerConnection.ts. */
export interface TrainerSocket {
  send(text: string): void;
  close(): void;
}

/** What the socket knows of why it could not connect, where it matters to the user: nothing listens at the address
 *  (a wrong port, a server not started), the server answered and refused the token or this client's origin, or (wss://)
 *  its certificate is not trusted yet or is not the one trusted before (serverCertificates.ts). */
export type ConnectFailure = 'refused' | 'unauthorized' | 'forbidden' | 'untrustedCertificate' | 'certificateChanged';

export interface SocketHandlers {
  open(): void;
  message(text: string): void;
  /** `fatal` when reconnecting cannot help (e.g. the server refused the token); `fingerprint`: the SHA-256 of the
   *  server's certificate, with a certificate failure. */
  close(reason: string, fatal: boolean, failure?: ConnectFailure, fingerprint?: string): void;
}

export type SocketFactory = (url: string, handlers: SocketHandlers) => TrainerSocket;

export interface Timers {
  set(callback: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export interface TrainerClientOptions {
  url: string;
  openSocket: SocketFactory;
  timers?: Timers;
  /** Every request fails with a `timeout` TrainerRequestError after this long unless it gives its own. */
  requestTimeoutMs?: number;
  /** A `server/ping` this often while connected; a ping that times out drops the socket and reconnects. */
  heartbeatMs?: number;
  /** Reconnect delays: initial, doubling up to max, each scaled by a random factor in [0.5, 1) (jitter). */
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  random?: () => number;
  clientInfo?: { name: string; version: string };
}

/** Why a request failed: a JSON-RPC error code from the server, or what happened on this side. */
export class TrainerRequestError extends Error {
  constructor(
    readonly method: string,
    readonly code: number | 'timeout' | 'disconnected' | 'not-connected',
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = 'TrainerRequestError';
  }
}

/** Why `connect()` failed: the reason in words, and, where the socket could tell, which failure it was, so that a
 *  caller asks for a token only when the server wants one and says "nothing listens" when nothing does. */
export class TrainerConnectError extends Error {
  constructor(
    message: string,
    readonly failure?: ConnectFailure,
    /** The server certificate's SHA-256 fingerprint, with a certificate failure. */
    readonly fingerprint?: string,
  ) {
    super(message);
    this.name = 'TrainerConnectError';
  }
}

type Listener<T> = (value: T) => void;
/** A notification other than `run/event` (which onRunEvent delivers in order, once). */
type OtherNotification = Exclude<RpcNotification, { method: 'run/event' }>;

class Emitter<T> {
  private readonly listeners = new Set<Listener<T>>();
  on(listener: Listener<T>): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }
  fire(value: T): void {
    for (const listener of [...this.listeners]) listener(value);
  }
}

interface Pending {
  method: string;
  resolve(result: unknown): void;
  reject(error: TrainerRequestError): void;
  timer: unknown;
}

const realTimers: Timers = {
  set: (callback, ms) => setTimeout(callback, ms),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export class TrainerClient {
  private socket: TrainerSocket | undefined;
  private stateValue: ConnectionState = 'idle';
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  /** runId -> last `seq` delivered: resubscribing `since` it yields no gap and no duplicate. */
  private readonly subscriptions = new Map<string, number>();
  private heartbeatTimer: unknown;
  private reconnectTimer: unknown;
  private attempt = 0;
  private initializeResult: InitializeResult | undefined;
  private firstConnect: { resolve(result: InitializeResult): void; reject(error: Error): void } | undefined;
  private readonly timers: Timers;
  private readonly options: Required<Omit<TrainerClientOptions, 'timers' | 'clientInfo'>> &
    Pick<TrainerClientOptions, 'clientInfo'>;

  private readonly stateChanged = new Emitter<{ state: ConnectionState; reason?: string }>();
  private readonly runEvent = new Emitter<RunEventParams>();
  private readonly notification = new Emitter<OtherNotification>();
  private readonly initialized = new Emitter<InitializeResult>();

  /** Every state change, with the reason for a loss of connection. */
  readonly onStateChange = (listener: Listener<{ state: ConnectionState; reason?: string }>) =>
    this.stateChanged.on(listener);
  /** Each run event exactly once and in order per run, across reconnects. */
  readonly onRunEvent = (listener: Listener<RunEventParams>) => this.runEvent.on(listener);
  /** Every other notification (`run/behind`). */
  readonly onNotification = (listener: Listener<OtherNotification>) => this.notification.on(listener);
  /** After each successful `initialize`, the first connection's and every reconnection's. */
  readonly onInitialized = (listener: Listener<InitializeResult>) => this.initialized.on(listener);

  constructor(options: TrainerClientOptions) {
    this.timers = options.timers ?? realTimers;
    this.options = {
      requestTimeoutMs: 30_000,
      heartbeatMs: 15_000,
      backoffInitialMs: 500,
      backoffMaxMs: 30_000,
      random: Math.random,
      ...options,
    };
  }

  get state(): ConnectionState {
    return this.stateValue;
  }

  get url(): string {
    return this.options.url;
  }

  /** What the server said about itself and its devices at the last `initialize`. */
  get server(): InitializeResult | undefined {
    return this.initializeResult;
  }

  /** Connects and initializes; rejects if the first attempt fails (later losses reconnect on their own). */
  connect(): Promise<InitializeResult> {
    if (this.stateValue !== 'idle')
      return Promise.reject(new Error(`connect() on a client that is ${this.stateValue}`));
    return new Promise((resolve, reject) => {
      this.firstConnect = { resolve, reject };
      this.open();
    });
  }

  request<M extends keyof RpcMethods>(
    method: M,
    params: RpcMethods[M]['params'],
    timeoutMs?: number,
  ): Promise<RpcMethods[M]['result']> {
    if (this.stateValue !== 'connected' && method !== 'initialize') {
      return Promise.reject(
        new TrainerRequestError(
          method,
          'not-connected',
          `${method}: not connected to the trainer server (${this.stateValue})`,
        ),
      );
    }
    return this.send(method, params, timeoutMs ?? this.options.requestTimeoutMs) as Promise<RpcMethods[M]['result']>;
  }

  /** Streams a run's events from after `since` (default: the last one this client delivered, else 0). */
  async subscribe(runId: string, since?: number): Promise<RpcMethods['run/subscribe']['result']> {
    const from = since ?? this.subscriptions.get(runId) ?? 0;
    this.subscriptions.set(runId, from);
    return this.request('run/subscribe', { runId, since: from });
  }

  async unsubscribe(runId: string): Promise<void> {
    this.subscriptions.delete(runId);
    if (this.stateValue === 'connected') await this.request('run/unsubscribe', { runId });
  }

  /** Closes for good: pending requests fail, no reconnect. */
  dispose(): void {
    if (this.stateValue === 'closed') return;
    this.timers.clear(this.reconnectTimer);
    this.stopHeartbeat();
    this.setState('closed', 'closed by the client');
    const socket = this.socket;
    this.socket = undefined;
    socket?.close();
    this.failPending('disconnected', 'the connection was closed');
    this.firstConnect?.reject(new Error('the connection was closed before it was established'));
    this.firstConnect = undefined;
  }

  private open(): void {
    this.setState('connecting');
    let socket: TrainerSocket | undefined;
    const handlers: SocketHandlers = {
      open: () => {
        if (this.socket === socket) void this.initialize();
      },
      message: (text) => {
        if (this.socket === socket) this.receive(text);
      },
      close: (reason, fatal, failure, fingerprint) => {
        if (this.socket === socket) this.lost(reason, fatal, failure, fingerprint);
      },
    };
    try {
      socket = this.options.openSocket(this.options.url, handlers);
      this.socket = socket;
    } catch (err) {
      this.lost(err instanceof Error ? err.message : String(err), true);
    }
  }

  private async initialize(): Promise<void> {
    let result: InitializeResult;
    try {
      result = await this.request('initialize', {
        protocolVersion: PROTOCOL_VERSION,
        ...(this.options.clientInfo ? { clientInfo: this.options.clientInfo } : {}),
      });
    } catch (err) {
      const error = err as TrainerRequestError;
      // A version mismatch will not fix itself; anything else is worth another try.
      this.drop(`initialize failed: ${error.message}`, error.code === ErrorCode.INCOMPATIBLE_PROTOCOL);
      return;
    }
    this.initializeResult = result;
    this.attempt = 0;
    this.setState('connected');
    this.startHeartbeat();
    this.initialized.fire(result);
    this.firstConnect?.resolve(result);
    this.firstConnect = undefined;
    for (const [runId, since] of this.subscriptions) {
      this.request('run/subscribe', { runId, since }).catch((err: Error) =>
        this.stateChanged.fire({ state: this.stateValue, reason: `resubscribing to ${runId} failed: ${err.message}` }),
      );
    }
  }

  private send(method: string, params: unknown, timeoutMs: number): Promise<unknown> {
    const socket = this.socket;
    if (!socket)
      return Promise.reject(
        new TrainerRequestError(method, 'not-connected', `${method}: not connected to the trainer server`),
      );
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = this.timers.set(() => {
        this.pending.delete(id);
        reject(
          new TrainerRequestError(
            method,
            'timeout',
            `${method}: no answer from the trainer server within ${Math.round(timeoutMs / 1000)} s`,
          ),
        );
      }, timeoutMs);
      this.pending.set(id, { method, resolve, reject, timer });
      try {
        socket.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
      } catch (err) {
        this.timers.clear(timer);
        this.pending.delete(id);
        reject(new TrainerRequestError(method, 'disconnected', `${method}: ${(err as Error).message}`));
      }
    });
  }

  private receive(text: string): void {
    let message: {
      id?: number | null;
      method?: string;
      params?: unknown;
      result?: unknown;
      error?: { code: number; message: string; data?: unknown };
    };
    try {
      message = JSON.parse(text);
    } catch {
      return; // the server validates what it sends (tests prove it); a broken frame is not worth a crash
    }
    if (typeof message.method === 'string') {
      this.deliver(message as RpcNotification); // the server validates what it sends (tests prove it)
      return;
    }
    const pending = typeof message.id === 'number' ? this.pending.get(message.id) : undefined;
    if (!pending) return; // answered after its timeout
    this.pending.delete(message.id as number);
    this.timers.clear(pending.timer);
    if (message.error)
      pending.reject(
        new TrainerRequestError(pending.method, message.error.code, message.error.message, message.error.data),
      );
    else pending.resolve(message.result);
  }

  private deliver(notification: RpcNotification): void {
    if (notification.method !== 'run/event') {
      this.notification.fire(notification);
      return;
    }
    const event = notification.params;
    const last = this.subscriptions.get(event.runId);
    if (last === undefined || event.seq <= last) return; // unsubscribed, or already delivered before a reconnect
    this.subscriptions.set(event.runId, event.seq);
    this.runEvent.fire(event);
  }

  /** Closes a socket this side gave up on; its own close callback then finds it detached and is ignored. */
  private drop(reason: string, fatal: boolean): void {
    const socket = this.socket;
    this.socket = undefined;
    socket?.close();
    this.lost(reason, fatal);
  }

  private lost(reason: string, fatal: boolean, failure?: ConnectFailure, fingerprint?: string): void {
    if (this.stateValue === 'closed') return;
    this.socket = undefined;
    this.stopHeartbeat();
    this.failPending('disconnected', `the connection to the trainer server was lost (${reason})`);
    // A failed first connection is reported to the caller of connect() rather than retried behind its back.
    if (fatal || this.firstConnect) {
      this.setState('closed', reason);
      this.firstConnect?.reject(new TrainerConnectError(reason, failure, fingerprint));
      this.firstConnect = undefined;
      return;
    }
    const delay =
      Math.min(this.options.backoffMaxMs, this.options.backoffInitialMs * 2 ** this.attempt) *
      (0.5 + this.options.random() / 2);
    this.attempt++;
    this.setState('reconnecting', reason);
    this.reconnectTimer = this.timers.set(() => this.open(), delay);
  }

  private failPending(code: 'disconnected', message: string): void {
    for (const [id, pending] of this.pending) {
      this.timers.clear(pending.timer);
      pending.reject(new TrainerRequestError(pending.method, code, `${pending.method}: ${message}`));
      this.pending.delete(id);
    }
  }

  private startHeartbeat(): void {
    this.heartbeatTimer = this.timers.set(async () => {
      const socket = this.socket;
      try {
        await this.request('server/ping', {}, this.options.heartbeatMs);
        if (this.stateValue === 'connected') this.startHeartbeat();
      } catch (err) {
        if (this.socket === socket && (err as TrainerRequestError).code === 'timeout')
          this.drop('no answer to the heartbeat', false);
      }
    }, this.options.heartbeatMs);
  }

  private stopHeartbeat(): void {
    this.timers.clear(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
  }

  private setState(state: ConnectionState, reason?: string): void {
    this.stateValue = state;
    this.stateChanged.fire({ state, reason });
  }
}
