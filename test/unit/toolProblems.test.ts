import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseTrajectories } from '../../extension/replay/trajectoryFile';
import {
  ACTION_DEFAULTS,
  envCheckProblems,
  howTheModelActs,
  repliesAreActions,
  toolProblems,
  trySummary,
} from '../../extension/toolProblems';

const ROOT = resolve(__dirname, '..', '..');
// Recorded by the trainer: episode 1-0-0 has one failed call of each kind, 1-0-9 a boom and a hang.
const { records } = parseTrajectories(
  readFileSync(join(ROOT, 'protocol', 'examples', 'trajectories', 'tool-errors.trajectories.jsonl'), 'utf8'),
);
const TOOLS_PY = [
  'from agentrl import Tool',
  '',
  'class Echo(Tool):',
  '    name = "echo"',
  '',
  'class Boom(Tool):',
  '    name = "boom"',
  '',
  'class Hang(Tool):',
  '    name = "hang"',
].join('\n');

describe('Try Environment: Tool problems', () => {
  const problems = toolProblems(records, 2, [
    { path: '/env/env.py', text: 'class Env(ToolEnv): pass\n' },
    { path: '/env/tools.py', text: TOOLS_PY },
  ]);
  const byTool = new Map(problems.map((p) => [p.tool, p]));

  it('one problem per failing Tool, counted over the episodes, at the line that defines it', () => {
    assert.deepEqual(problems.map((p) => [p.tool, p.count, p.location?.line]).sort(), [
      ['', 1, undefined],
      ['boom', 2, 6],
      ['echo', 1, 3],
      ['hang', 2, 9],
      ['nope', 1, undefined],
    ]);
    assert.equal(byTool.get('boom')!.location!.path, '/env/tools.py');
    assert.equal(
      byTool.get('boom')!.message,
      'Tool "boom" failed 2 time(s) in 2 of 2 episode(s) with errors (exception): boom raised RuntimeError: kaput',
    );
    assert.match(byTool.get('hang')!.message, /\(timeout\): hang timed out after 0\.2 s$/);
    assert.match(
      byTool.get('')!.message,
      /^A call naming no tool failed 1 time\(s\) .*\(bad_json\): tool call is not valid JSON/,
    );
  });

  it("a failure of the Tool's own code is its fault; a call the model got wrong is not", () => {
    assert.deepEqual([...byTool].map(([tool, p]) => [tool, p.faultOfTool]).sort(), [
      ['', false],
      ['boom', true],
      ['echo', true],
      ['hang', true],
      ['nope', false],
    ]);
  });

  it('no failed calls, no problems; a Tool defined nowhere still gets its message, without a location', () => {
    assert.deepEqual(
      toolProblems(
        records.map((r) => ({ ...r, turns: [] })),
        0,
        [],
      ),
      [],
    );
    assert.ok(toolProblems(records, 2, []).every((p) => p.location === undefined && p.message.length > 0));
  });
});

describe('Try Environment: its summary', () => {
  it('says when no episode called a Tool, instead of reporting 0 Tool errors', () => {
    const never = trySummary(
      'my-env',
      [
        { reward: 0.5, num_tool_calls: 0 },
        { reward: 0, num_tool_calls: 0 },
      ],
      0,
    );
    assert.ok(never.warning);
    assert.match(never.text, /^Try run my-env: 0 tool calls in 2 episodes: your Tools were never used\./);
    assert.match(never.text, /worked example/);
  });

  it('an env whose model acts by its reply (env.gym, env.openenv with action: text) makes no tool calls, and no warning', () => {
    const episodes = [
      { reward: 1, num_tool_calls: 0 },
      { reward: 0, num_tool_calls: 0 },
    ];
    assert.deepEqual(trySummary('coin', episodes, 0, { by: 'reply', section: 'env.gym' }), {
      text: 'Try run coin: 2 episodes, mean reward 0.50 (the model acts by its reply, env.gym.action: text: no tool calls).',
      warning: false,
    });
    assert.equal(repliesAreActions({ env: { gym: { factory: 'g.py:G' } } }), 'env.gym'); // text by default
    assert.equal(repliesAreActions({ env: { gym: { factory: 'g.py:G', action: 'tool' } } }), undefined);
    assert.equal(repliesAreActions({ env: { openenv: { url: 'http://127.0.0.1:8000' } } }), undefined); // tool by default
    assert.equal(repliesAreActions({ env: { openenv: { url: 'http://x', action: 'text' } } }), 'env.openenv');
    assert.equal(repliesAreActions({ env: { module: 'env.py', class_name: 'E' } }), undefined);
    assert.equal(repliesAreActions({ agent: { module: 'agent.py' } }), undefined);
  });

  it("an agent's Try that made no tool call speaks of the agent's messages, not of a ToolEnv", () => {
    assert.deepEqual(howTheModelActs({ env: null, agent: { module: 'agent.py' } }), { by: 'agent' });
    assert.deepEqual(howTheModelActs({ env: { gym: { factory: 'g.py:G' } } }), { by: 'reply', section: 'env.gym' });
    assert.deepEqual(howTheModelActs({ env: { module: 'env.py', class_name: 'E' } }), { by: 'tools' });
    const said = trySummary('converter', [{ reward: 0, num_tool_calls: 0 }], 0, { by: 'agent' });
    assert.ok(said.warning);
    assert.match(said.text, /^Try run converter: 0 tool calls in 1 episode: the model never called your agent's tools/);
    assert.match(said.text, /in the agent's messages/);
    assert.doesNotMatch(said.text, /ToolEnv/);
  });

  it("the adapters' action defaults are the run-config schema's", () => {
    const schema = JSON.parse(readFileSync(join(ROOT, 'protocol', 'schemas', 'run-config.schema.json'), 'utf8'));
    const defs: Record<string, string> = { gym: 'GymEnvConfig', openenv: 'OpenEnvConfig' };
    for (const [section, byDefault] of ACTION_DEFAULTS)
      assert.equal(schema.$defs[defs[section]].properties.action.default, byDefault, section);
  });

  it('counts the calls and the failed ones; a failed call makes it a warning', () => {
    const episodes = [
      { reward: 1, num_tool_calls: 2 },
      { reward: 0, num_tool_calls: 1 },
    ];
    assert.deepEqual(trySummary('e', episodes, 0), {
      text: 'Try run e: 2 episodes, 3 tool calls (0 failed), mean reward 0.50.',
      warning: false,
    });
    assert.ok(trySummary('e', episodes, 1).warning);
  });
});

describe('Try Environment: the env check first', () => {
  it('puts each finding on this machine: relative to the env folder, absolute when it exists here, else the config', () => {
    const found = envCheckProblems(
      [
        { severity: 'warning', message: 'relative', file: 'tools.py', line: 4 },
        { severity: 'error', message: 'here', file: '/home/me/lib/base.py', line: 1 },
        { severity: 'error', message: 'server only', file: '/srv/bundles/abc/x.py', line: 9 },
        { severity: 'error', message: 'no file' },
        { severity: 'info', message: 'scripted episode: 2 turn(s)' },
      ],
      '/work/env',
      '/work/env/env.agentrl.yaml',
      (path) => path !== '/srv/bundles/abc/x.py',
    );
    assert.deepEqual(found, [
      { path: join('/work/env', 'tools.py'), line: 3, error: false, message: 'relative' },
      { path: '/home/me/lib/base.py', line: 0, error: true, message: 'here' },
      { path: '/work/env/env.agentrl.yaml', line: 0, error: true, message: 'server only' },
      { path: '/work/env/env.agentrl.yaml', line: 0, error: true, message: 'no file' },
    ]);
  });
});
