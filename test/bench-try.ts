// Try benchmark: how long the first Try of the scaffolded template (New Environment's ToolEnv, the packaged model,
// 4 episodes) takes from the click to its episodes in hand, which is what the replay opens on: cold (the click starts
// the trainer server, as Try does where none is connected) and warm (a second Try on that server); then a 3-step
// training run of the same template. Each with the moments its phases began (the run's `phase` events as the
// extension receives them), for each rollout engine asked for, side by side.
// usage: npm run bench:try [-- ENGINE,ENGINE...]   (default: the template's own setting, auto, against hf)
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ENDED_RUN_STATUSES } from '../protocol/generated/rpc';
import { startLocalServer, type LocalServer } from '../extension/localServer';
import { readRunConfig } from '../extension/runConfig';
import { renderEnvironment } from '../extension/scaffold';
import { TrainerClient } from '../extension/trainerClient';
import { webSocketFactory } from '../extension/webSocket';

const ROOT = resolve(__dirname, '..');
const PYTHON = process.env.AGENTRL_PYTHON ?? join(ROOT, '.venv', 'bin', 'python');
const TOKEN = 'bench-try-token';
const ENGINES = (process.argv[2] ?? 'auto,hf').split(',');

type Moments = Record<string, number>; // what happened, seconds after the click

async function runOnce(
  client: TrainerClient,
  config: Record<string, unknown>,
  configDir: string,
  mode: 'try' | 'train',
  clickedAt: number,
  moments: Moments,
): Promise<void> {
  const seen = (what: string) => (moments[what] ??= (Date.now() - clickedAt) / 1000);
  let runId = '';
  const ended = new Promise<void>((resolveEnded, reject) => {
    const subscription = client.onRunEvent((event) => {
      if (event.runId !== runId) return;
      if (event.type === 'phase') seen(`${event.data.phase}${event.data.step ? ` (step ${event.data.step})` : ''}`);
      if (event.type === 'status' && ENDED_RUN_STATUSES.has(event.data.status)) {
        subscription.dispose();
        if (event.data.status === 'completed') resolveEnded();
        else reject(new Error(`the ${mode} run ended ${event.data.status}: ${event.data.message ?? ''}`));
      }
    });
  });
  ({ runId } = await client.request('run/start', {
    config,
    configDir,
    mode,
    ...(mode === 'try' ? { episodes: 4 } : {}),
  }));
  seen('run started');
  await client.subscribe(runId);
  await ended;
  seen('run ended');
  const page = await client.request('trajectory/query', { runId, limit: 1000 });
  await client.request('trajectory/get', { runId, ids: page.items.map((item) => item.id) });
  seen('episodes in hand');
}

async function bench(engine: string): Promise<Record<string, Moments>> {
  const dir = mkdtempSync(join(tmpdir(), 'agentrl-bench-try-'));
  const envDir = join(dir, 'my-env');
  const files = renderEnvironment(
    { name: 'my-env', model: 'smollm2', tools: ['search'] },
    join(ROOT, 'extension', 'templates'),
  );
  writeFileSync(join(dir, 'token'), TOKEN, { mode: 0o600 });
  mkdirSync(envDir);
  for (const [name, text] of files) writeFileSync(join(envDir, name), text);
  const config = readRunConfig(join(envDir, 'my-env.agentrl.yaml')) as Record<string, unknown> & {
    rollout: Record<string, unknown>;
    train: Record<string, unknown>;
  };
  config.rollout.engine = engine;
  const result: Record<string, Moments> = { cold: {}, warm: {}, 'train 3 steps': {} };
  let server: LocalServer | undefined;
  let client: TrainerClient | undefined;
  try {
    const clickedAt = Date.now();
    server = await startLocalServer({
      python: PYTHON,
      cwd: dir,
      runsDir: join(dir, 'runs'),
      tokenFile: join(dir, 'token'),
      log: { trace() {}, debug() {}, info() {}, warn() {}, error() {} },
    });
    client = new TrainerClient({ url: server.url, openSocket: webSocketFactory(TOKEN) });
    await client.connect();
    result.cold['server up'] = (Date.now() - clickedAt) / 1000;
    await runOnce(client, config, envDir, 'try', clickedAt, result.cold);
    await runOnce(client, config, envDir, 'try', Date.now(), result.warm);
    const train = { ...config, train: { ...config.train, steps: 3, checkpoint_every: 3 } };
    await runOnce(client, train, envDir, 'train', Date.now(), result['train 3 steps']);
  } finally {
    client?.dispose();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return result;
}

async function main() {
  const all: Record<string, Record<string, Moments>> = {};
  for (const engine of ENGINES) all[`rollout.engine: ${engine}`] = await bench(engine);
  console.log(JSON.stringify(all, null, 2));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
