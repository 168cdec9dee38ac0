import { fake } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { WebSocketServer, type WebSocket } from 'ws';
import { PROTOCOL_VERSION, type InitializeResult, type RunEventParams } from '../../protocol/generated/rpc';
import { TrainerConnectError } from '../../extension/trainerClient';
import { TrainerConnection, type HealthAlert, type RunWarning } from '../../extension/trainerConnection';
import { FakeLog, runInfo } from './fakeCtx';
import { Uri } from './vscodeStub';

const DEVICES: InitializeResult['devices'] = { cpu: { name: 'x86_64', cores: 8 }, gpus: [] };

/** A trainer server on a loopback port that answers what TrainerConnection asks and pushes the events a test gives. */
class FakeTrainerServer {
  readonly server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  readonly listening = new Promise((resolve) => this.server.on('listening', resolve));
  readonly methods: string[] = [];
  private socket: WebSocket | undefined;
  readonly connected = new Promise<void>((resolve) =>
    this.server.on('connection', (socket) => {
      this.socket = socket;
      socket.on('message', (data) => {
        const { id, method, params } = JSON.parse(data.toString());
        this.methods.push(method);
        socket.send(JSON.stringify({ jsonrpc: '2.0', id, result: this.answer(method, params) }));
      });
      resolve();
    }),
  );
  get url(): string {
    return `ws://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }
  private answer(method: string, params: { runId: string }): unknown {
    switch (method) {
      case 'initialize':
        return { serverVersion: '9.9', protocolVersion: PROTOCOL_VERSION, capabilities: {}, devices: DEVICES };
      case 'run/list':
        // r1 had 2 events before this client looked; done finished long ago
        return { runs: [runInfo('r1', { name: 'lookup', lastSeq: 2 }), runInfo('done', { status: 'completed' })] };
      case 'run/subscribe':
        return { runId: params.runId, lastSeq: 2 };
      default:
        return {};
    }
  }
  event(event: RunEventParams): void {
    this.socket!.send(JSON.stringify({ jsonrpc: '2.0', method: 'run/event', params: event }));
  }
  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const until = async (condition: () => boolean): Promise<void> => {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  assert.ok(condition(), 'timed out');
};

describe('TrainerConnection', () => {
  let server: FakeTrainerServer;
  let log: FakeLog;
  let connection: TrainerConnection;
  beforeEach(async () => {
    fake.reset();
    server = new FakeTrainerServer();
    await server.listening;
    log = new FakeLog();
    const context = {
      extension: { packageJSON: { version: '0.1.0' } },
      globalStorageUri: Uri.file(mkdtempSync(`${tmpdir()}/agentrl-storage-`)),
    };
    connection = new TrainerConnection(context as never, log as never);
  });
  afterEach(async () => {
    connection.dispose();
    await server.close();
  });

  it('connects, tells the devices, lists the runs and follows the active ones; a disconnect forgets them all', async () => {
    const devices: unknown[] = [];
    const states: string[] = [];
    connection.onDidChangeDevices((d) => devices.push(d));
    connection.onDidChangeState((s) => states.push(s));
    await connection.connectRemote(server.url, undefined);
    await until(() => server.methods.includes('run/subscribe'));
    assert.equal(connection.kind, 'remote');
    assert.equal(connection.isConnected, true);
    assert.deepEqual(devices, [null, DEVICES], 'a connect first ends the connection before it');
    assert.deepEqual(connection.model.runIds(), ['r1', 'done']);
    assert.deepEqual(server.methods, ['initialize', 'run/list', 'run/subscribe'], 'only the active run is followed');
    assert.match(log.lines[0], /^info: Connected to trainer server 9\.9 at ws:.* CPU 8 cores, no GPU\)$/);

    await connection.disconnect();
    assert.deepEqual(devices, [null, DEVICES, null]);
    assert.equal(states[states.length - 1], 'idle');
    assert.deepEqual(connection.model.runIds(), []);
    assert.equal(connection.kind, undefined);
  });

  it("logs a run's new events by level and announces a health alert that starts, but not what happened before it looked", async () => {
    const alerts: HealthAlert[] = [];
    connection.onHealthAlert((a) => alerts.push(a));
    const warnings: RunWarning[] = [];
    connection.onRunWarning((w) => warnings.push(w));
    await connection.connectRemote(server.url, undefined);
    await until(() => server.methods.includes('run/subscribe'));
    const log1 = (seq: number, level: 'info' | 'warning' | 'error', message: string): RunEventParams => ({
      runId: 'r1',
      seq,
      time: seq,
      type: 'log',
      data: { level, message },
    });
    server.event(log1(2, 'error', 'from before we looked'));
    server.event(log1(3, 'warning', 'slow step'));
    server.event({
      runId: 'r1',
      seq: 4,
      time: 4,
      type: 'health',
      data: {
        code: 'no_tool_calls',
        severity: 'warning',
        resolved: false,
        step: 3,
        since_step: 2,
        message: 'the model called no Tool',
        fix: 'check the chat template',
        metrics: {},
        trajectory_ids: [],
      },
    });
    await until(() => alerts.length === 1);
    assert.deepEqual(log.lines.slice(1), [
      'warn: [lookup] slow step',
      'warn: [lookup] step 3: no_tool_calls: the model called no Tool. Fix: check the chat template',
    ]);
    assert.deepEqual([alerts[0].runId, alerts[0].runName, alerts[0].alert.code], ['r1', 'lookup', 'no_tool_calls']);
    assert.deepEqual(warnings, [{ runId: 'r1', runName: 'lookup', message: 'slow step' }]); // reaches the editor
    assert.equal(connection.model.healthAlerts('r1').length, 1);
  });

  it('tells a connection nothing answers from a server that wants a token, as the socket saw them', async () => {
    const failure = (expected: TrainerConnectError['failure'], message: RegExp) => (err: unknown) =>
      err instanceof TrainerConnectError && err.failure === expected && message.test(err.message);
    const gone = new FakeTrainerServer();
    await gone.listening;
    const url = gone.url;
    await gone.close(); // nothing listens on its port any more
    await assert.rejects(connection.connectRemote(url, undefined), failure('refused', /ECONNREFUSED/));

    const guarded = new WebSocketServer({
      host: '127.0.0.1',
      port: 0,
      verifyClient: (info, done) => done(info.req.headers.authorization === 'Bearer s3cret', 401),
    });
    await new Promise((resolve) => guarded.on('listening', resolve));
    const guardedUrl = `ws://127.0.0.1:${(guarded.address() as { port: number }).port}`;
    try {
      await assert.rejects(
        connection.connectRemote(guardedUrl, undefined),
        failure('unauthorized', /^the server needs a token \(HTTP 401\)$/),
      );
      await assert.rejects(
        connection.connectRemote(guardedUrl, 'wrong'),
        failure('unauthorized', /^the server refused the token \(HTTP 401\)$/),
      );
    } finally {
      await new Promise((resolve) => guarded.close(resolve));
    }
  });

  it('refuses requests while not connected, saying how to connect', async () => {
    await assert.rejects(
      connection.request('run/list', {}),
      /Run "Agent RL: Start Local Server" or "Agent RL: Connect to Server"/,
    );
  });
});
