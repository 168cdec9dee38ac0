import { fake, pick, Uri } from './vscodeStub';
import { strict as assert } from 'node:assert';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { commands } from 'vscode';
import { parse } from 'yaml';
import type { MemoryPlan } from '../../protocol/generated/rpc';
import { Commands } from '../../extension/commands';
import { registerScaffoldCommands } from '../../extension/scaffoldCommands';
import { fakeCtx, type FakeCtx } from './fakeCtx';

describe('scaffold commands', () => {
  let f: FakeCtx;
  let parent: string;
  beforeEach(() => {
    fake.reset();
    parent = mkdtempSync(join(tmpdir(), 'agentrl-scaffold-commands-'));
    f = fakeCtx();
    f.connection.answers['config/memoryPlan'] = () => ({ plan: plan(true) });
    registerScaffoldCommands(f.ctx);
  });

  const GIB = 2 ** 30;
  /** The trainer's memory plan of a config, fitting its machine or not, with the ways to fit given. */
  const plan = (fits: boolean, waysToFit?: MemoryPlan['waysToFit']): MemoryPlan => ({
    peakBytes: 40 * GIB,
    rowPositions: 2048,
    fits,
    ...(fits ? {} : { shortestPeakBytes: 9 * GIB, waysToFit }),
    parameters: 134_515_008,
    trainableParameters: 134_515_008,
    shapeSource: 'config.json',
    device: { kind: 'cpu', label: "this machine's available memory (23.0 GiB)", memoryBytes: 23 * GIB },
    parts: [],
  });
  const halved = {
    text: 'train.micro_batch_size 8 -> 4 (peak 22.9 GiB)',
    settings: { 'train.micro_batch_size': 4 },
    peakBytes: 22.9 * GIB,
  };
  const lora = {
    text: 'model.lora.enabled: true (peak 12.0 GiB)',
    settings: { 'model.lora.enabled': true },
    peakBytes: 12 * GIB,
  };

  const newEnvironment = (name = 'lookup') =>
    commands.executeCommand(Commands.newEnvironment, { name, tools: ['search'], parent, model: 'tiny' });

  it('New Environment writes the env from the extension templates and opens its run config', async () => {
    const folder = await newEnvironment();
    assert.equal(folder, join(parent, 'lookup'));
    assert.ok(readdirSync(folder as string).includes('lookup.agentrl.yaml'));
    assert.match(readFileSync(join(parent, 'lookup', 'lookup.agentrl.yaml'), 'utf8'), /path: tiny/);
    assert.deepEqual(
      fake.shownDocuments.map((d) => d.uri.fsPath),
      [join(parent, 'lookup', 'lookup.agentrl.yaml')],
    );
    assert.deepEqual(f.log.lines, [`info: New environment written to ${join(parent, 'lookup')}`]);
  });

  it("New Environment fits its config to the trainer's machine where the memory plan says it does not fit", async () => {
    f.connection.answers['config/memoryPlan'] = () => ({ plan: plan(false, [lora, halved]) });
    const folder = (await newEnvironment()) as string;
    const config = join(folder, 'lookup.agentrl.yaml');
    const asked = f.connection.requests.find((r) => r.method === 'config/memoryPlan')!.params as {
      config: { name: string };
      configDir: string;
    };
    assert.deepEqual([asked.config.name, asked.configDir], ['lookup', folder], 'the config as written, and its folder');
    const written = readFileSync(config, 'utf8');
    assert.match(
      written,
      /micro_batch_size: 4 # set when written: 40\.0 GiB planned, over this machine's available memory/,
    );
    assert.match(written, /^# Run config of the lookup environment/, "the template's comments kept");
    assert.equal(parse(written).model.lora, undefined, 'LoRA changes what is learned: offered, never written');
    assert.match(
      fake.messages.at(-1)!.text,
      /lookup's config was fitted to the trainer's machine .*: train\.micro_batch_size 8 -> 4/,
    );
    assert.deepEqual(
      fake.shownDocuments.map((d) => d.uri.fsPath),
      [config],
    );
  });

  it('New Environment only says so where no change that keeps the learning fits; plans nothing without a trainer', async () => {
    f.connection.answers['config/memoryPlan'] = () => ({ plan: plan(false, [lora]) });
    const before = readFileSync(join((await newEnvironment('first')) as string, 'first.agentrl.yaml'), 'utf8');
    assert.match(before, /micro_batch_size: 8$/m);
    assert.match(
      fake.messages.at(-1)!.text,
      /first's config may not fit .* To fit, change one of: model\.lora\.enabled: true/,
    );
    f.connection.isConnected = false;
    f.connection.requests.length = 0;
    await newEnvironment('second');
    assert.deepEqual(f.connection.requests, []);
  });

  it('New Environment asks what plays the episodes, name, tools, model and folder in turn, and stops where the user does', async () => {
    fake.workspaceFolders = [{ uri: Uri.file(parent) }];
    fake.answers = [pick('Tools and a ToolEnv'), 'qa', 'search, calc', pick('tiny')];
    assert.equal(await commands.executeCommand(Commands.newEnvironment), join(parent, 'qa'));
    assert.deepEqual(
      fake.prompts.map((p) => p.options.title),
      ['New Environment (1/4)', 'New Environment (2/4)', 'New Environment (3/4)', 'New Environment (4/4)'],
    );
    assert.match(readFileSync(join(parent, 'qa', 'tools.py'), 'utf8'), /calc/);
    fake.answers = [pick('Tools and a ToolEnv'), 'later'];
    assert.equal(await commands.executeCommand(Commands.newEnvironment), undefined, 'the tools prompt dismissed');
  });

  it('New Environment from an existing agent asks the framework instead of tool names, and writes the agent, its reward and a run config', async () => {
    fake.workspaceFolders = [{ uri: Uri.file(parent) }];
    fake.answers = [pick('From an existing agent (OpenAI-compatible)'), 'my-agent', pick('LangGraph'), pick('tiny')];
    const folder = join(parent, 'my-agent');
    assert.equal(await commands.executeCommand(Commands.newEnvironment), folder);
    assert.deepEqual(
      fake.prompts.map((p) => p.options.title),
      ['New Environment (1/4)', 'New Environment (2/4)', 'New Environment (3/4)', 'New Environment (4/4)'],
    );
    assert.deepEqual(readdirSync(folder).sort(), ['agent.py', 'my-agent.agentrl.yaml', 'reward.py', 'tasks.jsonl']);
    assert.match(
      readFileSync(join(folder, 'agent.py'), 'utf8'),
      /^from langgraph\.prebuilt import create_react_agent$/m,
    );
    assert.match(readFileSync(join(folder, 'my-agent.agentrl.yaml'), 'utf8'), /^agent:\n {2}module: agent\.py$/m);
    assert.deepEqual(
      fake.shownDocuments.map((d) => d.uri.fsPath),
      [join(folder, 'my-agent.agentrl.yaml')],
    );
    const other = await commands.executeCommand(Commands.newEnvironment, {
      kind: 'agent',
      name: 'other',
      parent,
      model: 'tiny',
    });
    assert.equal(other, join(parent, 'other'), 'without prompts, from its arguments');
    assert.match(
      readFileSync(join(parent, 'other', 'agent.py'), 'utf8'),
      /^from openai import OpenAI$/m,
      'the default',
    );
    const byArgs = await commands.executeCommand(Commands.newEnvironment, {
      kind: 'agent',
      framework: 'pydantic-ai',
      name: 'typed',
      parent,
      model: 'tiny',
    });
    assert.match(readFileSync(join(byArgs as string, 'agent.py'), 'utf8'), /^from pydantic_ai import Agent$/m);
    fake.answers = [pick('From an existing agent (OpenAI-compatible)'), 'later'];
    assert.equal(await commands.executeCommand(Commands.newEnvironment), undefined, 'the framework pick dismissed');
  });

  it('New Environment as a Gym-style text environment asks no tool names, and writes the game and an env.gym run config', async () => {
    fake.workspaceFolders = [{ uri: Uri.file(parent) }];
    fake.answers = [pick('Gym-style text environment (env.gym)'), 'coin', pick('tiny')];
    const folder = join(parent, 'coin');
    assert.equal(await commands.executeCommand(Commands.newEnvironment), folder);
    assert.deepEqual(
      fake.prompts.map((p) => p.options.title),
      ['New Environment (1/4)', 'New Environment (2/3)', 'New Environment (3/3)'],
    );
    assert.equal(fake.prompts[1].options.value, 'my-game');
    assert.deepEqual(readdirSync(folder).sort(), ['coin.agentrl.yaml', 'game.py', 'tasks.jsonl', 'test_game.py']);
    assert.match(readFileSync(join(folder, 'coin.agentrl.yaml'), 'utf8'), /^env:\n {2}gym:\n/m);
    assert.deepEqual(
      fake.shownDocuments.map((d) => d.uri.fsPath),
      [join(folder, 'coin.agentrl.yaml')],
    );
    const byArgs = await commands.executeCommand(Commands.newEnvironment, { kind: 'gym', name: 'maze', parent });
    assert.ok(readdirSync(byArgs as string).includes('game.py'));
  });

  it('New Environment refuses a folder that exists', async () => {
    await newEnvironment();
    assert.equal(await newEnvironment(), undefined);
    assert.equal(
      fake.messages[0].text,
      `New Environment: ${join(parent, 'lookup')} already exists; choose another name.`,
    );
  });

  it('New Tool adds a Tool class to tools.py and registers it in env.py; New ToolEnv adds a second env on the same Tools', async () => {
    const folder = (await newEnvironment()) as string;
    const toolsPath = await commands.executeCommand(Commands.newTool, { folder, name: 'calculator' });
    assert.equal(toolsPath, join(folder, 'tools.py'));
    assert.match(readFileSync(join(folder, 'tools.py'), 'utf8'), /name = "calculator"/);
    assert.match(readFileSync(join(folder, 'env.py'), 'utf8'), /calculator|Calculator/);
    const module = await commands.executeCommand(Commands.newToolEnv, { folder, name: 'lookup-v2' });
    assert.equal(typeof module, 'string');
    assert.ok(readdirSync(folder).some((file) => file.startsWith('lookup-v2') && file.endsWith('.agentrl.yaml')));
  });

  it('New Tool from an MCP server lists its tools only in a trusted workspace, through the connected trainer', async () => {
    const folder = (await newEnvironment()) as string;
    f.connection.requests.length = 0; // New Environment's memory plan
    fake.trusted = false;
    const args = { folder, name: 'weather', kind: 'mcp', server: 'python weather.py' };
    assert.equal(await commands.executeCommand(Commands.newTool, args), undefined);
    assert.match(
      fake.messages[0].text,
      /^New Tool: Listing an MCP server's tools starts its program; trust this workspace first\./,
    );
    assert.equal(f.connection.requests.length, 0);

    fake.trusted = true;
    f.connection.answers['mcp/listTools'] = () =>
      ({ tools: [{ name: 'forecast', description: 'the weather' }] }) as never;
    const config = join(folder, 'lookup.agentrl.yaml');
    assert.equal(await commands.executeCommand(Commands.newTool, args), config);
    assert.equal(f.connection.requests[0].method, 'mcp/listTools');
    assert.equal((f.connection.requests[0].params as { server: { name: string } }).server.name, 'weather');
    const written = fake.textDocuments.find((d) => d.uri.fsPath === config)!.getText();
    assert.match(written, /weather/);
    assert.match(written, /python/);
  });

  it('New Tool without an environment in the workspace offers New Environment', async () => {
    assert.equal(await commands.executeCommand(Commands.newTool), undefined);
    assert.deepEqual(fake.messages[0].actions, ['New Environment', 'Learn more']);
  });
});
