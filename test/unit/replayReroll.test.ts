import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ErrorCode, type EpisodeRerollProgressParams, type RerollRecords } from '../../protocol/generated/rpc';
import type { RerollEpisodeMessage, RerollProgressMessage, TrajectoryRecord } from '../../protocol/webview-messages';
import {
  relayReroll,
  relayRerollGet,
  relayRerollList,
  REROLL_NOT_CONNECTED_MESSAGE,
  REROLL_TIMEOUT_MS,
  REROLL_UNTRUSTED_MESSAGE,
  type RerollTrainer,
} from '../../extension/replay/reroll';
import { TrainerRequestError } from '../../extension/trainerClient';
import { diffSequences } from '../../webview/replay/lineDiff';
import { firstDivergingTurn } from '../../webview/replay/rerollView';

const ROOT = resolve(__dirname, '..', '..');

describe('replay host: edit and re-roll from here', () => {
  const message: RerollEpisodeMessage = {
    type: 'rerollEpisode',
    params: {
      runId: 'run-1',
      trajectoryId: '3-0-1',
      turn: 1,
      edit: 'observation',
      text: 'the store is closed',
      policy: 'latest',
      samples: 4,
      temperature: 0.7,
    },
  };
  const result = { reroll: { rerollId: '20261126-100237-5c2a5c' }, records: [] } as unknown as RerollRecords;

  /** A trainer that answers `answer` after saying `said` of the re-roll's progress (and of another one's). */
  function trainer(answer: () => Promise<unknown>, said: string[] = []) {
    const requests: Array<{ method: string; params: Record<string, unknown>; timeoutMs?: number }> = [];
    const listeners = new Set<(progress: EpisodeRerollProgressParams) => void>();
    const connected: RerollTrainer & { requests: typeof requests; listeners: typeof listeners } = {
      requests,
      listeners,
      request: (async (method: string, params: Record<string, unknown>, timeoutMs?: number) => {
        requests.push({ method, params, timeoutMs });
        const token = String(params.progressToken);
        for (const text of said) {
          listeners.forEach((listener) => listener({ progressToken: token, message: text }));
          listeners.forEach((listener) => listener({ progressToken: 'another-client', message: 'not ours' }));
        }
        return answer();
      }) as RerollTrainer['request'],
      onRerollProgress: (listener) => {
        listeners.add(listener);
        return { dispose: () => listeners.delete(listener) };
      },
    };
    return connected;
  }

  it('relays the edit to episode/reroll with a progress token, its progress to the panel, and the re-roll back', async () => {
    const connected = trainer(async () => result, ['loading the policy: the base model', 'sampling 4 continuation(s)']);
    const progress: RerollProgressMessage[] = [];
    const reply = await relayReroll(message, { isTrusted: () => true, trainer: () => connected }, (p) =>
      progress.push(p),
    );
    assert.equal(connected.requests.length, 1);
    const [{ method, params, timeoutMs }] = connected.requests;
    assert.equal(method, 'episode/reroll');
    assert.equal(timeoutMs, REROLL_TIMEOUT_MS);
    assert.match(String(params.progressToken), /^reroll-\d+$/);
    assert.deepEqual({ ...params, progressToken: undefined }, { ...message.params, progressToken: undefined });
    assert.deepEqual(
      progress.map((p) => p.message),
      ['loading the policy: the base model', 'sampling 4 continuation(s)'],
      "only this re-roll's progress",
    );
    assert.deepEqual(progress[0], {
      type: 'rerollProgress',
      runId: 'run-1',
      trajectoryId: '3-0-1',
      message: 'loading the policy: the base model',
    });
    assert.deepEqual(reply, { type: 'reroll', runId: 'run-1', trajectoryId: '3-0-1', reply: { ok: true, result } });
    assert.equal(connected.listeners.size, 0, 'the progress listener is gone with the re-roll');
  });

  it('refuses in an untrusted workspace without asking the trainer, and says why without one', async () => {
    const connected = trainer(async () => result);
    const untrusted = await relayReroll(message, { isTrusted: () => false, trainer: () => connected }, () => {});
    assert.deepEqual(untrusted.reply, { ok: false, message: REROLL_UNTRUSTED_MESSAGE });
    assert.equal(connected.requests.length, 0, 'no code runs for an untrusted workspace');
    const alone = await relayReroll(message, { isTrusted: () => true, trainer: () => undefined }, () => {});
    assert.deepEqual(alone.reply, { ok: false, message: REROLL_NOT_CONNECTED_MESSAGE });
  });

  it("shows the trainer's refusal, a failed re-roll and an older trainer in words", async () => {
    const deps = (answer: () => Promise<unknown>) => ({ isTrusted: () => true, trainer: () => trainer(answer) });
    const refusing = deps(async () => {
      throw new TrainerRequestError('episode/reroll', ErrorCode.CODE_NOT_ALLOWED, 'restart it with --allow-code');
    });
    const refused = (await relayReroll(message, refusing, () => {})).reply;
    assert.ok(!refused.ok);
    assert.match(refused.message, /^The trainer server refused: .*--allow-code/);
    const failing = deps(async () => {
      throw new TrainerRequestError('episode/reroll', ErrorCode.REROLL_FAILED, "cannot re-roll: the task 'k3' is gone");
    });
    const failed = (await relayReroll(message, failing, () => {})).reply;
    assert.deepEqual(failed, { ok: false, message: "cannot re-roll: the task 'k3' is gone" });
    const old = deps(async () => {
      throw new TrainerRequestError('episode/reroll', ErrorCode.METHOD_NOT_FOUND, 'method not found');
    });
    const outdated = (await relayReroll(message, old, () => {})).reply;
    assert.ok(!outdated.ok);
    assert.match(outdated.message, /older than episode\/reroll; update agentrl on it to re-roll episodes/);
  });

  it('lists and opens stored re-rolls without asking for trust (reading runs no code)', async () => {
    const listing = { runId: 'run-1', rerolls: [], checkpoints: [5, 10], temperature: 0.7 };
    const connected = trainer(async () => listing);
    const list = await relayRerollList({ type: 'listRerolls', runId: 'run-1', trajectoryId: '3-0-1' }, connected);
    assert.deepEqual(list, {
      type: 'rerolls',
      runId: 'run-1',
      trajectoryId: '3-0-1',
      reply: { ok: true, result: listing },
    });
    assert.deepEqual(connected.requests[0], {
      method: 'reroll/list',
      params: { runId: 'run-1', trajectoryId: '3-0-1' },
      timeoutMs: undefined,
    });
    const opening = trainer(async () => result);
    const open = {
      type: 'openReroll' as const,
      runId: 'run-1',
      trajectoryId: '3-0-1',
      rerollId: '20261126-100237-5c2a5c',
    };
    assert.deepEqual((await relayRerollGet(open, opening)).reply, { ok: true, result });
    assert.deepEqual(opening.requests[0].params, { runId: 'run-1', rerollId: '20261126-100237-5c2a5c' });
    assert.deepEqual((await relayRerollGet(open, undefined)).reply, {
      ok: false,
      message: REROLL_NOT_CONNECTED_MESSAGE,
    });
  });
});

describe('the re-roll token diff', () => {
  const record = JSON.parse(
    readFileSync(join(ROOT, 'protocol', 'examples', 'trajectories', 'lookup.trajectories.jsonl'), 'utf8').split(
      '\n',
    )[0],
  ) as TrajectoryRecord;

  it('diffs tokens by id, keeping each token', () => {
    const a = [
      { id: 1, text: 'the' },
      { id: 2, text: ' gold' },
      { id: 3, text: '!' },
    ];
    const b = [
      { id: 1, text: 'the' },
      { id: 4, text: ' silver' },
      { id: 3, text: '!' },
    ];
    assert.deepEqual(
      diffSequences(a, b, (token) => token.id).map(({ kind, item }) => `${kind} ${item.text}`),
      ['same the', 'removed  gold', 'added  silver', 'same !'],
    );
  });

  it('finds the first turn the policy sampled otherwise, from the turn after the edit', () => {
    assert.equal(firstDivergingTurn(record, record, 0), undefined, 'the same episode: none');
    const firstSampled = record.tokens.role.findIndex((role, i) => role === 'assistant' && record.tokens.turn[i] === 1);
    const ids = [...record.tokens.ids];
    ids[firstSampled] += 1;
    const other = { ...record, tokens: { ...record.tokens, ids } };
    assert.equal(firstDivergingTurn(record, other, 0), 1);
    assert.equal(firstDivergingTurn(record, other, 2), undefined, 'only turns from `from` on');
  });
});
