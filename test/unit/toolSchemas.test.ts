import { strict as assert } from 'node:assert';
import { describeTools, typeInWords } from '../../webview/replay/toolSchemas';

describe('tool schemas, as the Prompt step shows them', () => {
  it("reads an OpenAI function schema into name, description and each parameter's type, need and meaning", () => {
    const [lookup] = describeTools([
      {
        type: 'function',
        function: {
          name: 'lookup',
          description: 'Return the value stored under a key.',
          parameters: {
            type: 'object',
            properties: {
              key: { type: 'string', description: 'the key, a single digit' },
              limit: { type: ['integer', 'null'] },
            },
            required: ['key'],
          },
        },
      },
    ]);
    assert.deepEqual(
      { ...lookup, schema: undefined },
      {
        name: 'lookup',
        description: 'Return the value stored under a key.',
        parameters: [
          { name: 'key', type: 'string', required: true, description: 'the key, a single digit' },
          { name: 'limit', type: 'integer | null', required: false, description: '' },
        ],
        schema: undefined,
      },
    );
  });

  it('says types in words: enums, alternatives, arrays of items; a schema without one is any', () => {
    assert.equal(typeInWords({ enum: ['a', 1] }), 'one of "a", 1');
    assert.equal(
      typeInWords({ anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'number' } }] }),
      'string | array of number',
    );
    assert.equal(typeInWords({}), 'any');
  });

  it('reads a bare function, and what user code or an MCP server got wrong as absent, never as a crash', () => {
    assert.deepEqual(describeTools([{ name: 'bare', parameters: { properties: { x: {} } } }])[0].parameters, [
      { name: 'x', type: 'any', required: false, description: '' },
    ]);
    const [broken] = describeTools([{ function: { name: 7, description: null, parameters: 'none' } }]);
    assert.deepEqual([broken.name, broken.description, broken.parameters], ['(unnamed)', '', []]);
  });
});
