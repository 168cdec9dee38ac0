// Starts `agentrl serve` as a child process with the configured Python, on a free loopback port, and stops
// it: `server/shutdown` is the client's business; here a SIGTERM, then a SIGKILL if it lingers. The server
// prints one JSON line on stdout when it listens (protocol/rpc.md, "Connecting"); its stderr is its log.
// No `vscode` import: unit-tested with a fake Python.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { EditorFailure, type FailureKind } from './troubleshooting';

export interface LogSink {
  trace(message: string): void;
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface LocalServerOptions {
  python: string;
  /** The server's working folder (the workspace folder). */
  cwd: string;
  runsDir: string;
  /** A file holding the token every connection must present (kept out of the process list). */
  tokenFile: string;
  log: LogSink;
  env?: NodeJS.ProcessEnv;
  startTimeoutMs?: number;
  /** Aborting before the server listens kills it and rejects. */
  signal?: AbortSignal;
}

export interface LocalServer {
  readonly url: string;
  readonly pid: number;
  /** Resolves when the process has exited, however it ended. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
  stop(graceMs?: number): Promise<void>;
}

const LOG_LINE = /^\S+ \S+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) (.*)$/;

/** Forwards one line of the server's stderr to the log at the level Python's logging gave it. */
export function forwardServerLog(line: string, log: LogSink): void {
  const match = LOG_LINE.exec(line);
  const level = match?.[1];
  const text = `[server] ${match ? match[2] : line}`;
  if (level === 'DEBUG') log.debug(text);
  else if (level === 'WARNING') log.warn(text);
  else if (level === 'ERROR' || level === 'CRITICAL') log.error(text);
  else if (level === 'INFO') log.info(text);
  else log.warn(text); // not from logging: a traceback or a message printed before logging was set up
}

export function startLocalServer(options: LocalServerOptions): Promise<LocalServer> {
  const args = [
    '-m',
    'agentrl.cli',
    'serve',
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--runs-dir',
    options.runsDir,
    '--token-file',
    options.tokenFile,
  ];
  options.log.info(`Starting the trainer server: ${options.python} ${args.join(' ')}`);
  let child: ChildProcess;
  try {
    child = spawn(options.python, args, {
      cwd: options.cwd,
      env: { ...process.env, ...options.env, PYTHONUNBUFFERED: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    return Promise.reject(new EditorFailure('noPython', `could not run ${options.python}: ${(err as Error).message}`));
  }
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.once('error', () => resolve({ code: null, signal: null }));
  });
  const stderrTail: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (line) => {
    stderrTail.push(line);
    if (stderrTail.length > 20) stderrTail.shift();
    forwardServerLog(line, options.log);
  });

  const stop = async (graceMs = 5000): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const killer = setTimeout(() => {
      options.log.warn(
        `The trainer server (pid ${child.pid}) did not exit within ${graceMs} ms of SIGTERM; killing it.`,
      );
      child.kill('SIGKILL');
    }, graceMs);
    await exited;
    clearTimeout(killer);
  };

  return new Promise<LocalServer>((resolve, reject) => {
    let settled = false;
    const fail = (message: string, kind: FailureKind = 'localServerFailed'): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void stop(1000);
      reject(new EditorFailure(kind, message));
    };
    const timer = setTimeout(
      () => fail(`the trainer server did not start listening within ${(options.startTimeoutMs ?? 60_000) / 1000} s`),
      options.startTimeoutMs ?? 60_000,
    );
    options.signal?.addEventListener('abort', () => fail('starting the trainer server was cancelled'));
    child.once('error', (err) =>
      fail(
        `could not run ${options.python}: ${err.message}. Set "agentRl.pythonPath" to a Python with agentrl installed.`,
        'noPython',
      ),
    );
    void exited.then(({ code, signal }) => {
      const why = stderrTail.slice(-5).join('\n');
      fail(
        `the trainer server exited before listening (${signal ?? `exit code ${code}`})${why ? `:\n${why}` : ''}`,
        // The Python runs but has no agentrl: installing it is the fix, not the server.
        /No module named '?agentrl/.test(why) ? 'noPython' : 'localServerFailed',
      );
    });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (settled) {
        options.log.info(`[server] ${line}`);
        return;
      }
      let ready: { event?: string; url?: string; pid?: number };
      try {
        ready = JSON.parse(line);
      } catch {
        options.log.info(`[server] ${line}`);
        return;
      }
      if (ready.event !== 'listening' || typeof ready.url !== 'string') return;
      settled = true;
      clearTimeout(timer);
      options.log.info(`Trainer server listening on ${ready.url} (pid ${child.pid})`);
      resolve({ url: ready.url, pid: child.pid!, exited, stop });
    });
  });
}
