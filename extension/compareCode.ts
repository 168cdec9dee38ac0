// Compare Code: the code two runs trained with, file by file, in VS Code's multi-file diff editor (`vscode.changes`).
// Each side is a document of the `agentrl-code` scheme, `agentrl-code:/RUN_ID/PATH`, whose text this provider reads
// from the trainer (`run/codeFile`: the run folder's code/ snapshot); a file the run's code.json does not list is
// empty, so a file only one run has shows against nothing. Which files differ comes from the two manifests' hashes
// (protocol/code-changes.ts); only those are opened.
import * as vscode from 'vscode';
import { codeChanges } from '../protocol/code-changes';
import type { CodeManifest, RunCodeFileResult } from '../protocol/generated/rpc';
import { Commands } from './commands';
import { counted } from './counted';
import { registerCommands, type Ctx } from './ctx';
import { pickRun, type RunTarget } from './runCommands';

export const CODE_SCHEME = 'agentrl-code';

export const noCodeMessage = (runName: string): string =>
  `run ${runName} recorded no code: it started before runs recorded the code they trained with`;
export const sameCodeMessage = (first: string, second: string, files: number): string =>
  `Agent RL: ${first} and ${second} trained with the same code (${counted(files, 'file')}, ` +
  'the same SHA-256 each); their versions are on the Run Dashboard.';

/** The document of `path` in run `runId`'s code. */
export function codeUri(runId: string, path: string): vscode.Uri {
  return vscode.Uri.from({ scheme: CODE_SCHEME, path: `/${runId}/${path}` });
}

/** What a document of a file that is not UTF-8 text shows. */
function binaryText(file: RunCodeFileResult): string {
  return `(${file.path} is not UTF-8 text: ${file.size} bytes, SHA-256 ${file.sha256})\n`;
}

/** The runs' code as the trainer gives it: each run's manifest asked once (a run's first snapshot never changes),
 *  asked again after the connection changes; each file read when its document opens. */
export class RunCodeDocuments implements vscode.TextDocumentContentProvider {
  private readonly manifests = new Map<string, Promise<CodeManifest>>();

  constructor(private readonly ctx: Ctx) {}

  forget(): void {
    this.manifests.clear();
  }

  manifest(runId: string): Promise<CodeManifest> {
    let found = this.manifests.get(runId);
    if (!found) {
      found = this.ctx.connection.request('run/code', { runId }).then(({ manifest }) => {
        if (!manifest) throw new Error(noCodeMessage(this.ctx.connection.model.runName(runId)));
        return manifest;
      });
      found.catch(() => this.manifests.delete(runId)); // asked again next time: the trainer may answer then
      this.manifests.set(runId, found);
    }
    return found;
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const [, runId, ...parts] = uri.path.split('/');
    const path = parts.join('/');
    const manifest = await this.manifest(runId);
    if (!manifest.code.files.some((file) => file.path === path)) return '';
    const file = await this.ctx.connection.request('run/codeFile', { runId, path });
    return file.text ?? binaryText(file);
  }
}

/** Two runs: the row's and another selected with it, else the one the user picks; both picked from the palette. */
async function pickTwoRuns(ctx: Ctx, target?: RunTarget, selected?: RunTarget[]): Promise<string[] | undefined> {
  const title = 'Compare Code';
  const first = await pickRun(ctx, target, title, () => true);
  if (!first) return undefined;
  const withIt = selected?.map((row) => row.runId).find((runId) => runId !== first);
  const second = withIt ?? (await pickRun(ctx, undefined, `${title}: compare with`, (runId) => runId !== first));
  return second ? [first, second] : undefined;
}

/** Opens the diff of two runs' code; returns the files that differ (none: says so instead). */
export const compareCode =
  (ctx: Ctx, documents: RunCodeDocuments) =>
  async (target?: RunTarget, selected?: RunTarget[]): Promise<{ runIds: string[]; changed: string[] } | undefined> => {
    const runIds = await pickTwoRuns(ctx, target, selected);
    if (!runIds) return undefined;
    const [base, other] = await Promise.all(runIds.map((runId) => documents.manifest(runId)));
    const [baseName, otherName] = runIds.map((runId) => ctx.connection.model.runName(runId));
    const changes = codeChanges(base.code, other.code);
    if (!changes.length) {
      void vscode.window.showInformationMessage(sameCodeMessage(baseName, otherName, base.code.files.length));
      return { runIds, changed: [] };
    }
    await vscode.commands.executeCommand(
      'vscode.changes',
      `Code: ${baseName} ↔ ${otherName}`,
      changes.map(({ path }) => [codeUri(runIds[1], path), codeUri(runIds[0], path), codeUri(runIds[1], path)]),
    );
    return { runIds, changed: changes.map(({ path }) => path) };
  };

export function registerCompareCode(ctx: Ctx): vscode.Disposable {
  const documents = new RunCodeDocuments(ctx);
  return vscode.Disposable.from(
    vscode.workspace.registerTextDocumentContentProvider(CODE_SCHEME, documents),
    ctx.connection.onDidChangeState(() => documents.forget()),
    registerCommands(ctx, {
      [Commands.compareCode]: { title: 'Compare Code', make: (ctx) => compareCode(ctx, documents) },
    }),
  );
}
