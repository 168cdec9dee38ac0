// The extension and the trainer are released together under one version: package.json's "version" is the
// extension's (sent as clientInfo when it connects), agentrl.__version__ the trainer's (its serverVersion, and the
// wheel's version through pyproject.toml's `dynamic`). A release that bumps one and not the other fails here.
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '..', '..');
const TRAINER = join(ROOT, 'trainer-server');

function extensionVersion(): string {
  return JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version;
}

/** `__version__ = "..."` in agentrl/__init__.py, read as text: importing agentrl would need the Python side. */
function trainerVersion(): string | undefined {
  const init = readFileSync(join(TRAINER, 'agentrl', '__init__.py'), 'utf8');
  return /^__version__ = "([^"]+)"$/m.exec(init)?.[1];
}

describe('one version', () => {
  it("the extension's version is the trainer's", () => {
    assert.equal(trainerVersion(), extensionVersion());
  });

  it("the trainer's wheel takes its version from agentrl.__version__, not a second copy", () => {
    const pyproject = readFileSync(join(TRAINER, 'pyproject.toml'), 'utf8');
    assert.match(pyproject, /^dynamic = \[[^\]]*"version"[^\]]*\]$/m);
    assert.match(pyproject, /^version = \{ attr = "agentrl\.__version__" \}$/m);
    assert.doesNotMatch(pyproject, /^version = "/m);
  });
});
