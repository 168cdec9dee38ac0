// The TypeScript side's walls, held as the Python side's are (trainer-server/tests/test_layers.py): the import graph of
// extension/, webview/ and protocol/ (type-only imports included: a circle of types is still a circle to read) has no
// circle; the parts meet only in protocol/: the extension and the webviews never import each other, and protocol/
// imports neither; and inside the extension and the webviews every file has a floor and imports only from its own
// floor or below.
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

/** Each part's floors, ground floor first, as file paths without `.ts` relative to the part (`*` ends a folder). */
const FLOORS: Record<string, Array<[string, string[]]>> = {
  extension: [
    [
      'building blocks: one job each, no state of the editor',
      [
        'commands',
        'counted',
        'settings',
        'envBundle',
        'runConfig',
        'runConfigDocuments',
        'scaffold',
        'mcpServerEntry',
        'webviewHtml',
      ],
    ],
    [
      'the trainer, spoken to and read',
      [
        'trainerClient',
        'serverCertificates',
        'webSocket',
        'troubleshooting',
        'localServer',
        'trainerInstall',
        'trajectoryCache',
      ],
    ],
    [
      'what the editor knows of runs and configs',
      [
        'searchQuery',
        'warmStart',
        'trainingSetFile',
        'healthProblems',
        'replay/atif',
        'replay/toolSource',
        'replay/trajectoryFile',
      ],
    ],
    ['the language server, a process of its own', ['languageServer/*']],
    [
      'models and the connection',
      [
        'offlineRuns',
        'runsModel',
        'toolProblems',
        'trainerConnection',
        'replay/search',
        'replay/toolRerun',
        'replay/reroll',
      ],
    ],
    ['the context every command is a function of', ['ctx']],
    [
      'features: the commands, views and panels',
      [
        'compareCode',
        'configProblems',
        'connectionCommands',
        'dashboard',
        'healthDiagnostics',
        'languageClient',
        'runCommands',
        'runStarting',
        'runsView',
        'scaffoldCommands',
        'scaffoldFit',
        'searchCommands',
        'setupCommands',
        'statusBar',
        'trainingSets',
        'tryCommands',
        'walkthrough',
        'replay/index',
      ],
    ],
    ['activation', ['extension']],
  ],
  webview: [
    [
      'pieces: the DOM helpers and what the views compute',
      [
        'dom',
        'dashboard/configDiff',
        'dashboard/metricGroups',
        'dashboard/smoothing',
        'dashboard/runTimeline',
        'dashboard/chartData',
        'replay/advantage',
        'replay/lineDiff',
        'replay/steps',
        'replay/anchorGroups',
        'replay/toolSchemas',
        'replay/toolOffers',
        'replay/tokenOverlays',
        'replay/trainingSetAction',
      ],
    ],
    ["the replay's state", ['replay/state']],
    [
      'views',
      [
        'replay/tokenView',
        'replay/toolRerunView',
        'replay/rerollView',
        'replay/promptTab',
        'replay/episodeView',
        'replay/groupView',
        'replay/runBrowser',
        'replay/searchBox',
        'dashboard/alerts',
        'dashboard/chart',
        'dashboard/codeSection',
      ],
    ],
    ["each webview's entry", ['replay/main', 'dashboard/main']],
  ],
};

/** A file's floor in its part (its index in FLOORS), or undefined where no floor names it. */
function floorOf(file: string): number | undefined {
  const [part, ...rest] = file.replace(/\.ts$/, '').split('/');
  const path = rest.join('/');
  const index = (FLOORS[part] ?? []).findIndex(([, files]) =>
    files.some((name) => (name.endsWith('/*') ? path.startsWith(name.slice(0, -1)) : path === name)),
  );
  return index >= 0 ? index : undefined;
}

/** Every import from a floor to a higher one, as "file (floor) -> target (floor)". */
function upwardImports(graph: Map<string, string[]>): string[] {
  return [...graph].flatMap(([file, targets]) =>
    targets
      .filter((target) => target.split('/')[0] === file.split('/')[0] && floorOf(target)! > floorOf(file)!)
      .map((target) => `${file} (${floorOf(file)}) -> ${target} (${floorOf(target)})`),
  );
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

  it('gives every file of the extension and the webviews a floor', () => {
    const floorless = [...graph.keys()].filter((file) => file.split('/')[0] in FLOORS && floorOf(file) === undefined);
    assert.deepEqual(floorless, [], 'a new file takes its place in FLOORS');
  });

  it('has no import from a floor to a higher one', () => {
    assert.deepEqual(upwardImports(graph), []);
  });

  it('finds an upward import where there is one', () => {
    assert.deepEqual(upwardImports(new Map([['webview/replay/state.ts', ['webview/replay/rerollView.ts']]])), [
      'webview/replay/state.ts (1) -> webview/replay/rerollView.ts (2)',
    ]);
  });
});
