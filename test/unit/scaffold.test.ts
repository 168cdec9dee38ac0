import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse } from 'yaml';
import { validateRunConfig } from '../../extension/languageServer/validate';
import {
  addTool,
  AGENT_FRAMEWORKS,
  parseTools,
  renderEnvironment,
  renderToolEnv,
  validateEnvName,
  validateToolName,
  type AgentFramework,
  type EnvironmentSpec,
} from '../../extension/scaffold';

const TEMPLATES = resolve(__dirname, '../../extension/templates');
const PYTHON = process.env.AGENTRL_PYTHON ?? resolve(__dirname, '../../.venv/bin/python');

describe('scaffold', () => {
  it('renders every file of a new environment with its classes filled in', () => {
    const files = renderEnvironment({ name: 'web-qa', tools: ['search', 'read_page'], model: 'tiny' }, TEMPLATES);
    assert.deepEqual([...files.keys()].sort(), [
      'codes.json',
      'env.py',
      'held-out.jsonl',
      'reward.py',
      'tasks.jsonl',
      'test_env.py',
      'tools.py',
      'web-qa.agentrl.yaml',
    ]);
    assert.match(files.get('tools.py')!, /class Search\(Tool\):\n {4}name = "search"/);
    assert.match(files.get('tools.py')!, /class ReadPage\(Tool\):\n {4}name = "read_page"/);
    assert.match(files.get('env.py')!, /class WebQaEnv\(ToolEnv\)/);
    assert.match(files.get('env.py')!, /self\.tools = \[Search\(\), ReadPage\(\)\]/);
    assert.match(files.get('web-qa.agentrl.yaml')!, /class_name: WebQaEnv/);
    // the config's comment shows a call of the env's own first Tool, as env.py's worked example writes it
    assert.match(files.get('web-qa.agentrl.yaml')!, /# How the model writes a call: <search>its argument<\/search>/);
    // the first Tool looks the tasks' words up, the others echo; the question names the first
    assert.match(
      files.get('tools.py')!,
      /class Search\(Tool\):[^]*CODES\.get\([^]*class ReadPage\(Tool\):[^]*return input\n$/,
    );
    assert.match(files.get('tasks.jsonl')!, /Look it up with the search tool/);
    assert.equal(parse(files.get('web-qa.agentrl.yaml')!).data.eval, 'held-out.jsonl');
    for (const content of files.values()) assert.doesNotMatch(content, /\{\{/);
    assert.match(
      renderEnvironment({ name: 'math-env', tools: ['calc'], model: 'tiny' }, TEMPLATES).get('env.py')!,
      /class MathEnv\(ToolEnv\)/,
    );
  });

  it("writes tasks only its Tool solves: each answer the code of the question's word, none guessable or shared", () => {
    const files = renderEnvironment({ name: 'qa', tools: ['search'], model: 'smollm2' }, TEMPLATES);
    const codes = JSON.parse(files.get('codes.json')!) as Record<string, string>;
    const read = (file: string) =>
      files
        .get(file)!
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { id: string; question: string; word: string; answer: string });
    const train = read('tasks.jsonl');
    const heldOut = read('held-out.jsonl');
    assert.deepEqual([train.length, heldOut.length], [47, 47]);
    const all = [...train, ...heldOut];
    for (const task of all) {
      assert.equal(task.answer, codes[task.word], task.id);
      assert.ok(task.question.includes(task.word) && !task.question.includes(task.answer), task.id);
    }
    assert.equal(new Set(all.map((t) => t.answer)).size, all.length, 'no two tasks share a code');
    assert.equal(new Set(all.map((t) => t.word)).size, all.length, 'no held-out word is trained on');
    assert.equal(new Set(all.map((t) => t.id)).size, all.length);
    // the worked example in env.py looks up a word no task asks, and shows the code the Tool returns for it
    const example = /EXAMPLE_WORD = "(\w+)"\nEXAMPLE_CODE = "(\w+)"/.exec(files.get('env.py')!)!;
    assert.equal(codes[example[1]], example[2]);
    assert.ok(!all.some((t) => t.word === example[1]));
  });

  it('writes a run config for the chosen model: fine-tuning settings for a real one, large steps for tiny', () => {
    const config = (model: string) =>
      parse(renderEnvironment({ name: 'qa', tools: ['search'], model }, TEMPLATES).get('qa.agentrl.yaml')!);
    const real = config('smollm2');
    assert.deepEqual(
      [real.model.path, real.train.lr, real.rollout.max_new_tokens, real.rollout.temperature, real.train.steps],
      ['smollm2', 1e-5, 128, 0.7, 20],
    );
    const tiny = config('tiny');
    assert.deepEqual(
      [tiny.model.path, tiny.train.lr, tiny.rollout.max_new_tokens, tiny.train.steps],
      ['tiny', 0.01, 16, 2],
    );
    assert.equal(config('Qwen/Qwen2.5-0.5B-Instruct').model.path, 'Qwen/Qwen2.5-0.5B-Instruct');
    assert.equal(config('/models/my model: v2 #1').model.path, '/models/my model: v2 #1'); // quoted where YAML needs it
    assert.deepEqual(
      validateRunConfig(
        renderEnvironment({ name: 'qa', tools: ['search'], model: 'smollm2' }, TEMPLATES).get('qa.agentrl.yaml')!,
        join(TEMPLATES, 'qa.agentrl.yaml'),
      ).filter((f) => f.severity === 'error' && f.code !== 'env-module' && f.code !== 'data-file'),
      [],
    );
  });

  it('refuses bad names with a reason', () => {
    assert.equal(validateEnvName('ok_env-1'), undefined);
    assert.ok(validateEnvName('Bad Name'));
    assert.ok(validateToolName('run-sql'));
    assert.throws(() => renderEnvironment({ name: 'x', tools: ['a', 'a'], model: 'tiny' }, TEMPLATES), /distinct/);
    assert.throws(() => renderEnvironment({ name: 'x', tools: [], model: 'tiny' }, TEMPLATES), /at least one tool/);
  });

  it('writes an env that passes `agentrl env check` and its own pytest unchanged', function () {
    this.timeout(120_000);
    const dir = mkdtempSync(join(tmpdir(), 'agentrl-scaffold-'));
    for (const [file, content] of renderEnvironment(
      { name: 'demo', tools: ['echo', 'shout'], model: 'tiny' },
      TEMPLATES,
    ))
      writeFileSync(join(dir, file), content);
    const check = execFileSync(PYTHON, ['-m', 'agentrl.cli', 'env', 'check', dir], { encoding: 'utf8' });
    assert.match(check, /scripted episode/);
    execFileSync(PYTHON, ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'test_env.py'], {
      cwd: dir,
      encoding: 'utf8',
    });
  });
});

describe('scaffold: from an existing agent', () => {
  const agent = (model = 'tiny') => renderEnvironment({ kind: 'agent', name: 'my-agent', model }, TEMPLATES);

  it('writes an OpenAI-SDK agent, its reward, tasks and a run config naming them under agent:', () => {
    const files = agent();
    assert.deepEqual([...files.keys()], ['agent.py', 'reward.py', 'tasks.jsonl', 'my-agent.agentrl.yaml']);
    assert.match(files.get('agent.py')!, /^def run\(task: dict\[str, Any\], base_url: str, api_key: str\)/m);
    assert.match(files.get('agent.py')!, /OpenAI\(base_url=base_url, api_key=api_key\)/);
    assert.match(files.get('reward.py')!, /^def score\(task: dict\[str, Any\], result: str \| None\) -> float:/m);
    for (const content of files.values()) assert.doesNotMatch(content, /\{\{/);
    const config = parse(files.get('my-agent.agentrl.yaml')!);
    assert.deepEqual(config.agent, { module: 'agent.py', function: 'run', reward: 'reward.py:score', timeout_s: 300 });
    assert.equal(config.env, undefined);
    assert.equal(config.rollout.max_turns, undefined, "the agent's own loop bounds its turns");
    assert.deepEqual([config.model.path, config.train.lr], ['tiny', 0.01]);
    assert.deepEqual([parse(agent('smollm2').get('my-agent.agentrl.yaml')!).train.lr], [1e-5]);
  });

  it("writes agent.py with the framework picked, in that framework's idiom, and the rest the same", () => {
    // How each framework is imported and pointed at the endpoint (trainer-server/tests/test_agent_templates.py plays
    // an episode of each through it, and runs `agentrl env check` on it).
    const idioms: Record<AgentFramework, RegExp[]> = {
      openai: [/^from openai import OpenAI$/m, /OpenAI\(base_url=base_url, api_key=api_key\)/],
      'agents-sdk': [
        /^from agents import \($/m,
        /AsyncOpenAI\(base_url=base_url, api_key=api_key\)/,
        /OpenAIResponsesModel\(model="policy", openai_client=client\)/,
        /^set_tracing_disabled\(True\)/m,
      ],
      langgraph: [
        /^from langgraph\.prebuilt import create_react_agent$/m,
        /ChatOpenAI\(model="policy", base_url=base_url, api_key=api_key\)/,
      ],
      'pydantic-ai': [
        /^from pydantic_ai import Agent$/m,
        /OpenAIChatModel\("policy", provider=OpenAIProvider\(base_url=base_url, api_key=api_key\)\)/,
      ],
    };
    const openai = agent();
    for (const framework of Object.keys(AGENT_FRAMEWORKS) as AgentFramework[]) {
      const files = renderEnvironment({ kind: 'agent', name: 'my-agent', model: 'tiny', framework }, TEMPLATES);
      assert.deepEqual([...files.keys()], [...openai.keys()]);
      for (const file of ['reward.py', 'tasks.jsonl', 'my-agent.agentrl.yaml'])
        assert.equal(files.get(file), openai.get(file), `${framework}: ${file}`);
      const agentPy = files.get('agent.py')!;
      for (const idiom of idioms[framework]) assert.match(agentPy, idiom, framework);
      assert.match(
        agentPy,
        /^(async )?def run\(task: dict\[str, Any\], base_url: str, api_key: str\) -> str \| None:/m,
      );
      assert.doesNotMatch(agentPy, /\{\{/);
      // the same tool and worked example in each: the calculator's code shared, the example in the framework's terms
      assert.match(agentPy, /^def calculator\(expression: str\) -> str:$/m);
      assert.match(agentPy, /^SYSTEM_PROMPT = "Solve the problem with the calculator\./m);
      assert.match(agentPy, /"24 \* 37"/);
      assert.match(agentPy, /"888"/);
      // the package the trainer's Python needs, named at the top
      assert.ok(agentPy.split('"""')[1].includes(AGENT_FRAMEWORKS[framework].packages), framework);
    }
    assert.equal(
      renderEnvironment({ kind: 'agent', name: 'my-agent', model: 'tiny', framework: 'openai' }, TEMPLATES).get(
        'agent.py',
      ),
      openai.get('agent.py'),
      'the OpenAI SDK is the default',
    );
    const unknown = {
      kind: 'agent',
      name: 'my-agent',
      model: 'tiny',
      framework: 'crewai',
    } as unknown as EnvironmentSpec;
    assert.throws(() => renderEnvironment(unknown, TEMPLATES), /No agent template for "crewai"/);
  });

  it('its run config has no finding of the language server beside the files it names', () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentrl-scaffold-agent-'));
    for (const [file, content] of agent('smollm2')) writeFileSync(join(dir, file), content);
    const config = join(dir, 'my-agent.agentrl.yaml');
    assert.deepEqual(validateRunConfig(readFileSync(config, 'utf8'), config), []);
  });

  it('a Try run (agentrl train --rollout-only) plays its episodes through the endpoint', function () {
    this.timeout(120_000);
    const episodes = tryEpisodes('tiny', 2, [], { kind: 'agent', name: 'my-agent', model: 'tiny' });
    assert.equal(episodes.length, 2);
    for (const episode of episodes) assert.notEqual(episode.status, 'error', JSON.stringify(episode));
  });
});

describe('scaffold: a Gym-style text environment (env.gym)', () => {
  const game = (model = 'tiny') => renderEnvironment({ kind: 'gym', name: 'coin', model }, TEMPLATES);

  it("writes a text game of the user's own (a plain class with reset/step), its tasks, a test and an env.gym run config", () => {
    const files = game();
    assert.deepEqual([...files.keys()], ['game.py', 'tasks.jsonl', 'coin.agentrl.yaml', 'test_game.py']);
    assert.match(files.get('game.py')!, /^class CoinGame:$/m);
    assert.doesNotMatch(files.get('game.py')!, /^(import|from) (gymnasium|agentrl)/m, 'no package beyond Python');
    for (const content of files.values()) assert.doesNotMatch(content, /\{\{/);
    const config = parse(files.get('coin.agentrl.yaml')!);
    assert.equal(config.env.gym.factory, 'game.py:CoinGame');
    assert.equal(config.env.gym.action, 'text');
    assert.deepEqual(
      [config.env.gym.valid_actions_key, config.env.gym.state_key, config.env.gym.score_keys],
      ['valid_actions', 'room', ['won']],
    );
    assert.equal(config.env.module, undefined);
    assert.deepEqual([config.model.path, config.train.lr], ['tiny', 0.01]);
    assert.equal(parse(game('smollm2').get('coin.agentrl.yaml')!).train.lr, 1e-5);
    assert.equal(
      renderEnvironment({ kind: 'gym', name: 'maze-game', model: 'tiny' }, TEMPLATES)
        .get('game.py')!
        .match(/^class (\w+)/m)![1],
      'MazeGame',
    );
  });

  it('its run config has no finding of the language server beside the files it names', () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentrl-scaffold-gym-'));
    for (const [file, content] of game('smollm2')) writeFileSync(join(dir, file), content);
    const config = join(dir, 'coin.agentrl.yaml');
    assert.deepEqual(validateRunConfig(readFileSync(config, 'utf8'), config), []);
  });

  it('passes `agentrl env check` and its own pytest unchanged, and a Try run plays the game', function () {
    this.timeout(240_000);
    const dir = mkdtempSync(join(tmpdir(), 'agentrl-scaffold-gym-'));
    for (const [file, content] of game()) writeFileSync(join(dir, file), content);
    const check = execFileSync(PYTHON, ['-m', 'agentrl.cli', 'env', 'check', dir], { encoding: 'utf8' });
    assert.match(check, /scripted episode: 1 turn\(s\)/);
    execFileSync(PYTHON, ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'test_game.py'], {
      cwd: dir,
      encoding: 'utf8',
    });
    const episodes = tryEpisodes('tiny', 2, [], { kind: 'gym', name: 'coin', model: 'tiny' });
    assert.equal(episodes.length, 2);
    for (const episode of episodes) assert.notEqual(episode.status, 'error', JSON.stringify(episode));
  });
});

/** The assistant text of each episode a Try run (`agentrl train --rollout-only`) of a new environment (a ToolEnv
 * over an `echo` Tool, unless `spec` says otherwise) gave, beside the task's question. */
function tryEpisodes(
  model: string,
  episodes: number,
  overrides: string[] = [],
  spec: EnvironmentSpec = { name: 'demo', tools: ['echo'], model },
): Array<{ question: string; text: string; status: string; answeredCalls: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'agentrl-scaffold-try-'));
  for (const [file, content] of renderEnvironment(spec, TEMPLATES)) writeFileSync(join(dir, file), content);
  const sets = overrides.flatMap((override) => ['--set', override]);
  const runs = join(dir, 'runs');
  execFileSync(
    PYTHON,
    [
      '-m',
      'agentrl.cli',
      'train',
      join(dir, `${spec.name}.agentrl.yaml`),
      '--rollout-only',
      String(episodes),
      '--runs-dir',
      runs,
      ...sets,
    ],
    { encoding: 'utf8', stdio: 'pipe' },
  );
  const [run] = readdirSync(runs);
  const tasks = new Map(
    readFileSync(join(dir, 'tasks.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: string; question: string })
      .map((task) => [task.id, task.question]),
  );
  return readFileSync(join(runs, run, 'trajectories', 'step-000000.trajectories.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map(
      (line) =>
        JSON.parse(line) as {
          task_id: string;
          status: string;
          turns: Array<{ assistant: string; tool_calls?: Array<{ result?: unknown; error?: string | null }> }>;
        },
    )
    .map((record) => ({
      question: tasks.get(record.task_id)!,
      text: record.turns.map((t) => t.assistant).join('\n'),
      status: record.status,
      // calls the Tool answered: what a Try of a fresh env must show (0 of 32 episodes before the worked example)
      answeredCalls: record.turns.flatMap((t) => t.tool_calls ?? []).filter((c) => !c.error && c.result != null).length,
    }));
}

/** Whether some episode takes up a word of its question (in a call's argument or its answer). */
function aboutTheTask(episodes: Array<{ question: string; text: string }>): boolean {
  return episodes.some(({ question, text }) => {
    const asked = new Set(question.toLowerCase().match(/[a-z]{3,}/g));
    return (text.toLowerCase().match(/[a-z]{3,}/g) ?? []).some((word) => asked.has(word));
  });
}

describe('scaffold: a new environment tried on the embedded model', () => {
  it('shows a real agent: the embedded model calls the Tool in most episodes and reads its result, the random tiny model does not', function () {
    // 'smollm2' is New Environment's recommended default (scaffoldCommands.ts). The worked example in env.py's reset
    // and the tag call format are what make a 135M model call the Tool (measured: 29 of 32 episodes,
    // results/template_teaches.md; with JSON calls and no example, 0 of 32). Both runs together: about 2 minutes
    // on 2 shared, busy cores. A Try samples with hf, as the editor's does.
    this.timeout(300_000);
    const real = tryEpisodes('smollm2', 4);
    assert.equal(real.length, 4);
    const calling = real.filter((episode) => episode.answeredCalls > 0).length;
    assert.ok(calling >= 3, JSON.stringify(real, null, 1));
    assert.ok(aboutTheTask(real), JSON.stringify(real, null, 1));
    const random = tryEpisodes('tiny', 2, ['rollout.max_new_tokens=128']);
    assert.equal(
      random.reduce((calls, episode) => calls + episode.answeredCalls, 0),
      0,
      JSON.stringify(random),
    );
  });
});

describe('scaffold: New Tool and New ToolEnv', () => {
  const env = renderEnvironment({ name: 'demo', tools: ['echo'], model: 'tiny' }, TEMPLATES);

  it('adds a Tool to tools.py and registers it in env.py', () => {
    const added = addTool('word_count', env.get('tools.py')!, env.get('env.py')!, TEMPLATES);
    assert.deepEqual(parseTools(added.toolsPy), [
      { symbol: 'Echo', name: 'echo', kind: 'class' },
      { symbol: 'WordCount', name: 'word_count', kind: 'class' },
    ]);
    assert.match(added.envPy!, /^from tools import Echo, WordCount$/m);
    assert.match(added.envPy!, /self\.tools = \[Echo\(\), WordCount\(\)\]/);
    assert.throws(
      () => addTool('echo', env.get('tools.py')!, env.get('env.py')!, TEMPLATES),
      /already defines a Tool named "echo"/,
    );
    assert.throws(() => addTool('Bad-Name', env.get('tools.py')!, env.get('env.py')!, TEMPLATES), /snake_case/);
    const edited = addTool('other', env.get('tools.py')!, 'class MyEnv(ToolEnv):\n    pass\n', TEMPLATES);
    assert.equal(edited.envPy, undefined, 'an env.py without the generated lines is left alone (the user is told)');
  });

  it('adds a function Tool under @tool, imports the decorator, and lists the function itself in env.py', () => {
    const added = addTool('shout', env.get('tools.py')!, env.get('env.py')!, TEMPLATES, 'function');
    assert.match(added.toolsPy, /^from agentrl import Tool, tool$/m);
    assert.match(added.toolsPy, /^@tool\ndef shout\(input: str\) -> str:$/m);
    assert.deepEqual(parseTools(added.toolsPy).at(-1), { symbol: 'shout', name: 'shout', kind: 'function' });
    assert.match(added.envPy!, /^from tools import Echo, shout$/m);
    assert.match(added.envPy!, /self\.tools = \[Echo\(\), shout\]/);
    const again = addTool('more', added.toolsPy, added.envPy!, TEMPLATES, 'function');
    assert.equal(
      again.toolsPy.match(/^from agentrl import .*$/m)![0],
      'from agentrl import Tool, tool',
      'imported once',
    );
    assert.throws(
      () => addTool('shout', added.toolsPy, added.envPy!, TEMPLATES),
      /already defines a Tool named "shout" \(function shout\)/,
    );
    assert.deepEqual(
      parseTools('@tool(name="add_numbers", timeout_s=2)\nasync def add(a: int) -> int:\n    return a\n'),
      [{ symbol: 'add', name: 'add_numbers', kind: 'function' }],
    );
  });

  it("writes a second ToolEnv over the folder's Tools with its own run config", () => {
    const files = renderToolEnv('strict-qa', env.get('tools.py')!, 'tiny', TEMPLATES);
    assert.deepEqual([...files.keys()], ['strict_qa_env.py', 'strict-qa.agentrl.yaml']);
    assert.match(files.get('strict_qa_env.py')!, /class StrictQaEnv\(ToolEnv\)/);
    assert.match(files.get('strict-qa.agentrl.yaml')!, /module: strict_qa_env\.py\n\s+class_name: StrictQaEnv/);
    assert.throws(() => renderToolEnv('x', '"""no tools"""', 'tiny', TEMPLATES), /defines no Tools/);
  });

  it('the env with an added class Tool, a function Tool and a second ToolEnv still passes `agentrl env check`', function () {
    this.timeout(120_000);
    const dir = mkdtempSync(join(tmpdir(), 'agentrl-scaffold-more-'));
    for (const [file, content] of env) writeFileSync(join(dir, file), content);
    const withClass = addTool('word_count', env.get('tools.py')!, env.get('env.py')!, TEMPLATES);
    const added = addTool('shout', withClass.toolsPy, withClass.envPy!, TEMPLATES, 'function');
    writeFileSync(join(dir, 'tools.py'), added.toolsPy);
    writeFileSync(join(dir, 'env.py'), added.envPy!);
    for (const [file, content] of renderToolEnv('strict-qa', added.toolsPy, 'tiny', TEMPLATES))
      writeFileSync(join(dir, file), content);
    for (const config of ['demo.agentrl.yaml', 'strict-qa.agentrl.yaml']) {
      assert.match(
        execFileSync(PYTHON, ['-m', 'agentrl.cli', 'env', 'check', join(dir, config)], { encoding: 'utf8' }),
        /scripted episode/,
      );
    }
  });
});

describe('manifest', () => {
  it('contributes every command the extension registers, under the Agent RL category', async () => {
    const { Commands } = await import('../../extension/commands');
    const manifest = JSON.parse(readFileSync(resolve(__dirname, '../../package.json'), 'utf8'));
    const contributed = new Map(
      manifest.contributes.commands.map((c: { command: string; category: string }) => [c.command, c.category]),
    );
    for (const id of Object.values(Commands)) assert.equal(contributed.get(id), 'Agent RL', id);
  });
});
