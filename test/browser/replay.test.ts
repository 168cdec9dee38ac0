import { strict as assert } from 'node:assert';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import type { TrajectoryRecord } from '../../protocol/webview-messages';
import { anchorGroups } from '../../webview/replay/anchorGroups';
import { formatNumber } from '../../webview/dom';
import { fixture, launch, load, openReplay, SCREENSHOTS, type Theme, withStepFields } from './harness';

describe('replay panel in Chromium', function () {
  this.timeout(120_000);
  let browser: Browser;
  const lookup = fixture('lookup');
  const toolErrors = fixture('tool-errors');
  const hostile = withStepFields(fixture('hostile')); // its second turn starts from a hostile observation

  before(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    browser = await launch();
  });
  after(async () => browser?.close());

  async function position(page: Page): Promise<string> {
    return (await page.textContent('#position')) ?? '';
  }

  it('lists, filters and sorts the trajectories of a run', async () => {
    const page = await openReplay(browser, [...lookup, ...toolErrors]);
    assert.equal(await page.locator('tbody tr').count(), lookup.length + toolErrors.length);
    await page.check('#filter-tool-errors');
    const withErrors = [...lookup, ...toolErrors].filter((r) => r.stats.num_tool_errors > 0).length;
    assert.ok(withErrors >= toolErrors.length);
    assert.equal(await page.locator('tbody tr').count(), withErrors);
    await page.uncheck('#filter-tool-errors');
    await page.selectOption('#run-sort', '-reward');
    const rewards = await page.locator('tbody tr td:nth-child(3)').allTextContents();
    const numbers = rewards.map(Number);
    assert.deepEqual(
      numbers,
      [...numbers].sort((a, b) => b - a),
    );
    await page.close();
  });

  it('follows a live run: appended episodes show up, and the badge says how the run ended', async () => {
    const page = await openReplay(browser, []);
    const post = (message: object) => page.evaluate((m) => window.postMessage(m, '*'), message);
    const [first, ...rest] = lookup;
    await post({ type: 'load', source: 'run-1', records: [first], live: true, runStatus: 'running' });
    await page.locator('.live-badge', { hasText: 'live' }).waitFor();
    await post({ type: 'append', records: rest });
    await post({ type: 'append', records: [first] }); // a record seen already is not listed twice
    await page.waitForFunction((n) => document.querySelectorAll('tbody tr').length === n, lookup.length);
    await post({ type: 'runStatus', live: false, runStatus: 'stopped' });
    await page.locator('.run-status-badge', { hasText: 'stopped' }).waitFor();
    assert.equal(await page.locator('.live-badge').count(), 0);
    assert.equal(await page.locator('tbody tr').count(), lookup.length);
    await page.close();
  });

  it('says when a tool result was stored cut, with its whole size and hash', async () => {
    const [record] = toolErrors;
    const turn = record.turns.findIndex((t) => t.tool_calls.length > 0);
    const call = record.turns[turn].tool_calls[0];
    const cut = structuredClone(record);
    Object.assign(cut.turns[turn].tool_calls[0], {
      result: 'x'.repeat(65_536),
      error: null,
      error_kind: null,
      result_cut: { chars: 20_000_000, sha256: 'ab'.repeat(32) },
    });
    const page = await openReplay(browser, [cut]);
    await page.click(`tr[data-id="${record.id}"]`);
    await page.keyboard.press('t');
    const shown = (await page.textContent('.happened .result-cut')) ?? '';
    assert.equal(shown, 'Stored cut: the first 65536 of 20000000 characters (sha256 abababababab…)', call.name);
    await page.close();
  });

  it('steps through an episode with the keyboard and the buttons', async () => {
    const page = await openReplay(browser, toolErrors);
    await page.click(`tr[data-id="${toolErrors[0].id}"]`);
    assert.match(await position(page), /^step 1 \/ \d+$/);
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('j');
    assert.match(await position(page), /^step 3 \//);
    await page.keyboard.press('k');
    assert.match(await position(page), /^step 2 \//);
    await page.click('#next');
    assert.match(await position(page), /^step 3 \//);
    await page.close();
  });

  it('jumps to the next tool call, error and reward, and shows what happened beside what it means', async () => {
    const page = await openReplay(browser, toolErrors);
    await page.click(`tr[data-id="${toolErrors[0].id}"]`);
    await page.keyboard.press('t');
    assert.equal(await page.locator('li.step.current').getAttribute('class'), 'step kind-tool status-normal current');
    assert.match((await page.textContent('.happened')) ?? '', /hello/);
    assert.match((await page.textContent('.means')) ?? '', /process reward/);
    await page.keyboard.press('e');
    assert.match((await page.locator('li.step.current').getAttribute('class')) ?? '', /status-error/);
    assert.match((await page.textContent('.happened')) ?? '', /exception: boom raised RuntimeError: kaput/);
    await page.click('.io button.link'); // navigate to code: the host opens the Tool's source
    const posted = await page.evaluate(() => (window as unknown as { __posted: unknown[] }).__posted);
    assert.deepEqual(posted.at(-1), { type: 'openToolSource', toolName: 'boom' });
    await page.click('#jump-reward');
    assert.match((await page.locator('li.step.current').getAttribute('class')) ?? '', /status-reward/);
    await page.close();
  });

  it('shows every token with its exact values and the loss mask visibly', async () => {
    const record = lookup[0];
    const page = await openReplay(browser, [record]);
    await page.click(`tr[data-id="${record.id}"]`);
    await page.click('#view-tokens');
    const tokens = page.locator('.token[data-index]');
    await tokens.first().waitFor();
    const rendered = await tokens.count();
    assert.ok(rendered > 0 && rendered < record.tokens.ids.length + 1);
    const firstSampled = record.tokens.loss_mask.indexOf(1);
    const cell = page.locator(`.token[data-index="${firstSampled}"]`);
    await cell.scrollIntoViewIfNeeded();
    const title = (await cell.getAttribute('title')) ?? '';
    assert.ok(title.includes(`logprob ${record.tokens.logprob[firstSampled]!.toFixed(4)}`), title);
    assert.ok(title.includes(`advantage ${record.tokens.advantage[firstSampled]!.toFixed(4)}`), title);
    assert.ok(title.includes('loss mask 1'));
    await cell.focus();
    assert.equal(await page.textContent('#token-detail'), title);
    const classes = await page
      .locator('.token[data-index]')
      .evaluateAll((els) => els.map((e) => [Number((e as HTMLElement).dataset.index), e.classList.contains('masked')]));
    for (const [index, masked] of classes as Array<[number, boolean]>) {
      assert.equal(masked, record.tokens.loss_mask[index] === 0, `token ${index}`);
    }
    const opacity = await page
      .locator('.token.masked')
      .first()
      .evaluate((e) => getComputedStyle(e).opacity);
    assert.equal(opacity, '0.55');
    await page.close();
  });

  /** Records as a training step writes them: what the learner read of each sampled token (here: the rollout's
   *  logprob shifted a little, one token of the first record by a lot, and an entropy). */
  function withLearnerFigures(records: TrajectoryRecord[]): { records: TrajectoryRecord[]; planted: number } {
    const planted = records[0].tokens.logprob.map((lp) => lp !== null).lastIndexOf(true);
    const figured = records.map((record, r) => {
      const t = record.tokens;
      return {
        ...record,
        tokens: {
          ...t,
          // one entry per sampled token (a rollout logprob), as the trainer writes them
          trainer_logprob: t.logprob.flatMap((lp, i) =>
            lp === null ? [] : [lp + (r === 0 && i === planted ? -2.5 : ((i % 5) - 2) * 0.01)],
          ),
          entropy: t.logprob.flatMap((lp, i) => (lp === null ? [] : [0.5 + (i % 3)])),
        },
      };
    });
    return { records: figured, planted };
  }

  it("colours the tokens by the trainer-vs-rollout mismatch or the entropy, and jumps to a step's largest mismatch", async () => {
    const step = lookup.filter((r) => r.step === lookup[0].step);
    const { records, planted } = withLearnerFigures(step);
    const page = await openReplay(browser, records);
    await page.click(`tr[data-id="${records[1].id}"]`);
    await page.click('#view-group');
    // the step's list, largest first: the planted token of the first record
    const first = page.locator('.mismatches .mismatch').first();
    assert.equal(await first.getAttribute('data-record'), records[0].id);
    assert.equal(await first.getAttribute('data-index'), String(planted));
    assert.match((await first.textContent()) ?? '', /-2\.5000$/);
    await first.click();
    // its episode's token view, coloured by the mismatch, the token focused
    await page.locator('.segmented button[data-overlay="mismatch"][aria-pressed="true"]').waitFor();
    await page.waitForFunction(
      (index) => (document.activeElement as HTMLElement)?.dataset.index === String(index),
      planted,
    );
    const chip = page.locator(`.token[data-index="${planted}"]`);
    assert.ok(
      await chip.evaluate((e) => e.classList.contains('adv-neg')),
      'a token the learner finds less likely: red',
    );
    assert.equal(await chip.evaluate((e) => e.style.getPropertyValue('--adv-alpha')), '0.550');
    const title = (await chip.getAttribute('title')) ?? '';
    assert.ok(title.includes('(-2.5000)') && title.includes('entropy'), title);
    const prompt = records[0].tokens.role.indexOf('prompt');
    const promptChip = page.locator(`.token[data-index="${prompt}"]`);
    if (await promptChip.count())
      assert.ok(!(await promptChip.evaluate((e) => /adv-|heat/.test(e.className))), 'a prompt token has no mismatch');
    await page.click('.segmented button[data-overlay="entropy"]');
    await page.locator('.token.heat').first().waitFor();
    assert.match((await page.locator('.legend').textContent()) ?? '', /entropy: darker, larger/);
    await page.screenshot({ path: join(SCREENSHOTS, 'token-overlays.png') });
    // a Try run's episodes carry none of it: the advantage alone, no control, no list
    await load(page, [lookup[0]]); // the same episode without them, in the token view still
    await page.locator('.token[data-index]').first().waitFor();
    assert.equal(await page.locator('.segmented button[data-overlay]').count(), 0);
    assert.equal(await page.locator('.mismatches').count(), 0);
    await page.close();
  });

  it("searches a run's episodes through the host, pages the matches into the list, and goes back to the whole run", async () => {
    const all = [...lookup, ...toolErrors];
    const page = await openReplay(browser, []); // then the run, as the host loads one it can search
    await page.evaluate(
      (recs) =>
        window.postMessage({ type: 'load', source: 'run-1', records: recs, live: false, searchable: true }, '*'),
      all,
    );
    await page.fill('#search-text', 'unclosed call');
    await page.selectOption('#search-error', 'bad_json');
    await page.fill('#search-reward-max', '0.5');
    await page.click('#search-run');
    const asked = await page.evaluate(() =>
      (window as unknown as { __posted: Array<{ type: string }> }).__posted.filter((m) => m.type === 'search'),
    );
    const query = { text: 'unclosed call', errorKind: 'bad_json', reward: { max: 0.5 } };
    assert.deepEqual(asked, [{ type: 'search', query }]);
    assert.match((await page.textContent('#search-results')) ?? '', /Searching for "unclosed call", error bad_json/);
    // the host answers with a page of records (one the panel did not hold yet among them) and a cursor
    const unseen = { ...toolErrors[0], id: 'unseen-1' };
    const answer = (records: TrajectoryRecord[], more: boolean, nextCursor: string | null) =>
      page.evaluate((m) => window.postMessage(m, '*'), {
        type: 'searchResults',
        query,
        more,
        reply: { ok: true, records, total: 3, nextCursor },
      });
    await answer([toolErrors[1], unseen], false, '2');
    await page.locator('tr[data-id="unseen-1"]').waitFor();
    assert.deepEqual(await page.locator('tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-id'))), [
      toolErrors[1].id,
      'unseen-1',
    ]);
    assert.match((await page.textContent('#search-results')) ?? '', /^3 episodes match .*\(2 shown\)/);
    await page.click('#search-more');
    const more = await page.evaluate(() =>
      (window as unknown as { __posted: Array<{ type: string; cursor?: string }> }).__posted.filter(
        (m) => m.type === 'search' && m.cursor,
      ),
    );
    assert.deepEqual(more, [{ type: 'search', query, cursor: '2' }]);
    await answer([lookup[0]], true, null);
    await page.locator(`tr[data-id="${lookup[0].id}"]`).waitFor();
    assert.equal(await page.locator('tbody tr').count(), 3);
    assert.equal(await page.locator('#search-more').count(), 0, 'no next page');
    await page.screenshot({ path: join(SCREENSHOTS, 'search.png') });
    await page.click('#search-clear');
    await page.waitForFunction((n) => document.querySelectorAll('tbody tr').length === n, all.length + 1);
    // a file's replay has no run to search: no search box
    await load(page, lookup);
    assert.equal(await page.locator('#search-text').count(), 0);
    await page.close();
  });

  it('sorts a GRPO group and flags a group with zero reward variance', async () => {
    const group = lookup.filter((r) => r.group === lookup[0].group);
    const page = await openReplay(browser, lookup);
    await page.click(`tr[data-id="${group[0].id}"]`);
    await page.click('#view-group');
    const rewardsShown = async () =>
      (await page.locator('.group-view tbody td:nth-child(2)').allTextContents()).map(Number);
    const descending = await rewardsShown();
    assert.equal(descending.length, group.length);
    assert.deepEqual(
      descending,
      [...descending].sort((a, b) => b - a),
    );
    await page.click('button[data-sort="reward"]');
    const ascending = await rewardsShown();
    assert.deepEqual(
      ascending,
      [...ascending].sort((a, b) => a - b),
    );
    const zeroVariance = group.map((r) => ({ ...r, reward: 0.5 }));
    await load(page, zeroVariance);
    await page.click('#view-group');
    assert.match((await page.textContent('#zero-variance')) ?? '', /zero variance/);
    await page.close();
  });

  it("shows each step's state, return and advantage, and groups a GRPO group's steps by anchor state", async () => {
    const records = withStepFields(lookup);
    const group = records.filter((r) => r.group === 0);
    const twoTurns = group.find((r) => r.turns.length === 2)!; // its second turn starts from a state no other reached
    const page = await openReplay(browser, records);
    await page.click(`tr[data-id="${twoTurns.id}"]`);
    await page.keyboard.press('j'); // Turn 1: assistant
    const turn = twoTurns.turns[0];
    assert.equal(await page.textContent('#step-state-key'), 'start');
    assert.equal(await page.textContent('#step-return'), turn.step_return!.toFixed(3));
    assert.equal(await page.textContent('#step-advantage'), turn.step_advantage!.toFixed(3));
    assert.match(
      (await page.textContent('#step-anchor')) ?? '',
      new RegExp(`^size ${group.length}: ${group.length - 1} other steps`),
    );
    assert.match((await page.locator('li.step.current .step-values').textContent()) ?? '', /R 0\.08 · A \+\d/);

    await page.click('#view-group');
    assert.equal(await page.getAttribute('#group-by-episode', 'aria-pressed'), 'true');
    await page.click('#group-by-anchor');
    assert.equal(await page.getAttribute('#group-by-anchor', 'aria-pressed'), 'true');
    const expected = anchorGroups(group).groups;
    assert.deepEqual(
      expected.map((g) => g.size),
      [group.length, 1],
    );
    const anchors = page.locator('tbody.anchor-group');
    assert.equal(await anchors.count(), expected.length);
    assert.match((await anchors.nth(0).locator('tr.anchor-head').textContent()) ?? '', /^state 1 start/);
    assert.match(
      (await anchors.nth(0).locator('.anchor-size').textContent()) ?? '',
      new RegExp(`anchor group of ${group.length} steps · ${group.length} episodes`),
    );
    assert.equal(await anchors.nth(0).locator('tr.anchor-step').count(), group.length);
    assert.equal(await anchors.nth(0).locator('.badge').count(), 0);
    const shownReturns = await anchors.nth(0).locator('tr.anchor-step td:nth-child(3)').allTextContents();
    assert.deepEqual(
      shownReturns,
      expected[0].steps.map((step) => formatNumber(step.stepReturn)),
    );
    const singleton = page.locator('tbody.anchor-group.singleton');
    assert.equal(await singleton.count(), 1);
    assert.equal(await singleton.locator('.badge.singleton').textContent(), 'size 1 · no step-level signal');
    assert.match(
      (await page.textContent('#anchor-summary')) ?? '',
      /2 distinct states over 9 steps · 1 reached by one step only/,
    );
    await singleton.locator('details.state-key summary').click(); // a long state key opens onto the whole of it
    assert.equal(await singleton.locator('details.state-key pre').textContent(), twoTurns.turns[0].observation);

    await singleton.locator('tr.anchor-step').click(); // opens that episode at that step
    assert.equal(await page.getAttribute('#view-episode', 'aria-selected'), 'true');
    assert.match((await page.locator('li.step.current').textContent()) ?? '', /^ Turn 2: assistant/);
    assert.equal(await page.textContent('#step-state-key'), twoTurns.turns[0].observation);
    assert.match((await page.textContent('#step-anchor')) ?? '', /^size 1: no other step/);
    await page.screenshot({ path: join(SCREENSHOTS, 'episode-step-fields-vscode-light.png') });

    // records written before the step fields: nothing to show, nothing to group by
    await load(page, lookup);
    await page.keyboard.press('j');
    assert.equal(await page.locator('.step-fields, .step-values').count(), 0);
    await page.click('#view-group');
    assert.equal(await page.isDisabled('#group-by-anchor'), true);
    assert.equal(await page.getAttribute('#group-by-episode', 'aria-pressed'), 'true');
    assert.equal(await page.locator('.group-view tbody tr').count(), group.length);
    await page.close();
  });

  it('renders hostile model and tool output as inert text', async () => {
    const page = await openReplay(browser, hostile);
    await page.click(`tr[data-id="${hostile[0].id}"]`);
    for (let i = 0; i < 8; i++) await page.keyboard.press('ArrowRight');
    for (const tab of ['#tab-io', '#tab-json', '#tab-reward', '#tab-metadata', '#tab-tokens']) await page.click(tab);
    await page.click('#view-tokens');
    await page.click('#view-episode');
    await page.keyboard.press('t');
    await page.click('#view-group');
    await page.click('#group-by-anchor');
    for (const summary of await page.locator('details.state-key summary').all()) await summary.click();
    assert.ok(((await page.textContent('.anchor-view')) ?? '').includes(hostile[0].turns[0].observation!));
    const app = page.locator('#app');
    assert.equal(await app.locator('script, img, a, iframe, object').count(), 0);
    assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined);
    assert.ok(((await app.textContent()) ?? '').includes('<script>window.__pwned = 1</script>'));
    await page.close();
  });

  it('restores the selected trajectory, step and tab after a reload', async () => {
    const page = await openReplay(browser, toolErrors);
    await page.click(`tr[data-id="${toolErrors[1].id}"]`);
    await page.keyboard.press('j');
    await page.keyboard.press('j');
    await page.click('#tab-reward');
    await page.reload();
    await load(page, toolErrors);
    assert.match(await position(page), /^step 3 \//);
    assert.match((await page.textContent('header .selected')) ?? '', new RegExp(toolErrors[1].id));
    assert.equal(await page.getAttribute('#tab-reward', 'aria-selected'), 'true');
    await page.close();
  });

  it('opens on the group view of a step when the Run Dashboard asks for one', async () => {
    const page = await openReplay(browser, []);
    const post = (message: object) => page.evaluate((m) => window.postMessage(m, '*'), message);
    const step = lookup[0].step;
    const first = [...lookup].sort((a, b) => a.group - b.group || a.sample - b.sample)[0];
    await post({ type: 'load', source: 'run-1', records: lookup, live: false, focusStep: step });
    await page.locator('.group-view').waitFor();
    assert.match(
      (await page.textContent('.group-view .toolbar')) ?? '',
      new RegExp(`^step ${step} · group ${first.group} `),
    );
    assert.equal(await page.getAttribute('#view-group', 'aria-selected'), 'true');
    await post({ type: 'load', source: 'run-1', records: lookup, live: false, focusStep: step + 100 }); // a step without trajectories
    await page.locator('.run-browser').waitFor();
    assert.equal(await page.locator('.run-browser tbody tr').count(), 0);
    // The step filter the click set is said in words, and one click shows every episode again.
    assert.equal(await page.textContent('#clear-filters'), `filtered by step ${step + 100}: show all`);
    await page.click('#clear-filters');
    assert.equal(await page.locator('.run-browser tbody tr').count(), lookup.length);
    assert.equal(await page.locator('#clear-filters').count(), 0);
    await page.close();
  });

  it('re-runs a tool call through the host and shows the new outcome beside the recorded one, with a diff', async () => {
    const page = await openReplay(browser, toolErrors);
    const record = toolErrors[0];
    await page.click(`tr[data-id="${record.id}"]`);
    await page.keyboard.press('t');
    await page.keyboard.press('t'); // the second call of turn 1: boom, which raised
    const boom = record.turns[0].tool_calls[1];
    assert.equal(boom.name, 'boom');
    await page.focus('#rerun-tool-call');
    await page.keyboard.press('Enter'); // keyboard reachable: a button in the inspector
    const posted = await page.evaluate(() =>
      (window as unknown as { __posted: Array<{ type: string }> }).__posted.filter((m) => m.type === 'rerunToolCall'),
    );
    assert.deepEqual(posted, [
      { type: 'rerunToolCall', runId: record.run_id, trajectoryId: record.id, turn: 0, call: 1, code: 'current' },
    ]);
    assert.match((await page.textContent('#rerun-tool-call')) ?? '', /Re-running/);
    assert.match((await page.textContent('#rerun-tool-call-snapshot')) ?? '', /Re-run with the run's code/);
    assert.equal(await page.isDisabled('#rerun-tool-call'), true, 'one re-run at a time per call');
    assert.equal(await page.isDisabled('#rerun-tool-call-snapshot'), true);

    const fixed = { status: 'ok', lines: ['first', '<b>not markup</b>'] };
    const address = { runId: record.run_id, trajectoryId: record.id, turn: 0, call: 1 };
    const answer = (code: string, result: unknown, latencyMs: number) => ({
      type: 'toolRerun',
      ...address,
      code,
      reply: {
        ok: true,
        result: {
          ...address,
          name: 'boom',
          arguments: {},
          timeoutS: 5,
          recorded: { result: null, error: boom.error, errorKind: boom.error_kind, latencyMs: boom.latency_ms },
          rerun: { result, error: null, errorKind: null, latencyMs },
          code,
        },
      },
    });
    await page.evaluate((m) => window.postMessage(m, '*'), answer('current', fixed, 12.5));
    await page.locator('.rerun-pair').waitFor();
    const recorded = (await page.textContent('.rerun-pair .recorded')) ?? '';
    const current = (await page.textContent('.rerun-pair .current')) ?? '';
    assert.match(recorded, new RegExp(`Recorded · ${boom.latency_ms.toFixed(1)} ms`));
    assert.ok(recorded.includes(`exception: ${boom.error}`), recorded);
    assert.match(current, /Current code · 12\.5 ms \(timeout 5 s\)/);
    assert.ok(current.includes(JSON.stringify(fixed, null, 2)), current);
    assert.match((await page.textContent('.rerun-verdict')) ?? '', /changed/);
    const removed = await page.locator('.diff-removed').allTextContents();
    const added = await page.locator('.diff-added').allTextContents();
    assert.deepEqual(removed, [`- exception: ${boom.error}`]);
    assert.ok(added.includes('+     "<b>not markup</b>"'), added.join(' | '));
    assert.equal(await page.locator('.rerun b, .rerun script').count(), 0, 'tool output is text, never HTML');
    assert.equal(await page.isDisabled('#rerun-tool-call'), false);
    await page.screenshot({ path: join(SCREENSHOTS, 'rerun-vscode-light.png') });

    await page.click('#rerun-tool-call-snapshot'); // the code the run recorded: its own outcome, headed so
    assert.match((await page.textContent('#rerun-tool-call-snapshot')) ?? '', /Re-running/);
    assert.equal(
      (
        await page.evaluate(() =>
          (window as unknown as { __posted: Array<{ type: string; code?: string }> }).__posted.filter(
            (m) => m.type === 'rerunToolCall',
          ),
        )
      ).at(-1)?.code,
      'snapshot',
    );
    await page.evaluate((m) => window.postMessage(m, '*'), answer('snapshot', 'as recorded', 3));
    await page.waitForFunction(() =>
      /The run's code · 3 ms/.test(document.querySelector('.rerun-pair .current')?.textContent ?? ''),
    );

    await page.keyboard.press('t'); // hang: the trainer refuses this one
    await page.click('#rerun-tool-call');
    await page.evaluate((m) => window.postMessage(m, '*'), {
      type: 'toolRerun',
      runId: record.run_id,
      trajectoryId: record.id,
      turn: 0,
      call: 2,
      code: 'current',
      reply: { ok: false, message: 'The trainer server refused: restart it with --allow-code' },
    });
    await page.locator('.rerun-error').waitFor();
    assert.match((await page.textContent('.rerun-error')) ?? '', /--allow-code/);
    for (let i = 0; i < 3; i++) await page.keyboard.press('t'); // echo, nope, then the call that did not parse
    assert.equal(await page.isDisabled('#rerun-tool-call'), true, 'an unparsed call has no arguments to run');
    await page.close();
  });

  it("an adapter's run (env.gym): a turn's valid actions as text, its act call with no re-run and no source", async () => {
    const [first] = toolErrors;
    const record = structuredClone(first);
    const valid = ['go east', '<b>open the door</b>', 'wait'];
    record.turns[0].valid_actions = valid;
    record.turns[0].tool_calls[0].name = 'act';
    const page = await openReplay(browser, []);
    await page.evaluate((m) => window.postMessage(m, '*'), {
      type: 'load',
      source: 'run-1',
      records: [record],
      live: false,
      episodeSource: 'gym',
    });
    await page.click(`tr[data-id="${record.id}"]`);
    await page.keyboard.press('ArrowRight'); // the first assistant turn
    assert.equal(await page.textContent('#valid-actions'), valid.join('\n'));
    assert.match(
      (await page.textContent('.valid-actions h4')) ?? '',
      /Valid actions \(3\), in the state this turn started from/,
    );
    assert.equal(await page.locator('.valid-actions b').count(), 0, 'valid actions are text, never HTML');
    await page.keyboard.press('t'); // the call of act
    assert.match((await page.textContent('.call-header')) ?? '', /^act/);
    assert.equal(await page.locator('.io button.link').count(), 0, "no source for the adapter's own act tool");
    assert.equal(await page.locator('#rerun-tool-call, #rerun-tool-call-snapshot').count(), 0);
    assert.match(
      (await page.textContent('#no-rerun')) ?? '',
      /^The tools of env\.gym are made at each episode's reset/,
    );
    assert.match((await page.textContent('.means h4')) ?? '', /What it means \(env\.gym\)/);
    await page.keyboard.press('t'); // boom: a tool of the same run, neither act nor re-runnable
    assert.equal(await page.locator('.io button.link').count(), 1);
    assert.equal(await page.locator('#rerun-tool-call').count(), 0);
    await page.close();
  });

  describe('at the default editor width (800px)', () => {
    const narrow = { width: 800, height: 700 };
    /** The tokens drawn past their view's right edge, or with their text cut short of their max-width. */
    const overflowing = (page: Page, view: string): Promise<string[]> =>
      page.locator(`${view} .token-viewport`).evaluate((viewport) => {
        const right = viewport.getBoundingClientRect().left + viewport.clientLeft + viewport.clientWidth;
        return [...viewport.querySelectorAll<HTMLElement>('.token[data-index]')]
          .filter(
            (t) =>
              t.getBoundingClientRect().right > right + 0.5 ||
              (t.scrollWidth > t.clientWidth && t.offsetWidth < parseFloat(getComputedStyle(t).maxWidth)),
          )
          .map((t) => `#${t.dataset.index} ${JSON.stringify(t.textContent)}`);
      });
    /** The token indices drawn, in the order they are laid out. */
    const drawnIndices = (page: Page, view: string): Promise<number[]> =>
      page
        .locator(`${view} .token[data-index]`)
        .evaluateAll((tokens) => tokens.map((t) => Number((t as HTMLElement).dataset.index)));

    it('wraps tokens at the width of the view instead of cutting them at its edge, and again when it is resized', async () => {
      const record = toolErrors[0];
      const page = await openReplay(browser, [record], 'vscode-light', narrow);
      await page.click(`tr[data-id="${record.id}"]`);
      await page.click('#view-tokens');
      await page.locator('.token[data-index]').first().waitFor();
      assert.deepEqual(await overflowing(page, '.token-view'), []);
      const shown = await drawnIndices(page, '.token-view');
      assert.deepEqual(
        shown,
        shown.map((_, i) => i),
        'every token from the first, each once, in order',
      );
      const rows = () => page.$eval('.token-spacer', (spacer) => spacer.getBoundingClientRect().height / 26);
      const rowsAt800 = await rows();
      await page.screenshot({ path: join(SCREENSHOTS, 'narrow-tokens-vscode-light.png') });

      await page.setViewportSize({ width: 1400, height: 700 });
      await page.waitForFunction(
        (n) => document.querySelector('.token-spacer')!.getBoundingClientRect().height / 26 < n,
        rowsAt800,
      );
      assert.deepEqual(await overflowing(page, '.token-view'), []);

      await page.setViewportSize(narrow);
      await page.click('#view-episode');
      await page.click('#tab-tokens'); // the inspector's, a third of the panel
      await page.locator('.inspector .token[data-index]').first().waitFor();
      assert.deepEqual(await overflowing(page, '.inspector'), []);
      await page.close();
    });

    it('shows the system prompt and every tool the model was shown, with its parameters, on the Prompt step', async () => {
      const record = toolErrors[0];
      const page = await openReplay(browser, [record], 'vscode-light', narrow);
      await page.click(`tr[data-id="${record.id}"]`);
      assert.equal(await page.textContent('li.step.current'), ' Prompt');
      const io = page.locator('.inspector .io.prompt');
      assert.equal(await io.locator('h4').first().textContent(), 'System prompt');
      assert.equal(await io.locator('pre').first().textContent(), record.prompt[0].content);
      assert.match((await page.textContent('#prompt-tools')) ?? '', /^Tools the model was shown \(3\)/);
      assert.deepEqual(await io.locator('.tool-card .tool-name').allTextContents(), ['boom', 'hang', 'echo']);
      const echo = io.locator('.tool-card', { hasText: 'echo' });
      assert.equal(await echo.locator('.tool-description').textContent(), 'returns its text');
      assert.deepEqual(await echo.locator('.tool-parameters li').allTextContents(), ['text string, required']);
      assert.equal(await page.textContent('.transcript .role-tools pre'), 'boom, hang, echo');
      await page.screenshot({ path: join(SCREENSHOTS, 'narrow-prompt-vscode-light.png') });
      await page.close();
    });

    it('keeps "what it means" readable: stacked under "what happened", its observation as wide as the pane', async () => {
      const record = toolErrors[0];
      const page = await openReplay(browser, [record], 'vscode-light', narrow);
      await page.click(`tr[data-id="${record.id}"]`);
      await page.keyboard.press('t');
      const box = async (selector: string) => (await page.locator(selector).boundingBox())!;
      const [happened, means, observation] = [
        await box('.pair .happened'),
        await box('.pair .means'),
        await box('.means dd pre'),
      ];
      assert.ok(means.width >= 240, `"what it means" is ${means.width}px wide`);
      assert.ok(means.y >= happened.y + happened.height, 'below "what happened", not squeezed beside it');
      assert.ok(observation.width >= means.width - 40, `its observation is ${observation.width}px wide`);
      await page.screenshot({ path: join(SCREENSHOTS, 'narrow-tool-call-vscode-light.png') });
      await page.setViewportSize({ width: 1600, height: 700 }); // side by side again where there is room
      assert.ok(Math.abs((await box('.pair .means')).y - (await box('.pair .happened')).y) < 1);
      await page.close();
    });

    it('says which advantage each view shows: the group table the mean over trained tokens, the tokens their own', async () => {
      const record = lookup[0];
      const trained = record.tokens.advantage.filter((_, i) => record.tokens.loss_mask[i] === 1) as number[];
      const mean = trained.reduce((sum, a) => sum + a, 0) / trained.length;
      assert.equal(formatNumber(mean), formatNumber(record.advantage), "the record's advantage is that mean");
      assert.ok(
        trained.some((a) => formatNumber(a) !== formatNumber(record.advantage)),
        'and its tokens show other values',
      );
      const page = await openReplay(browser, lookup, 'vscode-light', narrow);
      await page.click(`tr[data-id="${record.id}"]`);
      await page.click('#view-group');
      const header = page.locator('.group-view th', { hasText: 'mean advantage' });
      assert.match((await header.getAttribute('title')) ?? '', /mean of its trained tokens' advantages/);
      const column = await page.locator('.group-view thead th').allTextContents();
      const cell = page.locator(`.group-view tr[data-id="${record.id}"] td`).nth(column.indexOf('mean advantage'));
      assert.equal(await cell.textContent(), formatNumber(record.advantage));
      assert.deepEqual(await overflowingCells(page), [], 'the table fits the panel');
      await page.screenshot({ path: join(SCREENSHOTS, 'narrow-group-vscode-light.png') });
      await page.click('#view-tokens');
      assert.match(
        (await page.textContent('#token-summary')) ?? '',
        new RegExp(`mean advantage ${formatNumber(record.advantage)} over the trained tokens$`),
      );
      assert.deepEqual(await page.locator('.legend .swatch').allTextContents(), [
        'token advantage > 0',
        'token advantage < 0',
      ]);
      await page.close();
    });
  });

  for (const theme of ['vscode-light', 'vscode-dark', 'vscode-high-contrast'] as Theme[]) {
    it(`draws the run, an episode's errors, its tokens and a group's anchor states legibly in ${theme}, with screenshots`, async () => {
      const page = await openReplay(browser, toolErrors, theme);
      assert.deepEqual(
        await page.locator('tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-id'))),
        toolErrors.map((r) => r.id),
      );
      assert.ok((await contrast(page, 'body')) >= 4.5, 'body text against its background (WCAG AA)');
      await page.screenshot({ path: join(SCREENSHOTS, `runs-${theme}.png`) });
      await page.click(`tr[data-id="${toolErrors[0].id}"]`);
      await page.keyboard.press('t');
      await page.keyboard.press('e');
      const errors = await page.locator('.error-text').allTextContents();
      assert.ok(
        errors.some((text) => text.includes('kaput')),
        `the boom tool's error is shown: ${errors.join(' | ')}`,
      );
      const errorContrast = await contrast(page, '.error-text');
      assert.ok(errorContrast >= 4.5, `error text against its background: ${errorContrast.toFixed(2)} (WCAG AA: 4.5)`);
      await page.screenshot({ path: join(SCREENSHOTS, `episode-${theme}.png`) });
      await page.click('#view-tokens');
      await page.locator('.token[data-index]').first().waitFor();
      assert.equal(await page.locator('.token[data-index]').count(), toolErrors[0].tokens.ids.length);
      await page.screenshot({ path: join(SCREENSHOTS, `tokens-${theme}.png`) });
      await load(page, withStepFields(lookup));
      await page.click('#view-runs');
      await page.click(`tr[data-id="${lookup[0].id}"]`);
      await page.click('#view-group');
      await page.click('#group-by-anchor');
      await page.locator('details.state-key summary').first().click();
      const badgeContrast = await contrast(page, '.badge.singleton');
      assert.ok(
        badgeContrast >= 4.5,
        `size-1 badge against its background: ${badgeContrast.toFixed(2)} (WCAG AA: 4.5)`,
      );
      await page.screenshot({ path: join(SCREENSHOTS, `group-anchors-${theme}.png`) });
      await page.close();
    });
  }
});

/** The group table's cells drawn past the panel's right edge. */
async function overflowingCells(page: Page): Promise<string[]> {
  return page
    .locator('.group-view td')
    .evaluateAll((cells) =>
      cells
        .filter((c) => c.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)
        .map((c) => c.textContent ?? ''),
    );
}

/** WCAG contrast ratio of an element's text colour against the first opaque background at or above it. */
async function contrast(page: Page, selector: string): Promise<number> {
  const { color, backgrounds } = await page
    .locator(selector)
    .first()
    .evaluate((element) => {
      const found: string[] = [];
      for (let node: Element | null = element; node; node = node.parentElement) {
        found.push(getComputedStyle(node).backgroundColor);
      }
      return { color: getComputedStyle(element).color, backgrounds: found };
    });
  const rgba = (css: string): number[] => (css.match(/[\d.]+/g) ?? []).map(Number);
  const linear = (c: number): number => (c / 255 <= 0.03928 ? c / 255 / 12.92 : ((c / 255 + 0.055) / 1.055) ** 2.4);
  const luminance = ([r, g, b]: number[]): number => 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b);
  const background = backgrounds.map(rgba).find(([, , , alpha = 1]) => alpha > 0) ?? [255, 255, 255];
  const [lighter, darker] = [luminance(rgba(color)), luminance(background)].sort((x, y) => y - x);
  return (lighter + 0.05) / (darker + 0.05);
}
