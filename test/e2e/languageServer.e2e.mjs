// Run-config language support inside a real VS Code (code-server + Chromium, see /work/shared/vscode-e2e):
// open a broken *.agentrl.yaml, see its diagnostic in the Problems panel, fix it with the quick fix, and see the
// file fixed on disk and the problem gone. A scenario for the e2e harness: it gets the harness's page (a loaded
// workbench with `workspace` open and the packaged extension installed) and its helpers.
import fs from 'node:fs';
import path from 'node:path';

const FIXTURES = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', 'fixtures', 'run-configs');
const CONFIG = 'broken.agentrl.yaml';
const MESSAGE = "unknown key 'trian'; did you mean 'train'?";

async function waitFor(check, what, ms = 30000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what}`);
}

export async function languageServerScenario({ page, workspace, lap, runCommand, quickOpen }) {
  // The fixture's relative env.module / data.train must resolve inside the workspace too.
  for (const name of ['env.py', 'tasks.jsonl']) fs.copyFileSync(path.join(FIXTURES, name), path.join(workspace, name));
  const configPath = path.join(workspace, CONFIG);
  fs.copyFileSync(path.join(FIXTURES, 'unknown-key.agentrl.yaml'), configPath);

  await quickOpen(page, CONFIG);
  await page.locator('.monaco-editor .view-lines', { hasText: 'trian' }).first().waitFor({ timeout: 30000 });
  lap(`opened ${CONFIG}`);

  // The diagnostic, from the language server, in the Problems panel.
  await page.keyboard.press('Control+Shift+M');
  const problem = page.locator('.markers-panel .monaco-list-row', { hasText: MESSAGE }).first();
  await problem.waitFor({ timeout: 60000 });
  lap('Problems panel shows the unknown-key diagnostic');

  // Opening the problem selects its range in the editor; the quick fix there replaces the key.
  await problem.click();
  await page.keyboard.press('Enter');
  await page.locator('.monaco-editor.focused').first().waitFor({ timeout: 10000 });
  // The code actions arrive from the language server a moment after the selection: ask again until they do.
  const fix = page.locator('.action-widget .monaco-list-row', { hasText: "Change 'trian' to 'train'" }).first();
  for (let attempt = 1; ; attempt++) {
    await page.keyboard.press('Control+.');
    try {
      await fix.waitFor({ timeout: 5000 });
      break;
    } catch (e) {
      if (attempt === 4) throw e;
      await page.keyboard.press('Escape');
    }
  }
  await fix.click();
  await page.keyboard.press('Control+S');
  await waitFor(
    () => /^train:/m.test(fs.readFileSync(configPath, 'utf8')) && !/trian/.test(fs.readFileSync(configPath, 'utf8')),
    'the fixed key on disk',
  );
  await page
    .locator('.markers-panel .monaco-list-row', { hasText: MESSAGE })
    .waitFor({ state: 'detached', timeout: 30000 });
  lap('quick fix applied: the key is fixed on disk and the problem is gone');

  // The restart command brings the server back, and it diagnoses the open config again once it changes on disk.
  await runCommand(page, 'Agent RL: Restart Run-Config Language Server');
  fs.copyFileSync(path.join(FIXTURES, 'bad-enum.agentrl.yaml'), configPath);
  await page
    .locator('.markers-panel .monaco-list-row', { hasText: '(did you mean "grpo"?)' })
    .first()
    .waitFor({ timeout: 60000 });
  lap('after a restart, the server diagnoses the config again');
}
