import { strict as assert } from 'node:assert';
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import { ACTIVE_RUN_STATUSES, ENDED_RUN_STATUSES, ErrorCode } from '../../protocol/generated/rpc';

const ROOT = resolve(__dirname, '..', '..');
const PROTOCOL = join(ROOT, 'protocol');

function schema(name: string): object {
  return JSON.parse(readFileSync(join(PROTOCOL, 'schemas', name), 'utf8'));
}

describe('protocol', () => {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addSchema(schema('trajectory.schema.json'));
  ajv.addSchema(schema('rpc.schema.json'));
  ajv.addSchema(schema('run-folder.schema.json'));
  const rpcId = 'https://agent-rl-studio.dev/schemas/rpc.schema.json';
  const defRef = (name: string) => `${rpcId}#/$defs/${name.replace(/~/g, '~0').replace(/\//g, '~1')}`;

  it('every trajectory fixture validates against the trajectory schema', () => {
    const validate = ajv.getSchema('https://agent-rl-studio.dev/schemas/trajectory.schema.json')!;
    const dir = join(PROTOCOL, 'examples', 'trajectories');
    const files = readdirSync(dir).filter((f) => f.endsWith('.trajectories.jsonl'));
    assert.ok(files.length >= 3);
    for (const file of files) {
      for (const line of readFileSync(join(dir, file), 'utf8').split('\n').filter(Boolean)) {
        assert.ok(validate(JSON.parse(line)), `${file}: ${ajv.errorsText(validate.errors)}`);
      }
    }
  });

  it('the RPC examples are valid and invalid exactly as labelled', () => {
    const valid = JSON.parse(readFileSync(join(PROTOCOL, 'examples', 'rpc', 'valid.json'), 'utf8'));
    const invalid = JSON.parse(readFileSync(join(PROTOCOL, 'examples', 'rpc', 'invalid.json'), 'utf8'));
    for (const [name, example] of Object.entries(valid)) {
      const validate = ajv.getSchema(defRef(name))!;
      assert.ok(validate(example), `${name}: ${ajv.errorsText(validate.errors)}`);
    }
    for (const [name, example] of Object.entries(invalid)) {
      assert.equal(ajv.getSchema(defRef(name))!(example), false, `${name} should be rejected`);
    }
  });

  it('the generated TypeScript types match the schema (run `npm run gen:protocol`)', async () => {
    const { generateDoctorTypes, generateRpcTypes, generateTrainingSetTypes, generateTrajectoryTypes } =
      await import('../../protocol/generate.mjs');
    assert.equal(readFileSync(join(PROTOCOL, 'generated', 'trajectory.ts'), 'utf8'), await generateTrajectoryTypes());
    assert.equal(readFileSync(join(PROTOCOL, 'generated', 'rpc.ts'), 'utf8'), await generateRpcTypes());
    assert.equal(readFileSync(join(PROTOCOL, 'generated', 'doctor.ts'), 'utf8'), await generateDoctorTypes());
    assert.equal(
      readFileSync(join(PROTOCOL, 'generated', 'training-set.ts'), 'utf8'),
      await generateTrainingSetTypes(),
    );
  });

  it('a stored event is a streamed one without its runId and runInfo', () => {
    const valid = JSON.parse(readFileSync(join(PROTOCOL, 'examples', 'rpc', 'valid.json'), 'utf8'));
    const eventLine = ajv.getSchema('https://agent-rl-studio.dev/schemas/run-folder.schema.json#/$defs/eventLine')!;
    assert.ok(eventLine(valid.runEvent), ajv.errorsText(eventLine.errors));
    assert.equal(eventLine({ ...valid.runEvent, runId: 'r' }), false);
  });

  it("the generated shared names are the schema's", () => {
    const defs = schema('rpc.schema.json') as {
      $defs: { runStatus: { enum: string[] }; errorCode: { oneOf: { const: number; 'x-name': string }[] } };
    };
    assert.deepEqual([...ACTIVE_RUN_STATUSES, ...ENDED_RUN_STATUSES].sort(), [...defs.$defs.runStatus.enum].sort());
    assert.deepEqual(
      ErrorCode,
      Object.fromEntries(defs.$defs.errorCode.oneOf.map((code) => [code['x-name'], code.const])),
    );
  });

  it('no TypeScript source spells an error code or a set of run statuses by hand', () => {
    const statuses = (
      schema('rpc.schema.json') as { $defs: { runStatus: { enum: string[] } } }
    ).$defs.runStatus.enum.join('|');
    const handCopies = [/-32[0-7]\d\d\b/g, new RegExp(`[([{]\\s*'(${statuses})'\\s*,\\s*'(${statuses})'`, 'g')];
    const sources = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
        entry.isDirectory()
          ? sources(join(dir, entry.name))
          : entry.name.endsWith('.ts')
            ? [join(dir, entry.name)]
            : [],
      );
    const copies = ['extension', 'webview', 'test']
      .flatMap((dir) => sources(join(ROOT, dir)))
      .flatMap((file) =>
        handCopies.flatMap((pattern) =>
          [...readFileSync(file, 'utf8').matchAll(pattern)].map((m) => `${relative(ROOT, file)}: ${m[0]}`),
        ),
      );
    assert.deepEqual(copies, [], 'use the constants of protocol/generated/rpc.ts');
  });
});
