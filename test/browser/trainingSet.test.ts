import { strict as assert } from 'node:assert';
import type { Browser, Page } from 'playwright-core';
import type { TrajectoryRecord } from '../../protocol/generated/trajectory';
import { fixture, launch, openReplay } from './harness';

describe("the replay's Add to Training Set in Chromium", function () {
  this.timeout(120_000);
  let browser: Browser;
  const lookup = fixture('lookup');
  before(async () => {
    browser = await launch();
  });
  after(async () => browser?.close());

  const posted = (page: Page) => page.evaluate(() => (window as unknown as { __posted: unknown[] }).__posted);

  it('asks the host to add an episode of the list, whole, without opening it', async () => {
    const record = lookup[3];
    const page = await openReplay(browser, lookup);
    await page.click(`tr[data-id="${record.id}"] button.add-to-set`);
    assert.deepEqual((await posted(page)).at(-1), { type: 'addToTrainingSet', records: [record], fromTurn: 0 });
    assert.equal(await page.locator('tbody tr').count(), lookup.length, 'still the list: the row was not opened');
    await page.close();
  });

  it("asks the host to add an episode from a turn of the episode view, that turn's index", async () => {
    const record = lookup.find((r) => r.turns.length > 1)!;
    const page = await openReplay(browser, lookup);
    await page.click(`tr[data-id="${record.id}"]`);
    await page.click('.step.kind-assistant >> nth=1');
    await page.click('#add-to-set-here');
    assert.deepEqual((await posted(page)).at(-1), { type: 'addToTrainingSet', records: [record], fromTurn: 1 });
    await page.close();
  });

  it('asks the host to add every sample of the group the group view shows', async () => {
    const record = lookup[0];
    const group = lookup.filter((r) => r.step === record.step && r.group === record.group);
    const page = await openReplay(browser, lookup);
    await page.click(`tr[data-id="${record.id}"]`);
    await page.click('#view-group');
    await page.click('#add-group-to-set');
    const last = (await posted(page)).at(-1) as { records: TrajectoryRecord[] };
    const byId = (a: TrajectoryRecord, b: TrajectoryRecord) => a.id.localeCompare(b.id);
    assert.deepEqual(
      { ...last, records: [...last.records].sort(byId) },
      { type: 'addToTrainingSet', records: [...group].sort(byId), fromTurn: 0 },
    );
    await page.close();
  });
});
