// Helpers shared by the extension-host tests (bundled into each test file).
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import * as vscode from 'vscode';
import { ENDED_RUN_STATUSES, type RunEvent, type RunStatus, type StatusEvent } from '../../protocol/generated/rpc';

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
export async function waitFor<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  what: string,
  ms = 30_000,
  everyMs = 200,
): Promise<T> {
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

/** The folder a local server keeps its runs in: the `agentRl.runsFolder` setting, relative to the workspace. */
export function runsFolder(): string {
  const root = workspaceFolder().uri.fsPath;
  const configured =
    vscode.workspace.getConfiguration('agentRl').get<string>('runsFolder')?.trim() || join('.agentrl', 'runs');
  return isAbsolute(configured) ? configured : join(root, configured);
}

/** The complete lines of a run's events.jsonl (a line being written is left for the next read). */
export function runEvents(runId: string): RunEvent[] {
  const file = join(runsFolder(), runId, 'events.jsonl');
  if (!existsSync(file)) return [];
  const text = readFileSync(file, 'utf8');
  return text
    .slice(0, text.lastIndexOf('\n') + 1)
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as RunEvent);
}

export function lastStatus(runId: string): StatusEvent | undefined {
  return runEvents(runId)
    .flatMap((e) => (e.type === 'status' ? [e.data] : []))
    .at(-1);
}

/** Waits until the run's event log ends in `want`; fails at once, with the run's message, on another final status. */
export async function waitForStatus(runId: string, want: RunStatus, ms: number): Promise<void> {
  await waitFor(
    () => {
      const status = lastStatus(runId);
      if (status && status.status !== want && ENDED_RUN_STATUSES.has(status.status)) {
        throw new Error(
          `run ${runId} ended ${status.status}, not ${want}: ${status.message ?? ''}\n${status.traceback ?? ''}`,
        );
      }
      return status?.status === want;
    },
    `run ${runId} to be ${want} (last status: ${lastStatus(runId)?.status ?? 'none'})`,
    ms,
    500,
  );
}
