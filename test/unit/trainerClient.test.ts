import { strict as assert } from 'node:assert';
import { ErrorCode, PROTOCOL_VERSION } from '../../protocol/generated/rpc';
import {
  TrainerClient,
  TrainerConnectError,
  TrainerRequestError,
  type SocketHandlers,
  type Timers,
} from '../../extension/trainerClient';

/** Timers that run only when the test advances the clock. */
class FakeTimers implements Timers {
  now = 0;
  private nextHandle = 1;
  private readonly scheduled = new Map<number, { at: number; callback: () => void }>();
  set(callback: () => void, ms: number): unknown {
    const handle = this.nextHandle++;
    this.scheduled.set(handle, { at: this.now + ms, callback });
    return handle;
  }
  clear(handle: unknown): void {
    this.scheduled.delete(handle as number);
  }
  async advance(ms: number): Promise<void> {
    const end = this.now + ms;
    for (;;) {
      const due = [...this.scheduled.entries()].filter(([, t]) => t.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.scheduled.delete(due[0]);
      this.now = due[1].at;
      due[1].callback();
      await flush();
    }
    this.now = end;
  }
  /** Delays of what is scheduled, from now. */
  pending(): number[] {
    return [...this.scheduled.values()].map((t) => t.at - this.now);
  }
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

interface Frame {
  id: number;
  method: string;
  params: Record<string, unknown>;
}

class FakeSocket {
  readonly sent: Frame[] = [];
  closed = false;
  constructor(readonly handlers: SocketHandlers) {}
  send(text: string): void {
    this.sent.push(JSON.parse(text));
  }
  close(): void {
    this.closed = true;
  }
  last(method: string): Frame {
    const frame = [...this.sent].reverse().find((f) => f.method === method);
    assert.ok(frame, `no ${method} was sent`);
    return frame;
  }
  reply(frame: Frame, result: unknown): void {
    this.handlers.message(JSON.stringify({ jsonrpc: '2.0', id: frame.id, result }));
  }
  fail(frame: Frame, code: number, message: string): void {
    this.handlers.message(JSON.stringify({ jsonrpc: '2.0', id: frame.id, error: { code, message } }));
  }
  event(runId: string, seq: number): void {
    this.handlers.message(
      JSON.stringify({
        jsonrpc: '2.0',
        method: 'run/event',
        params: { runId, seq, type: 'log', time: seq, data: { level: 'info', message: `event ${seq}` } },
      }),
    );
  }
}

const INITIALIZED = {
  serverVersion: '0.1.0',
  protocolVersion: PROTOCOL_VERSION,
  capabilities: {},
  devices: { cpu: { name: 'cpu', cores: 2 }, gpus: [] },
};

function setup(overrides: Partial<ConstructorParameters<typeof TrainerClient>[0]> = {}) {
  const timers = new FakeTimers();
  const sockets: FakeSocket[] = [];
  const states: string[] = [];
  const client = new TrainerClient({
    url: 'ws://127.0.0.1:1',
    timers,
    random: () => 0,
    requestTimeoutMs: 1000,
    heartbeatMs: 5000,
    backoffInitialMs: 100,
    backoffMaxMs: 1000,
    openSocket: (_url, handlers) => {
      const socket = new FakeSocket(handlers);
      sockets.push(socket);
      return socket;
    },
    ...overrides,
  });
  client.onStateChange(({ state }) => states.push(state));
  /** Opens the newest socket and answers its initialize. */
  const accept = async () => {
    const socket = sockets[sockets.length - 1];
    socket.handlers.open();
    socket.reply(socket.last('initialize'), INITIALIZED);
    await flush();
    return socket;
  };
  return { client, timers, sockets, states, accept };
}

describe('TrainerClient', () => {
  it('initializes with the protocol version and becomes connected', async () => {
    const { client, sockets, accept, states } = setup();
    const connected = client.connect();
    await accept();
    assert.deepEqual(await connected, INITIALIZED);
    assert.equal(sockets[0].sent[0].method, 'initialize');
    assert.equal(sockets[0].sent[0].params.protocolVersion, PROTOCOL_VERSION);
    assert.deepEqual(states, ['connecting', 'connected']);
    assert.deepEqual(client.server, INITIALIZED);
  });

  it("fails a request with a typed error: the server's code, or a timeout (a late answer is ignored)", async () => {
    const { client, timers, accept } = setup();
    const connected = client.connect();
    const socket = await accept();
    await connected;
    const refused = client.request('run/get', { runId: 'nope' });
    socket.fail(socket.last('run/get'), ErrorCode.RUN_NOT_FOUND, 'run nope not found');
    await assert.rejects(
      refused,
      (err: TrainerRequestError) =>
        err instanceof TrainerRequestError && err.code === ErrorCode.RUN_NOT_FOUND && err.method === 'run/get',
    );
    const slow = client.request('run/list', {});
    const frame = socket.last('run/list');
    const timedOut = assert.rejects(
      slow,
      (err: TrainerRequestError) => err.code === 'timeout' && /within 1 s/.test(err.message),
    );
    await timers.advance(1000);
    await timedOut;
    socket.reply(frame, { runs: [] }); // too late: nothing to resolve, nothing thrown
    await assert.rejects(
      new TrainerClient({ url: 'ws://x', openSocket: () => socket }).request('run/list', {}),
      (err: TrainerRequestError) => err.code === 'not-connected',
    );
  });

  it('reconnects with backoff after a loss, fails what was pending, and resubscribes from the last seq without duplicates', async () => {
    const { client, timers, sockets, accept, states } = setup();
    const events: number[] = [];
    client.onRunEvent((e) => events.push(e.seq));
    const connected = client.connect();
    let socket = await accept();
    await connected;
    const subscribed = client.subscribe('run-1');
    assert.equal(socket.last('run/subscribe').params.since, 0);
    socket.reply(socket.last('run/subscribe'), { runId: 'run-1', lastSeq: 0 });
    await subscribed;
    socket.event('run-1', 1);
    socket.event('run-1', 2);
    socket.event('other-run', 3); // not subscribed: dropped
    const inFlight = client.request('run/list', {});
    socket.handlers.close('socket hang up', false);
    await assert.rejects(inFlight, (err: TrainerRequestError) => err.code === 'disconnected');
    assert.equal(client.state, 'reconnecting');
    assert.deepEqual(timers.pending(), [50]); // initial 100 ms x jitter 0.5
    await timers.advance(50);
    assert.equal(sockets.length, 2);
    socket = await accept();
    assert.equal(client.state, 'connected');
    assert.deepEqual(socket.last('run/subscribe').params, { runId: 'run-1', since: 2 });
    socket.event('run-1', 2); // replayed by a server that had already sent it: dropped
    socket.event('run-1', 3);
    assert.deepEqual(events, [1, 2, 3]);
    assert.deepEqual(states, ['connecting', 'connected', 'reconnecting', 'connecting', 'connected']);
  });

  it('doubles the backoff up to its maximum while the server stays away, and resets it after a success', async () => {
    const { client, timers, sockets, accept } = setup();
    const connected = client.connect();
    await accept();
    await connected;
    const delays: number[] = [];
    for (let i = 0; i < 6; i++) {
      sockets[sockets.length - 1].handlers.close('connection refused', false);
      delays.push(timers.pending().find((d) => d > 0 && d <= 1000)!);
      await timers.advance(delays[i]);
    }
    assert.deepEqual(delays, [50, 100, 200, 400, 500, 500]);
    await accept();
    sockets[sockets.length - 1].handlers.close('again', false);
    assert.ok(timers.pending().includes(50));
  });

  it('drops a connection whose heartbeat goes unanswered, and reconnects', async () => {
    const { client, timers, sockets, accept } = setup();
    const connected = client.connect();
    const socket = await accept();
    await connected;
    await timers.advance(5000);
    socket.reply(socket.last('server/ping'), { time: 1 }); // answered: the next one is scheduled
    await flush();
    await timers.advance(5000);
    assert.equal(socket.sent.filter((f) => f.method === 'server/ping').length, 2);
    await timers.advance(5000); // the second ping times out
    assert.ok(socket.closed);
    assert.equal(client.state, 'reconnecting');
    await timers.advance(50);
    assert.equal(sockets.length, 2);
  });

  it('reports a failed first connection to connect() instead of retrying; stops for good on a refused token', async () => {
    const first = setup();
    const attempt = first.client.connect();
    first.sockets[0].handlers.close('ECONNREFUSED 127.0.0.1:1', false, 'refused');
    await assert.rejects(
      attempt,
      (err) => err instanceof TrainerConnectError && err.failure === 'refused' && /ECONNREFUSED/.test(err.message),
    );
    assert.equal(first.client.state, 'closed');
    assert.deepEqual(first.timers.pending(), []);

    const { client, timers, sockets, accept } = setup();
    const connected = client.connect();
    await accept();
    await connected;
    sockets[0].handlers.close('lost', false);
    await timers.advance(50);
    sockets[1].handlers.close('HTTP 401: the server refused the token', true);
    assert.equal(client.state, 'closed');
    assert.deepEqual(timers.pending(), []);
  });

  it('gives up on a server that speaks another major protocol version', async () => {
    const { client, sockets } = setup();
    const attempt = client.connect();
    sockets[0].handlers.open();
    sockets[0].fail(
      sockets[0].last('initialize'),
      ErrorCode.INCOMPATIBLE_PROTOCOL,
      'client speaks protocol 1.0, this server 2.0',
    );
    await assert.rejects(attempt, /protocol 1.0, this server 2.0/);
    assert.equal(client.state, 'closed');
    assert.ok(sockets[0].closed);
  });

  it('dispose() closes the socket, fails pending requests and never reconnects', async () => {
    const { client, timers, sockets, accept } = setup();
    const connected = client.connect();
    await accept();
    await connected;
    const pending = client.request('run/list', {});
    client.dispose();
    await assert.rejects(pending, (err: TrainerRequestError) => err.code === 'disconnected');
    assert.ok(sockets[0].closed);
    sockets[0].handlers.close('closed', false);
    await timers.advance(60_000);
    assert.equal(sockets.length, 1);
    assert.equal(client.state, 'closed');
  });
});
