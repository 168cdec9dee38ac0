import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ErrorCode, type ToolRerunResult } from '../../protocol/generated/rpc';
import type { RerunToolCallMessage } from '../../protocol/webview-messages';
import {
  NOT_CONNECTED_MESSAGE,
  relayToolRerun,
  TOOL_RERUN_TIMEOUT_MS,
  type ReplayTrainer,
  UNTRUSTED_MESSAGE,
} from '../../extension/replay/toolRerun';
import { findToolDefinition } from '../../extension/replay/toolSource';
import { episodeSourceOf } from '../../protocol/episode-sources';
import { ACT_TOOL, toolCallOffers } from '../../webview/replay/toolOffers';
import { parseTrajectories } from '../../extension/replay/trajectoryFile';
import { TrainerRequestError } from '../../extension/trainerClient';

const ROOT = resolve(__dirname, '..', '..');

describe('replay host helpers', () => {
  it('finds a Tool by its name attribute before its class name', () => {
    const source = [
      'from agentrl import Tool',
      '',
      'class Search(Tool):',
      '    """Looks things up."""',
      '    name = "wiki_search"',
      '',
      'class Calculator(Tool):',
      "    name: str = 'calculator'",
    ].join('\n');
    assert.equal(findToolDefinition(source, 'wiki_search'), 4);
    assert.equal(findToolDefinition(source, 'calculator'), 7);
  });

  it('falls back to `class <Name>(Tool)` and says when there is none', () => {
    const source = 'import agentrl\n\nclass WikiSearch(agentrl.Tool):\n    pass\n';
    assert.equal(findToolDefinition(source, 'wiki_search'), 2);
    assert.equal(findToolDefinition(source, 'lookup'), undefined);
    assert.equal(findToolDefinition('name = "a.b"\n', 'a+b'), undefined, 'the name is matched literally');
  });

  it('finds a function Tool (`@tool`) by its def, or by the name its decorator gives it', () => {
    const source = [
      'from agentrl import tool',
      '',
      '@tool',
      'async def search(query: str) -> str:',
      '    return query',
      '',
      '@tool(name="add_numbers", timeout_s=2)',
      'def add(a: int, b: int) -> int:',
      '    return a + b',
      '',
      'def helper(x: int) -> int:',
      '    return x',
    ].join('\n');
    assert.equal(findToolDefinition(source, 'search'), 3);
    assert.equal(findToolDefinition(source, 'add_numbers'), 6);
    assert.equal(findToolDefinition(source, 'helper'), undefined, 'an undecorated function is not a Tool');
  });

  it("finds an env.methods tool: a method of the environment's class, after every Tool there is", () => {
    const source = [
      'class Greenhouse:',
      '    def reset(self, target, **task):',
      '        self.target = target',
      '',
      '    async def set_thermostat(self, degrees: int) -> str:',
      '        """Set the temperature."""',
      '',
      'def read_thermostat(greenhouse):',
      '    return greenhouse.setting',
    ].join('\n');
    assert.equal(findToolDefinition(source, 'set_thermostat'), 4);
    assert.equal(findToolDefinition(source, 'read_thermostat'), undefined, 'a module-level function is no method');
    const decorated = `${source}\n\n@tool\ndef set_thermostat(d: int) -> str:\n    pass\n`;
    assert.equal(findToolDefinition(decorated, 'set_thermostat'), 11, 'a Tool wins over a method of that name');
  });

  it("offers no re-run of an adapter's or an agent's tool calls, and no source for the adapters' own act tool", () => {
    const toolEnv = toolCallOffers('class_name', 'act', false);
    assert.deepEqual(toolEnv, { openSource: true, interpreter: 'ToolEnv' }, "a ToolEnv's own Tool named act");
    assert.deepEqual(toolCallOffers(undefined, 'lookup', false), { openSource: true, interpreter: 'ToolEnv' });
    assert.equal(toolCallOffers(undefined, 'search', true).openSource, false, "an MCP server's tool has no file here");
    for (const source of ['gym', 'openenv'] as const) {
      const act = toolCallOffers(source, ACT_TOOL, false);
      assert.equal(act.openSource, false);
      assert.equal(act.interpreter, `env.${source}`);
      assert.match(
        act.noRerun!,
        new RegExp(`^The tools of env\\.${source} are made at each episode's reset \\(act steps`),
      );
    }
    const method = toolCallOffers('methods', 'set_thermostat', false);
    assert.equal(method.openSource, true, "an env.methods tool is a method of the user's class");
    assert.match(method.noRerun!, /a method of its own episode's environment object/);
    // An agent's own tool: its code ran and read it; no re-run, no source to open, no ToolEnv to say what it means.
    assert.deepEqual(toolCallOffers('agent', 'calculator', false), { openSource: false });
  });

  it("the adapters' act tool is the trainer's (adapters/external.py's ACT_TOOL)", () => {
    const external = readFileSync(
      join(ROOT, 'trainer-server', 'agentrl', 'environment', 'adapters', 'external.py'),
      'utf8',
    );
    assert.equal(/^ACT_TOOL = "(\w+)"/m.exec(external)![1], ACT_TOOL);
  });

  it("where a run config's episodes come from: one env section, or agent", () => {
    assert.equal(episodeSourceOf({ env: { module: 'env.py', class_name: 'E', gym: null } }), 'class_name');
    assert.equal(episodeSourceOf({ env: { gym: { factory: 'g.py:G' }, methods: null, openenv: null } }), 'gym');
    assert.equal(episodeSourceOf({ env: null, agent: { module: 'agent.py' } }), 'agent');
    assert.equal(episodeSourceOf({ env: { gym: {}, openenv: {} } }), undefined, 'two sections: the config is invalid');
    assert.equal(episodeSourceOf({ env: {}, agent: {} }), undefined);
    assert.equal(episodeSourceOf('env: {}'), undefined);
  });

  it('reads every fixture and reports bad lines by number instead of dropping them silently', () => {
    const text = readFileSync(join(ROOT, 'protocol', 'examples', 'trajectories', 'lookup.trajectories.jsonl'), 'utf8');
    const good = parseTrajectories(text);
    assert.equal(good.errors.length, 0);
    assert.equal(good.records.length, text.split('\n').filter(Boolean).length);
    const bad = parseTrajectories(`${text.split('\n')[0]}\n{oops\n`);
    assert.equal(bad.records.length, 1);
    assert.match(bad.errors[0], /^line 2: /);
  });
});

describe('replay host: re-run a tool call', () => {
  const message: RerunToolCallMessage = {
    type: 'rerunToolCall',
    runId: 'run-1',
    trajectoryId: '3-0-1',
    turn: 0,
    call: 1,
    code: 'current',
  };
  const result: ToolRerunResult = {
    runId: 'run-1',
    trajectoryId: '3-0-1',
    turn: 0,
    call: 1,
    name: 'lookup',
    arguments: { key: '3' },
    timeoutS: 5,
    recorded: { result: 'gold', error: null, errorKind: null, latencyMs: 0.4 },
    rerun: { result: 'GOLD', error: null, errorKind: null, latencyMs: 0.3 },
    code: 'current',
  };

  function trainer(answer: () => Promise<unknown>) {
    const requests: Array<{ method: string; params: unknown; timeoutMs?: number }> = [];
    return {
      requests,
      request: ((method: string, params: unknown, timeoutMs?: number) => {
        requests.push({ method, params, timeoutMs });
        return answer();
      }) as ReplayTrainer['request'],
    };
  }

  it('relays the call, named by its place only, to tool/rerun and the result back to the panel', async () => {
    const connected = trainer(async () => result);
    const reply = await relayToolRerun(message, { isTrusted: () => true, trainer: () => connected });
    assert.deepEqual(connected.requests, [
      {
        method: 'tool/rerun',
        params: { runId: 'run-1', trajectoryId: '3-0-1', turn: 0, call: 1 },
        timeoutMs: TOOL_RERUN_TIMEOUT_MS,
      },
    ]);
    assert.deepEqual(reply, {
      type: 'toolRerun',
      runId: 'run-1',
      trajectoryId: '3-0-1',
      turn: 0,
      call: 1,
      code: 'current',
      reply: { ok: true, result },
    });
  });

  it("asks for the run's code only when the panel does (a server older than the choice runs today's)", async () => {
    const connected = trainer(async () => ({ ...result, code: 'snapshot' }));
    const reply = await relayToolRerun(
      { ...message, code: 'snapshot' },
      { isTrusted: () => true, trainer: () => connected },
    );
    assert.deepEqual(connected.requests[0].params, {
      runId: 'run-1',
      trajectoryId: '3-0-1',
      turn: 0,
      call: 1,
      code: 'snapshot',
    });
    assert.equal(reply.code, 'snapshot');
    assert.ok(reply.reply.ok && reply.reply.result.code === 'snapshot');
  });

  it('refuses in an untrusted workspace without asking the trainer, and says why without one', async () => {
    const connected = trainer(async () => result);
    const untrusted = await relayToolRerun(message, { isTrusted: () => false, trainer: () => connected });
    assert.deepEqual(untrusted.reply, { ok: false, message: UNTRUSTED_MESSAGE });
    assert.equal(connected.requests.length, 0, 'no code runs for an untrusted workspace');
    const alone = await relayToolRerun(message, { isTrusted: () => true, trainer: () => undefined });
    assert.deepEqual(alone.reply, { ok: false, message: NOT_CONNECTED_MESSAGE });
  });

  it("shows the trainer's refusal and errors in words", async () => {
    const refusing = trainer(async () => {
      throw new TrainerRequestError(
        'tool/rerun',
        ErrorCode.CODE_NOT_ALLOWED,
        'this server listens on 0.0.0.0, not loopback; restart it with `agentrl serve --allow-code`',
      );
    });
    const refused = await relayToolRerun(message, { isTrusted: () => true, trainer: () => refusing });
    assert.ok(!refused.reply.ok);
    assert.match(refused.reply.message, /^The trainer server refused: .*--allow-code/);
    const old = trainer(async () => {
      throw new TrainerRequestError('tool/rerun', ErrorCode.METHOD_NOT_FOUND, "method not found: 'tool/rerun'");
    });
    const outdated = await relayToolRerun(message, { isTrusted: () => true, trainer: () => old });
    assert.ok(!outdated.reply.ok);
    assert.match(outdated.reply.message, /older than tool\/rerun/);
  });
});
