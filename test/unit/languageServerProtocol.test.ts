// The built language server (dist/languageServer.js) spoken to over stdio, as an editor would.
import { strict as assert } from 'node:assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  memoryPlanRequest,
  trainerDevicesNotification,
  type MemoryPlanParams,
} from '../../extension/languageServer/protocol';
import {
  createMessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
  type MessageConnection,
} from 'vscode-jsonrpc/node';

const ROOT = resolve(__dirname, '..', '..');

describe('run-config language server over LSP', function () {
  this.timeout(30_000);
  let child: ChildProcess;
  let connection: MessageConnection;

  before(async () => {
    child = spawn(process.execPath, [join(ROOT, 'dist', 'languageServer.js'), '--stdio'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    connection = createMessageConnection(new StreamMessageReader(child.stdout!), new StreamMessageWriter(child.stdin!));
    connection.listen();
    const result = (await connection.sendRequest('initialize', {
      processId: process.pid,
      rootUri: null,
      capabilities: {},
    })) as { capabilities: Record<string, unknown> };
    assert.ok(result.capabilities.hoverProvider && result.capabilities.codeActionProvider);
    await connection.sendNotification('initialized', {});
  });

  after(() => {
    connection?.dispose();
    child?.kill();
  });

  it('publishes diagnostics for an opened config and offers the did-you-mean fix', async () => {
    const file = join(ROOT, 'test', 'fixtures', 'run-configs', 'unknown-key.agentrl.yaml');
    const uri = pathToFileURL(file).href;
    const published = new Promise<{
      uri: string;
      diagnostics: Array<{ message: string; range: unknown; data?: unknown; source: string }>;
    }>((done) => connection.onNotification('textDocument/publishDiagnostics', done));
    await connection.sendNotification('textDocument/didOpen', {
      textDocument: { uri, languageId: 'yaml', version: 1, text: readFileSync(file, 'utf8') },
    });
    const { diagnostics } = await published;
    assert.equal(diagnostics.length, 1);
    assert.equal(diagnostics[0].message, "unknown key 'trian'; did you mean 'train'?");
    assert.deepEqual(diagnostics[0].range, { start: { line: 5, character: 0 }, end: { line: 5, character: 5 } });
    const actions = (await connection.sendRequest('textDocument/codeAction', {
      textDocument: { uri },
      range: diagnostics[0].range,
      context: { diagnostics },
    })) as Array<{ title: string; edit: { changes: Record<string, Array<{ newText: string }>> } }>;
    assert.equal(actions[0].title, "Change 'trian' to 'train'");
    assert.equal(actions[0].edit.changes[uri][0].newText, 'train');
    const hover = (await connection.sendRequest('textDocument/hover', {
      textDocument: { uri },
      position: { line: 6, character: 4 },
    })) as { contents: { value: string } } | null;
    assert.equal(hover, null); // batch_size under an unknown section has no schema to describe
  });

  it('hovers on model keys with the devices the extension passed on from the trainer, and the plan it asked the trainer for', async () => {
    const file = join(ROOT, 'test', 'fixtures', 'run-configs', 'valid.agentrl.yaml');
    const uri = pathToFileURL(file).href;
    await connection.sendNotification('textDocument/didOpen', {
      textDocument: { uri, languageId: 'yaml', version: 1, text: readFileSync(file, 'utf8') },
    });
    // The extension host's part: it asks the connected trainer (config/memoryPlan) and answers with the trainer's plan.
    const asked: MemoryPlanParams[] = [];
    connection.onRequest(memoryPlanRequest, (params) => {
      asked.push(params);
      return {
        plan: {
          peakBytes: 3 * 2 ** 30,
          rowPositions: 1024,
          fits: true,
          shortestPeakBytes: 2 * 2 ** 30,
          parameters: 134.5e6,
          trainableParameters: 134.5e6,
          shapeSource: "SmolLM2-135M-Instruct's config",
          device: { kind: 'cuda' as const, label: 'H100 (80.0 GiB)', memoryBytes: 80 * 2 ** 30 },
          parts: [{ name: 'weights', bytes: 2 ** 29, detail: '134.5M parameters x 4 bytes', phase: 'always' as const }],
        },
      };
    });
    await connection.sendNotification(trainerDevicesNotification, {
      cpu: { name: 'x86_64', cores: 16 },
      gpus: [{ name: 'H100', memoryBytes: 80 * 2 ** 30 }],
    });
    const hover = (await connection.sendRequest('textDocument/hover', {
      textDocument: { uri },
      position: { line: 2, character: 4 },
    })) as { contents: { value: string } };
    assert.match(hover.contents.value, /\*\*model\.path\*\*/);
    assert.match(hover.contents.value, /Connected trainer: 16 CPU cores; GPUs: H100 \(80\.0 GiB\)\./);
    assert.match(hover.contents.value, /Planned peak memory: 3\.0 GiB, fits H100 \(80\.0 GiB\)/);
    assert.equal(asked.length, 1);
    assert.equal(asked[0].configPath, file); // the trainer reads the model's shape relative to the config's folder
    assert.deepEqual(asked[0].config.model, { path: 'tiny' }); // the file's contents, parsed
  });
});
