import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { complete, hoverText, pathAt } from '../../extension/languageServer/assist';
import { closest, fieldsReadByEnv, validateRunConfig, type Finding } from '../../extension/languageServer/validate';

const DIR = join(resolve(__dirname, '..'), 'fixtures', 'run-configs');

function check(name: string): { text: string; findings: Array<Finding & { line: number; col: number; snippet: string }> } {
  const file = join(DIR, `${name}.agentrl.yaml`);
  const text = readFileSync(file, 'utf8');
  const findings = validateRunConfig(text, file).map((f) => {
    const before = text.slice(0, f.start);
    return { ...f, line: before.split('\n').length, col: f.start - before.lastIndexOf('\n'), snippet: text.slice(f.start, f.end) };
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
    assert.equal(f.message, 'algorithm.name: must be one of "grpo", "ppo", "reinforce_pp", "rloo"; got "grp" (did you mean "grpo"?)');
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
    assert.deepEqual(messages, [['env-module', 4, 'missing_env.py'], ['model-path', 2, './no-such-model'], ['data-file', 7, 'missing.jsonl']]);
  });

  it('env class that does not exist, and data records missing the fields the env reads', () => {
    const findings = check('wrong-class').findings;
    assert.equal(findings[0].message, 'env.class_name: env.py defines no class OtherEnv');
    assert.equal(findings[1].message, "data.train: the first record has no 'question', 'hint', which the env reads from each task");
    assert.equal(findings[1].severity, 'warning');
  });

  it('max_context smaller than prompt + turns x new tokens, said to be an estimate', () => {
    const [f] = check('context-budget').findings;
    assert.match(f.message, /^rollout\.max_context \(1024\) < prompt \(~10 tokens, estimated at 4 characters a token\) \+ max_turns × max_new_tokens \(8 × 256\) = 2058/);
    assert.equal(f.snippet, '1024');
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
    assert.deepEqual(values, ['grpo', 'ppo', 'reinforce_pp', 'rloo']);
    const top = complete('', 0).map((s) => s.label);
    assert.ok(top.includes('model') && top.includes('train'));
  });

  it('hovers with description, allowed range and default, and the trainer devices on model keys', () => {
    const hover = hoverText(text, text.indexOf('group_size') + 2)!;
    assert.match(hover, /\*\*rollout\.group_size\*\*: integer/);
    assert.match(hover, /Samples per prompt/);
    assert.match(hover, /Allowed: >= 1 and <= 1024/);
    assert.match(hover, /Default: `4`/);
    const model = 'model:\n  dtype: auto\n';
    assert.match(hoverText(model, model.indexOf('dtype') + 1, 'Connected trainer: 16 CPU cores, GPUs: H100 (80 GiB).')!, /H100/);
  });
});
