// Builds the trainer's wheel into dist/, which the .vsix carries (`.vscodeignore`: dist/agentrl-*.whl), so that the
// extension's Install the Trainer installs the trainer of its own version from its own folder, with no repository
// to reach. `npm run package` runs it after the bundles. Offline: `pip wheel --no-build-isolation` builds with the
// setuptools already installed (trainer-server/pyproject.toml's build-system), nothing is downloaded.
// The Python: $AGENTRL_PYTHON, else .venv (make setup), else python3.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

const python = process.env.AGENTRL_PYTHON || (existsSync('.venv/bin/python') ? '.venv/bin/python' : 'python3');
const version = JSON.parse(readFileSync('package.json', 'utf8')).version;
const wheel = `agentrl-${version}-py3-none-any.whl`;

mkdirSync('dist', { recursive: true });
// A wheel of another version left in dist/ would ship too.
for (const old of readdirSync('dist').filter((name) => /^agentrl-.*\.whl$/.test(name))) rmSync(join('dist', old));
// Built from a copy with its links followed (agentrl/schemas is a link to protocol/schemas), so that no build/ folder
// of the checkout, with modules deleted since, ends up in the wheel (as tests/test_wheel.py builds it).
const work = mkdtempSync(join(tmpdir(), 'agentrl-wheel-'));
try {
  const source = join(work, 'trainer-server');
  const skipped = new Set(['build', 'tests', 'benchmarks', '__pycache__']);
  cpSync('trainer-server', source, {
    recursive: true,
    dereference: true,
    filter: (path) => !skipped.has(basename(path)) && !path.endsWith('.egg-info') && !basename(path).startsWith('.'),
  });
  execFileSync(python, ['-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '-q', '-w', 'dist', source], {
    stdio: 'inherit',
  });
} finally {
  rmSync(work, { recursive: true, force: true });
}
// The extension installs the wheel of its own version by name: a trainer of another version is a release mistake.
if (!existsSync(join('dist', wheel))) {
  console.error(`build-wheel: expected dist/${wheel}; found ${readdirSync('dist').filter((n) => n.endsWith('.whl'))}`);
  process.exit(1);
}
console.log(`build-wheel: dist/${wheel}`);
