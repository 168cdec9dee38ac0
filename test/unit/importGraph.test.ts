// The TypeScript side's walls, held as the Python side's are (trainer-server/tests/test_layers.py): the import graph of
// extension/, webview/ and protocol/ (type-only imports included: a circle of types is still a circle to read) has no
// circle, and the parts meet only in protocol/: the extension and the webviews never import each other, and protocol/
// imports neither.
import { strict as assert } from 'node:assert';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = resolve(__dirname, '..', '..');
const PARTS = ['extension', 'webview', 'protocol'];

function sources(folder: string): string[] {
  return readdirSync(folder).flatMap((name) => {
    const path = join(folder, name);
    if (statSync(path).isDirectory()) return name === 'generated' ? [] : sources(path);
    return name.endsWith('.ts') && !name.endsWith('.d.ts') ? [path] : [];
  });
}

/** Each file's relative imports (and re-exports), as files of the repository. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of PARTS.flatMap((part) => sources(join(ROOT, part)))) {
    const text = readFileSync(file, 'utf8');
    const targets = [...text.matchAll(/^(?:import|export)\s[^;]*?from\s+'(\.[^']+)'/gms)].flatMap(([, spec]) => {
      const base = resolve(dirname(file), spec);
      return [`${base}.ts`, join(base, 'index.ts')].filter(existsSync).slice(0, 1);
    });
    graph.set(relative(ROOT, file), [...new Set(targets.map((target) => relative(ROOT, target)))]);
  }
  return graph;
}

/** Every circle: a path from a file back to itself, each found once (from its first file in the walk). */
function circles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const done = new Set<string>();
  const walk = (file: string, path: string[]): void => {
    const at = path.indexOf(file);
    if (at >= 0) {
      found.push([...path.slice(at), file]);
      return;
    }
    if (done.has(file)) return;
    for (const next of graph.get(file) ?? []) walk(next, [...path, file]);
    done.add(file);
  };
  for (const file of graph.keys()) walk(file, []);
  return found;
}

describe('the TypeScript import graph', () => {
  const graph = importGraph();

  it('reads every part', () => {
    for (const part of PARTS)
      assert.ok(
        [...graph.keys()].some((file) => file.startsWith(`${part}/`)),
        part,
      );
    assert.ok(graph.size > 50, `${graph.size} files`);
  });

  it('has no circle', () => {
    assert.deepEqual(
      circles(graph).map((circle) => circle.join(' -> ')),
      [],
    );
  });

  it('finds a circle where there is one', () => {
    const planted = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['a.ts']],
    ]);
    assert.deepEqual(circles(planted), [['a.ts', 'b.ts', 'c.ts', 'a.ts']]);
  });

  it('joins the extension and the webviews only through protocol/', () => {
    const crossing = [...graph].flatMap(([file, targets]) =>
      targets
        .filter((target) => {
          const [from, to] = [file.split('/')[0], target.split('/')[0]];
          return from !== to && to !== 'protocol';
        })
        .map((target) => `${file} -> ${target}`),
    );
    assert.deepEqual(crossing, []);
  });
});
