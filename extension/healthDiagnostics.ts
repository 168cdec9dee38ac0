// A run's health alerts in the Problems panel, on the workspace run config the run was started from (the one whose
// `name` the run has), at the key the alert's fix names, with a quick fix that opens that step's episodes in the
// replay. Kept current from the event stream: an alert that clears leaves the panel.
import { parse } from 'yaml';
import * as vscode from 'vscode';
import { Commands } from './commands';
import { healthProblems } from './healthProblems';
import type { Ctx } from './ctx';
import { RUN_CONFIG_GLOB } from './settings';

const SOURCE = 'Agent RL health';

interface Shown {
  runId: string;
  step: number;
  code: string;
  line: number;
}

export function registerHealthDiagnostics(ctx: Ctx): vscode.Disposable {
  const { connection, log } = ctx;
  const collection = vscode.languages.createDiagnosticCollection('agentRl.health');
  // config -> run -> its problems: a config trained several times shows each run's alerts in force
  const byConfig = new Map<string, Map<string, { diagnostics: vscode.Diagnostic[]; shown: Shown[] }>>();

  async function configOf(runName: string): Promise<vscode.Uri | undefined> {
    for (const uri of await ctx.settings.findRunConfigs()) {
      const text = new TextDecoder().decode(await vscode.workspace.fs.readFile(uri));
      if ((parse(text) as { name?: unknown } | null)?.name === runName) return uri;
    }
    return undefined;
  }

  async function update(runId: string): Promise<void> {
    const info = connection.model.run(runId);
    const config = info && (await configOf(info.name));
    if (!config) return;
    const document = await vscode.workspace.openTextDocument(config);
    const problems = healthProblems(connection.model.healthAlerts(runId), document.getText());
    const diagnostics = problems.map((problem) => {
      const range = new vscode.Range(document.positionAt(problem.start), document.positionAt(problem.end));
      const diagnostic = new vscode.Diagnostic(
        range,
        `${info.name}: ${problem.message}`,
        problem.severity === 'error' ? vscode.DiagnosticSeverity.Error : vscode.DiagnosticSeverity.Warning,
      );
      diagnostic.source = SOURCE;
      diagnostic.code = problem.code;
      return diagnostic;
    });
    const runs = byConfig.get(config.toString()) ?? new Map();
    runs.set(runId, {
      diagnostics,
      shown: problems.map((p, i) => ({ runId, step: p.step, code: p.code, line: diagnostics[i].range.start.line })),
    });
    byConfig.set(config.toString(), runs);
    collection.set(
      config,
      [...runs.values()].flatMap((r) => r.diagnostics),
    );
  }

  const quickFixes: vscode.CodeActionProvider = {
    provideCodeActions(document, _range, context) {
      const shown = [...(byConfig.get(document.uri.toString())?.values() ?? [])].flatMap((r) => r.shown);
      return context.diagnostics
        .filter((d) => d.source === SOURCE)
        .flatMap((diagnostic) => {
          const match = shown.find((s) => s.code === diagnostic.code && s.line === diagnostic.range.start.line);
          if (!match) return [];
          const action = new vscode.CodeAction(
            `Open step ${match.step}'s episodes in the replay`,
            vscode.CodeActionKind.QuickFix,
          );
          action.command = {
            title: action.title,
            command: Commands.openReplay,
            arguments: [{ runId: match.runId, step: match.step }],
          };
          action.diagnostics = [diagnostic];
          return [action];
        });
    },
  };

  return vscode.Disposable.from(
    collection,
    vscode.languages.registerCodeActionsProvider({ pattern: RUN_CONFIG_GLOB }, quickFixes, {
      providedCodeActionKinds: [vscode.CodeActionKind.QuickFix],
    }),
    connection.onRunEvent((event) => {
      if (event.type === 'health')
        update(event.runId).catch((err) => log.warn(`health problems for ${event.runId}: ${err}`));
    }),
  );
}
