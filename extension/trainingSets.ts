// Add to Training Set: recorded episodes gathered into a named training set of the workspace
// (`training-sets/NAME.jsonl`, protocol/schemas/training-set.schema.json), which a run config names as an sft source
// (`data.sft: [{episodes: training-sets/NAME.jsonl}]`). Offered where episodes are seen: the replay's episode list and
// a turn of its episode view (replay/index.ts relays the webview's message), Search Episodes' results. Its one
// command takes the records and the turn learning starts from, so it is hidden from the palette.
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { TrajectoryRecord } from '../protocol/generated/trajectory';
import { Commands } from './commands';
import { counted } from './counted';
import { registerCommands, type Ctx } from './ctx';
import { readRunConfig } from './offlineRuns';
import {
  appendToTrainingSet,
  listTrainingSets,
  TRAINING_SET_EXTENSION,
  TRAINING_SETS_FOLDER,
  whyNotName,
  type Appended,
} from './trainingSetFile';
import { warmUpConfig, writeNewConfig } from './warmStart';

export const TrainingSetMessages = {
  title: 'Add to Training Set',
  newSet: '$(add) New Training Set…',
  namePrompt: 'Letters, digits, "-", "_" and "."; it is written as training-sets/NAME.jsonl in this workspace',
  open: 'Open',
  useInConfig: 'Use in a Run Config',
  noFolder: 'open a folder first: a training set is written into the workspace, as training-sets/NAME.jsonl.',
  noRecords: 'no episode was given to add.',
  added: (added: number, name: string, skipped: number) =>
    `Agent RL: Added ${counted(added, 'episode')} to training set ${name}` +
    (skipped ? ` (${counted(skipped, 'episode')} already in it, from the same turn: skipped).` : '.'),
  noConfig: (runId: string, name: string) =>
    `the config of run ${runId}, which the new config is made from, cannot be read: connect the trainer that has ` +
    `the run, or name the set in a run config of yours: data.sft: [{episodes: ${setPath(name)}}] (docs/sft.md).`,
  configWritten: (file: string, name: string) =>
    `Agent RL: ${file} fine-tunes on training set ${name} for train.sft_steps steps, then trains on rollouts. ` +
    'Edit it, then Start Training.',
} as const;

/** The set as a run config beside the workspace's configs names it (relative to the config). */
const setPath = (name: string): string => `${TRAINING_SETS_FOLDER}/${name}${TRAINING_SET_EXTENSION}`;

export function registerTrainingSets(ctx: Ctx): vscode.Disposable {
  return registerCommands(ctx, {
    [Commands.addToTrainingSet]: {
      title: TrainingSetMessages.title,
      make: (ctx) => (records: readonly TrajectoryRecord[], fromTurn?: number) =>
        addToTrainingSet(ctx, records, fromTurn ?? 0),
    },
  });
}

/** What was added where; undefined when the user closed the picker or the name box. */
export type AddedToSet = Appended & { name: string };

/** Asks which set (or a new one's name), appends a line per record learning from `fromTurn` (0: the whole episode),
 *  then offers to open the set or to write a run config that warms up on it. */
export async function addToTrainingSet(
  ctx: Ctx,
  records: readonly TrajectoryRecord[],
  fromTurn: number,
): Promise<AddedToSet | undefined> {
  const root = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  if (root === undefined) throw new Error(TrainingSetMessages.noFolder);
  if (!Array.isArray(records) || !records.length) throw new Error(TrainingSetMessages.noRecords);
  const name = await pickSet(root, records.length, fromTurn);
  if (name === undefined) return undefined;
  const appended = appendToTrainingSet(root, name, records, fromTurn);
  ctx.log.info(`training set ${name}: ${appended.added} added, ${appended.skipped} skipped (${appended.file})`);
  const choice = await vscode.window.showInformationMessage(
    TrainingSetMessages.added(appended.added, name, appended.skipped),
    TrainingSetMessages.open,
    TrainingSetMessages.useInConfig,
  );
  if (choice === TrainingSetMessages.open) await vscode.window.showTextDocument(vscode.Uri.file(appended.file));
  if (choice === TrainingSetMessages.useInConfig) await writeSetConfig(ctx, root, name, records[0].run_id);
  return { ...appended, name };
}

async function pickSet(root: string, count: number, fromTurn: number): Promise<string | undefined> {
  const what = `${counted(count, 'episode')}${fromTurn ? `, learned from turn ${fromTurn}` : ''}`;
  const pick = await vscode.window.showQuickPick(
    [
      ...listTrainingSets(root).map((name) => ({ label: name, description: setPath(name), name })),
      { label: TrainingSetMessages.newSet, name: undefined },
    ],
    { title: `Add ${what} to a training set`, placeHolder: 'A training set of this workspace, or a new one' },
  );
  if (!pick) return undefined;
  if (pick.name !== undefined) return pick.name;
  const typed = await vscode.window.showInputBox({
    title: `New Training Set for ${what}`,
    prompt: TrainingSetMessages.namePrompt,
    placeHolder: 'e.g. good-calls',
    validateInput: (value) => whyNotName(value.trim().replace(/\.jsonl$/, '')),
  });
  return typed?.trim().replace(/\.jsonl$/, '') || undefined; // the name, not the file's
}

/** Writes `NAME.sft.agentrl.yaml` beside the workspace's configs (never over a file) from the frozen config of the
 *  run the episodes came from, warming up on the set as Warm-start from these does, and opens it. */
async function writeSetConfig(ctx: Ctx, root: string, name: string, runId: string): Promise<void> {
  const frozen = await frozenConfig(ctx, runId);
  if (!frozen) throw new Error(TrainingSetMessages.noConfig(runId, name));
  const text = warmUpConfig(
    frozen,
    [{ episodes: setPath(name) }],
    name,
    (algorithm) =>
      `# Warm-start on training set ${name} (${setPath(name)}, picked in the editor): train.sft_steps steps of sft\n` +
      `# on it (data.sft), then ${algorithm} on rollouts, in one run. Made from the frozen config of run ${runId}.\n`,
  );
  const file = writeNewConfig(root, `${name}.sft`, text);
  await vscode.window.showTextDocument(vscode.Uri.file(file));
  void vscode.window.showInformationMessage(TrainingSetMessages.configWritten(path.basename(file), name));
}

/** The run's frozen config: from the trainer when connected, else from its folder when the run is listed offline. */
async function frozenConfig(ctx: Ctx, runId: string): Promise<Record<string, unknown> | undefined> {
  if (ctx.connection.isConnected)
    return (await ctx.connection.request('run/config', { runId }).catch(() => undefined))?.config;
  const folder = ctx.connection.model.offlineFolder(runId);
  return folder ? readRunConfig(folder) : undefined;
}
