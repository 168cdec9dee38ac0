// Builds the trainer's wheel into dist/, which the .vsix carries (`.vscodeignore`: dist/agentrl-*.whl), so that the
// extension's Install the Trainer installs the trainer of its own version from its own folder, with no repository
// to reach. `npm run package` runs it after the bundles. Offline where it can: `pip wheel --no-build-isolation`
// builds with the setuptools already installed, if it is one trainer-server/pyproject.toml's build-system accepts
// (setuptools >= 77); an older one (Debian 12's python3 has 66) or none, and pip fetches that setuptools from the
// package index for the build alone.
// The Python: $AGENTRL_PYTHON, else .venv (make setup), else python3.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

const python = process.env.AGENTRL_PYTHON || (existsSync('.venv/bin/python') ? '.venv/bin/python' : 'python3');
const SETUPTOOLS_NEEDED = 77; // trainer-server/pyproject.toml: requires = ["setuptools>=77"]
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
  execFileSync(python, ['-m', 'pip', 'wheel', '--no-deps', ...isolation(), '-q', '-w', 'dist', source], {
    stdio: 'inherit',
  });
} finally {
  rmSync(work, { recursive: true, force: true });
}
/** pip's build isolation: off where the Python's own setuptools can build the wheel, else on, said why. */
function isolation() {
  const probe = (code) => spawnSync(python, ['-c', code], { encoding: 'utf8' });
  if (probe('import pip').status !== 0) {
    console.error(
      `build-wheel: ${python} has no pip to build the trainer's wheel with. Run \`make setup\` (it makes .venv), ` +
        'install pip (Debian: apt install python3-pip), or name another Python in AGENTRL_PYTHON.',
    );
    process.exit(1);
  }
  const found = probe('import setuptools; print(setuptools.__version__)').stdout.trim();
  if (found && Number.parseInt(found, 10) >= SETUPTOOLS_NEEDED) return ['--no-build-isolation'];
  console.log(
    `build-wheel: ${python} has ${found ? `setuptools ${found}` : 'no setuptools'}, the build needs ` +
      `>= ${SETUPTOOLS_NEEDED}: pip fetches it for this build alone`,
  );
  return [];
}

// The extension installs the wheel of its own version by name: a trainer of another version is a release mistake.
if (!existsSync(join('dist', wheel))) {
  console.error(`build-wheel: expected dist/${wheel}; found ${readdirSync('dist').filter((n) => n.endsWith('.whl'))}`);
  process.exit(1);
}
console.log(`build-wheel: dist/${wheel}`);
