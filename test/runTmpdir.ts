// Every temporary folder the TypeScript tests make, and the trainer processes and browsers they start, goes into
// one folder of this mocha run's, removed when the run ends: the tests make theirs with mkdtemp and leave them there
// (one run left about 400 folders in /tmp). Loaded by .mocharc.json before the spec files, so that a folder a spec
// file makes as it loads lands here too (os.tmpdir() reads TMPDIR at each call).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const runFolder = mkdtempSync(join(tmpdir(), 'agentrl-mocha-'));
process.env.TMPDIR = runFolder;

export const mochaHooks = {
  afterAll(): void {
    rmSync(runFolder, { recursive: true, force: true });
  },
};
