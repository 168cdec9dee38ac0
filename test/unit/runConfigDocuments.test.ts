import { fake, TextDocument, Uri } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { onFirstRunConfig } from '../../extension/runConfigDocuments';

describe('onFirstRunConfig (when the language server starts)', () => {
  beforeEach(() => fake.reset());
  const open = (path: string) => {
    const document = new TextDocument(Uri.file(path), 'name: x\n');
    fake.textDocuments.push(document);
    fake.documentOpened.fire(document);
  };

  it('waits, in a window with no run config, for the first one to open; once', () => {
    let started = 0;
    onFirstRunConfig(() => started++);
    open('/ws/notes.yaml');
    open('/ws/env.py');
    assert.equal(started, 0, 'nothing started for files that are not run configs');
    open('/ws/my-env/my-env.agentrl.yaml');
    assert.equal(started, 1);
    open('/ws/other.agentrl.yaml');
    assert.equal(started, 1, 'started once');
  });

  it('starts at once where a run config is already open', () => {
    fake.textDocuments.push(new TextDocument(Uri.file('/ws/a.agentrl.yaml'), ''));
    let started = 0;
    onFirstRunConfig(() => started++);
    assert.equal(started, 1);
  });

  it('starts nothing once disposed (the extension deactivated first)', () => {
    let started = 0;
    onFirstRunConfig(() => started++).dispose();
    open('/ws/a.agentrl.yaml');
    assert.equal(started, 0);
  });
});
