import { fake } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Commands, Succeeded } from '../../extension/commands';
import {
  openOnFirstActivation,
  registerWalkthrough,
  TRAINER_MISSING_CONTEXT,
  updateTrainerMissing,
  WALKTHROUGH_ID,
  WALKTHROUGH_SHOWN_KEY,
} from '../../extension/walkthrough';
import { fakeCtx, type FakeCtx } from './fakeCtx';

const ROOT = resolve(__dirname, '..', '..');
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));

interface Step {
  id: string;
  description: string;
  when?: string;
  media: { markdown?: string };
  completionEvents?: string[];
}
const walkthroughs: Array<{ id: string; steps: Step[] }> = manifest.contributes.walkthroughs;
const steps = walkthroughs[0].steps;

/** The context keys the extension sets (`setContext`), which a step may complete on. */
const CONTEXT_KEYS: string[] = ['agentRl.connected', TRAINER_MISSING_CONTEXT, ...Object.values(Succeeded)];
/** VS Code's own commands a step's buttons may run. */
const WORKBENCH_COMMANDS = ['workbench.action.openSettings'];

describe('walkthrough contribution', () => {
  it("is the one walkthrough, under the id the extension opens, in the issue's order", () => {
    assert.deepEqual(
      walkthroughs.map((w) => w.id),
      [WALKTHROUGH_ID],
    );
    assert.deepEqual(
      steps.map((s) => s.id),
      [
        'connectTrainer',
        'installTrainer',
        'newEnvironment',
        'tryEnvironment',
        'startTraining',
        'openDashboard',
        'openReplay',
      ],
    );
  });

  it('the steps after the connection complete when their command succeeded, not when it started', () => {
    assert.deepEqual(
      steps.slice(2).map((s) => s.completionEvents),
      Object.values(Succeeded).map((key) => [`onContext:${key}`]),
    );
  });

  it('every step completes on a command the extension registers or a context key it sets, not on being looked at', () => {
    const commandIds = new Set<string>(Object.values(Commands));
    for (const step of steps) {
      assert.ok(step.completionEvents?.length, `${step.id} has no completion event`);
      for (const event of step.completionEvents) {
        const [kind, name] = event.split(/:(.*)/);
        if (kind === 'onCommand') assert.ok(commandIds.has(name), `${step.id}: ${name} is no command of ours`);
        else assert.ok(kind === 'onContext' && CONTEXT_KEYS.includes(name), `${step.id}: ${event}`);
      }
    }
  });

  it("every button runs one of the extension's commands (or opens its setting)", () => {
    const commandIds = new Set<string>([...Object.values(Commands), ...WORKBENCH_COMMANDS]);
    for (const step of steps) {
      const links = [...step.description.matchAll(/\]\(command:([^?)]+)/g)].map((m) => m[1]);
      assert.ok(links.length, `${step.id} has no button`);
      for (const id of links) assert.ok(commandIds.has(id), `${step.id}: ${id}`);
    }
  });

  it('exactly one of the first two steps shows, by whether the configured Python has agentrl', () => {
    assert.deepEqual(
      steps.slice(0, 2).map((s) => s.when),
      [`!${TRAINER_MISSING_CONTEXT}`, TRAINER_MISSING_CONTEXT],
    );
    assert.ok(steps.slice(2).every((s) => s.when === undefined));
  });

  it('every step has its markdown, and every picture the markdown shows ships with the extension', () => {
    const shipped = readFileSync(join(ROOT, '.vscodeignore'), 'utf8');
    for (const step of steps) {
      const markdownPath = join(ROOT, step.media.markdown ?? '');
      assert.ok(step.media.markdown && existsSync(markdownPath), `${step.id}: ${step.media.markdown}`);
      const pictures = [...readFileSync(markdownPath, 'utf8').matchAll(/!\[[^\]]+\]\(([^)]+)\)/g)].map((m) => m[1]);
      assert.equal(pictures.length, 1, `${step.id}: one picture, with its alt text`);
      // VS Code resolves a walkthrough markdown's relative image against the markdown's own folder.
      for (const picture of pictures) {
        assert.ok(existsSync(join(dirname(markdownPath), picture)), `${step.id}: ${picture}`);
        assert.ok(shipped.includes(`!media/walkthrough/*${picture.slice(picture.lastIndexOf('.'))}`), picture);
      }
    }
    assert.ok(shipped.includes('!media/walkthrough/*.md'));
  });
});

describe('walkthrough', () => {
  let f: FakeCtx;
  const dir = mkdtempSync(join(tmpdir(), 'agentrl-walkthrough-'));
  /** A "Python" whose probe answers "has agentrl" (exit 0) or "has not" (exit 3). */
  const python = (name: string, status: number): string => {
    const path = join(dir, name);
    writeFileSync(path, `#!/bin/sh\nexit ${status}\n`);
    chmodSync(path, 0o755);
    return path;
  };
  const contextSet = () =>
    fake.executed
      .filter((e) => e.command === 'setContext' && e.args[0] === TRAINER_MISSING_CONTEXT)
      .map((e) => e.args[1]);
  const opened = () => fake.executed.filter((e) => e.command === 'workbench.action.openWalkthrough');

  beforeEach(() => {
    fake.reset();
    f = fakeCtx({ workspaceRoot: () => dir, pythonPath: () => python('with-agentrl', 0) });
  });

  it('opens on the first activation only, as <publisher>.<name>#<walkthrough id>', async () => {
    assert.equal(await openOnFirstActivation(f.ctx), true);
    assert.equal(await openOnFirstActivation(f.ctx), false);
    const id = `${manifest.publisher}.${manifest.name}`;
    assert.deepEqual(
      opened().map((e) => e.args),
      [[`${id}#${WALKTHROUGH_ID}`, false]],
    );
    assert.equal(f.globalState.get(WALKTHROUGH_SHOWN_KEY), true);
  });

  it('stays closed for a user who turned walkthroughs on install off, and does not ask again', async () => {
    fake.configuration['welcomePage.walkthroughs.openOnInstall'] = false;
    assert.equal(await openOnFirstActivation(f.ctx), false);
    delete fake.configuration['welcomePage.walkthroughs.openOnInstall'];
    assert.equal(await openOnFirstActivation(f.ctx), false);
    assert.deepEqual(opened(), []);
  });

  it('tells the first step whether the configured Python has agentrl', async () => {
    assert.equal(await updateTrainerMissing(f.ctx), false);
    f.settings.pythonPath = () => python('without-agentrl', 3);
    assert.equal(await updateTrainerMissing(f.ctx), true);
    f.settings.pythonPath = () => join(dir, 'no-such-python');
    assert.equal(await updateTrainerMissing(f.ctx), true);
    assert.deepEqual(contextSet(), [false, true, true]);
    assert.match(f.log.lines.join('\n'), /without-agentrl has no agentrl/);
    assert.match(f.log.lines.join('\n'), /no-such-python could not be run/);
  });

  it('runs no Python of an untrusted workspace', async () => {
    fake.trusted = false;
    assert.equal(await updateTrainerMissing(f.ctx), undefined);
    assert.deepEqual(contextSet(), []);
  });

  it('once registered: opens after activation, checks, and checks again when the Python setting changes', async () => {
    const registration = registerWalkthrough(f.ctx);
    assert.deepEqual(fake.executed, [], 'activate() itself runs nothing');
    const settle = () => new Promise((done) => setTimeout(done, 300));
    await settle();
    assert.equal(opened().length, 1);
    assert.deepEqual(contextSet(), [false]);
    f.settings.pythonPath = () => python('without-agentrl', 3);
    fake.configurationChanges.fire({ affectsConfiguration: (section) => section === 'agentRl.runsFolder' });
    await settle();
    assert.deepEqual(contextSet(), [false], 'another setting changed: no check');
    fake.configurationChanges.fire({ affectsConfiguration: (section) => section === 'agentRl.pythonPath' });
    await settle();
    assert.deepEqual(contextSet(), [false, true]);
    registration.dispose();
  });
});
