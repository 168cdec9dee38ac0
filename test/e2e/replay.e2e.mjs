// A trajectories file opened from the Explorer shows in the replay panel (the default editor for
// *.trajectories.jsonl): the webview lists every episode, and a click steps into one.
import fs from 'node:fs';
import path from 'node:path';

const REPO = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
const FILE = 'lookup.trajectories.jsonl';

export async function replayScenario({ page, workspace, lap, openFromExplorer }) {
  const source = path.join(REPO, 'protocol', 'examples', 'trajectories', FILE);
  const records = fs
    .readFileSync(source, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  fs.copyFileSync(source, path.join(workspace, FILE));

  await openFromExplorer(page, FILE); // its default editor is the replay panel

  // Webviews are nested iframes: the workbench's iframe (hidden ones may linger), then the page's own #active-frame.
  const view = page.locator('iframe.webview.ready:visible').first().contentFrame().frameLocator('#active-frame');
  const rows = view.locator('tbody tr');
  await rows.nth(records.length - 1).waitFor({ timeout: 60000 });
  const count = await rows.count();
  if (count !== records.length)
    throw new Error(`the run browser lists ${count} episodes, the file has ${records.length}`);
  lap(`replay panel lists all ${count} episodes of ${FILE}`);

  await view.locator(`tr[data-id="${records[0].id}"]`).click();
  const position = view.locator('#position');
  await position.waitFor({ timeout: 15000 });
  const text = await position.textContent();
  if (!/^step 1 \/ \d+$/.test(text ?? ''))
    throw new Error(`after opening an episode the position reads ${JSON.stringify(text)}`);
  await view.locator('body').press('ArrowRight');
  await view.locator('#position', { hasText: /^step 2 \// }).waitFor({ timeout: 10000 });
  lap('an episode opens at step 1 and the arrow key steps to step 2');
}
