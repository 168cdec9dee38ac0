// The replay panel: Open Trajectory Replay on a trajectories file opens the replay custom editor for it.
import { strict as assert } from 'node:assert';
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { allTabs, extension, screenshot, waitFor, workspaceFolder } from './util';

describe('replay', () => {
  it('agentRl.openReplay opens a trajectories file in the replay editor', async () => {
    const ext = await extension();
    const dir = join(workspaceFolder().uri.fsPath, 'replay');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, 'lookup.trajectories.jsonl');
    copyFileSync(join(ext.extensionPath, 'protocol', 'examples', 'trajectories', 'lookup.trajectories.jsonl'), file);
    const uri = vscode.Uri.file(file);

    await vscode.commands.executeCommand('agentRl.openReplay', uri);
    const tab = await waitFor(
      () => allTabs().find((t) => t.input instanceof vscode.TabInputCustom && t.input.uri.fsPath === uri.fsPath),
      'a tab showing the file',
      30_000,
    );
    const input = tab.input as vscode.TabInputCustom;
    assert.equal(input.viewType, 'agentRl.trajectoryReplay');
    assert.ok(tab.isActive, 'the replay tab is the active one');
    await screenshot('replay', 'tbody tr', 'webview');
  });
});
