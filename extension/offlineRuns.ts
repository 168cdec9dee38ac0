// The runs of a runs folder, read from disk for the Runs view while no trainer server is connected (a local server
// that was killed leaves its runs going on in their own processes, and the view would otherwise be empty), and a run's
// trajectories for the replay. Read-only: each folder's run.json, the latest status and metrics of its events.jsonl
// (read from its end), its checkpoints and its trajectory files (the layout: protocol/README.md, "The run folder").
// What a server would show is computed by the server; this is what the files said when read, and says so ("offline").
// No `vscode`: unit-tested on folders of files.
import { readdir, readFile, open, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { episodeSourceOf, type EpisodeSource } from '../protocol/episode-sources';
import {
  ACTIVE_RUN_STATUSES,
  ENDED_RUN_STATUSES,
  type MetricsEvent,
  type RunInfo,
  type RunMode,
  type StatusEvent,
} from '../protocol/generated/rpc';
import type { TrajectoryRecord } from '../protocol/webview-messages';
import { parseTrajectories } from './replay/trajectoryFile';

/** A run read from its folder. */
export interface OfflineRun {
  info: RunInfo;
  folder: string;
}

const RUN_FILE = 'run.json';
const EVENTS_FILE = 'events.jsonl';
const CONFIG_FILE = 'config.yaml';
const TAIL_BLOCK_BYTES = 1 << 16;
// How far from its end a log is read for its latest status and metrics: a step writes both, so a run's log holds them
// near its end; a log damaged for longer than this shows the run without them rather than read gigabytes.
const MAX_TAIL_BYTES = 8 << 20;

/** Every run of `runsDir` (a folder holding a run.json; the server's own folders start with a dot), newest first. A
 *  missing folder has none. */
export async function readOfflineRuns(runsDir: string): Promise<OfflineRun[]> {
  const entries = await readdir(runsDir, { withFileTypes: true }).catch(() => []);
  const runs = await Promise.all(
    entries
      .filter((entry) => entry.isDirectory() && !entry.name.startsWith('.'))
      .map((entry) => readOfflineRun(join(runsDir, entry.name))),
  );
  return runs
    .filter((run): run is OfflineRun => run !== undefined)
    .sort((a, b) => (b.info.createdAt ?? '').localeCompare(a.info.createdAt ?? ''));
}

/** The run in `folder` as a RunInfo, or undefined when the folder holds no run.json. A run.json that is not a JSON
 *  object gives the run its folder's name, as the server lists it. */
export async function readOfflineRun(folder: string): Promise<OfflineRun | undefined> {
  const text = await readFile(join(folder, RUN_FILE), 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const fields = parseObject(text);
  const runId = folder.split(/[\\/]/).pop()!;
  const { status, metrics, lastSeq } = await readLogTail(join(folder, EVENTS_FILE));
  return {
    folder,
    info: {
      runId,
      name: typeof fields.name === 'string' ? fields.name : runId,
      mode: modeOf(fields.mode),
      // a run whose log says nothing yet was about to start when it was last seen
      status: status?.status ?? 'queued',
      step: status?.step ?? 0,
      totalSteps: status?.total_steps ?? 0,
      ...(typeof fields.created_at === 'string' ? { createdAt: fields.created_at } : {}),
      latestMetrics: metrics?.metrics ?? {},
      lastSeq,
      hasCheckpoint: await hasCheckpoint(folder),
      message: status?.message ?? null,
    },
  };
}

/** The trajectory records of every step file of the run in `folder` (`trajectories/*.trajectories.jsonl`, in step
 *  order), and each unreadable line by file and number. */
export async function readRunTrajectories(folder: string): Promise<{ records: TrajectoryRecord[]; errors: string[] }> {
  const dir = join(folder, 'trajectories');
  const files = (await readdir(dir).catch(() => [] as string[])).filter((f) => f.endsWith('.trajectories.jsonl'));
  const records: TrajectoryRecord[] = [];
  const errors: string[] = [];
  for (const file of files.sort()) {
    const parsed = parseTrajectories(await readFile(join(dir, file), 'utf8'));
    records.push(...parsed.records);
    errors.push(...parsed.errors.map((error) => `${file} ${error}`));
  }
  return { records, errors };
}

/** The frozen config (config.yaml) of the run in `folder`; undefined when it cannot be read or is not a mapping. */
export async function readRunConfig(folder: string): Promise<Record<string, unknown> | undefined> {
  const text = await readFile(join(folder, CONFIG_FILE), 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  try {
    const config: unknown = parseYaml(text);
    return config && typeof config === 'object' && !Array.isArray(config)
      ? (config as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined; // a config damaged past reading
  }
}

/** Where the episodes of the run in `folder` came from, as its frozen config says; undefined when it cannot be
 *  read. */
export async function readRunEpisodeSource(folder: string): Promise<EpisodeSource | undefined> {
  const config = await readRunConfig(folder);
  return config === undefined ? undefined : episodeSourceOf(config);
}

function parseObject(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

// run.json's mode, as the server reads it: a value it does not know is a train run's.
const modeOf = (value: unknown): RunMode => (value === 'try' || value === 'eval' ? value : 'train');

async function hasCheckpoint(folder: string): Promise<boolean> {
  const names = await readdir(join(folder, 'checkpoints')).catch(() => [] as string[]);
  for (const name of names)
    if (/^step-\d+$/.test(name) && (await stat(join(folder, 'checkpoints', name))).isDirectory()) return true;
  return false;
}

/** One complete line of the log as an event, or undefined for a damaged one (the server skips those too). */
function parseEvent(line: string): { seq: number; type: string; data: unknown } | undefined {
  try {
    const event = JSON.parse(line) as { seq?: unknown; type?: unknown; data?: unknown };
    return Number.isInteger(event.seq) && typeof event.type === 'string' && event.data && typeof event.data === 'object'
      ? (event as { seq: number; type: string; data: unknown })
      : undefined;
  } catch {
    return undefined;
  }
}

const isStatus = (data: unknown): data is StatusEvent => {
  const status = (data as StatusEvent).status;
  return ACTIVE_RUN_STATUSES.has(status) || ENDED_RUN_STATUSES.has(status);
};

/** The latest status and metrics of a log and its last seq, read back from its end a block at a time; a torn last
 *  line (an event still being written) is not an event yet. */
async function readLogTail(path: string): Promise<{ status?: StatusEvent; metrics?: MetricsEvent; lastSeq: number }> {
  const found: { status?: StatusEvent; metrics?: MetricsEvent; lastSeq: number } = { lastSeq: 0 };
  const handle = await open(path, 'r').catch(() => undefined);
  if (!handle) return found;
  try {
    const size = (await handle.stat()).size;
    let position = size;
    let rest = Buffer.alloc(0); // the start of a line whose beginning lies in an earlier block
    let torn = true; // until the log's last newline is found: what follows it is an event still being written
    while (position > 0 && size - position < MAX_TAIL_BYTES && !(found.status && found.metrics)) {
      const start = Math.max(0, position - TAIL_BLOCK_BYTES);
      const block = Buffer.alloc(position - start);
      await handle.read(block, 0, block.length, start);
      position = start;
      let data = Buffer.concat([block, rest]);
      if (torn) {
        const newline = data.lastIndexOf(0x0a);
        rest = Buffer.alloc(0);
        if (newline < 0) continue;
        data = data.subarray(0, newline);
        torn = false;
      }
      // Split as bytes: a block may start inside a character of a line that begins in the block before it.
      const first = start > 0 ? data.indexOf(0x0a) : -1;
      rest = start === 0 ? Buffer.alloc(0) : first < 0 ? data : data.subarray(0, first);
      const whole = start === 0 ? data : first < 0 ? Buffer.alloc(0) : data.subarray(first + 1);
      for (const line of whole.toString('utf8').split('\n').reverse()) {
        const event = line.trim() ? parseEvent(line) : undefined;
        if (!event) continue;
        found.lastSeq ||= event.seq;
        if (event.type === 'status' && !found.status && isStatus(event.data)) found.status = event.data;
        if (event.type === 'metrics' && !found.metrics) found.metrics = event.data as MetricsEvent;
      }
    }
  } finally {
    await handle.close();
  }
  return found;
}
