import { fake } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Commands } from '../../extension/commands';
import { ensureConnected, registerConnectionCommands } from '../../extension/connectionCommands';
import { ActionableError } from '../../extension/ctx';
import { CertificateMessages } from '../../extension/serverCertificates';
import { tokenKey } from '../../extension/settings';
import { TrainerConnectError } from '../../extension/trainerClient';
import { fakeCtx, type FakeCtx } from './fakeCtx';
import { commands } from 'vscode';

describe('connection commands', () => {
  let f: FakeCtx;
  beforeEach(() => {
    fake.reset();
    f = fakeCtx({ workspaceRoot: () => '/ws', pythonPath: () => '/ws/.venv/bin/python' });
    f.connection.isConnected = false;
    registerConnectionCommands(f.ctx);
  });

  it('Start Local Server starts the configured Python in the workspace, its runs in the runs folder, and returns the URL', async () => {
    const url = await commands.executeCommand(Commands.startLocalServer);
    assert.deepEqual(f.connection.calls, ['startLocal /ws/.venv/bin/python /ws /ws/.agentrl/runs']);
    assert.equal(url, 'ws://127.0.0.1:4242');
    assert.deepEqual(fake.progress, ['Agent RL: starting the trainer server']);
  });

  it('Start Local Server refuses in an untrusted workspace and offers to manage trust', async () => {
    fake.trusted = false;
    assert.equal(await commands.executeCommand(Commands.startLocalServer), undefined);
    assert.deepEqual(f.connection.calls, []);
    assert.match(
      fake.messages[0].text,
      /^Starting a trainer server runs code from this workspace, which is not trusted/,
    );
    assert.deepEqual(fake.messages[0].actions, ['Manage Workspace Trust', 'Learn more']);
  });

  it('Start Local Server without a folder open fails in words, logged and shown with the way to the logs', async () => {
    f.settings.workspaceRoot = () => undefined;
    assert.equal(await commands.executeCommand(Commands.startLocalServer), undefined);
    const reason = 'Start Local Server: Open a folder first: the local server keeps its runs in the workspace.';
    assert.deepEqual(f.log.lines, [`error: ${reason}`]);
    assert.deepEqual(fake.messages, [{ severity: 'error', text: reason, actions: ['Show Logs', 'Learn more'] }]);
  });

  it("an error's Learn more opens the troubleshooting page the extension ships, at the failure's section", async () => {
    f.settings.workspaceRoot = () => undefined;
    fake.messageChoices = ['Learn more'];
    await commands.executeCommand(Commands.startLocalServer);
    await new Promise((settle) => setTimeout(settle, 0));
    const [preview] = fake.executed.filter((e) => e.command === 'markdown.showPreview');
    const page = preview.args[0] as { fsPath: string; fragment: string };
    assert.match(page.fsPath, /\/docs\/troubleshooting\.md$/);
    assert.equal(page.fragment, 'no-folder-open');
    assert.equal(f.log.shown, 0, 'Learn more is not Show Logs');
  });

  describe('Start Local Server with a Python that cannot start the trainer', () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentrl-python-'));
    /** A "Python" that is a shell script, as trainerInstall's tests make them. */
    const script = (name: string, body: string): string => {
      const path = join(dir, name);
      writeFileSync(path, `#!/bin/sh\n${body}\n`);
      chmodSync(path, 0o755);
      return path;
    };
    const settle = () => new Promise((resolve) => setImmediate(resolve));
    beforeEach(() => {
      f.settings.workspaceRoot = () => dir; // the probe runs there, as the server would
      f.connection.connecting = async () => {
        throw new Error('the trainer server exited before listening (exit code 1)');
      };
    });

    it('a Python that is not there: says so, and offers the setting, Install the Trainer and its section', async () => {
      const python = join(dir, 'no-such-python');
      f.settings.pythonPath = () => python;
      fake.messageChoices = ['Open Setting'];
      assert.equal(await commands.executeCommand(Commands.startLocalServer), undefined);
      assert.deepEqual(fake.messages, [
        {
          severity: 'error',
          text: `Start Local Server: ${python} could not be run. Set "agentRl.pythonPath" to a Python (3.11 or newer) with the trainer installed, or install it into a new .venv of the workspace (Install the Trainer).`,
          actions: ['Open Setting', 'Install the Trainer', 'Show Logs', 'Learn more'],
        },
      ]);
      await settle();
      assert.deepEqual(fake.executed, [{ command: 'workbench.action.openSettings', args: ['agentRl.pythonPath'] }]);
    });

    it('a Python without agentrl: says so, and Install the Trainer installs the one the extension carries there', async () => {
      const python = script('bare-python', 'exec python3 -I -S "$@"');
      f.settings.pythonPath = () => python;
      fake.messageChoices = ['Install the Trainer'];
      await commands.executeCommand(Commands.startLocalServer);
      assert.equal(
        fake.messages[0].text,
        `Start Local Server: ${python} has no agentrl (the trainer). Install the Trainer installs it there; or set "agentRl.pythonPath" to a Python that has it.`,
      );
      await settle();
      assert.deepEqual(
        fake.executed.map((e) => e.command),
        [Commands.installTrainer],
      );
    });

    it('their Learn more is the section on the Python and the trainer', async () => {
      f.settings.pythonPath = () => join(dir, 'no-such-python');
      fake.messageChoices = ['Learn more'];
      await commands.executeCommand(Commands.startLocalServer);
      await settle();
      const [preview] = fake.executed.filter((e) => e.command === 'markdown.showPreview');
      assert.equal((preview.args[0] as { fragment: string }).fragment, 'python-or-the-trainer-not-found');
    });

    it('through ensureConnected (Start Training, Try): the same error with its fixes; a Python with agentrl: the failure as it came', async () => {
      f.settings.pythonPath = () => join(dir, 'no-such-python');
      await assert.rejects(
        ensureConnected(f.ctx),
        (err) =>
          err instanceof ActionableError &&
          /could not be run/.test(err.message) &&
          err.actions.map((a) => a.title).join() === 'Open Setting,Install the Trainer',
      );
      const found = script('found-python', 'exit 0');
      f.settings.pythonPath = () => found;
      await commands.executeCommand(Commands.startLocalServer);
      assert.deepEqual(fake.messages.at(-1), {
        severity: 'error',
        text: 'Start Local Server: the trainer server exited before listening (exit code 1)',
        actions: ['Show Logs', 'Learn more'],
      });
    });
  });

  /** A server at ws://gpu-box:8765 that wants the token `s3cret`, as the socket reports it. */
  const wantsToken = async (token?: string): Promise<void> => {
    if (token === 's3cret') f.connection.isConnected = true;
    else
      throw new TrainerConnectError(
        `the server ${token ? 'refused the token' : 'needs a token'} (HTTP 401)`,
        'unauthorized',
      );
  };

  it('Connect to Server asks for the URL, tries it, asks for the token the server wants, and keeps it in secret storage', async () => {
    f.connection.connecting = wantsToken;
    fake.answers = ['ws://gpu-box:8765', 's3cret'];
    const url = await commands.executeCommand(Commands.connectServer);
    assert.equal(url, 'ws://gpu-box:8765');
    assert.deepEqual(f.connection.calls, [
      'connectRemote ws://gpu-box:8765 (no token)',
      'connectRemote ws://gpu-box:8765 s3cret',
    ]);
    assert.equal(f.secrets.get(tokenKey('ws://gpu-box:8765')), 's3cret');
    assert.equal(fake.prompts[0].options.value, 'ws://127.0.0.1:8765', 'without a serverUrl setting, the default');
    assert.equal(fake.prompts[1].options.title, 'Token for ws://gpu-box:8765');
    assert.equal(fake.prompts[1].options.password, true);
  });

  it('Connect to Server says that nothing listens at a refused URL, and how to start a server there, asking no token', async () => {
    f.connection.connecting = async () => {
      throw new TrainerConnectError('connect ECONNREFUSED 10.0.0.7:8765', 'refused');
    };
    fake.answers = ['ws://gpu-box:8765 ', 'never asked'];
    assert.equal(await commands.executeCommand(Commands.connectServer), undefined);
    assert.deepEqual(f.connection.calls, ['connectRemote ws://gpu-box:8765 (no token)']);
    assert.equal(fake.prompts.length, 1, 'the URL only');
    const reason =
      'Connect to Server: nothing listens at ws://gpu-box:8765: start the server there ' +
      '(agentrl serve --host 0.0.0.0 --port 8765 --token-file ~/.agentrl-token --allow-code --tls-self-signed, ' +
      'then connect to wss://gpu-box:8765) or check the port';
    assert.deepEqual(fake.messages, [{ severity: 'error', text: reason, actions: ['Show Logs', 'Learn more'] }]);

    fake.messages = [];
    await commands.executeCommand(Commands.connectServer, { url: 'ws://127.0.0.1:9000' });
    assert.match(
      fake.messages[0].text,
      /nothing listens at ws:\/\/127\.0\.0\.1:9000: start the server there \(agentrl serve --port 9000\)/,
    );
  });

  it('Connect to Server uses the stored token without asking', async () => {
    f.secrets.set(tokenKey('ws://gpu-box:8765'), 's3cret');
    f.connection.connecting = wantsToken;
    assert.equal(
      await commands.executeCommand(Commands.connectServer, { url: 'ws://gpu-box:8765' }),
      'ws://gpu-box:8765',
    );
    assert.deepEqual(f.connection.calls, ['connectRemote ws://gpu-box:8765 s3cret']);
    assert.equal(fake.prompts.length, 0);
  });

  it('Connect to Server forgets a stored token the server refuses and asks for the current one', async () => {
    f.secrets.set(tokenKey('ws://gpu-box:8765'), 'old');
    f.connection.connecting = wantsToken;
    fake.answers = ['s3cret'];
    assert.equal(
      await commands.executeCommand(Commands.connectServer, { url: 'ws://gpu-box:8765' }),
      'ws://gpu-box:8765',
    );
    assert.deepEqual(f.connection.calls, [
      'connectRemote ws://gpu-box:8765 old',
      'connectRemote ws://gpu-box:8765 s3cret',
    ]);
    assert.match(String(fake.prompts[0].options.prompt), /^The server refused the stored token\. /);
    assert.equal(f.secrets.get(tokenKey('ws://gpu-box:8765')), 's3cret');
  });

  it('Connect to Server fails on a token refused again, keeping none, and on a token its caller gave, asking nothing', async () => {
    f.connection.connecting = wantsToken;
    fake.answers = ['wrong'];
    assert.equal(await commands.executeCommand(Commands.connectServer, { url: 'ws://gpu-box:8765' }), undefined);
    assert.equal(f.secrets.size, 0);
    assert.equal(fake.messages[0].text, 'Connect to Server: the server refused the token (HTTP 401)');

    fake.messages = [];
    fake.prompts = [];
    assert.equal(
      await commands.executeCommand(Commands.connectServer, { url: 'ws://gpu-box:8765', token: 'guess' }),
      undefined,
    );
    assert.equal(fake.prompts.length, 0);
    assert.equal(fake.messages[0].text, 'Connect to Server: the server refused the token (HTTP 401)');
  });

  describe('wss:// certificates, trusted on first use', () => {
    const URL = 'wss://gpu-box:8765';
    const FP = 'AB:CD:'.repeat(15) + 'AB:CD';
    const OLD = '01:23:'.repeat(15) + '01:23';
    const settle = () => new Promise((resolve) => setImmediate(resolve));
    /** A server whose certificate is FP, which no authority vouches for, and that wants the token `s3cret`; the
     *  socket refuses any other certificate as webSocket.ts does, before the token is sent. */
    const selfSigned = async (token?: string, pinned?: string): Promise<void> => {
      if (pinned === undefined)
        throw new TrainerConnectError(CertificateMessages.untrusted('gpu-box:8765', FP), 'untrustedCertificate', FP);
      if (pinned !== FP)
        throw new TrainerConnectError(
          CertificateMessages.changed('gpu-box:8765', FP, pinned),
          'certificateChanged',
          FP,
        );
      return wantsToken(token);
    };

    it('shows the fingerprint in a modal dialog, pins it per server when trusted, then asks for the token', async () => {
      f.connection.connecting = selfSigned;
      fake.messageChoices = [CertificateMessages.trustAction];
      fake.answers = ['s3cret'];
      assert.equal(await commands.executeCommand(Commands.connectServer, { url: URL }), URL);
      assert.deepEqual(f.connection.calls, [
        `connectRemote ${URL} (no token)`,
        `connectRemote ${URL} (no token) pinned ${FP}`,
        `connectRemote ${URL} s3cret pinned ${FP}`,
      ]);
      const [dialog] = fake.messages;
      assert.equal(dialog.text, 'Trust this certificate of gpu-box:8765?');
      assert.deepEqual(dialog.actions, ['Trust']);
      assert.equal(dialog.options?.modal, true);
      assert.match(
        String(dialog.options?.detail),
        new RegExp(`\\n\\n${FP}\\n\\nCompare it with the one agentrl serve`),
      );
      assert.deepEqual(f.globalState.get('serverCertificates'), { 'gpu-box:8765': FP });
      assert.equal(f.secrets.get(tokenKey(URL)), 's3cret');

      f.connection.calls.length = 0;
      fake.messages = [];
      assert.equal(await commands.executeCommand(Commands.connectServer, { url: URL }), URL);
      assert.deepEqual(f.connection.calls, [`connectRemote ${URL} s3cret pinned ${FP}`], 'the pin and the token kept');
      assert.deepEqual(fake.messages, [], 'asked nothing');
    });

    it('a certificate not trusted: nothing pinned, no token asked, no connection', async () => {
      f.connection.connecting = selfSigned;
      fake.answers = ['never asked'];
      assert.equal(await commands.executeCommand(Commands.connectServer, { url: URL }), undefined);
      assert.deepEqual(f.connection.calls, [`connectRemote ${URL} (no token)`]);
      assert.equal(fake.messages.length, 1, 'the dialog, dismissed; no error');
      assert.equal(f.globalState.get('serverCertificates'), undefined);
      assert.equal(fake.prompts.length, 0);
    });

    it('a changed certificate is refused naming both fingerprints, and its fix forgets the pin', async () => {
      f.globalState.set('serverCertificates', { 'gpu-box:8765': OLD, 'other:1': FP });
      f.connection.connecting = selfSigned;
      fake.messageChoices = ['Forget Server Certificate'];
      assert.equal(await commands.executeCommand(Commands.connectServer, { url: URL }), undefined);
      assert.deepEqual(f.connection.calls, [`connectRemote ${URL} (no token) pinned ${OLD}`]);
      const [error] = fake.messages;
      assert.equal(error.severity, 'error');
      assert.equal(
        error.text,
        `Connect to Server: the certificate of gpu-box:8765 changed: its SHA-256 fingerprint is ${FP}, the one trusted ` +
          `for it ${OLD}. Nothing was sent to it. If the server has a new certificate (another RUNS_DIR/.tls, another ` +
          `--tls-cert), compare ${FP} with the fingerprint agentrl serve printed at start, then run "Agent RL: Forget ` +
          'Server Certificate" and connect again; otherwise someone may be in between.',
      );
      assert.deepEqual(error.actions, ['Forget Server Certificate', 'Show Logs', 'Learn more']);
      await settle();
      assert.deepEqual(f.globalState.get('serverCertificates'), { 'other:1': FP });
      assert.equal(fake.messages.at(-1)?.text, CertificateMessages.forgotten('gpu-box:8765'));
    });

    it("a changed certificate's Learn more is its own section", async () => {
      f.globalState.set('serverCertificates', { 'gpu-box:8765': OLD });
      f.connection.connecting = selfSigned;
      fake.messageChoices = ['Learn more'];
      await commands.executeCommand(Commands.connectServer, { url: URL });
      await settle();
      const [preview] = fake.executed.filter((e) => e.command === 'markdown.showPreview');
      assert.equal((preview.args[0] as { fragment: string }).fragment, 'the-server-certificate-changed');
    });

    it('ws:// to a server whose certificate is pinned is refused before connecting: the token would go in clear', async () => {
      f.globalState.set('serverCertificates', { 'gpu-box:8765': FP });
      assert.equal(await commands.executeCommand(Commands.connectServer, { url: 'ws://gpu-box:8765' }), undefined);
      assert.deepEqual(f.connection.calls, []);
      assert.match(
        fake.messages[0].text,
        /^Connect to Server: gpu-box:8765 was reached over TLS before \(its certificate is trusted\): connect to wss:\/\/gpu-box:8765/,
      );
      assert.deepEqual(fake.messages[0].actions, ['Forget Server Certificate', 'Show Logs', 'Learn more']);
    });

    it('Forget Server Certificate: one picked among those trusted; none trusted is said so', async () => {
      assert.equal(await commands.executeCommand(Commands.forgetServerCertificate), undefined);
      assert.deepEqual(fake.messages.at(-1)?.text, CertificateMessages.noneTrusted);
      f.globalState.set('serverCertificates', { 'gpu-box:8765': FP, 'other:1': OLD });
      fake.answers = [(items: readonly { label: string }[]) => items[1]];
      assert.equal(await commands.executeCommand(Commands.forgetServerCertificate), 'other:1');
      const [pick] = fake.prompts;
      assert.deepEqual(pick.options.items, [
        { label: 'gpu-box:8765', description: FP },
        { label: 'other:1', description: OLD },
      ]);
      assert.deepEqual(f.globalState.get('serverCertificates'), { 'gpu-box:8765': FP });
      assert.equal(await commands.executeCommand(Commands.forgetServerCertificate, 'wss://nowhere:1'), undefined);
      assert.equal(fake.messages.at(-1)?.text, CertificateMessages.notTrusted('nowhere:1'));
    });
  });

  it('Connect to Server does nothing when the URL prompt is dismissed', async () => {
    assert.equal(await commands.executeCommand(Commands.connectServer), undefined);
    assert.deepEqual(f.connection.calls, []);
  });

  it('a local server that exits unasked is announced, with Restart (the Runs view emptied without a word)', async () => {
    f.connection.localServerLost.fire('the local trainer server exited (SIGKILL)');
    assert.deepEqual(fake.messages, [
      {
        severity: 'error',
        text: 'Agent RL: the local trainer server exited (SIGKILL). Its runs go on in their own processes; restart it to see them again.',
        actions: ['Restart', 'Show Logs', 'Learn more'],
      },
    ]);
  });

  it('Disconnect closes the connection; Show Logs shows the log channel', async () => {
    assert.equal(await commands.executeCommand(Commands.disconnectServer), true);
    await commands.executeCommand(Commands.showLogs);
    assert.deepEqual(f.connection.calls, ['disconnect']);
    assert.equal(f.log.shown, 1);
  });

  describe('ensureConnected', () => {
    it('does nothing when connected', async () => {
      f.connection.isConnected = true;
      await ensureConnected(f.ctx);
      assert.deepEqual(f.connection.calls, []);
    });

    it('connects to the agentRl.serverUrl setting, asking only for the token it wants', async () => {
      f.settings.serverUrl = () => 'wss://trainer.example';
      f.connection.connecting = wantsToken;
      fake.answers = ['s3cret'];
      await ensureConnected(f.ctx);
      assert.deepEqual(f.connection.calls, [
        'connectRemote wss://trainer.example (no token)',
        'connectRemote wss://trainer.example s3cret',
      ]);
      assert.equal(fake.prompts.length, 1);
    });

    it('starts a local server without a serverUrl, and fails when none could be had', async () => {
      await ensureConnected(f.ctx);
      assert.deepEqual(f.connection.calls, ['startLocal /ws/.venv/bin/python /ws /ws/.agentrl/runs']);
      f.connection.calls.length = 0;
      f.connection.isConnected = false;
      fake.trusted = false;
      await assert.rejects(ensureConnected(f.ctx), /No trainer server: start a local one or connect to one\./);
    });
  });
});
