import { strict as assert } from 'node:assert';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { complete, hoverText, pathAt } from '../../extension/languageServer/assist';
import { devicesSummary, fitSummary } from '../../extension/languageServer/fit';
import { BUILTIN_MODELS, describeModelSource, modelSource } from '../../extension/languageServer/modelPath';
import {
  closest,
  fieldsReadByEnv,
  findDottedModule,
  validateRunConfig,
  type Finding,
} from '../../extension/languageServer/validate';

const DIR = join(resolve(__dirname, '..'), 'fixtures', 'run-configs');
/** The algorithm names as the run-config schema (the trainer's config.py) declares them. */
const ALGORITHMS: string[] = JSON.parse(
  readFileSync(join(resolve(__dirname, '..', '..'), 'protocol', 'schemas', 'run-config.schema.json'), 'utf8'),
).$defs.AlgorithmConfig.properties.name.enum;

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

  it('missing required key, at its parent key', () => {
    const [f] = check('missing-key').findings;
    assert.equal(f.message, "env: required key 'class_name' is missing");
    assert.deepEqual([f.line, f.snippet], [1, 'env']);
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
    writeFileSync(join(dir, 'agent.py'), 'async def play(task, base_url):\n    return task["question"]\n');
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
      ['agent-function', 'agent.function: agent.py defines no function run (the trainer calls run(task, base_url))'],
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
    waysToFit: ['train.micro_batch_size 4 -> 1 (peak 0.90 GiB)'],
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
