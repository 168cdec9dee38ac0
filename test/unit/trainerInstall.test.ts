import { strict as assert } from 'node:assert';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { checkTrainerInstall, installCommand, TRAINER_PIP_SPEC } from '../../extension/trainerInstall';

const VENV_PYTHON = process.env.AGENTRL_PYTHON ?? resolve(__dirname, '../../.venv/bin/python');

describe('checkTrainerInstall', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentrl-install-'));
  /** A "Python" that is a shell script: the probe's outcome without depending on what this machine has installed. */
  const script = (name: string, body: string): string => {
    const path = join(dir, name);
    writeFileSync(path, `#!/bin/sh\n${body}\n`);
    chmodSync(path, 0o755);
    return path;
  };

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

describe('installCommand', () => {
  it("installs the trainer into the Python given, from what the walkthrough's install step shows", () => {
    assert.equal(installCommand('/opt/py/bin/python'), `/opt/py/bin/python -m pip install ${TRAINER_PIP_SPEC}`);
    assert.match(installCommand('/My Envs/python'), /^"\/My Envs\/python" -m pip install /);
    const walkthrough = readFileSync(resolve(__dirname, '../../media/walkthrough/install-trainer.md'), 'utf8');
    assert.ok(walkthrough.includes(installCommand('python3')), 'install-trainer.md shows the same command');
  });
});
