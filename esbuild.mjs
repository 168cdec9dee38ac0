// Builds the three bundles the .vsix ships: the extension host (Node), the language server (Node),
// and the webview app (browser). `node esbuild.mjs --watch` rebuilds on change.
import * as esbuild from 'esbuild';
import { cpSync, existsSync, mkdirSync } from 'node:fs';

const watch = process.argv.includes('--watch');
const common = { bundle: true, sourcemap: true, minify: !watch, logLevel: 'info' };

const builds = [
  { ...common, entryPoints: ['extension/extension.ts'], outfile: 'dist/extension.js', platform: 'node', format: 'cjs', target: 'node20', external: ['vscode'] },
  { ...common, entryPoints: ['extension/languageServer/server.ts'], outfile: 'dist/languageServer.js', platform: 'node', format: 'cjs', target: 'node20' },
  { ...common, entryPoints: ['webview/main.ts'], outfile: 'dist/webview/main.js', platform: 'browser', format: 'iife', target: 'es2022', loader: { '.css': 'css' } },
].filter((b) => existsSync(b.entryPoints[0]));

// codicons ship as a font + stylesheet; the webview loads them from its own resource root.
mkdirSync('dist/webview', { recursive: true });
cpSync('node_modules/@vscode/codicons/dist', 'dist/webview/codicons', { recursive: true });

if (watch) {
  for (const b of builds) await (await esbuild.context(b)).watch();
} else {
  await Promise.all(builds.map((b) => esbuild.build(b)));
}
