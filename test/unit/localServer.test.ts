import { strict as assert } from 'node:assert';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { forwardServerLog, startLocalServer, type LogSink } from '../../extension/localServer';

function recorder(): { log: LogSink; lines: string[] } {
  const lines: string[] = [];
  const at = (level: string) => (message: string) => lines.push(`${level}: ${message}`);
  return {
    lines,
    log: { trace: at('trace'), debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') },
  };
}

/** A stand-in for Python: a shell script that behaves like a server in one of the ways under test. */
function fakePython(script: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'agentrl-fake-python-')), 'python');
  writeFileSync(path, `#!/bin/sh\n${script}\n`);
  chmodSync(path, 0o755);
  return path;
}

const options = (python: string, log: LogSink) => ({
  python,
  cwd: tmpdir(),
  runsDir: join(tmpdir(), 'runs'),
  tokenFile: '/dev/null',
  log,
  startTimeoutMs: 5000,
});

describe('local trainer server process', () => {
  it("forwards the server's stderr by the level Python's logging gave each line", () => {
    const { log, lines } = recorder();
    forwardServerLog('2026-11-22 10:00:00,123 INFO agentrl.server: listening', log);
    forwardServerLog('2026-11-22 10:00:00,123 WARNING agentrl.server: slow client', log);
    forwardServerLog('2026-11-22 10:00:00,123 ERROR agentrl.server: run crashed', log);
    forwardServerLog('2026-11-22 10:00:00,123 DEBUG agentrl.server: frame', log);
    forwardServerLog('Traceback (most recent call last):', log);
    assert.deepEqual(lines, [
      'info: [server] agentrl.server: listening',
      'warn: [server] agentrl.server: slow client',
      'error: [server] agentrl.server: run crashed',
      'debug: [server] agentrl.server: frame',
      'warn: [server] Traceback (most recent call last):',
    ]);
  });

  it('reads the URL from the JSON line, passes loopback, port 0 and the token file, and stops with SIGTERM', async () => {
    const { log, lines } = recorder();
    const python = fakePython('echo \'{"event": "listening", "url": "ws://127.0.0.1:4242", "pid": 1}\'; exec sleep 30');
    const server = await startLocalServer(options(python, log));
    assert.equal(server.url, 'ws://127.0.0.1:4242');
    assert.ok(
      lines.includes(
        `info: Starting the trainer server: ${python} -m agentrl.cli serve --host 127.0.0.1 --port 0 --runs-dir ${join(tmpdir(), 'runs')} --token-file /dev/null`,
      ),
      lines.join('\n'),
    );
    await server.stop();
    assert.deepEqual(await server.exited, { code: null, signal: 'SIGTERM' });
  });

  it('kills a server that ignores SIGTERM', async () => {
    const { log, lines } = recorder();
    const server = await startLocalServer(
      options(
        fakePython(
          'trap "" TERM; echo \'{"event": "listening", "url": "ws://127.0.0.1:1"}\'; while true; do sleep 0.1; done',
        ),
        log,
      ),
    );
    await server.stop(300);
    assert.equal((await server.exited).signal, 'SIGKILL');
    assert.ok(lines.some((l) => /did not exit within 300 ms/.test(l)));
  });

  it('reports a server that dies before listening with the tail of its stderr, and a missing Python', async () => {
    const { log } = recorder();
    await assert.rejects(
      startLocalServer(options(fakePython('echo "No module named agentrl" >&2; exit 1'), log)),
      /exited before listening \(exit code 1\):\nNo module named agentrl/,
    );
    await assert.rejects(
      startLocalServer(options('/nonexistent/python', log)),
      /could not run \/nonexistent\/python.*agentRl\.pythonPath/,
    );
  });

  it('gives up on a server that never listens, and on a cancelled start', async () => {
    const { log } = recorder();
    await assert.rejects(
      startLocalServer({ ...options(fakePython('exec sleep 30'), log), startTimeoutMs: 300 }),
      /did not start listening within 0.3 s/,
    );
    const abort = new AbortController();
    const starting = startLocalServer({ ...options(fakePython('exec sleep 30'), log), signal: abort.signal });
    abort.abort();
    await assert.rejects(starting, /cancelled/);
  });
});
