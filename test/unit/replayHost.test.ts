import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { findToolDefinition, parseTrajectories } from '../../extension/replay/toolSource';

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
