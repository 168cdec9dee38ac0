// Try Environment: the env checked first (its scripted episode, no model), then a few episodes on the base model with
// no updates, their Tool failures in the Problems panel at each Tool's definition, a summary, and the replay.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import * as vscode from 'vscode';
import { Commands, markSucceeded } from './commands';
import { RUN_ANYWAY, SHOW_PROBLEMS } from './configProblems';
import { showError, type Ctx } from './ctx';
import { readRunConfig } from './runConfig';
import {
  envCheckProblems,
  howTheModelActs,
  toolProblems,
  trySummary,
  type ModelActs,
  type ProblemAt,
} from './toolProblems';
import { prepareRun, startRun, withRunActivity, type PreparedRun } from './runStarting';
import { counted } from './counted';

// The server gives an env check 300 s (ENV_CHECK_TIMEOUT_S); its answer comes a little after.
const ENV_CHECK_TIMEOUT_MS = 320_000;

/** Try Environment: the env checked first (its scripted episode, no model: a Tool that raises is in the Problems
 *  panel before any episode is sampled), then a few episodes with the base model and no updates, their replay, and
 *  the Tools that failed in `problems`; returns the try run's id. */
export const tryEnvironment =
  (ctx: Ctx, problems: vscode.DiagnosticCollection) =>
  async (target?: vscode.Uri | string): Promise<string | undefined> => {
    const prepared = await prepareRun(ctx, target, 'try');
    if (!prepared) return undefined;
    const { configUri } = prepared;
    if (!(await checkEnvironment(ctx, prepared, problems))) return undefined;
    const run = await startRun(ctx, prepared, 'try');
    const { runId } = run;
    const status = await withRunActivity(
      ctx,
      runId,
      {
        title: `Agent RL: trying ${vscode.workspace.asRelativePath(configUri)}`,
        first: `${counted(ctx.settings.tryEpisodes(), 'episode')} with the base model, no updates`,
        cancellable: true,
      },
      async (cancel) => {
        const cancelled = new Promise<undefined>((resolve) =>
          cancel.onCancellationRequested(() => {
            void ctx.connection.request('run/stop', { runId, mode: 'immediate' }).catch(() => undefined);
            resolve(undefined);
          }),
        );
        return Promise.race([run.ended, cancelled]);
      },
    );
    if (!status) return runId;
    const errors = await reportToolErrors(ctx, runId, configUri.fsPath, problems);
    const info = ctx.connection.model.run(runId);
    const episodes = ctx.connection.model.trajectories(runId);
    const failedCalls = episodes.reduce((sum, episode) => sum + episode.num_tool_errors, 0);
    const { text: summary, warning } =
      status === 'completed'
        ? trySummary(ctx.connection.model.runName(runId), episodes, failedCalls, modelActsIn(configUri.fsPath))
        : {
            text: `Try run ${ctx.connection.model.runName(runId)} ${status}${info?.message ? `: ${info.message}` : ''}.`,
            warning: true,
          };
    ctx.log.info(summary);
    if (status === 'completed') markSucceeded('tryEnvironment');
    await vscode.commands.executeCommand(Commands.openReplay, { runId });
    const actions = errors ? [SHOW_PROBLEMS] : [];
    const show = warning ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
    void show(summary, ...actions).then(
      (choice) => choice && vscode.commands.executeCommand('workbench.actions.view.problems'),
    );
    return runId;
  };

/** The env check (env/check: the env loaded and its scripted episode played, no model), its errors and warnings in
 *  `problems` (a new Try replaces the last one's). Whether to go on: yes when it found no error, else when the user
 *  chooses Try Anyway (an error here is what the episodes would fail on, and they take minutes). */
async function checkEnvironment(
  ctx: Ctx,
  { configUri, location }: PreparedRun,
  problems: vscode.DiagnosticCollection,
): Promise<boolean> {
  problems.clear();
  const configPath = configUri.fsPath;
  const where = 'configDir' in location ? { configDir: location.configDir } : { bundleId: location.envBundle };
  const checked = await vscode.window.withProgress(
    {
      location: vscode.ProgressLocation.Notification,
      title: `Agent RL: checking ${vscode.workspace.asRelativePath(configUri)} (one scripted episode, no model)`,
    },
    () => ctx.connection.request('env/check', { ...where, configFile: basename(configPath) }, ENV_CHECK_TIMEOUT_MS),
  );
  for (const d of checked.diagnostics) ctx.log.info(`[env check] ${d.severity}: ${d.message}`);
  const found = envCheckProblems(checked.diagnostics, dirname(configPath), configPath, existsSync);
  publishProblems(problems, found, 'Agent RL: env check');
  if (checked.ok) return true;
  const errors = found.filter((problem) => problem.error);
  const choice = await showError(
    ctx,
    `Agent RL: the env check of ${vscode.workspace.asRelativePath(configUri)} found ${errors.length} error(s) ` +
      `before any episode ran: ${errors[0]?.message ?? 'see the log'}`,
    'envCheckFailed',
    SHOW_PROBLEMS,
    RUN_ANYWAY.try,
  );
  if (choice === SHOW_PROBLEMS) void vscode.commands.executeCommand('workbench.actions.view.problems');
  return choice === RUN_ANYWAY.try;
}

/** How the config's model acts (by tools, by its reply, as an agent), as far as the config reads. */
function modelActsIn(configPath: string): ModelActs {
  try {
    return howTheModelActs(readRunConfig(configPath));
  } catch {
    return { by: 'tools' }; // a config that no longer reads: the summary as for any env
  }
}

/** Lists the try run's Tool failures in the Problems panel at each Tool's definition (an MCP server's tools: at
 * the server's entry in the run config), beside the env check's; returns how many calls failed. */
async function reportToolErrors(
  ctx: Ctx,
  runId: string,
  configPath: string,
  problems: vscode.DiagnosticCollection,
): Promise<number> {
  const envFolder = dirname(configPath);
  const page = await ctx.connection.request('trajectory/query', { runId, hasToolError: true, limit: 1000 });
  // through the connection's cache: the replay panel opened next shows these without fetching them again
  const records = await ctx.connection.records.get(
    runId,
    page.items.map((summary) => summary.id),
  );
  const sources = readdirSync(envFolder)
    .filter((f) => f.endsWith('.py'))
    .map((f) => ({ path: join(envFolder, f), text: readFileSync(join(envFolder, f), 'utf8') }));
  const found = toolProblems(records, page.total, sources, {
    path: configPath,
    text: readFileSync(configPath, 'utf8'),
  });
  for (const problem of found) ctx.log.warn(`[try ${runId}] ${problem.message}`);
  publishProblems(
    problems,
    found.flatMap(({ location, faultOfTool, message }) =>
      location ? [{ ...location, error: faultOfTool, message }] : [],
    ),
    'Agent RL: Try Environment',
  );
  return found.reduce((sum, p) => sum + p.count, 0);
}

/** Adds `found` to what `problems` already shows for each file. */
function publishProblems(problems: vscode.DiagnosticCollection, found: ProblemAt[], source: string): void {
  for (const { path, line, error, message } of found) {
    const diagnostic = new vscode.Diagnostic(
      new vscode.Range(line, 0, line, 200),
      message,
      error ? vscode.DiagnosticSeverity.Error : vscode.DiagnosticSeverity.Warning,
    );
    diagnostic.source = source;
    const uri = vscode.Uri.file(path);
    problems.set(uri, [...(problems.get(uri) ?? []), diagnostic]);
  }
}
