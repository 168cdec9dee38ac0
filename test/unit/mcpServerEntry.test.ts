import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import { parse } from 'yaml';
import {
  addServerEntry,
  entryFromInput,
  findServerEntry,
  splitCommandLine,
  suggestServerName,
  validateServerName,
} from '../../extension/mcpServerEntry';
import { parseTrajectories } from '../../extension/replay/trajectoryFile';
import { toolProblems } from '../../extension/toolProblems';

const ROOT = resolve(__dirname, '..', '..');
const runConfigSchema = JSON.parse(readFileSync(join(ROOT, 'protocol', 'schemas', 'run-config.schema.json'), 'utf8'));
const validRunConfig = new Ajv2020({ strict: false }).compile(runConfigSchema);

const CONFIG = [
  '# the scaffolded config, with a comment that must survive',
  'name: weather',
  'env:',
  '  module: env.py',
  '  class_name: WeatherEnv  # the ToolEnv',
  'data:',
  '  train: tasks.jsonl',
  '',
].join('\n');

describe('New Tool > From an MCP server: the env.mcp_servers entry', () => {
  it('reads a command line as a POSIX shell would, quotes and escapes included', () => {
    assert.deepEqual(splitCommandLine(`python 'my server.py' --root "a \\"b\\"" c\\ d`), [
      'python',
      'my server.py',
      '--root',
      'a "b"',
      'c d',
    ]);
    assert.deepEqual(splitCommandLine('  npx  -y  @scope/server  '), ['npx', '-y', '@scope/server']);
    assert.throws(() => splitCommandLine('python "server.py'), /unclosed " quote/);
  });

  it('tells a stdio command from a streamable HTTP URL, and refuses what is neither', () => {
    assert.deepEqual(entryFromInput('python weather_server.py --units metric', 'weather'), {
      name: 'weather',
      command: 'python',
      args: ['weather_server.py', '--units', 'metric'],
    });
    assert.deepEqual(entryFromInput(' http://127.0.0.1:8000/mcp ', 'web'), {
      name: 'web',
      url: 'http://127.0.0.1:8000/mcp',
    });
    assert.throws(() => entryFromInput('   ', 'x'), /Give the command/);
    assert.throws(() => entryFromInput('https://a b', 'x'), /no spaces/);
  });

  it('suggests a valid server name from the script or the host, and checks names', () => {
    assert.equal(suggestServerName('python servers/weather_server.py'), 'weather_server');
    assert.equal(suggestServerName('npx -y @modelcontextprotocol/server-filesystem /tmp'), 'tmp');
    assert.equal(suggestServerName('https://tools.example.com/mcp'), 'tools');
    assert.equal(suggestServerName('"unclosed'), 'mcp');
    assert.equal(validateServerName('weather-2'), undefined);
    assert.match(validateServerName('my server') ?? '', /Letters, digits/);
  });

  it('appends the entry to the config, keeps its comments, and the result is a valid run config', () => {
    const once = addServerEntry(CONFIG, entryFromInput('python weather_server.py', 'weather')).yaml;
    const twice = addServerEntry(once, entryFromInput('http://127.0.0.1:8000/mcp', 'web')).yaml;
    assert.match(twice, /# the scaffolded config, with a comment that must survive/);
    assert.match(twice, /class_name: WeatherEnv +# the ToolEnv/);
    const config = parse(twice);
    assert.deepEqual(config.env.mcp_servers, [
      { name: 'weather', command: 'python', args: ['weather_server.py'] },
      { name: 'web', url: 'http://127.0.0.1:8000/mcp' },
    ]);
    assert.ok(validRunConfig(config), JSON.stringify(validRunConfig.errors));
    assert.throws(
      () => addServerEntry(twice, { name: 'web', url: 'http://x/mcp' }),
      /already has a server named "web"/,
    );
    assert.throws(() => addServerEntry('data: {train: t}\n', { name: 'a', command: 'x', args: [] }), /no env: section/);
    assert.throws(() => addServerEntry('env: [\n', { name: 'a', command: 'x', args: [] }), /not valid YAML/);
  });

  it('switches a tags config to hermes when a listed tool takes more than one text argument (the run would fail)', () => {
    const tags = `${CONFIG}rollout:\n  # how the model writes a call\n  tool_format: tags\n`;
    const search = { name: 'search', parameters: { properties: { query: { type: 'string' } } } };
    const add = { name: 'add', parameters: { properties: { a: { type: 'number' }, b: { type: 'number' } } } };
    const fits = addServerEntry(tags, { name: 'web', url: 'http://x/mcp' }, [search]);
    assert.deepEqual([parse(fits.yaml).rollout.tool_format, fits.switchedFor], ['tags', []]);
    const switched = addServerEntry(tags, { name: 'math', command: 'python', args: [] }, [search, add]);
    assert.deepEqual([parse(switched.yaml).rollout.tool_format, switched.switchedFor], ['hermes', ['add']]);
    assert.match(switched.yaml, /# how the model writes a call\n {2}tool_format: hermes/);
    const hermes = addServerEntry(CONFIG, { name: 'math', command: 'python', args: [] }, [add]);
    assert.deepEqual(hermes.switchedFor, []); // no tool_format: hermes, the default, already calls it
  });

  it("finds a server's entry by name, for the Problems panel", () => {
    const text = addServerEntry(addServerEntry(CONFIG, { name: 'weather', command: 'python', args: [] }).yaml, {
      name: 'web',
      url: 'http://127.0.0.1:8000/mcp',
    }).yaml;
    const lines = text.split('\n');
    assert.match(lines[findServerEntry(text, 'weather')!], /name: weather/);
    assert.match(lines[findServerEntry(text, 'web')!], /name: web/);
    assert.equal(findServerEntry(text, 'other'), undefined);
    assert.equal(findServerEntry(CONFIG, 'weather'), undefined);
  });

  it("places an MCP tool's failures on its server's entry in the run config", () => {
    // A trainer-recorded episode whose "boom" calls are declared to come from the server "weather".
    const { records } = parseTrajectories(
      readFileSync(join(ROOT, 'protocol', 'examples', 'trajectories', 'tool-errors.trajectories.jsonl'), 'utf8'),
    );
    const fromServer = records.map((record) => ({ ...record, tool_servers: { boom: 'weather' } }));
    const config = addServerEntry(CONFIG, { name: 'weather', command: 'python', args: ['weather_server.py'] }).yaml;
    const problems = toolProblems(
      fromServer,
      2,
      [{ path: '/env/tools.py', text: 'class Boom(Tool):\n    name = "boom"\n' }],
      { path: '/env/weather.agentrl.yaml', text: config },
    );
    const boom = problems.find((problem) => problem.tool === 'boom')!;
    assert.deepEqual(boom.location, { path: '/env/weather.agentrl.yaml', line: findServerEntry(config, 'weather') });
    assert.match(boom.message, /^MCP server "weather"'s tool "boom" failed 2 time\(s\)/);
    assert.equal(boom.faultOfTool, true);
  });
});
