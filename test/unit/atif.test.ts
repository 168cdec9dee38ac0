import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import { atifToRecord } from '../../extension/replay/atif';
import { parseTrajectories } from '../../extension/replay/trajectoryFile';

// The replay reads ATIF as trainer-server/agentrl/run/atif.py does: both are held to the files of
// protocol/examples/atif/ (trainer-server/tests/test_atif.py checks the Python side, and that the ATIF export there is
// what the exporter writes today).
const PROTOCOL = resolve(__dirname, '..', '..', 'protocol');
const ATIF = join(PROTOCOL, 'examples', 'atif');
const read = (name: string): string => readFileSync(join(ATIF, name), 'utf8');
const jsonLines = (name: string): unknown[] =>
  read(name)
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line));
const schema = (name: string): object => JSON.parse(readFileSync(join(PROTOCOL, 'schemas', name), 'utf8'));

const EXPECTED =
  'neither an Agent RL trajectory record (schema_version 1, id, turns, ...) ' +
  'nor an ATIF trajectory (schema_version "ATIF-v1.x", steps, ...)';

describe('ATIF in the replay', () => {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  const validRecord = ajv.compile(schema('trajectory.schema.json'));
  const validAtif = ajv.compile(schema('atif.schema.json'));

  for (const [atif, records] of [
    ['episodes.atif.jsonl', 'episodes.trajectories.jsonl'],
    ['harbor-style.atif.json', 'harbor-style.trajectories.jsonl'],
  ]) {
    it(`reads ${atif} as ${records}, as the Python converter does`, () => {
      const parsed = parseTrajectories(read(atif));
      assert.deepEqual(parsed.errors, []);
      assert.deepEqual(parsed.records, jsonLines(records));
      for (const record of parsed.records) assert.ok(validRecord(record), ajv.errorsText(validRecord.errors));
    });
  }

  it('holds the fixtures to the ATIF schema', () => {
    for (const trajectory of [...jsonLines('episodes.atif.jsonl'), JSON.parse(read('harbor-style.atif.json'))]) {
      assert.ok(validAtif(trajectory), ajv.errorsText(validAtif.errors));
    }
    assert.equal(validAtif({ ...JSON.parse(read('harbor-style.atif.json')), schema_version: 'ATIF-v2.0' }), false);
  });

  it('reads our records, ATIF lines and a whole ATIF document alike, and says what a line in neither format holds', () => {
    const ours = read('episodes.trajectories.jsonl').split('\n')[0];
    const atif = read('episodes.atif.jsonl').split('\n')[1];
    const text = [ours, atif, '{"name": "x", "value": 1}', '[1, 2]', '{oops', ''].join('\n');
    const { records, errors } = parseTrajectories(text);
    assert.deepEqual(
      records.map((r) => r.id),
      ['1-0-0', '1-0-9'],
    );
    assert.equal(errors.length, 3);
    assert.match(errors[2], /^line 5: not JSON \(/);
    assert.deepEqual(errors.slice(0, 2), [
      `line 3 has keys {name, value}: ${EXPECTED}`,
      `line 4 is a JSON array: ${EXPECTED}`,
    ]);

    // a pretty-printed trajectory.json is one document, not a line each
    assert.equal(
      parseTrajectories(JSON.stringify(JSON.parse(read('harbor-style.atif.json')), null, 2)).records.length,
      1,
    );
  });

  it('says why it cannot read an ATIF trajectory', () => {
    const harbor = JSON.parse(read('harbor-style.atif.json'));
    assert.match(
      parseTrajectories(JSON.stringify({ ...harbor, schema_version: 'ATIF-v2.0' })).errors[0],
      /^line 1: an ATIF trajectory this cannot read: ATIF-v2\.0: this reads ATIF-v1\.x$/,
    );
    const badStep = { ...harbor, steps: [{ step_id: 1, source: 'robot', message: '' }] };
    assert.throws(() => atifToRecord(badStep), /steps\[0\]\.source is "robot", not "system", "user" or "agent"/);
    // a later 1.x reads: its new fields are left aside
    assert.equal(atifToRecord({ ...harbor, schema_version: 'ATIF-v1.8' }).id, 'notes-task-1');
  });
});
