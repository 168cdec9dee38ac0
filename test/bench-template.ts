// Does the template teach? New Environment's ToolEnv template (the packaged SmolLM2-135M) as a newcomer gets it:
// a Try of 32 episodes of the untrained model (how many call the Tool, how many answer right), then `agentrl demo`
// on its run config: the held-out words scored greedily, 10 GRPO steps, scored again, with the paired bootstrap
// interval of the change. Writes results/template_teaches.json and .md and prints the table.
// usage: npm run bench:template [-- ENGINE]   (default: the template's own rollout.engine, auto)
import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { renderEnvironment } from '../extension/scaffold';

const ROOT = resolve(__dirname, '..');
const PYTHON = process.env.AGENTRL_PYTHON ?? join(ROOT, '.venv', 'bin', 'python');
const ENGINE = process.argv[2];
const TRY_EPISODES = 32;
const STEPS = 10;

interface Episode {
  reward_breakdown?: Record<string, number>;
  turns: Array<{ tool_calls?: Array<{ error?: string | null }> }>;
}

function agentrl(args: string[], cwd: string): string {
  const engine = ENGINE ? ['--set', `rollout.engine=${ENGINE}`] : [];
  return execFileSync(PYTHON, ['-m', 'agentrl.cli', ...args, ...engine], { cwd, encoding: 'utf8', stdio: 'pipe' });
}

/** The untrained model's Try: episodes that made a call that worked, and episodes answered exactly. */
function tryTemplate(envDir: string): { episodes: number; called: number; right: number } {
  const runs = join(envDir, 'runs-try');
  agentrl(['train', 'my-env.agentrl.yaml', '--rollout-only', String(TRY_EPISODES), '--runs-dir', runs], envDir);
  const [run] = readdirSync(runs);
  const episodes = readFileSync(join(runs, run, 'trajectories', 'step-000000.trajectories.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Episode);
  return {
    episodes: episodes.length,
    called: episodes.filter((e) => e.turns.some((t) => (t.tool_calls ?? []).some((c) => !c.error))).length,
    right: episodes.filter((e) => e.reward_breakdown?.accuracy === 1).length,
  };
}

function main(): void {
  const dir = mkdtempSync(join(tmpdir(), 'agentrl-bench-template-'));
  const envDir = join(dir, 'my-env');
  mkdirSync(envDir);
  try {
    const files = renderEnvironment(
      { name: 'my-env', model: 'smollm2', tools: ['search'] },
      join(ROOT, 'extension', 'templates'),
    );
    for (const [name, text] of files) writeFileSync(join(envDir, name), text);
    const tried = tryTemplate(envDir);
    const started = Date.now();
    const demoArgs = ['demo', '--config', 'my-env.agentrl.yaml', '--steps', String(STEPS), '--metric', 'accuracy'];
    const output = agentrl([...demoArgs, '--eval-limit', '1000', '--runs-dir', join(dir, 'runs')], envDir);
    const demo = JSON.parse(output.trim().split('\n').at(-1)!) as {
      n: number;
      before: Record<string, number>;
      after: Record<string, number>;
      delta: number;
      ci95: [number, number];
      train_wall_s: number;
    };
    const record = {
      date: new Date().toISOString().slice(0, 10),
      machine: `${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores`,
      engine: ENGINE ?? 'auto (the template)',
      try: tried,
      steps: STEPS,
      held_out: {
        n: demo.n,
        before: demo.before.accuracy,
        after: demo.after.accuracy,
        delta: demo.delta,
        ci95: demo.ci95,
      },
      train_wall_s: Math.round(demo.train_wall_s),
      demo_wall_s: Math.round((Date.now() - started) / 1000),
    };
    const [low, high] = demo.ci95;
    const text =
      `# Does New Environment's template teach?\n\n` +
      `Measured by \`npm run bench:template\` (test/bench-template.ts) on ${record.machine}, ${record.date}; ` +
      `the ToolEnv template with the packaged SmolLM2-135M-Instruct, rollout.engine ${record.engine}.\n\n` +
      `| untrained Try: episodes that called the Tool | answered right | held-out words right (greedy), before -> after ${STEPS} GRPO steps | change [95% CI] | training s |\n` +
      `|---|---|---|---|---|\n` +
      `| ${tried.called} of ${tried.episodes} | ${tried.right} of ${tried.episodes} | ` +
      `${demo.before.accuracy.toFixed(3)} -> ${demo.after.accuracy.toFixed(3)} (n = ${demo.n}) | ` +
      `${demo.delta >= 0 ? '+' : ''}${demo.delta.toFixed(3)} [${low >= 0 ? '+' : ''}${low.toFixed(3)}, +${high.toFixed(3)}] | ` +
      `${record.train_wall_s} |\n`;
    writeFileSync(join(ROOT, 'results', 'template_teaches.json'), `${JSON.stringify(record, null, 2)}\n`);
    writeFileSync(join(ROOT, 'results', 'template_teaches.md'), text);
    console.log(text);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main();
