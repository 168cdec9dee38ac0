import { fake, pick, Uri } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { commands } from 'vscode';
import { codeChanges } from '../../protocol/code-changes';
import type { CodeManifest, CodeState } from '../../protocol/generated/rpc';
import { Commands } from '../../extension/commands';
import { CODE_SCHEME, noCodeMessage, registerCompareCode, sameCodeMessage } from '../../extension/compareCode';
import { fakeCtx, runInfo, type FakeCtx } from './fakeCtx';

const hash = (text: string): string => text.repeat(64).slice(0, 64);

function state(files: Record<string, string>): CodeState {
  return {
    recorded_at: '2026-11-26T10:00:00+00:00',
    root: '/home/me/env',
    files: Object.entries(files).map(([path, sha]) => ({ path, sha256: hash(sha), size: 10 })),
    left_out: [],
    versions: { python: '3.11.7', agentrl: '0.1.0', torch: '2.13.0', transformers: '5.19.0', vllm: null },
    platform: 'Linux',
  };
}

const manifest = (files: Record<string, string>): CodeManifest => ({
  code: state(files),
  limits: { file_bytes: 1 << 20, total_bytes: 10 << 20 },
  resumes: [],
});

/** The text of each file of each run, as `run/codeFile` answers it. */
const TEXTS: Record<string, Record<string, string | null>> = {
  r1: { 'env.py': 'v1\n', 'tools.py': 'old\n', 'gone.py': 'bye\n', 'same.py': 'same\n' },
  r2: { 'env.py': 'v1\n', 'tools.py': 'new\n', 'added.py': 'hi\n', 'same.py': 'same\n', 'blob.bin': null },
};

describe('Compare Code', () => {
  let f: FakeCtx;

  beforeEach(() => {
    fake.reset();
    f = fakeCtx();
    f.connection.model.setRuns([runInfo('r1', { name: 'lookup' }), runInfo('r2', { name: 'qa' }), runInfo('r3')]);
    const manifests: Record<string, CodeManifest | null> = {
      r1: manifest({ 'env.py': 'a', 'tools.py': 'b', 'gone.py': 'c', 'same.py': 'd' }),
      r2: manifest({ 'env.py': 'a', 'tools.py': 'e', 'added.py': 'f', 'same.py': 'd', 'blob.bin': '0' }),
      r3: null,
    };
    f.connection.answers['run/code'] = ({ runId }) => ({ runId, manifest: manifests[runId] });
    f.connection.answers['run/codeFile'] = ({ runId, path }) => ({
      runId,
      path,
      sha256: hash('0'),
      size: 7,
      text: TEXTS[runId][path],
    });
    registerCompareCode(f.ctx);
  });

  const document = (uri: unknown): Promise<string> =>
    Promise.resolve(fake.contentProviders.get(CODE_SCHEME)!.provideTextDocumentContent(uri as Uri));

  it('opens the files that differ in the multi-file diff editor, each run read through its own documents', async () => {
    const result = await commands.executeCommand(Commands.compareCode, { kind: 'run', runId: 'r1' }, [
      { kind: 'run', runId: 'r1' },
      { kind: 'run', runId: 'r2' },
    ]);
    assert.deepEqual(result, { runIds: ['r1', 'r2'], changed: ['added.py', 'blob.bin', 'gone.py', 'tools.py'] });
    assert.equal(fake.prompts.length, 0, 'two selected rows ask nothing');
    const [{ command, args }] = fake.executed;
    assert.equal(command, 'vscode.changes');
    assert.equal(args[0], 'Code: lookup ↔ qa');
    const resources = args[1] as Uri[][];
    assert.deepEqual(
      resources.map((triple) => triple.map((uri) => `${uri.scheme}:${uri.path}`)),
      ['added.py', 'blob.bin', 'gone.py', 'tools.py'].map((path) => [
        `${CODE_SCHEME}:/r2/${path}`,
        `${CODE_SCHEME}:/r1/${path}`,
        `${CODE_SCHEME}:/r2/${path}`,
      ]),
    );
    const texts = await Promise.all(resources.map(([, left, right]) => Promise.all([document(left), document(right)])));
    assert.deepEqual(texts, [
      ['', 'hi\n'],
      ['', `(blob.bin is not UTF-8 text: 7 bytes, SHA-256 ${hash('0')})\n`],
      ['bye\n', ''],
      ['old\n', 'new\n'],
    ]);
    const asked = f.connection.requests.filter((r) => r.method === 'run/code').map((r) => r.params);
    assert.deepEqual(asked, [{ runId: 'r1' }, { runId: 'r2' }], 'a manifest is asked once, then kept');
    const read = f.connection.requests.filter((r) => r.method === 'run/codeFile').map((r) => r.params);
    assert.equal(read.length, 5, 'a file a run does not have is never asked for');
  });

  it('with one row, asks for the run to compare it with; from the palette, for both', async () => {
    fake.answers = [pick('qa')];
    const fromRow = (await commands.executeCommand(Commands.compareCode, { kind: 'run', runId: 'r1' })) as {
      runIds: string[];
    };
    assert.deepEqual(fromRow.runIds, ['r1', 'r2']);
    const offered = (fake.prompts[0].options.items as Array<{ runId: string }>).map((item) => item.runId);
    assert.deepEqual(offered, ['r3', 'r2'], 'every run but the row’s, newest first');

    fake.answers = [pick('qa'), pick('lookup')];
    const fromPalette = (await commands.executeCommand(Commands.compareCode)) as { runIds: string[] };
    assert.deepEqual(fromPalette.runIds, ['r2', 'r1']);
    fake.answers = [];
    assert.equal(await commands.executeCommand(Commands.compareCode), undefined, 'dismissed: nothing opens');
  });

  it('says when two runs trained with the same code, and when a run recorded none', async () => {
    f.connection.answers['run/code'] = ({ runId }) => ({
      runId,
      manifest: runId === 'r3' ? null : manifest({ 'env.py': 'a' }),
    });
    const result = await commands.executeCommand(Commands.compareCode, { runId: 'r1' }, [{ runId: 'r2' }]);
    assert.deepEqual(result, { runIds: ['r1', 'r2'], changed: [] });
    assert.equal(fake.messages.at(-1)?.text, sameCodeMessage('lookup', 'qa', 1));
    assert.equal(fake.executed.length, 0);

    await commands.executeCommand(Commands.compareCode, { runId: 'r1' }, [{ runId: 'r3' }]);
    assert.equal(fake.messages.at(-1)?.text, `Compare Code: ${noCodeMessage('r3-name')}`);
    assert.equal(fake.messages.at(-1)?.severity, 'error');
  });

  it('marks each file added, removed or changed by its hash', () => {
    const before = state({ 'a.py': '1', 'b.py': '2', 'c.py': '3' });
    const after = state({ 'b.py': '2', 'c.py': '4', 'd.py': '5' });
    assert.deepEqual(codeChanges(before, after), [
      { path: 'a.py', change: 'removed' },
      { path: 'c.py', change: 'changed' },
      { path: 'd.py', change: 'added' },
    ]);
  });
});
