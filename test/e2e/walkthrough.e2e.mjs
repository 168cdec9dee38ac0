// The Get Started walkthrough as VS Code renders it from package.json: opened from the palette (run.sh's profile
// keeps it from opening by itself), its steps listed in order (Connect a trainer, not Install the trainer: this
// profile's Python has agentrl, and the extension is not even active yet), a step's markdown and picture.
const STEPS = [
  'Connect a trainer',
  'Write an environment',
  'Try it',
  'Train it',
  'Watch its metrics',
  'Replay what it did',
];

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
