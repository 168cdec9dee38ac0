// New Environment with its answers as an argument (no prompts): writes a complete env and opens its run config.
import { strict as assert } from 'node:assert';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { extension, waitFor, workspaceFolder } from './util';

describe('scaffold', () => {
  before(() => extension());

  it('agentRl.newEnvironment writes the env files into the given folder and opens the run config', async () => {
    const parent = workspaceFolder().uri.fsPath;
    const folder = await vscode.commands.executeCommand<string | undefined>('agentRl.newEnvironment', {
      name: 'exthost-env',
      tools: ['search', 'calculator'],
      parent,
      model: 'tiny',
    });
    assert.equal(folder, join(parent, 'exthost-env'));
    assert.deepEqual(readdirSync(folder).sort(), [
      'codes.json',
      'env.py',
      'exthost-env.agentrl.yaml',
      'held-out.jsonl',
      'reward.py',
      'tasks.jsonl',
      'test_env.py',
      'tools.py',
    ]);
    const tools = readFileSync(join(folder, 'tools.py'), 'utf8');
    assert.match(tools, /class Search\(Tool\):\n {4}name = "search"/);
    assert.match(tools, /class Calculator\(Tool\):\n {4}name = "calculator"/);
    assert.match(readFileSync(join(folder, 'env.py'), 'utf8'), /class ExthostEnv\(ToolEnv\)/);
    const config = readFileSync(join(folder, 'exthost-env.agentrl.yaml'), 'utf8');
    assert.match(config, /^name: exthost-env$/m);
    assert.match(config, /class_name: ExthostEnv/);
    assert.doesNotMatch(config, /\{\{/);
    for (const line of readFileSync(join(folder, 'tasks.jsonl'), 'utf8').split('\n').filter(Boolean)) JSON.parse(line);
    const editor = await waitFor(() => vscode.window.activeTextEditor, 'an active editor');
    assert.equal(editor.document.uri.fsPath, join(folder, 'exthost-env.agentrl.yaml'));
  });

  it('agentRl.newEnvironment refuses a folder that exists and leaves it alone', async () => {
    const parent = workspaceFolder().uri.fsPath;
    const before = readFileSync(join(parent, 'exthost-env', 'tools.py'), 'utf8');
    const result = await vscode.commands.executeCommand('agentRl.newEnvironment', {
      name: 'exthost-env',
      tools: ['other'],
      parent,
      model: 'tiny',
    });
    assert.equal(result, undefined);
    assert.equal(readFileSync(join(parent, 'exthost-env', 'tools.py'), 'utf8'), before);
    assert.ok(!existsSync(join(parent, 'exthost-env', 'other')));
  });
});
