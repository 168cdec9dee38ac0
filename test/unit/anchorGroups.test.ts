import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { TrajectoryRecord } from '../../protocol/webview-messages';
import {
  anchorGroups,
  anchorOf,
  hasStateKeys,
  hasStepFields,
  stateKeyPreview,
} from '../../webview/replay/anchorGroups';

type Turn = TrajectoryRecord['turns'][number];

// Recorded before the trainer wrote state keys: the turns carry none of the new fields.
const lookup = readFileSync(
  join(resolve(__dirname, '..', '..'), 'protocol', 'examples', 'trajectories', 'lookup.trajectories.jsonl'),
  'utf8',
)
  .split('\n')
  .filter(Boolean)
  .map((l) => JSON.parse(l) as TrajectoryRecord);

/** A sample of one group whose turns start from these states, with these step returns and advantages. */
function sample(
  index: number,
  turns: Array<Pick<Turn, 'state_key' | 'step_return' | 'step_advantage'>>,
  reward = 0,
): TrajectoryRecord {
  const base = lookup[0];
  return {
    ...base,
    id: `3-0-${index}`,
    sample: index,
    reward,
    turns: turns.map((fields, i) => ({ ...base.turns[0], index: i, ...fields })),
  };
}

describe('anchor states', () => {
  it('groups nothing in records written before state keys existed', () => {
    const group = lookup.filter((r) => r.group === 0);
    assert.equal(hasStateKeys(group), false);
    assert.equal(hasStepFields(group[0]), false);
    const { groups, keyless } = anchorGroups(group);
    assert.deepEqual(groups, []);
    assert.equal(
      keyless,
      group.reduce((sum, r) => sum + r.turns.length, 0),
    );
    assert.equal(anchorOf(group, group[0], 0), undefined);
  });

  it("lists each distinct state with the steps that start from it, their returns and advantages, and the group's size", () => {
    const group = [
      sample(1, [
        { state_key: 'start', step_return: 0, step_advantage: -0.5 },
        { state_key: 'found: 7', step_return: 0, step_advantage: -1 },
      ]),
      sample(0, [
        { state_key: 'start', step_return: 1, step_advantage: 0.5 },
        { state_key: 'found: 7', step_return: 1, step_advantage: 1 },
        { state_key: 'answered', step_return: 1, step_advantage: 0 },
      ]),
      sample(2, [{ state_key: 'start', step_return: null, step_advantage: null }]),
    ];
    assert.equal(hasStateKeys(group), true);
    const { groups, keyless } = anchorGroups(group);
    assert.equal(keyless, 0);
    assert.deepEqual(
      groups.map((g) => [g.stateKey, g.size, g.episodes, g.singleton]),
      [
        ['start', 3, 3, false],
        ['found: 7', 2, 2, false],
        ['answered', 1, 1, true],
      ],
    );
    const [start, found, answered] = groups;
    assert.deepEqual(start.steps, [
      { id: '3-0-0', sample: 0, turn: 0, stepReturn: 1, stepAdvantage: 0.5 },
      { id: '3-0-1', sample: 1, turn: 0, stepReturn: 0, stepAdvantage: -0.5 },
      { id: '3-0-2', sample: 2, turn: 0, stepReturn: null, stepAdvantage: null },
    ]);
    // a step without a known return is listed but left out of the mean and range
    assert.equal(start.returnMean, 0.5);
    assert.equal(start.returnMin, 0);
    assert.equal(start.returnMax, 1);
    assert.deepEqual(
      found.steps.map((s) => [s.sample, s.turn]),
      [
        [0, 1],
        [1, 1],
      ],
    );
    assert.equal(answered.returnMean, 1);
    assert.deepEqual(anchorOf(group, group[1], 1), found);
    assert.equal(anchorOf(group, group[1], 2)?.singleton, true);
  });

  it('counts a state an episode comes back to once per step, and its episode once', () => {
    const group = [
      sample(0, [
        { state_key: 'start', step_return: 1 },
        { state_key: 'start', step_return: 1 }, // the first turn changed nothing
        { state_key: 'done', step_return: 1 },
      ]),
    ];
    const [start, done] = anchorGroups(group).groups;
    assert.equal(start.size, 2);
    assert.equal(start.episodes, 1);
    assert.equal(start.singleton, false);
    assert.equal(done.singleton, true);
  });

  it('leaves out steps without a state key, a null key or a missing one alike, and counts them', () => {
    const group = [
      sample(0, [{ state_key: 'start' }, { state_key: null, step_return: 2 }, {}]),
      sample(1, [{ state_key: 'start' }]),
    ];
    assert.equal(hasStepFields(group[0]), true);
    const { groups, keyless } = anchorGroups(group);
    assert.deepEqual(
      groups.map((g) => g.stateKey),
      ['start'],
    );
    assert.equal(keyless, 2);
    assert.equal(groups[0].returnMean, null, 'no step return known');
    assert.equal(anchorOf(group, group[0], 1), undefined);
    assert.equal(anchorOf(group, group[0], 9), undefined, 'no such turn');
  });

  it('orders states by the earliest turn that reaches them, then the larger group, then the key', () => {
    const group = [
      sample(0, [{ state_key: 'start' }, { state_key: 'b' }, { state_key: 'z' }]),
      sample(1, [{ state_key: 'start' }, { state_key: 'a' }, { state_key: 'z' }]),
      sample(2, [{ state_key: 'start' }, { state_key: 'b' }]),
    ];
    assert.deepEqual(
      anchorGroups(group).groups.map((g) => g.stateKey),
      ['start', 'b', 'a', 'z'],
    );
  });

  it('keeps a state key as the exact text it is: markup and all, the empty string included', () => {
    const hostile = '<img src=x onerror="alert(1)">';
    const group = [sample(0, [{ state_key: hostile }, { state_key: '' }]), sample(1, [{ state_key: hostile }])];
    const { groups } = anchorGroups(group);
    assert.deepEqual(
      groups.map((g) => [g.stateKey, g.size]),
      [
        [hostile, 2],
        ['', 1],
      ],
    );
  });

  it('previews a long or multi-line state key on one line', () => {
    assert.equal(stateKeyPreview('start'), 'start');
    assert.equal(stateKeyPreview('found:\n  7\tkeys'), 'found: 7 keys');
    const long = stateKeyPreview('x'.repeat(500));
    assert.equal(long.length, 120);
    assert.ok(long.endsWith('…'));
    assert.equal(stateKeyPreview(''), '(empty)');
    assert.equal(stateKeyPreview(' \n '), '(whitespace)');
  });
});
