import { strict as assert } from 'node:assert';
import type { Browser, Page } from 'playwright-core';
import type { TrajectoryRecord } from '../../protocol/webview-messages';
import { fixture, launch, openReplay } from './harness';

/** `count` records of a run: the fixture's first, renumbered as 8 episodes a step. */
function run(count: number, from = 0): TrajectoryRecord[] {
  const [base] = fixture('lookup');
  return Array.from({ length: count }, (_, k) => {
    const i = from + k;
    return { ...base, id: `${Math.floor(i / 8)}-0-${i % 8}`, step: Math.floor(i / 8) };
  });
}

const post = (page: Page, message: object) => page.evaluate((m) => window.postMessage(m, '*'), message);
const count = async (page: Page) => (await page.textContent('.count')) ?? '';

describe('replay panel following a live run, in Chromium', function () {
  this.timeout(120_000);
  let browser: Browser;
  before(async () => {
    browser = await launch();
  });
  after(async () => browser?.close());

  it("draws a fast run's appends at most once a second, every episode in the end", async () => {
    const page = await openReplay(browser, []);
    await post(page, { type: 'load', source: 'run-1', records: run(40), live: true, runStatus: 'running' });
    await page.locator('.live-badge').waitFor();
    const redraws = await page.evaluate(
      async (batches) => {
        let drawn = 0;
        new MutationObserver(() => drawn++).observe(document.getElementById('app')!, { childList: true });
        for (const records of batches) {
          window.postMessage({ type: 'append', records }, '*');
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        const end = Date.now() + 5000; // the last of them drawn within a second
        while (!document.querySelector('.count')?.textContent?.startsWith('100 of 100') && Date.now() < end)
          await new Promise((resolve) => setTimeout(resolve, 50));
        return drawn;
      },
      Array.from({ length: 30 }, (_, k) => run(2, 40 + 2 * k)),
    );
    assert.equal(await count(page), '100 of 100');
    // 30 appends in about 0.6 s (timers run late on a busy machine: at most one more)
    assert.ok(redraws >= 1 && redraws <= 2, `${redraws} redraws for 30 appends`);
    await post(page, { type: 'runStatus', live: false, runStatus: 'completed' }); // drawn at once
    await page.locator('.run-status-badge', { hasText: 'completed' }).waitFor({ timeout: 500 });
    await page.close();
  });

  it('lists a long run a page of 100 rows at a time', async () => {
    const page = await openReplay(browser, run(250));
    assert.equal(await page.locator('tbody tr').count(), 100);
    assert.equal(await count(page), '250 of 250');
    assert.equal((await page.textContent('#show-more'))?.trim(), 'show 100 more (150 not shown)');
    await page.click('#show-more');
    assert.equal(await page.locator('tbody tr').count(), 200);
    assert.equal((await page.textContent('#show-more'))?.trim(), 'show 50 more (50 not shown)');
    await page.click('#show-more');
    assert.equal(await page.locator('tbody tr').count(), 250);
    assert.equal(await page.locator('#show-more').count(), 0);
    await page.close();
  });
});
