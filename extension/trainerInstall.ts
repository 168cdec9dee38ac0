// Whether a Python can start a local trainer: it runs, and `agentrl` is importable by it. Asked the way Start Local
// Server runs it (same Python, same working folder, so a package found there counts as it would for `-m agentrl.cli`),
// without importing agentrl: its import pulls in torch, which takes seconds; `find_spec` only locates it.
// No `vscode` import: unit-tested with real and missing Pythons.
import { execFile } from 'node:child_process';

/** `found`: agentrl is importable; `missing`: the Python runs but has no agentrl; `noPython`: it could not be run
 *  (not there, not executable, or it did not answer in time). */
export type TrainerInstall = 'found' | 'missing' | 'noPython';

/** The exit status the probe gives when the Python runs and has no agentrl, told apart from any failure to run. */
const MISSING_STATUS = 3;
const PROBE = `import importlib.util, sys; sys.exit(0 if importlib.util.find_spec("agentrl") else ${MISSING_STATUS})`;

export function checkTrainerInstall(
  python: string,
  cwd: string | undefined,
  timeoutMs = 10_000,
): Promise<TrainerInstall> {
  return new Promise((resolve) => {
    execFile(python, ['-c', PROBE], { cwd, timeout: timeoutMs, windowsHide: true }, (err) => {
      if (!err) resolve('found');
      else resolve(err.code === MISSING_STATUS ? 'missing' : 'noPython');
    });
  });
}

/** What pip installs the trainer from (media/walkthrough/install-trainer.md shows the same; a test keeps them equal). */
export const TRAINER_PIP_SPEC =
  '"agentrl @ git+https://github.com/agent-rl-studio/agent-rl-studio#subdirectory=trainer-server"';

/** The shell command that installs the trainer into `python`. */
export function installCommand(python: string): string {
  return `${/\s/.test(python) ? `"${python}"` : python} -m pip install ${TRAINER_PIP_SPEC}`;
}
