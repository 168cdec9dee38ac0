import { strict as assert } from 'node:assert';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { complete, hoverText, pathAt } from '../../extension/languageServer/assist';
import { devicesSummary, fitSummary } from '../../extension/languageServer/fit';
import { BUILTIN_MODELS, describeModelSource, modelSource } from '../../extension/languageServer/modelPath';
import { ENV_SOURCES } from '../../protocol/episode-sources';
import { fieldsReadByEnv, findDottedModule } from '../../extension/languageServer/sourceChecks';
import { closest, validateRunConfig, type Finding } from '../../extension/languageServer/validate';

const DIR = join(resolve(__dirname, '..'), 'fixtures', 'run-configs');
/** The algorithm names as the run-config schema (the trainer's config.py) declares them. */
const ALGORITHMS: string[] = JSON.parse(
  readFileSync(join(resolve(__dirname, '..', '..'), 'protocol', 'schemas', 'run-config.schema.json'), 'utf8'),
).$defs.AlgorithmConfig.properties.name.anyOf[0].enum;

function check(name: string): {
  text: string;
  findings: Array<Finding & { line: number; col: number; snippet: string }>;
} {
  const file = join(DIR, `${name}.agentrl.yaml`);
  const text = readFileSync(file, 'utf8');
  const findings = validateRunConfig(text, file).map((f) => {
    const before = text.slice(0, f.start);
    return {
      ...f,
      line: before.split('\n').length,
      col: f.start - before.lastIndexOf('\n'),
      snippet: text.slice(f.start, f.end),
    };
  });
  return { text, findings };
}

describe('run-config language server: diagnostics', () => {
  it('a valid config has none', () => {
    assert.deepEqual(check('valid').findings, []);
  });

  it('unknown key, with did-you-mean and its quick fix, on the key itself', () => {
    const [f] = check('unknown-key').findings;
    assert.equal(f.message, "unknown key 'trian'; did you mean 'train'?");
    assert.deepEqual([f.line, f.col, f.snippet], [6, 1, 'trian']);
    assert.deepEqual(f.fix, { title: "Change 'trian' to 'train'", text: 'train' });
  });

  it('wrong type on the value', () => {
    const [f] = check('wrong-type').findings;
    assert.equal(f.message, 'train.lr: must be a number; got string "fast"');
    assert.deepEqual([f.line, f.col, f.snippet], [7, 7, 'fast']);
  });

  it('out of range with the allowed range', () => {
    const [f] = check('out-of-range').findings;
    assert.equal(f.message, 'rollout.top_p: 1.5 is out of range: must be > 0 and <= 1');
    assert.deepEqual([f.line, f.snippet], [7, '1.5']);
  });

  it('enum values, with did-you-mean', () => {
    const [f] = check('bad-enum').findings;
    assert.equal(
      f.message,
      `algorithm.name: must be one of ${ALGORITHMS.map((name) => `"${name}"`).join(', ')}; got "grp" (did you mean "grpo"?)`,
    );
    assert.deepEqual([f.line, f.col, f.snippet, f.fix?.text], [7, 9, 'grp', 'grpo']);
  });

  it("a user's own algorithm and loss as MODULE:NAME, beside the names of the list", () => {
    const text = (name: string) =>
      `env:\n  module: env.py\n  class_name: E\ndata:\n  train: t.jsonl\nalgorithm:\n  name: ${name}\n  policy_loss: my_rl.py:reinforce\n`;
    const about = (name: string) =>
      validateRunConfig(text(name), join(DIR, 'c.agentrl.yaml')).filter((f) => f.message.startsWith('algorithm.'));
    assert.deepEqual(about('my_rl.py:BatchBaseline'), []);
    assert.deepEqual(
      about('my_rl.py').map((f) => f.fix?.text),
      [undefined],
    ); // neither a name of the list nor MODULE:NAME
  });

  it('missing required key, at its parent key', () => {
    const text = 'env:\n  gym:\n    action: text\ndata:\n  train: tasks.jsonl\n';
    const [f] = validateRunConfig(text, join(DIR, 'c.agentrl.yaml'));
    assert.equal(f.message, "env.gym: required key 'factory' is missing");
    assert.equal(text.slice(f.start, f.end), 'gym');
  });

  it("env.module without env.class_name: they go together (the trainer's words), on the key given", () => {
    const [f] = check('missing-key').findings;
    assert.equal(f.message, 'env: module and class_name go together (the file or module, and the ToolEnv in it)');
    assert.deepEqual([f.code, f.line, f.snippet], ['env-source', 2, 'module']);
  });

  it('batch size not divisible by group size, with a fix', () => {
    const [f] = check('batch-group').findings;
    assert.equal(f.message, 'train.batch_size (8) must be divisible by rollout.group_size (3)');
    assert.deepEqual([f.line, f.snippet, f.fix?.text], [9, '8', '9']);
  });

  it('files that must exist: model, env module, data', () => {
    const messages = check('missing-files').findings.map((f) => [f.code, f.line, f.snippet]);
    assert.deepEqual(messages, [
      ['env-module', 4, 'missing_env.py'],
      ['model-path', 2, './no-such-model'],
      ['data-file', 7, 'missing.jsonl'],
    ]);
  });

  it('model.path: built-ins, local folders and .gguf files, Hub ids (namespace/name) and missing paths told apart as the trainer does', () => {
    const dir = mkdtempSync(join(tmpdir(), 'model-path-'));
    writeFileSync(join(dir, 'weights.gguf'), 'GGUF');
    assert.deepEqual(BUILTIN_MODELS, ['tiny', 'smollm2']); // read from the run-config schema
    assert.equal(modelSource('smollm2', dir), 'builtin');
    assert.equal(modelSource('weights.gguf', dir), 'gguf');
    assert.equal(modelSource('.', dir), 'folder');
    assert.equal(modelSource('Qwen/Qwen2.5-0.5B-Instruct', dir), 'hub');
    assert.equal(modelSource('./Qwen/Qwen2.5-0.5B-Instruct', dir), 'missing');
    const config = (path: string) =>
      `model:\n  path: ${path}\nenv:\n  module: agentrl.examples.lookup.env\n  class_name: LookupEnv\n`;
    const modelFindings = (path: string) =>
      validateRunConfig(config(path), join(dir, 'c.agentrl.yaml')).filter((f) => f.code === 'model-path');
    assert.deepEqual(modelFindings('Qwen/Qwen2.5-0.5B-Instruct'), []);
    assert.match(
      modelFindings('no-such-model')[0].message,
      /does not exist \(built-ins: tiny, smollm2; a Hugging Face Hub id is written namespace\/name\)/,
    );
    const hover = hoverText(config('Qwen/Qwen2.5-0.5B-Instruct'), 9, undefined, describeModelSource('hub'))!;
    assert.match(hover, /\*\*model\.path\*\*/);
    assert.match(hover, /This value: a Hugging Face Hub id/);
  });

  it('env class that does not exist, and data records missing the fields the env reads', () => {
    const findings = check('wrong-class').findings;
    assert.equal(findings[0].message, 'env.class_name: env.py defines no class OtherEnv');
    assert.equal(
      findings[1].message,
      "data.train: the first record has no 'question', 'hint', which the env reads from each task",
    );
    assert.equal(findings[1].severity, 'warning');
  });

  it('a dotted env.module is found in the folders above the config (here the agentrl package), and its class and task fields checked', () => {
    assert.equal(
      findDottedModule('agentrl.examples.lookup.env', DIR),
      resolve(DIR, '../../../trainer-server/agentrl/examples/lookup/env.py'),
    );
    const [f] = check('dotted-module').findings;
    assert.equal(f.message, "data.train: the first record has no 'key', which the env reads from each task");
    assert.deepEqual([f.line, f.snippet], [6, 'tasks.jsonl']);
  });

  it("a dotted env.module found nowhere is a warning (it may be installed in the trainer's Python)", () => {
    const [f] = check('unknown-module').findings;
    assert.equal(f.severity, 'warning');
    assert.match(f.message, /^env\.module: no no_such_pkg\/envs\.py \(or package\) in the folders above this config/);
    assert.deepEqual([f.line, f.snippet], [3, 'no_such_pkg.envs']);
  });

  it('max_context smaller than prompt + turns x new tokens, said to be an estimate', () => {
    const [f] = check('context-budget').findings;
    assert.match(
      f.message,
      /^rollout\.max_context \(1024\) < prompt \(~10 tokens, estimated at 4 characters a token\) \+ max_turns × max_new_tokens \(8 × 256\) = 2058/,
    );
    assert.equal(f.snippet, '1024');
  });

  it('agent: its modules found and defining the functions the trainer calls, and the task fields the agent reads', () => {
    const dir = mkdtempSync(join(tmpdir(), 'agent-config-'));
    writeFileSync(join(dir, 'agent.py'), 'async def play(task, base_url, api_key):\n    return task["question"]\n');
    writeFileSync(join(dir, 'reward.py'), 'def score(task, result):\n    return float(task["answer"] == result)\n');
    writeFileSync(join(dir, 'tasks.jsonl'), '{"question": "2 + 2?"}\n');
    const findings = (agent: string) =>
      validateRunConfig(`agent:\n${agent}data:\n  train: tasks.jsonl\n`, join(dir, 'c.agentrl.yaml')).map((f) => [
        f.code,
        f.message,
      ]);
    assert.deepEqual(findings('  module: agent.py\n  function: play\n  reward: reward.py:score\n'), [
      ['data-fields', "data.train: the first record has no 'answer', which the agent reads from each task"],
    ]);
    assert.deepEqual(findings('  module: missing.py\n  reward: reward.py:grade\n'), [
      ['agent-module', `agent.module: ${join(dir, 'missing.py')} does not exist`],
      ['agent-reward', 'agent.reward: reward.py defines no function grade (the trainer calls grade(task, result))'],
      ['data-fields', "data.train: the first record has no 'answer', which the agent reads from each task"],
    ]);
    assert.deepEqual(findings('  module: agent.py\n  reward: nowhere.py:score\n').slice(0, 2), [
      [
        'agent-function',
        'agent.function: agent.py defines no function run (the trainer calls run(task, base_url, api_key))',
      ],
      ['agent-reward', `agent.reward: ${join(dir, 'nowhere.py')} does not exist`],
    ]);
  });

  it('a config gives either env or agent, and says so when it gives both or neither', () => {
    const both = 'env:\n  module: agentrl.examples.lookup.env\nagent:\n  module: agent.py\n  reward: r.py:score\n';
    const [f] = validateRunConfig(both, join(DIR, 'c.agentrl.yaml')).filter((f) => f.code === 'episode-source');
    assert.equal(f.message, 'give either env (a ToolEnv) or agent (an OpenAI-compatible agent), not both');
    assert.equal(both.slice(f.start, f.end).split('\n')[0], 'module: agent.py'); // at the agent: section
    const [neither] = validateRunConfig('name: x\ndata:\n  train: tasks.jsonl\n', join(DIR, 'c.agentrl.yaml'));
    assert.deepEqual([neither.code, neither.start, neither.end], ['episode-source', 0, 'name: x'.length]);
    assert.match(neither.message, /add env \(a ToolEnv that gives them\) or agent/);
  });

  it('env gives exactly one of a ToolEnv, env.gym, env.methods and env.openenv; the adapters need no env.module', () => {
    const dir = mkdtempSync(join(tmpdir(), 'env-sources-'));
    writeFileSync(join(dir, 'tasks.jsonl'), '{"id": "a", "seed": 1}\n');
    writeFileSync(
      join(dir, 'corridor.py'),
      'class Corridor:\n    def reset(self, seed=None):\n        return "room 0", {}\n',
    );
    writeFileSync(
      join(dir, 'pantry.py'),
      'def make_pantry():\n    return object()\n\ndef grade(env, task, text):\n    return 1.0\n',
    );
    const findings = (env: string, more = '') =>
      validateRunConfig(`env:\n${env}data:\n  train: tasks.jsonl\n${more}`, join(dir, 'c.agentrl.yaml')).map((f) => [
        f.code,
        f.message,
      ]);
    assert.deepEqual(findings('  gym:\n    factory: corridor.py:Corridor\n    valid_actions_key: valid\n'), []);
    assert.deepEqual(findings('  gym: {factory: "textworld_express:TextWorldExpressEnv"}\n'), []); // installed, unchecked
    assert.deepEqual(findings('  methods:\n    factory: pantry.py:make_pantry\n    reward: pantry.py:grade\n'), []);
    assert.deepEqual(findings('  openenv:\n    url: http://127.0.0.1:8000\n'), []);
    assert.deepEqual(findings('  openenv:\n    command: [python, -m, uvicorn, server:app, --port, "{port}"]\n'), []);
    assert.deepEqual(findings('  gym: {factory: corridor.py:Corridor}\n  openenv: {url: "http://127.0.0.1:8000"}\n'), [
      [
        'env-source',
        'env: give exactly one of class_name (with module: a ToolEnv), gym, methods or openenv; this gives gym, openenv',
      ],
    ]);
    assert.deepEqual(findings('  mcp_servers: []\n'), [
      [
        'env-source',
        'env: give exactly one of class_name (with module: a ToolEnv), gym, methods or openenv; this gives none',
      ],
    ]);
    assert.deepEqual(findings('  gym: {factory: corridor.py:Corridor}\n  args: {goal: 2}\n'), [
      ['env-args', "env.args are the ToolEnv's; give them as env.gym.args"],
    ]);
    assert.deepEqual(
      findings('  methods: {factory: pantry.py:make_pantry}\n', 'rollout:\n  tool_isolation: process\n'),
      [
        [
          'env-methods-isolation',
          "rollout.tool_isolation: process runs Tools in a worker process, but env.methods' tools change the environment object that the reward reads here: use tool_isolation: thread",
        ],
      ],
    );
  });

  it("an adapter's MODULE:NAME: a .py file relative to the config that exists and defines NAME, else a diagnostic on it", () => {
    const dir = mkdtempSync(join(tmpdir(), 'env-factory-'));
    writeFileSync(join(dir, 'tasks.jsonl'), '{"id": "a"}\n');
    writeFileSync(
      join(dir, 'corridor.py'),
      'import gymnasium\n\nclass Corridor(gymnasium.Env):\n    pass\n\nmake = Corridor\n',
    );
    const check = (env: string) => {
      const text = `env:\n${env}data:\n  train: tasks.jsonl\n`;
      return validateRunConfig(text, join(dir, 'c.agentrl.yaml')).map((f) => [
        f.code,
        f.message,
        text.slice(f.start, f.end),
      ]);
    };
    assert.deepEqual(check('  gym:\n    factory: corridor.py:make\n'), []); // an assignment defines it too
    assert.deepEqual(check('  gym:\n    factory: corridor.py:Corridor.make_env\n'), []); // NAME may be dotted
    assert.deepEqual(check('  gym:\n    factory: corridor.py:Hallway\n'), [
      [
        'env-gym-factory',
        'env.gym.factory: corridor.py defines no Hallway (a class or function that makes the environment)',
        'corridor.py:Hallway',
      ],
    ]);
    assert.deepEqual(check('  methods:\n    factory: pantry.py:Pantry\n'), [
      ['env-methods-factory', `env.methods.factory: ${join(dir, 'pantry.py')} does not exist`, 'pantry.py:Pantry'],
    ]);
    assert.deepEqual(check('  methods:\n    factory: corridor.py:Corridor\n    reward: corridor.py:grade\n'), [
      [
        'env-methods-reward',
        'env.methods.reward: corridor.py defines no grade (a function called as function(environment, task, final_text))',
        'corridor.py:grade',
      ],
    ]);
    const [pattern] = check('  gym:\n    factory: corridor.py\n');
    assert.equal(pattern[0], 'value');
    assert.match(
      pattern[1],
      /^env\.gym\.factory: must match .* \(MODULE:NAME, e\.g\. env\.py:make_env\); got "corridor\.py"$/,
    );
    assert.deepEqual(check('  openenv:\n    command: [python, server.py]\n    cwd: server\n'), [
      ['env-openenv-cwd', `env.openenv.cwd: ${join(dir, 'server')} is not a folder`, 'server'],
    ]);
  });

  it("the env sources the language server knows are the trainer's (env_sources.py ENV_SOURCES)", () => {
    const config = readFileSync(
      join(resolve(__dirname, '..', '..'), 'trainer-server', 'agentrl', 'contract', 'env_sources.py'),
      'utf8',
    );
    const declared = /^ENV_SOURCES = \(([^)]*)\)/m.exec(config)![1];
    assert.deepEqual(
      [...ENV_SOURCES],
      [...declared.matchAll(/"(\w+)"/g)].map((m) => m[1]),
    );
  });

  it('YAML syntax errors are reported, not thrown', () => {
    const [f] = validateRunConfig('env: [unclosed\n', '/tmp/x.agentrl.yaml');
    assert.equal(f.code, 'yaml');
  });

  it('helpers', () => {
    assert.equal(closest('lerning_rate', ['lr', 'learning_rate']), 'learning_rate');
    assert.equal(closest('zzz', ['train', 'model']), undefined);
    assert.deepEqual(fieldsReadByEnv('x = task["a"] + task.get(\'b\')'), ['a', 'b']);
  });
});

describe('run-config language server: completion and hover', () => {
  const text = 'rollout:\n  group_size: 4\n  \nalgorithm:\n  name: \n';
  it('finds the key path by indentation', () => {
    assert.deepEqual(pathAt(text, text.indexOf('group_size') + 3).parent, ['rollout']);
  });

  it('completes keys of the enclosing section and enum values', () => {
    const keys = complete(text, text.indexOf('\n  \n') + 3).map((s) => s.label);
    assert.ok(keys.includes('max_turns') && keys.includes('temperature') && !keys.includes('lr'));
    const values = complete(text, text.indexOf('name: ') + 6).map((s) => s.label);
    assert.deepEqual(values, ALGORITHMS);
    assert.ok(values.includes('gigpo') && values.includes('step_ppo')); // the step-level algorithms
    const top = complete('', 0).map((s) => s.label);
    assert.ok(top.includes('model') && top.includes('train'));
  });

  it('completes and hovers the keys of agent:', () => {
    const agent = 'agent:\n  module: agent.py\n  \n';
    const keys = complete(agent, agent.indexOf('\n  \n') + 3).map((s) => s.label);
    assert.deepEqual(keys, ['module', 'function', 'reward', 'timeout_s']);
    const hover = hoverText(agent, agent.indexOf('module') + 1)!;
    assert.match(hover, /^\*\*agent\.module\*\*: string/);
    assert.match(hover, /a Python file relative to this config/);
    const top = complete('', 0).map((s) => s.label);
    assert.ok(top.includes('agent') && top.includes('env'));
  });

  it('completes and hovers the keys of env.gym, env.methods and env.openenv, and their enum values', () => {
    const env = 'env:\n  \n';
    const keys = complete(env, env.indexOf('\n  \n') + 3);
    const labels = keys.map((s) => s.label);
    assert.ok(['module', 'class_name', 'gym', 'methods', 'openenv'].every((key) => labels.includes(key)));
    assert.equal(keys.find((s) => s.label === 'gym')!.insertText, 'gym:\n  '); // a section: its keys go below
    const gym = 'env:\n  gym:\n    factory: corridor.py:Corridor\n    \n';
    const gymKeys = complete(gym, gym.indexOf('\n    \n') + 5).map((s) => s.label);
    assert.ok(
      ['factory', 'valid_actions_key', 'state_key', 'score_keys', 'rewards', 'reuse'].every((k) => gymKeys.includes(k)),
    );
    const action = 'env:\n  openenv:\n    action: \n';
    assert.deepEqual(
      complete(action, action.indexOf('action: ') + 8).map((s) => s.label),
      ['text', 'tool'],
    );
    const methods = 'env:\n  methods:\n    \n';
    assert.deepEqual(
      complete(methods, methods.indexOf('\n    \n') + 5).map((s) => s.label),
      ['factory', 'args', 'system_prompt', 'reward'],
    );
    const hover = hoverText(gym, gym.indexOf('factory') + 1)!;
    assert.match(hover, /^\*\*env\.gym\.factory\*\*: string/);
    assert.match(hover, /MODULE:NAME of the class or function that makes one environment/);
    const sessions = 'env:\n  openenv:\n    max_sessions: 8\n';
    assert.match(hoverText(sessions, sessions.indexOf('max_sessions') + 1)!, /Allowed: >= 1 and <= 4096/);
  });

  it('hovers with description, allowed range and default, and the trainer devices on model keys', () => {
    const hover = hoverText(text, text.indexOf('group_size') + 2)!;
    assert.match(hover, /\*\*rollout\.group_size\*\*: integer/);
    assert.match(hover, /Samples per prompt/);
    assert.match(hover, /Allowed: >= 1 and <= 1024/);
    assert.match(hover, /Default: `4`/);
    const model = 'model:\n  dtype: auto\n';
    assert.match(
      hoverText(model, model.indexOf('dtype') + 1, 'Connected trainer: 16 CPU cores, GPUs: H100 (80 GiB).')!,
      /H100/,
    );
  });
});

describe('run-config language server: does the model fit the trainer', () => {
  const h100 = {
    cpu: { name: 'x86_64', cores: 16, memoryBytes: 128 * 2 ** 30 },
    gpus: [{ name: 'H100', memoryBytes: 80 * 2 ** 30 }],
  };
  const laptop = { cpu: { name: 'arm64', cores: 8, memoryBytes: 2 ** 30 }, gpus: [] };

  const plan = {
    peakBytes: 3 * 2 ** 30,
    rowPositions: 1024,
    fits: false,
    shortestPeakBytes: 2 * 2 ** 30,
    parameters: 134.5e6,
    trainableParameters: 134.5e6,
    shapeSource: "SmolLM2-135M-Instruct's config",
    device: { kind: 'cpu' as const, label: "this machine's available memory (1.00 GiB)", memoryBytes: 2 ** 30 },
    parts: [
      { name: 'weights', bytes: 2 ** 29, detail: '134.5M parameters x 4 bytes', phase: 'always' as const },
      { name: 'activations', bytes: 2 * 2 ** 30, detail: '4 rows x 1,024 positions', phase: 'update' as const },
      { name: 'reference', bytes: 0, detail: 'none', phase: 'always' as const },
    ],
    waysToFit: [
      {
        text: 'train.micro_batch_size 4 -> 1 (peak 0.90 GiB)',
        settings: { 'train.micro_batch_size': 1 },
        peakBytes: 0.9 * 2 ** 30,
      },
    ],
  };

  it("names the connected trainer's devices", () => {
    assert.equal(devicesSummary(h100), 'Connected trainer: 16 CPU cores, 128.0 GiB RAM; GPUs: H100 (80.0 GiB).');
    assert.equal(devicesSummary(laptop), 'Connected trainer: 8 CPU cores, 1.0 GiB RAM; no GPU.');
  });

  it("shows the trainer's memory plan, largest part first, and what to change when it does not fit", () => {
    const shown = fitSummary(laptop, { plan });
    assert.match(shown, /^Connected trainer: 8 CPU cores/);
    assert.match(
      shown,
      /Planned peak memory: 3\.0 GiB, \*\*does not fit\*\* this machine's available memory .*, even for episodes without a prompt \(2\.0 GiB\): the run would be refused/,
    );
    assert.ok(shown.indexOf('- activations: 2.0 GiB') < shown.indexOf('- weights: 0.50 GiB'));
    assert.ok(!shown.includes('reference'), 'a part of 0 bytes is left out');
    assert.match(shown, /To fit, change one of: train\.micro_batch_size 4 -> 1/);
    assert.match(fitSummary(h100, { plan: { ...plan, fits: true, waysToFit: undefined } }), /, fits this machine/);
    assert.match(
      fitSummary(laptop, { plan: { ...plan, shortestPeakBytes: 2 ** 29 } }),
      /\*\*may not fit\*\* .* at its longest episodes \(1024 positions a row\); the run would start with a warning/,
    );
  });

  it('says why there is no plan, and shows the devices alone without an answer', () => {
    assert.match(
      fitSummary(laptop, { unavailable: "no config.json to read for model.path 'x' on this machine" }),
      /No memory plan: no config\.json/,
    );
    assert.equal(fitSummary(laptop, null), 'Connected trainer: 8 CPU cores, 1.0 GiB RAM; no GPU.');
  });
});
