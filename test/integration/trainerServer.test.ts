// The extension's client against the real Python trainer server (`agentrl serve` from the repo's .venv):
// local start with a token file, a try run with configDir, an uploaded env bundle, streaming across a
// dropped connection, a refused token, the replay's tool re-run relay, a Try run's records fetched once for its two
// readers, and a graceful stop of the server.
import { strict as assert } from 'node:assert';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ENDED_RUN_STATUSES, ErrorCode, PROTOCOL_VERSION, type RunEventParams } from '../../protocol/generated/rpc';
import { packEnvFolder } from '../../extension/envBundle';
import { startLocalServer, type LocalServer, type LogSink } from '../../extension/localServer';
import { relayToolRerun } from '../../extension/replay/toolRerun';
import { readRunConfig } from '../../extension/runConfig';
import { TrainerClient, TrainerRequestError, type SocketHandlers } from '../../extension/trainerClient';
import { TrajectoryCache } from '../../extension/trajectoryCache';
import { webSocketFactory } from '../../extension/webSocket';

const ROOT = resolve(__dirname, '..', '..');
const PYTHON = process.env.AGENTRL_PYTHON ?? join(ROOT, '.venv', 'bin', 'python');
const EXAMPLE = join(ROOT, 'trainer-server', 'agentrl', 'examples', 'lookup');
const TOKEN = 'integration-test-token';

const lines: string[] = [];
const log: LogSink = {
  trace: (m) => lines.push(`trace ${m}`),
  debug: (m) => lines.push(`debug ${m}`),
  info: (m) => lines.push(`info ${m}`),
  warn: (m) => lines.push(`warn ${m}`),
  error: (m) => lines.push(`error ${m}`),
};

function eventsUntilEnd(client: TrainerClient, runId: string, timeoutMs = 120_000): Promise<RunEventParams[]> {
  const events: RunEventParams[] = [];
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(
      () =>
        reject(
          new Error(`run ${runId} did not end within ${timeoutMs} ms; events: ${JSON.stringify(events.slice(-3))}`),
        ),
      timeoutMs,
    );
    const subscription = client.onRunEvent((event) => {
      if (event.runId !== runId) return;
      events.push(event);
      if (event.type === 'status' && ENDED_RUN_STATUSES.has(event.data.status)) {
        clearTimeout(timer);
        subscription.dispose();
        resolvePromise(events);
      }
    });
  });
}

describe('the extension client against the real trainer server', function () {
  this.timeout(180_000);
  let dir: string;
  let server: LocalServer;
  let client: TrainerClient;
  let openSockets: Array<{ handlers: SocketHandlers; close(): void }> = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agentrl-client-'));
    writeFileSync(join(dir, 'token'), TOKEN, { mode: 0o600 });
    server = await startLocalServer({
      python: PYTHON,
      cwd: dir,
      runsDir: join(dir, 'runs'),
      tokenFile: join(dir, 'token'),
      log,
    });
    const real = webSocketFactory(TOKEN);
    client = new TrainerClient({
      url: server.url,
      backoffInitialMs: 50,
      openSocket: (url, handlers) => {
        const socket = real(url, handlers);
        openSockets.push({ handlers, close: () => socket.close() });
        return socket;
      },
    });
  });

  after(async () => {
    client?.dispose();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts `agentrl serve` on a free loopback port and initializes with the devices', async () => {
    assert.match(server.url, /^ws:\/\/127\.0\.0\.1:\d+$/);
    const result = await client.connect();
    assert.equal(result.protocolVersion, PROTOCOL_VERSION);
    assert.ok(result.devices.cpu.cores >= 1);
    assert.equal(
      result.capabilities.runsCode,
      true,
      'a loopback server runs code: runs, checks, re-runs, MCP listings',
    );
    assert.ok(
      lines.some((l) => l.startsWith('info [server]')),
      "the server's stderr is forwarded by level",
    );
  });

  it('runs a try run with configDir and streams its events exactly once across a dropped connection', async () => {
    const config = readRunConfig(join(EXAMPLE, 'lookup.agentrl.yaml'));
    const { runId } = await client.request('run/start', { config, configDir: EXAMPLE, mode: 'try', episodes: 3 });
    const ended = eventsUntilEnd(client, runId);
    await client.subscribe(runId);
    openSockets[openSockets.length - 1].close(); // drop the socket mid-run: the client reconnects and resubscribes
    const events = await ended;
    const seqs = events.map((e) => e.seq);
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
    );
    assert.equal(new Set(seqs).size, seqs.length, 'no duplicate events');
    assert.equal(seqs[0], 1, 'no gap at the start');
    assert.equal(seqs[seqs.length - 1] - seqs[0] + 1, seqs.length, 'no gap across the reconnect');
    assert.ok(openSockets.length >= 2, 'the client opened a second socket');
    assert.equal(events.filter((e) => e.type === 'trajectory').length, 3);
    const page = await client.request('trajectory/query', { runId, limit: 10 });
    assert.equal(page.total, 3);
    const { records } = await client.request('trajectory/get', { runId, ids: [page.items[2].id, page.items[0].id] });
    assert.deepEqual(
      records.map((r) => [r.run_id, r.id]),
      [
        [runId, page.items[2].id],
        [runId, page.items[0].id],
      ],
    );
    // The replay's Re-run relay reaches tool/rerun (the run's code asked for), and a call the trajectory does not have
    // is named in the reply.
    const rerun = await relayToolRerun(
      { type: 'rerunToolCall', runId, trajectoryId: records[0].id, turn: 99, call: 0, code: 'snapshot' },
      { isTrusted: () => true, trainer: () => client },
    );
    assert.ok(!rerun.reply.ok);
    assert.match(rerun.reply.message, new RegExp(`trajectory ${records[0].id} has no call 0 in turn 99`));
  });

  it("fetches a Try run's records once for both of its readers: Tool problems, then the replay", async () => {
    // The two reads Try Environment makes, in its order, through one cache as TrainerConnection holds it:
    // runCommands.ts asks the episodes with a Tool error, then the replay panel (replay/index.ts) every episode.
    const config = readRunConfig(join(EXAMPLE, 'lookup.agentrl.yaml'));
    const { runId } = await client.request('run/start', { config, configDir: EXAMPLE, mode: 'try', episodes: 4 });
    const ended = eventsUntilEnd(client, runId);
    await client.subscribe(runId);
    await ended;
    const asked: string[][] = [];
    const records = new TrajectoryCache(async (run, ids) => {
      asked.push(ids);
      return (await client.request('trajectory/get', { runId: run, ids })).records;
    });
    const failing = await client.request('trajectory/query', { runId, hasToolError: true, limit: 1000 });
    await records.get(
      runId,
      failing.items.map((summary) => summary.id),
    );
    const all = await client.request('trajectory/query', { runId, limit: 1000 });
    assert.equal(all.total, 4);
    const shown = await records.get(
      runId,
      all.items.map((summary) => summary.id),
    );
    assert.deepEqual(
      shown.map((record) => record.id),
      all.items.map((summary) => summary.id),
    );
    const fetched = asked.flat();
    assert.deepEqual([...fetched].sort(), all.items.map((summary) => summary.id).sort(), 'each record fetched once');
    assert.ok(asked.length <= 2, `${asked.length} trajectory/get requests`);
  });

  it('uploads an env folder as a bundle the server accepts, checks it and trains from it', async () => {
    const envDir = join(dir, 'upload-me');
    cpSync(EXAMPLE, envDir, { recursive: true });
    rmSync(join(envDir, '__pycache__'), { recursive: true, force: true });
    const bundle = packEnvFolder(envDir);
    assert.deepEqual(bundle.files.sort(), ['__init__.py', 'env.py', 'lookup.agentrl.yaml', 'tasks.jsonl']);
    const uploaded = await client.request('env/upload', { name: 'lookup', archive: bundle.archive.toString('base64') });
    assert.equal(uploaded.files, 4);
    const checked = await client.request('env/check', { bundleId: uploaded.bundleId }, 120_000);
    assert.ok(checked.ok, JSON.stringify(checked.diagnostics));
    const config = {
      ...readRunConfig(join(envDir, 'lookup.agentrl.yaml')),
      train: { steps: 2, batch_size: 16, micro_batch_size: 16, lr: 0.01, checkpoint_every: 1 },
    };
    const { runId } = await client.request('run/start', { config, envBundle: uploaded.bundleId });
    const ended = eventsUntilEnd(client, runId);
    await client.subscribe(runId);
    const events = await ended;
    const last = events[events.length - 1];
    assert.ok(last.type === 'status' && last.data.status === 'completed');
    const info = await client.request('run/get', { runId });
    assert.equal(info.step, 2);
    assert.ok(info.hasCheckpoint);
    const { status, step, totalSteps, message } = info;
    assert.deepEqual(last.runInfo, { status, step, totalSteps, message }, 'the stream says what run/get says');
    const frozen = await client.request('run/config', { runId }); // what the Run Dashboard compares runs by
    assert.equal(frozen.runId, runId);
    const { steps: frozenSteps, lr } = frozen.config.train as { steps: number; lr: number };
    assert.deepEqual({ steps: frozenSteps, lr }, { steps: 2, lr: 0.01 });
  });

  it('answers a bad request with a typed error', async () => {
    await assert.rejects(
      client.request('run/stop', { runId: 'no-such-run', mode: 'graceful' }),
      (err: TrainerRequestError) => err.code === ErrorCode.RUN_NOT_FOUND,
    );
  });

  it('refuses a wrong token, and the client gives up instead of retrying', async () => {
    const intruder = new TrainerClient({ url: server.url, openSocket: webSocketFactory('wrong-token') });
    await assert.rejects(intruder.connect(), /refused the token/);
    assert.equal(intruder.state, 'closed');
  });

  it('stops the server gracefully', async () => {
    client.dispose();
    await server.stop();
    const exit = await server.exited;
    assert.ok(exit.code === 0 || exit.signal === 'SIGTERM', JSON.stringify(exit));
    openSockets = [];
  });
});
