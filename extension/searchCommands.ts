// Search Episodes: the episodes of one run or several, found by the trainer's search index (trajectory/search),
// listed to pick from; a pick opens that episode in its run's replay, and the first items of one run's list write a
// config that warm-starts on them or one that keeps imitating episodes like them (warmStart.ts); the next adds them
// all to a training set (trainingSets.ts). The replay's own search box searches its run.
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { TrajectorySearchParams, TrajectorySearchResult } from '../protocol/generated/rpc';
import type { TrajectoryRecord } from '../protocol/generated/trajectory';
import { Commands } from './commands';
import { registerCommands, type Ctx } from './ctx';
import { rebuildingMessage } from './replay/search';
import type { RunsTreeNode } from './runsModel';
import { parseSearchQuery, type EpisodeFilters } from './searchQuery';
import { imitateConfig, warmStartConfig, writeNewConfig } from './warmStart';
import { counted } from './counted';

/** Matches listed at once: the first page of trajectory/search. */
const LISTED = 200;

export function registerSearchCommands(ctx: Ctx): vscode.Disposable {
  return registerCommands(ctx, { [Commands.searchEpisodes]: { title: 'Search Episodes', make: searchEpisodes } });
}

/** From the palette: asks which runs; from a run's row: that run (and the other rows selected with it). Returns the
 *  episode opened, if one was. */
export const searchEpisodes =
  (ctx: Ctx) =>
  async (node?: RunsTreeNode, selected?: RunsTreeNode[]): Promise<{ runId: string; id: string } | undefined> => {
    if (!ctx.connection.isConnected)
      throw new Error('not connected to a trainer server: start or connect one to search its runs.');
    const model = ctx.connection.model;
    const fromRows = [...new Set((selected ?? (node ? [node] : [])).map((n) => n.runId))];
    const runIds = fromRows.length
      ? fromRows
      : (
          await vscode.window.showQuickPick(
            model.runIds().map((runId, index) => ({
              label: model.runName(runId),
              description: `${runId} · ${model.run(runId)?.status ?? ''}`,
              runId,
              picked: index === 0, // the newest run: OK at once searches it
            })),
            { title: 'Search Episodes: which runs', canPickMany: true, placeHolder: 'Runs to search (up to 16)' },
          )
        )?.map((pick) => pick.runId);
    if (runIds === undefined) return undefined; // the picker was closed
    if (!runIds.length) {
      void vscode.window.showInformationMessage(
        'Agent RL: Search Episodes searched nothing: no run was picked. Pick one or more runs (Space), then OK.',
      );
      return undefined;
    }
    const line = await vscode.window.showInputBox({
      title: `Search Episodes of ${runIds.length === 1 ? runIds[0] : `${runIds.length} runs`}`,
      prompt:
        'Words the model wrote or was told ("a phrase" in order), and filters: tool:NAME error:KIND status:STATUS ' +
        'health:CODE reward>=N reward<=N turns>=N step<=N',
      placeHolder: 'e.g. paris tool:search error:timeout reward<=0',
      validateInput: (value) => {
        try {
          parseSearchQuery(value);
          return undefined;
        } catch (err) {
          return (err as Error).message;
        }
      },
    });
    if (line === undefined) return undefined;
    const params: TrajectorySearchParams = {
      ...parseSearchQuery(line),
      runIds: runIds.slice(0, 16) as TrajectorySearchParams['runIds'], // the schema's 1 to 16, as a tuple type
      sort: '-reward',
      limit: LISTED,
    };
    const found = await ctx.connection.request('trajectory/search', params);
    if (found.rebuilding) {
      void vscode.window.showInformationMessage(`Agent RL: ${rebuildingMessage(found.rebuilding)}`);
      return undefined;
    }
    if (!found.items.length) {
      void vscode.window.showInformationMessage(`Agent RL: no episode matches "${line}".`);
      return undefined;
    }
    const episodes = found.items.map(({ runId, summary }) => ({
      label: `${model.runName(runId)} · step ${summary.step} · ${summary.id}`,
      description: `reward ${summary.reward.toFixed(3)} · ${summary.status} · ${counted(summary.num_turns, 'turn')} · ${counted(summary.num_tool_calls, 'tool call')} (${summary.num_tool_errors} failed)`,
      runId,
      id: summary.id,
    }));
    const warmStart = {
      label: `$(mortar-board) Warm-start from these ${counted(found.total, 'episode')}`,
      description: 'a run config: sft on them, then RL',
      warmStart: true as const,
    };
    const imitate = {
      label: '$(sync) Imitate episodes like these',
      description: 'a run config: each step fine-tunes on its own rollouts that pass this search',
      imitate: true as const,
    };
    const addToSet = {
      label: `$(add) Add these ${counted(found.total, 'episode')} to a training set`,
      description: 'training-sets/NAME.jsonl: an sft source',
      addToSet: true as const,
    };
    const pick = await vscode.window.showQuickPick<
      (typeof episodes)[number] | typeof warmStart | typeof imitate | typeof addToSet
    >(runIds.length === 1 ? [warmStart, imitate, addToSet, ...episodes] : [addToSet, ...episodes], {
      title: `${found.total} episode(s) match${found.total > LISTED ? ` (the ${LISTED} with the highest reward)` : ''}`,
      matchOnDescription: true,
    });
    if (!pick) return undefined;
    if ('addToSet' in pick) {
      await vscode.commands.executeCommand(Commands.addToTrainingSet, await matchedRecords(ctx, params), 0);
      return undefined;
    }
    if ('warmStart' in pick) {
      await writeWarmStart(ctx, runIds[0], parseSearchQuery(line), found.total);
      return undefined;
    }
    if ('imitate' in pick) {
      await writeImitate(ctx, runIds[0], parseSearchQuery(line), found.total);
      return undefined;
    }
    await vscode.commands.executeCommand(Commands.openReplay, { runId: pick.runId, trajectoryId: pick.id });
    return { runId: pick.runId, id: pick.id };
  };

/** Every episode a search matches, whole (page after page of trajectory/search, then trajectory/get by run through
 *  the connection's record cache), in the search's order. */
export async function matchedRecords(ctx: Ctx, params: TrajectorySearchParams): Promise<TrajectoryRecord[]> {
  const matches: Array<{ runId: string; id: string }> = [];
  let cursor: string | null = null;
  do {
    const page: TrajectorySearchResult = await ctx.connection.request('trajectory/search', {
      ...params,
      ...(cursor ? { cursor } : {}),
    });
    matches.push(...page.items.map(({ runId, summary }) => ({ runId, id: summary.id })));
    cursor = page.nextCursor;
  } while (cursor);
  const records = new Map<string, TrajectoryRecord>();
  for (const runId of new Set(matches.map((match) => match.runId))) {
    const ids = matches.filter((match) => match.runId === runId).map((match) => match.id);
    for (const record of await ctx.connection.records.get(runId, ids)) records.set(`${runId}/${record.id}`, record);
  }
  return matches.map(({ runId, id }) => records.get(`${runId}/${id}`)!);
}

/** Writes the warm-start config of a search's episodes beside the workspace's configs and opens it. The config names
 *  the run's folder, which only a local server's runs have on this machine. */
async function writeWarmStart(ctx: Ctx, runId: string, filters: EpisodeFilters, matched: number): Promise<void> {
  const runsFolder = ctx.connection.localRunsFolder;
  const root = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  if (runsFolder === undefined || root === undefined)
    throw new Error(
      `Warm-start from these writes a config naming the run's folder, which is on the trainer's machine: with a ` +
        `remote trainer, write data.sft's run: and where: by hand there (docs/sft.md)${root === undefined ? '; and open a folder first' : ''}.`,
    );
  const { config } = await ctx.connection.request('run/config', { runId });
  const text = warmStartConfig(config, path.join(runsFolder, runId), filters, matched);
  const file = writeNewConfig(root, `${String((config as { name?: unknown }).name ?? 'run')}-warm-start`, text);
  await vscode.window.showTextDocument(vscode.Uri.file(file));
  void vscode.window.showInformationMessage(
    `Agent RL: ${path.basename(file)} fine-tunes on the ${counted(matched, 'episode')} for train.sft_steps steps, then ` +
      'trains on rollouts. Edit it, then Start Training.',
  );
}

/** Writes the config that keeps imitating episodes like a search's (expert iteration filtered by it) and opens it. It
 *  names no run folder, so a remote trainer's runs give one too. */
async function writeImitate(ctx: Ctx, runId: string, filters: EpisodeFilters, matched: number): Promise<void> {
  const root = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  if (root === undefined) throw new Error('Imitate episodes like these writes a run config: open a folder first.');
  const { config } = await ctx.connection.request('run/config', { runId });
  const file = writeNewConfig(
    root,
    `${String((config as { name?: unknown }).name ?? 'run')}-rft`,
    imitateConfig(config, filters, matched),
  );
  await vscode.window.showTextDocument(vscode.Uri.file(file));
  void vscode.window.showInformationMessage(
    `Agent RL: ${path.basename(file)} trains by expert iteration: each step fine-tunes on its own episodes that ` +
      'pass this search (algorithm.rft_where). Edit it, then Start Training.',
  );
}
