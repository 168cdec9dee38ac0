// The extension's wss:// client against a real `agentrl serve --tls-self-signed` (from the repo's .venv): the
// fingerprint the server prints is the one it serves and the one the client pins; a wrong pin is refused in the TLS
// handshake with both fingerprints named, before the upgrade request (and the token in it) is written, which a TLS
// server that records every byte it receives proves; and the first use of a certificate goes through the injected
// prompt, which pins it when it is trusted.
import { strict as assert } from 'node:assert';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { createServer, type Server } from 'node:tls';
import { PROTOCOL_VERSION } from '../../protocol/generated/rpc';
import {
  certificateCheckingConnection,
  CertificatePins,
  trustOnFirstUse,
  type CertificateRefusal,
} from '../../extension/serverCertificates';
import { TrainerClient, TrainerConnectError } from '../../extension/trainerClient';
import { webSocketFactory } from '../../extension/webSocket';

const ROOT = resolve(__dirname, '..', '..');
const PYTHON = process.env.AGENTRL_PYTHON ?? join(ROOT, '.venv', 'bin', 'python');
const TOKEN = 'a-tls-integration-test-token';
const FINGERPRINT_LINE = 'agentrl serve: TLS certificate SHA-256 fingerprint: ';
const WRONG = Array(32).fill('00').join(':');

/** `agentrl serve --tls-self-signed` on a free loopback port, its log (stderr) kept line by line. */
async function serveTls(dir: string): Promise<{ process: ChildProcess; ready: Record<string, string>; log: string[] }> {
  const child = spawn(
    PYTHON,
    [
      '-m',
      'agentrl.cli',
      'serve',
      '--port',
      '0',
      '--runs-dir',
      join(dir, 'runs'),
      '--token-file',
      join(dir, 'token'),
    ].concat(['--tls-self-signed', '--log-level', 'debug']),
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const log: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (line) => log.push(line));
  const [line] = (await new Promise<string[]>((settle, reject) => {
    createInterface({ input: child.stdout! }).once('line', (first) => settle([first]));
    child.once('exit', (code) => reject(new Error(`agentrl serve exited (${code}): ${log.join('\n')}`)));
  })) as string[];
  return { process: child, ready: JSON.parse(line), log };
}

/** A TLS server with a certificate of its own that records every byte a client sends it after the handshake, and
 *  answers an upgrade request with HTTP 401 (so a client that sends one ends at once). */
function recordingServer(cert: string, key: string): Promise<{ server: Server; url: string; received: Buffer[] }> {
  const received: Buffer[] = [];
  const server = createServer({ cert, key }, (socket) => {
    socket.on('data', (data: Buffer) => {
      received.push(data);
      if (data.includes('\r\n\r\n')) socket.end('HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n');
    });
    socket.on('error', () => undefined); // a client that hangs up after the handshake
  });
  return new Promise((settle) =>
    server.listen(0, '127.0.0.1', () =>
      settle({ server, url: `wss://127.0.0.1:${(server.address() as AddressInfo).port}`, received }),
    ),
  );
}

const connecting = (url: string, pinned?: string): TrainerClient =>
  new TrainerClient({ url, openSocket: webSocketFactory(TOKEN, pinned) });

describe('the extension over wss:// against a real `agentrl serve --tls-self-signed`', function () {
  this.timeout(120_000);
  let dir: string;
  let served: Awaited<ReturnType<typeof serveTls>>;
  let fingerprint: string;
  const clients: TrainerClient[] = [];
  const client = (url: string, pinned?: string): TrainerClient => {
    const made = connecting(url, pinned);
    clients.push(made);
    return made;
  };
  const requestsLogged = (): number => served.log.filter((line) => line.includes('< GET ')).length;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agentrl-tls-'));
    writeFileSync(join(dir, 'token'), TOKEN, { mode: 0o600 });
    served = await serveTls(dir);
    fingerprint = served.ready.tls_fingerprint;
  });

  afterEach(() => {
    for (const made of clients.splice(0)) made.dispose();
  });

  after(async () => {
    if (served?.process.exitCode === null) {
      const exited = new Promise((settle) => served.process.once('exit', settle));
      served.process.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the certificate whose fingerprint it printed, and the client with it pinned initializes', async () => {
    assert.match(served.ready.url, /^wss:\/\/127\.0\.0\.1:\d+$/);
    assert.match(fingerprint, /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
    assert.ok(served.log.includes(FINGERPRINT_LINE + fingerprint), served.log.join('\n'));
    const onDisk = new X509Certificate(readFileSync(join(dir, 'runs', '.tls', 'cert.pem')));
    assert.equal(onDisk.fingerprint256, fingerprint);
    const result = await client(served.ready.url, fingerprint).connect();
    assert.equal(result.protocolVersion, PROTOCOL_VERSION);
    assert.equal(result.capabilities.runsCode, true);
  });

  it('refuses a wrong pinned fingerprint in the handshake, naming both, without retrying; the server sees no request', async () => {
    const before = requestsLogged();
    assert.ok(before >= 1, 'the server logs each request at debug level (the first test made one)');
    const intruder = client(served.ready.url, WRONG);
    await assert.rejects(
      intruder.connect(),
      (err: unknown) =>
        err instanceof TrainerConnectError &&
        err.failure === 'certificateChanged' &&
        err.fingerprint === fingerprint &&
        err.message.includes(`its SHA-256 fingerprint is ${fingerprint}, the one trusted for it ${WRONG}`) &&
        err.message.includes('"Agent RL: Forget Server Certificate"'),
    );
    assert.equal(intruder.state, 'closed', 'a changed certificate will not change back by retrying');
    await new Promise((settle) => setTimeout(settle, 300));
    assert.equal(requestsLogged(), before);
    await client(served.ready.url, fingerprint).connect(); // and the next request is logged
    assert.equal(requestsLogged(), before + 1);
  });

  it('writes not a byte to a server whose certificate is not the pinned one, nor to an unknown self-signed one', async () => {
    const other = join(dir, 'other');
    const made = spawnSync(PYTHON, [
      '-c',
      "import sys, pathlib; from agentrl.server.tls import self_signed; self_signed(pathlib.Path(sys.argv[1]), '127.0.0.1')",
      other,
    ]);
    assert.equal(made.status, 0, String(made.stderr));
    const cert = readFileSync(join(other, 'cert.pem'), 'utf8');
    const recorder = await recordingServer(cert, readFileSync(join(other, 'key.pem'), 'utf8'));
    try {
      let connections = 0;
      recorder.server.on('connection', () => connections++);
      await assert.rejects(client(recorder.url, fingerprint).connect(), { failure: 'certificateChanged' });
      await assert.rejects(client(recorder.url).connect(), { failure: 'untrustedCertificate' });
      await new Promise((settle) => setTimeout(settle, 300));
      assert.equal(connections, 2, 'both reached the server, and were shown its certificate');
      assert.deepEqual(recorder.received, [], 'and sent nothing after it');
      // the control: pinned to the recorder's own certificate, the upgrade request goes, token and all
      const own = new X509Certificate(cert).fingerprint256;
      await assert.rejects(client(recorder.url, own).connect(), { failure: 'unauthorized' });
      const request = Buffer.concat(recorder.received).toString();
      assert.match(request, /^GET \/ HTTP\/1\.1\r\n/);
      assert.ok(request.includes(`Authorization: Bearer ${TOKEN}`));
    } finally {
      await new Promise((settle) => recorder.server.close(settle));
    }
  });

  it('accepts without a pin a certificate that a certificate authority it trusts vouches for, names included', async () => {
    const port = Number(new URL(served.ready.url).port);
    const ca = readFileSync(join(dir, 'runs', '.tls', 'cert.pem'), 'utf8'); // its own authority, made for 127.0.0.1
    const attempt = (extra: object) =>
      new Promise<{ err: Error | null; refusal?: CertificateRefusal }>((settle) => {
        let refusal: CertificateRefusal | undefined;
        const connect = certificateCheckingConnection(undefined, 10_000, (why) => (refusal = why));
        connect({ host: '127.0.0.1', port, ...extra }, (err, socket) => {
          socket?.destroy();
          settle({ err, refusal });
        });
      });
    assert.deepEqual(await attempt({ ca }), { err: null, refusal: undefined });
    const unknown = await attempt({});
    assert.equal(unknown.refusal?.failure, 'untrustedCertificate');
    assert.equal(unknown.refusal?.fingerprint, fingerprint);
  });

  it('first use: the injected prompt is shown the fingerprint; declined pins nothing, trusted pins it and connects', async () => {
    const store = new Map<string, unknown>();
    const pins = new CertificatePins({
      get: <T>(key: string) => store.get(key) as T | undefined,
      update: async (key, value) => void store.set(key, value),
    });
    const asked: Array<[string, string]> = [];
    const connectPinned = (pinned: string | undefined) => client(served.ready.url, pinned).connect();
    const server = served.ready.url.replace('wss://', '');
    const ask = (answer: boolean) => async (who: string, shown: string) => {
      asked.push([who, shown]);
      return answer;
    };
    assert.equal(await trustOnFirstUse(served.ready.url, pins, ask(false), connectPinned), false);
    assert.deepEqual(asked, [[server, fingerprint]]);
    assert.equal(pins.get(served.ready.url), undefined);
    assert.equal(await trustOnFirstUse(served.ready.url, pins, ask(true), connectPinned), true);
    assert.equal(pins.get(served.ready.url), fingerprint);
    assert.equal(clients.at(-1)?.state, 'connected');
    assert.equal(await trustOnFirstUse(served.ready.url, pins, ask(true), connectPinned), true);
    assert.equal(asked.length, 2, 'a pinned certificate is not asked about again');
  });
});
