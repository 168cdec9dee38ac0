import { strict as assert } from 'node:assert';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { complete, hoverText, pathAt } from '../../extension/languageServer/assist';
import { devicesSummary, estimateParameters } from '../../extension/languageServer/fit';
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

  it('estimates parameters of the built-ins and of a local model from its config.json', () => {
    assert.equal(estimateParameters({ path: 'smollm2' }, DIR), 135e6);
    assert.equal(
      estimateParameters({ path: 'tiny', tiny_hidden: 64, tiny_layers: 2 }, DIR),
      300 * 64 * 2 + 2 * (4 * 64 * 64 + 3 * 64 * 128),
    );
    const dir = mkdtempSync(join(tmpdir(), 'model-'));
    writeFileSync(
      join(dir, 'config.json'),
      JSON.stringify({ vocab_size: 1000, hidden_size: 10, num_hidden_layers: 2, intermediate_size: 20 }),
    );
    assert.equal(estimateParameters({ path: dir }, DIR), 1000 * 10 + 2 * (4 * 100 + 3 * 10 * 20));
    assert.equal(estimateParameters({ path: './no-such-model' }, DIR), undefined);
  });

  it('says whether a model fits: weights × bytes per dtype, plus gradients and Adam moments to train', () => {
    const fits = devicesSummary(h100, { path: 'smollm2', dtype: 'bfloat16' }, DIR);
    assert.match(fits, /^Connected trainer: 16 CPU cores, 128\.0 GiB RAM; GPUs: H100 \(80\.0 GiB\)\./);
    assert.match(fits, /~135\.0M parameters × 2 bytes = 0\.25 GiB of weights; ~1\.5 GiB to train \(estimate/);
    assert.match(fits, /Fits the largest GPU \(80\.0 GiB\)/);
    const tooBig = devicesSummary(laptop, { path: 'smollm2', dtype: 'auto' }, DIR);
    assert.match(tooBig, /× 4 bytes/); // auto on CPU = float32
    assert.match(tooBig, /Likely does not fit the trainer's RAM \(1\.0 GiB\): consider LoRA/);
    assert.equal(
      devicesSummary(laptop, { path: './no-such-model' }, DIR),
      'Connected trainer: 8 CPU cores, 1.0 GiB RAM; no GPU.',
    );
  });
});
