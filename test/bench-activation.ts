// Activation benchmark: how long the built extension (dist/extension.js) takes to load and to run activate(),
// each measured in a fresh Node process (a cold module cache, as in a new extension host) against a stub
// `vscode` that accepts every call. It measures our own startup cost, not VS Code's: activation must stay
// cheap (no server started, no files scanned) because it runs whenever a workspace holds a run config.
// usage: npm run bench:activation [-- RUNS]
import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { resolve } from 'node:path';

const ROOT = resolve(__dirname, '..');
const BUNDLE = resolve(ROOT, 'dist', 'extension.js');
const RUNS = Number(process.argv[2] ?? 15);

// Runs inside each child: a `vscode` whose every member is a callable stub, then load + activate, timed.
const CHILD = `
const Module = require('module');
const { performance } = require('perf_hooks');
const childProcess = require('child_process');
let spawned = 0;
for (const name of ['spawn', 'fork', 'execFile', 'exec']) {
  const original = childProcess[name];
  childProcess[name] = (...args) => { spawned++; return original(...args); };
}
const stub = () => {
  const members = new Map();
  return new Proxy(function () {}, {
    get: (target, key) => key === 'then' ? undefined : key === Symbol.toPrimitive ? () => '' : members.has(key) ? members.get(key) : members.set(key, stub()).get(key),
    set: (target, key, value) => (members.set(key, value), true),
    apply: () => stub(),
    construct: () => stub(),
  });
};
// esbuild's ESM interop copies the module's own keys, so the namespaces the extension uses are real keys.
const names = ['window', 'workspace', 'commands', 'languages', 'env', 'extensions', 'Uri', 'EventEmitter', 'Disposable',
  'ThemeIcon', 'ThemeColor', 'TreeItem', 'TreeItemCollapsibleState', 'MarkdownString', 'CodeLens', 'Range', 'Position',
  'Diagnostic', 'DiagnosticSeverity', 'StatusBarAlignment', 'ProgressLocation', 'LogLevel', 'ViewColumn'];
const vscode = new Proxy({ ...Object.fromEntries(names.map((name) => [name, stub()])), version: '1.139.0' }, { get: (t, k) => (k in t ? t[k] : (t[k] = stub())) });
const load = Module._load;
Module._load = function (request, ...rest) { return request === 'vscode' ? vscode : load.call(this, request, ...rest); };
const context = { subscriptions: [], extensionPath: ${JSON.stringify(ROOT)}, extensionUri: vscode.Uri.file(${JSON.stringify(ROOT)}),
  asAbsolutePath: (p) => require('path').join(${JSON.stringify(ROOT)}, p), globalStorageUri: { fsPath: require('os').tmpdir() },
  secrets: stub(), extension: { packageJSON: { version: '0' } } };
const t0 = performance.now();
const extension = require(${JSON.stringify(BUNDLE)});
const t1 = performance.now();
extension.activate(context);
const t2 = performance.now();
process.stdout.write(JSON.stringify({ load: t1 - t0, activate: t2 - t1, subscriptions: context.subscriptions.length, spawnedDuringActivate: spawned }));
process.exit(0);
`;

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

const samples = Array.from(
  { length: RUNS },
  () =>
    JSON.parse(execFileSync(process.execPath, ['-e', CHILD], { encoding: 'utf8' })) as {
      load: number;
      activate: number;
      subscriptions: number;
      spawnedDuringActivate: number;
    },
);
const row = (name: string, values: number[]) =>
  console.log(
    `${name.padEnd(22)} median ${quantile(values, 0.5).toFixed(1).padStart(6)} ms   p90 ${quantile(values, 0.9).toFixed(1).padStart(6)} ms`,
  );
console.log(
  `dist/extension.js: ${(statSync(BUNDLE).size / 1024).toFixed(0)} KiB; ${RUNS} cold starts (node ${process.version})`,
);
row(
  'load (require)',
  samples.map((s) => s.load),
);
row(
  'activate()',
  samples.map((s) => s.activate),
);
row(
  'load + activate',
  samples.map((s) => s.load + s.activate),
);
console.log(
  `subscriptions registered: ${samples[0].subscriptions}; processes spawned synchronously by activate(): ${samples[0].spawnedDuringActivate}`,
);
