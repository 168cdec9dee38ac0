// Helpers shared by the extension-host tests (bundled into each test file).
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';

export const EXTENSION_ID = 'agent-rl-studio.agent-rl-studio';

/** The extension under test, activated; its extensionPath is the repository root. */
export async function extension(): Promise<vscode.Extension<unknown>> {
  const ext = vscode.extensions.getExtension(EXTENSION_ID);
  if (!ext) throw new Error(`${EXTENSION_ID} is not installed in this extension host`);
  await ext.activate();
  return ext;
}

/** The one folder the runner opened. */
export function workspaceFolder(): vscode.WorkspaceFolder {
  const folders = vscode.workspace.workspaceFolders ?? [];
  if (folders.length !== 1) throw new Error(`expected one workspace folder, got ${folders.length}`);
  return folders[0];
}

/** Polls `check` until it returns a value other than undefined/false; fails with `what` after `ms`. */
export async function waitFor<T>(check: () => T | undefined | false | Promise<T | undefined | false>, what: string, ms = 30_000, everyMs = 200): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > end) throw new Error(`timed out after ${ms / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export function allTabs(): vscode.Tab[] {
  return vscode.window.tabGroups.all.flatMap((g) => g.tabs);
}

/** Asks the runner (test/e2e/exthost.mjs) for a screenshot of the workbench, test-results/e2e/exthost-NAME.png,
 * taken once `selector` shows (a CSS selector in the workbench page, or with `in: 'webview'` inside the active
 * webview's own page), and waits until it is written. The request travels as a console line, which the workbench
 * forwards to the runner. A no-op outside the runner. */
export async function screenshot(name: string, selector = '', where: 'page' | 'webview' = 'page'): Promise<void> {
  const dir = process.env.AGENTRL_EXTHOST_SHOTS;
  if (!dir) return;
  const file = join(dir, `exthost-${name}.png`);
  rmSync(file, { force: true });
  console.log(`agentrl-e2e:screenshot ${name} ${where} ${selector}`.trim());
  await waitFor(() => existsSync(file), `the runner's screenshot ${file}`, 40_000);
}
