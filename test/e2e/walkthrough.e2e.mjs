// The Get Started walkthrough as VS Code renders it from package.json. First, before every other scenario, it finds
// a newcomer by itself: the window opened on an empty folder, the extension installed before the window opened, and
// VS Code's opening of walkthroughs on install left on (run.sh's UI profile), it comes to the front without a click.
// Then, opened from the palette, its steps listed in order (Connect a trainer, not Install the trainer: this
// profile's Python has agentrl), a step's markdown and picture.
import fs from 'node:fs';
import path from 'node:path';

const STEPS = [
  'Connect a trainer',
  'Write an environment',
  'Try it',
  'Train it',
  'Watch its metrics',
  'Replay what it did',
];

/** The walkthrough in front in the empty workspace, then closed for the scenarios after. */
export async function walkthroughFindsAnEmptyFolderScenario({ page, workspace, lap, runCommand }) {
  const there = fs.readdirSync(workspace);
  if (there.length) throw new Error(`the workspace is not empty: ${there.join(', ')}`);
  const tab = page.locator('.tab.active', { hasText: /Walkthrough: .*Agent RL|Welcome/ });
  await tab.waitFor({ timeout: 60000 });
  const titles = page.locator('.gettingStartedContainer .getting-started-step .step-title');
  await titles
    .filter({ hasText: /^Connect a trainer$|^Install the trainer$/ })
    .first()
    .waitFor({ timeout: 30000 });
  lap(
    `in an empty folder the walkthrough opened by itself: "${(await tab.textContent())?.trim()}", first step "${(
      await titles.first().textContent()
    )?.trim()}"`,
  );
  await page.screenshot({ path: path.join('test-results', 'e2e', 'walkthrough-in-an-empty-folder.png') });
  await runCommand(page, 'View: Close All Editors');
  await tab.waitFor({ state: 'detached', timeout: 10000 });
}
walkthroughFindsAnEmptyFolderScenario.first = true; // the harness runs it before the others: it needs the fresh window

export async function walkthroughScenario({ page, runCommand }) {
  await runCommand(page, 'Welcome: Open Walkthrough...');
  const input = page.locator('.quick-input-widget input');
  await input.fill('Get Started with Agent RL');
  await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Get Started with Agent RL' }).first().waitFor();
  await page.keyboard.press('Enter');
  const container = page.locator('.gettingStartedContainer');
  const titles = container.locator('.getting-started-step .step-title');
  await titles.first().waitFor({ state: 'visible', timeout: 30000 });
  const shown = (await titles.allInnerTexts()).map((t) => t.trim()).filter(Boolean);
  if (JSON.stringify(shown) !== JSON.stringify(STEPS))
    throw new Error(`the walkthrough's steps: ${JSON.stringify(shown)}`);
  // A step's markdown and its picture, in the media webview beside the steps: the first step's first (a click on
  // another step while that webview still loaded only highlighted the step, and left the media blank), then the Try
  // step's.
  const media = page.frameLocator('.getting-started-media iframe.webview').frameLocator('iframe#active-frame');
  await media.locator('h1', { hasText: 'Connect a trainer' }).waitFor({ state: 'visible', timeout: 30000 });
  const tryStep = container.locator('.getting-started-step', {
    has: page.locator('.step-title', { hasText: /^Try it$/ }),
  });
  await tryStep.click();
  await container.locator('.getting-started-step.expanded', { hasText: 'Try it' }).waitFor({ timeout: 10000 });
  await media.locator('h1', { hasText: 'Try it before training' }).waitFor({ state: 'visible', timeout: 30000 });
  const picture = media.locator('img[alt^="A Try run"]');
  await picture.waitFor({ state: 'visible', timeout: 30000 });
  if (!(await picture.evaluate((img) => img.complete && img.naturalWidth > 0)))
    throw new Error("the Try step's picture did not load");
}
