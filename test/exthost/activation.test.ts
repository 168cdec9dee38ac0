// The extension as VS Code loads it: it activates, and every command package.json contributes is registered.
import { strict as assert } from 'node:assert';
import * as vscode from 'vscode';
import { EXTENSION_ID, extension } from './util';

describe('activation', () => {
  it('activates in the extension host', async () => {
    const ext = await extension();
    assert.equal(ext.id, EXTENSION_ID);
    assert.ok(ext.isActive);
    assert.equal(ext.extensionKind, vscode.ExtensionKind.Workspace);
  });

  it('registers every command contributed in package.json', async () => {
    const ext = await extension();
    const contributed = (ext.packageJSON.contributes.commands as Array<{ command: string }>).map((c) => c.command);
    assert.ok(contributed.length >= 4, `package.json contributes only ${contributed.length} commands`);
    const registered = new Set(await vscode.commands.getCommands(true));
    assert.deepEqual(
      contributed.filter((id) => !registered.has(id)),
      [],
      'contributed but not registered',
    );
  });
});
