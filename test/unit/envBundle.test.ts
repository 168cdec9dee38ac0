import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packEnvFolder } from '../../extension/envBundle';

describe('env bundle (what Start Training uploads to a remote server)', () => {
  it("packs the env's regular files into a tar.gz that tar reads back, leaving caches, venvs, runs and links home", () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentrl-bundle-'));
    const deep = join(dir, 'data', 'a'.repeat(60), 'b'.repeat(60));
    for (const sub of ['__pycache__', '.venv/lib', '.agentrl/runs', 'data'])
      mkdirSync(join(dir, sub), { recursive: true });
    mkdirSync(deep, { recursive: true });
    writeFileSync(join(dir, 'env.py'), 'print("hi")\n');
    writeFileSync(join(dir, 'tasks.jsonl'), '{"question": "q", "answer": "a"}\n');
    writeFileSync(join(deep, 'long-name.jsonl'), 'x'.repeat(1500));
    writeFileSync(join(dir, '__pycache__', 'env.cpython-311.pyc'), 'bytecode');
    writeFileSync(join(dir, '.venv', 'lib', 'big.so'), 'binary');
    writeFileSync(join(dir, '.agentrl', 'runs', 'events.jsonl'), '{}');
    symlinkSync('/etc/passwd', join(dir, 'link'));
    const bundle = packEnvFolder(dir);
    const longPath = `data/${'a'.repeat(60)}/${'b'.repeat(60)}/long-name.jsonl`;
    assert.deepEqual(bundle.files, [longPath, 'env.py', 'tasks.jsonl']);
    const archive = join(dir, '..', `${dir.split('/').pop()}.tar.gz`);
    writeFileSync(archive, bundle.archive);
    assert.deepEqual(
      execFileSync('tar', ['-tzf', archive], { encoding: 'utf8' }).trim().split('\n').sort(),
      [longPath, 'env.py', 'tasks.jsonl'].sort(),
    );
    assert.equal(execFileSync('tar', ['-xzOf', archive, longPath], { encoding: 'utf8' }), 'x'.repeat(1500));
    assert.equal(execFileSync('tar', ['-xzOf', archive, 'env.py'], { encoding: 'utf8' }), 'print("hi")\n');
  });
});
