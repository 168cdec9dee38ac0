import { strict as assert } from 'node:assert';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import type { DashboardEvent } from '../../protocol/dashboard-messages';
import type { CodeLeftOut, CodeManifest } from '../../protocol/generated/rpc';
import { chartSpecs } from '../../webview/dashboard/metricGroups';
import { cspViolations, drawn, launch, openDashboard, runFixture, SCREENSHOTS, type Theme } from './harness';

type Posted = { __posted: Array<{ type: string; runId?: string; step?: number }> };
const posted = (page: Page) => page.evaluate(() => (window as unknown as Posted).__posted);
const lastMetrics = (events: DashboardEvent[]) =>
  events.filter((e) => e.type === 'metrics').at(-1)!.data as { step: number; metrics: Record<string, number> };
const drawCount = (page: Page) => page.evaluate(() => performance.getEntriesByName('dashboard-drawn').length);

describe('Run Dashboard in Chromium', function () {
  this.timeout(120_000);
  let browser: Browser;
  const high = runFixture('lookup-lr-high');
  const low = runFixture('lookup-lr-low');

  before(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    browser = await launch();
  });
  after(async () => browser?.close());

  it('draws one chart per metric group and unit, one series per metric and run, with the latest values as text', async () => {
    const page = await openDashboard(browser, [high, low]);
    const names = new Set([
      ...Object.keys(lastMetrics(high.events).metrics),
      ...Object.keys(lastMetrics(low.events).metrics),
    ]);
    const specs = chartSpecs(names);
    // every metric of both runs is a series: in the uPlot legend and in the text alternative
    const seriesCount =
      Object.keys(lastMetrics(high.events).metrics).length + Object.keys(lastMetrics(low.events).metrics).length;
    // the second run's events may still be folding in when the first chart appears (a loaded machine: CI saw 59 of 83)
    await page.waitForFunction((n) => document.querySelectorAll('table.latest tbody tr').length >= n, seriesCount);
    // and the charts redrawn with them: a chart's legend follows its table a frame later (a loaded CI again saw 59)
    await page.waitForFunction(
      (n) => document.querySelectorAll('.u-legend .u-series').length >= n,
      seriesCount + specs.length,
    );
    assert.equal(await page.locator('section.chart').count(), specs.length);
    assert.equal(await page.locator('section.chart canvas').count(), specs.length);
    assert.deepEqual(
      await page.locator('section.group').evaluateAll((sections) => sections.map((s) => s.getAttribute('data-group'))),
      ['reward', 'actor', 'loss', 'adv', 'tool', 'health', 'perf', 'other'],
    );
    assert.equal(await page.locator('table.latest tbody tr').count(), seriesCount);
    assert.equal(await page.locator('.u-legend .u-series').count(), seriesCount + specs.length); // + each chart's x
    // per-component rewards and per-tool failure rates are series of their own
    const reward = page.locator('section.chart[data-chart="reward"] table.latest');
    for (const name of ['reward/answered', 'reward/looked_up', 'reward/mean'])
      assert.equal(await reward.locator(`tr[data-series="${name} · lookup-lr-high"]`).count(), 1);
    assert.equal(
      await page
        .locator(
          'section.chart[data-chart="tool:fraction"] tr[data-series="tools/(unparsed)/failure_rate · lookup-lr-low"]',
        )
        .count(),
      1,
    );
    // the latest values are the last metrics event's
    const last = lastMetrics(high.events);
    const row = reward.locator('tr[data-series="reward/mean · lookup-lr-high"] td');
    assert.deepEqual(await row.allTextContents(), [
      'lookup-lr-high',
      String(last.step),
      last.metrics['reward/mean'].toFixed(4),
    ]);
    assert.match(
      (await page.locator('.run-legend').textContent()) ?? '',
      /lookup-lr-high completed · step 12\/12.*lookup-lr-low completed · step 12\/12/,
    );
    await page.close();
  });

  it('lists the health alerts, newest first, each opening the replay at its step', async () => {
    const page = await openDashboard(browser, [high, low]);
    const alerts = page.locator('li.alert');
    const expected = high.events.filter((e) => e.type === 'health');
    assert.equal(await alerts.count(), expected.length);
    assert.deepEqual(
      (await alerts.evaluateAll((items) => items.map((i) => i.getAttribute('data-code')))).sort(),
      expected.map((e) => e.data.code as string).sort(),
    );
    assert.match((await alerts.first().textContent()) ?? '', /lookup-lr-high · step 11 · .*Fix: /);
    await alerts.first().locator('button.link').click();
    assert.deepEqual((await posted(page)).at(-1), { type: 'openReplay', runId: 'lookup-lr-high', step: 11 });
    await page.close();
  });

  it('shows alerts of codes it does not know, with severity and trajectories, as text', async () => {
    const hostile = '<img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script>';
    const unknown: DashboardEvent = {
      seq: 10_000,
      time: 2e9,
      type: 'health',
      data: {
        code: 'reward_hacking',
        resolved: false,
        step: 3,
        since_step: 2,
        message: hostile,
        fix: hostile,
        metrics: {},
        severity: 'error',
        trajectory_ids: ['3-0-0', '3-0-1'],
      },
    };
    const page = await openDashboard(browser, [{ run: high.run, events: [...high.events, unknown] }]);
    const item = page.locator('li.alert[data-code="reward_hacking"]');
    assert.match((await item.textContent()) ?? '', /step 3 · reward_hacking \(error\) · 2 trajectories/);
    assert.equal(await item.locator('.alert-message').textContent(), hostile);
    assert.equal(await item.locator('img, script').count(), 0);
    assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined);
    assert.equal(await page.locator('li.alert.severity-error .codicon-error').count(), 1);
    await page.close();
  });

  it('posts the open-replay message with the step of the point clicked, and of the point reached by keyboard', async () => {
    const page = await openDashboard(browser, [high]);
    const over = page.locator('section.chart[data-chart="reward"] .u-over');
    const box = (await over.boundingBox())!;
    const steps = lastMetrics(high.events).step; // the x axis runs from step 1 to the last step
    await over.click({ position: { x: ((5 - 1) / (steps - 1)) * box.width, y: box.height / 2 } });
    assert.deepEqual((await posted(page)).at(-1), { type: 'openReplay', runId: 'lookup-lr-high', step: 5 });
    const plot = page.locator('section.chart[data-chart="reward"] .plot');
    await plot.focus();
    for (const key of ['Home', 'ArrowRight', 'ArrowRight', 'Enter']) await page.keyboard.press(key);
    assert.deepEqual((await posted(page)).at(-1), { type: 'openReplay', runId: 'lookup-lr-high', step: 3 });
    await page.close();
  });

  it('grows as a live run trains: events in pieces, repeated ones ignored', async () => {
    const metricsAt = high.events.findIndex((e) => e.type === 'metrics' && e.data.step === 6);
    const page = await openDashboard(browser, [{ run: high.run, events: high.events.slice(0, metricsAt + 1) }]);
    const latestStep = () =>
      page.locator('section.chart[data-chart="reward"] tr[data-series="reward/mean"] td').nth(1).textContent();
    assert.equal(await latestStep(), '6');
    const before = await drawCount(page);
    await page.evaluate((events) => {
      window.postMessage({ type: 'events', runId: 'lookup-lr-high', events: events.slice(0, 40) }, '*');
      window.postMessage({ type: 'events', runId: 'lookup-lr-high', events }, '*'); // the history again, as after a reload
    }, high.events);
    await drawn(page, before + 1);
    assert.equal(await latestStep(), String(lastMetrics(high.events).step));
    assert.equal(await page.locator('li.alert').count(), high.events.filter((e) => e.type === 'health').length);
    await page.close();
  });

  it('smooths, switches to wall-clock, zooms by keyboard, and shows the config differences on demand', async () => {
    const page = await openDashboard(browser, [high, low]);
    const values = () => page.locator('section.chart[data-chart="reward"] .u-legend').textContent();
    assert.equal(await page.locator('#config-diff table').count(), 0);
    await page.click('#toggle-config-diff');
    await page.locator('#config-diff table').waitFor();
    const diff = page.locator('#config-diff table[data-run="lookup-lr-low"] tbody tr td:first-child');
    assert.deepEqual(await diff.allTextContents(), ['rollout.group_size', 'train.batch_size', 'train.lr']);
    assert.equal(await page.getAttribute('#toggle-config-diff', 'aria-expanded'), 'true');
    const plot = page.locator('section.chart[data-chart="reward"] .plot');
    await plot.focus();
    await page.keyboard.press('End');
    const raw = await values();
    const before = await drawCount(page);
    await page.locator('#smoothing').fill('0.9');
    await drawn(page, before + 1);
    await plot.focus();
    await page.keyboard.press('End');
    assert.notEqual(await values(), raw); // the legend reads the smoothed series at the cursor
    assert.equal(await page.locator('#smoothing-value').textContent(), '0.90');
    await page.selectOption('#x-axis', 'time');
    const range = page.locator('section.chart[data-chart="reward"] .x-range');
    await page.waitForFunction(() =>
      /^seconds [0-9.]+ to [0-9.]+ shown$/.test(
        document.querySelector('section.chart[data-chart="reward"] .x-range')?.textContent ?? '',
      ),
    );
    await page.selectOption('#x-axis', 'step');
    await page.waitForFunction(
      () =>
        document.querySelector('section.chart[data-chart="reward"] .x-range')?.textContent === 'steps 1 to 12 shown',
    );
    await plot.focus();
    await page.keyboard.press('End');
    await page.keyboard.press('+'); // zoom in around the cursor: half the steps, up to the last
    assert.equal(await range.textContent(), 'steps 6.5 to 12 shown');
    await page.keyboard.press('0');
    assert.equal(await range.textContent(), 'steps 1 to 12 shown');
    await page.close();
  });

  it("shows each run's code: versions, files with short hashes, what differs from the first, its diff on a click", async () => {
    const versions = { python: '3.11.7', agentrl: '0.1.0', torch: '2.13.0', transformers: '5.19.0', vllm: null };
    const manifest = (files: Array<[string, string]>, left_out: CodeLeftOut[] = []): CodeManifest => ({
      code: {
        recorded_at: '2026-11-26T10:00:00+00:00',
        root: '/home/me/lookup',
        files: files.map(([path, sha]) => ({ path, sha256: sha.repeat(64), size: 100 })),
        left_out,
        versions,
        platform: 'Linux-6.1.0-x86_64',
      },
      limits: { file_bytes: 1 << 20, total_bytes: 10 << 20 },
      resumes: [],
    });
    const markup = '<b>bold</b>.py';
    const page = await openDashboard(browser, [
      {
        ...high,
        run: {
          ...high.run,
          code: manifest([
            ['env.py', 'a'],
            ['tools.py', 'b'],
            [markup, 'c'],
          ]),
        },
      },
      {
        ...low,
        run: {
          ...low.run,
          code: manifest(
            [
              ['env.py', 'a'],
              ['tools.py', 'd'],
            ],
            [{ path: 'corpus.jsonl', size: 5 << 20, reason: 'over 1,048,576 bytes, the cap per file' }],
          ),
        },
      },
    ]);
    const summaries = await page.locator('details.code-run summary').allTextContents();
    assert.deepEqual(summaries, [
      'lookup-lr-high: 3 files · python 3.11.7 · agentrl 0.1.0 · torch 2.13.0 · transformers 5.19.0 · vllm –',
      'lookup-lr-low: 2 files (2 differ from lookup-lr-high) · python 3.11.7 · agentrl 0.1.0 · torch 2.13.0 · ' +
        'transformers 5.19.0 · vllm –',
    ]);
    const second = page.locator('details.code-run[data-run="lookup-lr-low"]');
    await second.locator('summary').click();
    assert.deepEqual(
      await second
        .locator('tbody tr')
        .evaluateAll((rows) => rows.map((r) => [...r.children].map((c) => c.textContent))),
      [
        ['env.py', '100', 'aaaaaaaaaa', 'same'],
        ['tools.py', '100', 'dddddddddd', 'differs from lookup-lr-high'],
        [markup, '', '', 'only in lookup-lr-high'],
      ],
    );
    assert.equal(await second.locator('td.hash').first().getAttribute('title'), 'a'.repeat(64));
    assert.match(
      (await second.locator('.code-left-out').textContent()) ?? '',
      /corpus\.jsonl: left out, over 1,048,576/,
    );
    assert.equal(await page.locator('.code-section b').count(), 0, 'a path is text, never markup');
    await page.locator('.code-section').screenshot({ path: join(SCREENSHOTS, 'dashboard-code.png') });
    await second.locator('button.compare-code').click();
    assert.deepEqual((await posted(page)).at(-1), {
      type: 'compareCode',
      runId: 'lookup-lr-high',
      otherRunId: 'lookup-lr-low',
    });
    await page.close();
  });

  for (const theme of ['vscode-light', 'vscode-dark', 'vscode-high-contrast'] as Theme[]) {
    it(`renders in ${theme} with the theme's colours and no CSP violation (screenshot)`, async () => {
      const dashboard = await openDashboard(browser, [high, low], theme);
      await dashboard.click('#toggle-config-diff');
      await dashboard.locator('section.chart[data-chart="reward"] .plot').focus();
      await dashboard.keyboard.press('End');
      await dashboard.screenshot({ path: join(SCREENSHOTS, `dashboard-${theme}.png`), fullPage: false });
      const background = await dashboard.evaluate(() => getComputedStyle(document.body).backgroundColor);
      assert.equal(
        background,
        theme === 'vscode-light' ? 'rgb(255, 255, 255)' : theme === 'vscode-dark' ? 'rgb(31, 31, 31)' : 'rgb(0, 0, 0)',
      );
      assert.deepEqual(cspViolations(dashboard), []);
      await dashboard.close();
    });
  }
});
