import { CodeActionKind, DiagnosticSeverity, fake, Range, Uri } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { workspace } from 'vscode';
import type { HealthEvent } from '../../protocol/generated/rpc';
import { Commands } from '../../extension/commands';
import { registerHealthDiagnostics } from '../../extension/healthDiagnostics';
import { fakeCtx, runInfo, type FakeCtx } from './fakeCtx';

const alert = (resolved: boolean): HealthEvent => ({
  code: 'zero_variance_groups',
  severity: 'warning',
  resolved,
  step: 4,
  since_step: 3,
  message: 'every group had the same reward',
  fix: 'raise rollout.temperature',
  metrics: {},
  trajectory_ids: [],
});

describe('health alerts as problems', () => {
  let f: FakeCtx;
  let config: string;
  let seq = 0;
  const health = (resolved: boolean): void => {
    const event = { runId: 'r1', seq: ++seq, time: seq, type: 'health', data: alert(resolved) } as const;
    f.connection.model.applyEvent(event);
    f.connection.runEvents.fire(event);
  };
  const settle = () => new Promise((resolve) => setTimeout(resolve, 10));

  beforeEach(() => {
    fake.reset();
    const folder = mkdtempSync(join(tmpdir(), 'agentrl-health-'));
    config = join(folder, 'lookup.agentrl.yaml');
    writeFileSync(config, 'name: lookup\nrollout:\n  temperature: 0.1\n');
    writeFileSync(join(folder, 'other.agentrl.yaml'), 'name: other\n');
    f = fakeCtx({ findRunConfigs: async () => [Uri.file(join(folder, 'other.agentrl.yaml')), Uri.file(config)] });
    f.connection.model.setRuns([runInfo('r1', { name: 'lookup' })]);
    registerHealthDiagnostics(f.ctx);
  });

  it("puts an alert on the key its fix names, in the config whose name the run has, with a quick fix to the step's episodes", async () => {
    health(false);
    await settle();
    const [diagnostic] = fake.diagnostics.get('agentRl.health')!.get(Uri.file(config))!;
    assert.equal(diagnostic.message, 'lookup: Step 4: every group had the same reward Fix: raise rollout.temperature');
    assert.equal(diagnostic.severity, DiagnosticSeverity.Warning);
    assert.deepEqual([diagnostic.range.start.line, diagnostic.range.start.character], [2, 2]);
    const document = await workspace.openTextDocument(config);
    const [action] = fake.codeActionProviders[0].provideCodeActions(document as never, new Range(2, 2, 2, 2), {
      diagnostics: [diagnostic],
    });
    assert.equal(action.kind, CodeActionKind.QuickFix);
    assert.deepEqual(action.command, {
      title: "Open step 4's episodes in the replay",
      command: Commands.openReplay,
      arguments: [{ runId: 'r1', step: 4 }],
    });
  });

  it('takes the problem away when the alert clears', async () => {
    health(false);
    await settle();
    health(true);
    await settle();
    assert.deepEqual(fake.diagnostics.get('agentRl.health')!.get(Uri.file(config)), []);
  });
});
