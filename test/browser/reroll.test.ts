import { strict as assert } from 'node:assert';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import type { RerollSummary, TrajectoryRecord } from '../../protocol/webview-messages';
import { fixture, launch, openReplay, SCREENSHOTS } from './harness';

/** "Edit and re-roll from here" in the replay panel: the form, what it asks the host, the progress, and a re-roll
 * beside the recorded episode with the token diff of the first turn the policy sampled otherwise. */
describe('replay panel: edit and re-roll from here, in Chromium', function () {
  this.timeout(120_000);
  let browser: Browser;
  const [record] = fixture('lookup'); // turn 1 called a tool and read an error; turn 2 answered and ended it
  const address = { runId: record.run_id, trajectoryId: record.id };

  before(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    browser = await launch();
  });
  after(async () => browser?.close());

  const post = (page: Page, message: object) => page.evaluate((m) => window.postMessage(m, '*'), message);
  const posted = (page: Page, type: string) =>
    page.evaluate(
      (t) => (window as unknown as { __posted: Array<{ type: string }> }).__posted.filter((m) => m.type === t),
      type,
    );

  function summary(rerollId: string, rewards: number[]): RerollSummary {
    return {
      ...address,
      rerollId,
      turn: 0,
      edit: 'observation',
      text: 'the value of key 3 is gold',
      recordedText: record.turns[0].observation!,
      policyStep: 5,
      samples: rewards.length,
      temperature: 0.2,
      seed: 0,
      code: 'snapshot',
      differences: [],
      rewards,
      createdAt: '2026-11-26T10:02:24.781058+00:00',
      elapsedS: 3.5,
    };
  }

  /** A re-roll of the record whose second turn the policy wrote otherwise: other tokens, and text that looks like markup. */
  function rewritten(sample: number): TrajectoryRecord {
    const tokens = { ...record.tokens, ids: [...record.tokens.ids], text: [...record.tokens.text] };
    const second = tokens.role.flatMap((role, i) => (role === 'assistant' && tokens.turn[i] === 1 ? [i] : []));
    tokens.ids[second[1]] += 1000;
    tokens.text[second[1]] = '<b>';
    const turns = record.turns.map((t) => (t.index === 1 ? { ...t, assistant: '<b>not markup</b>' } : t));
    return { ...record, id: `reroll-20261126-100237-5c2a5c-${sample}`, tokens, turns, reward: 2.5 };
  }

  it('opens on an observation with its text, asks the trainer with the chosen policy, and shows the re-rolls side by side', async () => {
    const page = await openReplay(browser, [record]);
    await page.click(`tr[data-id="${record.id}"]`);
    await page.click('.step.kind-observation >> nth=0');
    await page.click('#reroll-here');
    assert.equal(await page.getAttribute('#view-reroll', 'aria-selected'), 'true');
    assert.deepEqual(await posted(page, 'listRerolls'), [{ type: 'listRerolls', ...address }]);
    assert.equal(await page.inputValue('#reroll-text'), record.turns[0].observation);

    const stored = summary('20261125-090000-aaaaaa', [0.5]);
    await post(page, {
      type: 'rerolls',
      ...address,
      reply: { ok: true, result: { runId: record.run_id, rerolls: [stored], checkpoints: [5, 10], temperature: 0.7 } },
    });
    await page.locator('#reroll-stored li').waitFor();
    const options = await page.locator('#reroll-policy option').allTextContents();
    assert.deepEqual(options, ['latest checkpoint (step 10)', 'base model', 'checkpoint 5', 'checkpoint 10']);
    assert.equal(await page.inputValue('#reroll-temperature'), '0.7', "the run's temperature by default");
    assert.match(
      (await page.textContent('#reroll-stored')) ?? '',
      /turn 1 observation · checkpoint 5 · 1 × T 0\.20 · the run's code/,
    );

    await page.fill('#reroll-text', 'the value of key 3 is gold');
    await page.selectOption('#reroll-policy', '5');
    await page.fill('#reroll-samples', '2');
    await page.fill('#reroll-temperature', '0.2');
    await page.selectOption('#reroll-code', 'snapshot');
    await page.click('#reroll-run');
    assert.deepEqual(await posted(page, 'rerollEpisode'), [
      {
        type: 'rerollEpisode',
        params: {
          ...address,
          turn: 0,
          edit: 'observation',
          text: 'the value of key 3 is gold',
          policy: 5,
          samples: 2,
          temperature: 0.2,
          code: 'snapshot',
        },
      },
    ]);
    assert.equal(await page.isDisabled('#reroll-run'), true, 'one re-roll of an episode at a time');
    await post(page, { type: 'rerollProgress', ...address, message: 'loading the policy: the checkpoint of step 5' });
    await page.locator('#reroll-progress', { hasText: 'checkpoint of step 5' }).waitFor();

    const made = {
      ...summary('20261126-100237-5c2a5c', [record.reward, 2.5]),
      differences: [{ turn: 0, recorded: 'gold', now: '<i>silver</i>' }],
    };
    const same = { ...record, id: 'reroll-20261126-100237-5c2a5c-0' };
    await post(page, {
      type: 'reroll',
      ...address,
      reply: { ok: true, result: { reroll: made, records: [same, rewritten(1)] } },
    });
    await page.locator('#reroll-compare').waitFor();
    const columns = await page.locator('.reroll-column h5').allTextContents();
    assert.deepEqual(columns, ['Recorded', 'Re-roll 1', 'Re-roll 2']);
    assert.match((await page.locator('.reroll-column >> nth=2').textContent()) ?? '', /reward 2\.500 · finished/);
    const differences = (await page.textContent('.reroll-differences')) ?? '';
    assert.match(differences, /turn 1's observation is now <i>silver<\/i>, recorded gold/);
    const diffs = await page.locator('#reroll-token-diff').textContent();
    assert.match(diffs ?? '', /Re-roll 1: the same sampled tokens as recorded from turn 2 on/);
    assert.match(diffs ?? '', /Re-roll 2: turn 2 \(1 recorded only, 1 re-rolled only\)/);
    assert.deepEqual(await page.locator('.tok-removed').allTextContents(), [
      record.tokens.text[recordedSecond(record)],
    ]);
    assert.deepEqual(await page.locator('.tok-added').allTextContents(), ['<b>']);
    assert.equal(await page.locator('.reroll b, .reroll i, .reroll script').count(), 0, 'model output is text');
    assert.equal(await page.isDisabled('#reroll-run'), false);
    assert.equal(await page.locator('#reroll-stored li').count(), 2, 'the new re-roll joins the stored ones');
    await page.screenshot({ path: join(SCREENSHOTS, 'reroll-vscode-light.png'), fullPage: true });

    await page.click(`#reroll-stored [data-reroll="${stored.rerollId}"]`);
    assert.deepEqual(await posted(page, 'openReroll'), [{ type: 'openReroll', ...address, rerollId: stored.rerollId }]);
    await post(page, {
      type: 'reroll',
      ...address,
      reply: { ok: false, message: 'The trainer server refused: --allow-code' },
    });
    await page.locator('.reroll-error', { hasText: '--allow-code' }).waitFor();

    await page.click('#reroll-back');
    assert.equal(await page.getAttribute('#view-episode', 'aria-selected'), 'true');
    await page.close();
  });

  it("offers the assistant's text on every turn, and no observation edit where nothing followed it", async () => {
    const page = await openReplay(browser, [record]);
    await page.click(`tr[data-id="${record.id}"]`);
    await page.click('.step.kind-assistant >> nth=1');
    assert.equal(await page.isDisabled('#reroll-here'), false);
    await page.click('.step.kind-observation >> nth=1'); // the turn that ended the episode
    assert.equal(await page.isDisabled('#reroll-here'), true);
    assert.match((await page.textContent('.reroll-here .hint')) ?? '', /ended the episode/);
    await page.click('.step.kind-assistant >> nth=1');
    await page.click('#reroll-here');
    assert.equal(await page.inputValue('#reroll-text'), record.turns[1].assistant);
    await page.reload();
    await page.waitForFunction(() =>
      (window as unknown as { __posted: Array<{ type: string }> }).__posted.some((m) => m.type === 'ready'),
    );
    await post(page, { type: 'load', source: 'fixture', records: [record], live: false });
    await page.locator('#reroll-text').waitFor();
    assert.equal(await page.inputValue('#reroll-text'), record.turns[1].assistant, 'the view survives a reload');
    await page.close();
  });
});

/** The index of the second token the policy sampled in turn 2 (the one `rewritten` changes). */
function recordedSecond(record: TrajectoryRecord): number {
  return record.tokens.role.flatMap((role, i) => (role === 'assistant' && record.tokens.turn[i] === 1 ? [i] : []))[1];
}
