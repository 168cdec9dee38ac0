// The world every run command's test starts from (runCommands.test.ts, tryCommands.test.ts): a fresh fake VS Code, an
// env folder with a run config, the run commands registered on a fake context, and a run-config language server that
// finds in each config as it opens what a test puts in `configProblems`.
import { Diagnostic, fake, Uri } from './vscodeStub';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { languages, workspace } from 'vscode';
import { registerRunCommands } from '../../extension/runCommands';
import { fakeCtx, type FakeCtx } from './fakeCtx';

export interface RunCommandsWorld {
  f: FakeCtx;
  envFolder: string;
  config: string;
  configProblems: Diagnostic[];
}

/** Made anew before each test of the `describe` that calls it. */
export function runCommandsWorld(): RunCommandsWorld {
  const world = { configProblems: [] as Diagnostic[] } as RunCommandsWorld;
  beforeEach(() => {
    fake.reset();
    world.envFolder = mkdtempSync(join(tmpdir(), 'agentrl-run-commands-'));
    world.config = join(world.envFolder, 'lookup.agentrl.yaml');
    writeFileSync(world.config, 'name: lookup\nmodel:\n  path: tiny\n');
    world.f = fakeCtx({ findRunConfigs: async () => [Uri.file(world.config)] });
    registerRunCommands(world.f.ctx);
    world.configProblems = [];
    const published = languages.createDiagnosticCollection('agentRl.runConfig');
    workspace.onDidOpenTextDocument((document) => published.set(document.uri, world.configProblems as never));
  });
  return world;
}
