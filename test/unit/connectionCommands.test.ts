import { fake } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { Commands } from '../../extension/commands';
import { ensureConnected, registerConnectionCommands } from '../../extension/connectionCommands';
import { tokenKey } from '../../extension/settings';
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
    assert.deepEqual(fake.messages[0].actions, ['Manage Workspace Trust']);
  });

  it('Start Local Server without a folder open fails in words, logged and shown with the way to the logs', async () => {
    f.settings.workspaceRoot = () => undefined;
    assert.equal(await commands.executeCommand(Commands.startLocalServer), undefined);
    const reason = 'Start Local Server: Open a folder first: the local server keeps its runs in the workspace.';
    assert.deepEqual(f.log.lines, [`error: ${reason}`]);
    assert.deepEqual(fake.messages, [{ severity: 'error', text: reason, actions: ['Show Logs'] }]);
  });

  it('Connect to Server asks for the URL and the token, connects, and keeps the token in secret storage', async () => {
    fake.answers = ['ws://gpu-box:8765', 's3cret'];
    const url = await commands.executeCommand(Commands.connectServer);
    assert.equal(url, 'ws://gpu-box:8765');
    assert.deepEqual(f.connection.calls, ['connectRemote ws://gpu-box:8765 s3cret']);
    assert.equal(f.secrets.get(tokenKey('ws://gpu-box:8765')), 's3cret');
    assert.equal(fake.prompts[0].options.value, 'ws://127.0.0.1:8765', 'without a serverUrl setting, the default');
    assert.equal(fake.prompts[1].options.password, true);
  });

  it('Connect to Server uses the stored token without asking, and forgets one the server refuses', async () => {
    f.secrets.set(tokenKey('ws://gpu-box:8765'), 'old');
    f.connection.connecting = async () => {
      throw new Error('the server refused the token (HTTP 401)');
    };
    assert.equal(await commands.executeCommand(Commands.connectServer, { url: 'ws://gpu-box:8765' }), undefined);
    assert.deepEqual(f.connection.calls, ['connectRemote ws://gpu-box:8765 old']);
    assert.equal(fake.prompts.length, 0);
    assert.equal(f.secrets.has(tokenKey('ws://gpu-box:8765')), false);
    assert.equal(fake.messages[0].text, 'Connect to Server: the server refused the token (HTTP 401)');
  });

  it('Connect to Server does nothing when the URL prompt is dismissed', async () => {
    assert.equal(await commands.executeCommand(Commands.connectServer), undefined);
    assert.deepEqual(f.connection.calls, []);
  });

  it('a local server that exits unasked is announced, with Restart (the Runs view emptied without a word)', async () => {
    f.connection.localServerLost.fire('the local trainer server exited (SIGKILL)');
    assert.deepEqual(fake.messages, [
      {
        severity: 'warning',
        text: 'Agent RL: the local trainer server exited (SIGKILL). Its runs go on in their own processes; restart it to see them again.',
        actions: ['Restart', 'Show Logs'],
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

    it('connects to the agentRl.serverUrl setting, asking only for its token', async () => {
      f.settings.serverUrl = () => 'wss://trainer.example';
      fake.answers = [''];
      await ensureConnected(f.ctx);
      assert.deepEqual(f.connection.calls, ['connectRemote wss://trainer.example (no token)']);
      assert.equal(fake.prompts.length, 1);
      assert.equal(f.secrets.size, 0, 'an empty token is not stored');
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
