// Runs the extension-host tests (out/exthost, built from test/exthost by esbuild.mjs) inside code-server's real
// extension host. The server must run with `--vscode-option enable-smoke-test-driver`; the page is opened with a
// `payload` naming the development extension (the repo root, loaded from source: package.json + dist/) and the
// tests, and the workbench reports their end through window.codeAutomationExit (exposed here before it loads).
// usage: node exthost.mjs BASE_URL WORKSPACE_DIR   env: EXTHOST_ENV (JSON object of extra variables for the
// extension host), EXTHOST_TIMEOUT_S (default 900), EXTHOST_VERBOSE=1 (all workbench log lines).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { launchChromium } from './chromium.mjs';
import { format } from 'node:util';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const REPO = path.resolve(HERE, '..', '..');
const SHOTS = path.join(REPO, 'test-results', 'e2e');
const [base, workspace] = process.argv.slice(2);
if (!workspace) {
  console.error('usage: node exthost.mjs BASE_URL WORKSPACE_DIR');
  process.exit(2);
}
const tests = path.join(REPO, 'out', 'exthost');
if (!fs.existsSync(path.join(tests, 'index.js'))) {
  console.error(`${tests}/index.js missing: run npm run build`);
  process.exit(2);
}

const t0 = Date.now();
const lap = (m) => console.log(`[exthost ${((Date.now() - t0) / 1000).toFixed(1)}s] ${m}`);
const remote = (p) => `vscode-remote://${new URL(base).host}${p}`; // code-server's remote authority is its Host
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'agentrl-chromium-'));
const resultsFile = path.join(profile, 'exthost-results.json');
const env = {
  ...JSON.parse(process.env.EXTHOST_ENV || '{}'),
  AGENTRL_EXTHOST_RESULTS: resultsFile,
  AGENTRL_EXTHOST_SHOTS: SHOTS,
};
const payload = [
  ['extensionDevelopmentPath', remote(REPO)],
  ['extensionTestsPath', remote(tests)],
  ['extensionEnvironment', JSON.stringify(env)],
  ['skipWelcome', 'true'],
];
// Workbench chatter kept out of the console (all of it goes to test-results/e2e/exthost-workbench.log): connection
// set-up, and what fails offline by design (the marketplace at open-vsx.org, the GitHub sign-in provider).
const NOISE =
  /ENOTFOUND|open-vsx|marketplace|authentication provider 'github'|Creating a socket|connection token|reconnection-grace-time|Updating additional builtin|\[Service Worker\]|\[AgentHost|\[AccountPolicyGate\]/i;
const url = `${base}/?folder=${encodeURIComponent(workspace)}&payload=${encodeURIComponent(JSON.stringify(payload))}`;

fs.mkdirSync(SHOTS, { recursive: true });
const workbenchLog = fs.createWriteStream(path.join(SHOTS, 'exthost-workbench.log'));
const context = await launchChromium(profile);
let code = 'no result';
let shots = Promise.resolve();
// A test asked for a screenshot (test/exthost/util.ts): written under a temporary name, then renamed, so the test
// that polls for the file never sees half of it.
async function screenshot(page, name, where, selector) {
  try {
    // Webviews are nested iframes: the workbench's iframe, then the webview's own #active-frame.
    const scope =
      where === 'webview'
        ? page.locator('iframe.webview.ready:visible').first().contentFrame().frameLocator('#active-frame')
        : page;
    if (selector)
      await scope
        .locator(selector)
        .first()
        .waitFor({ timeout: 30000 })
        .catch(() => lap(`screenshot ${name}: ${selector} did not show`));
    await page.waitForTimeout(500);
    const file = path.join(SHOTS, `exthost-${name}.png`);
    await page.screenshot({ path: `${file}.tmp.png` });
    fs.renameSync(`${file}.tmp.png`, file);
  } catch (e) {
    lap(`screenshot ${name} failed: ${e.message}`);
  }
}
try {
  const page = context.pages()[0] ?? (await context.newPage());
  let exited;
  const exit = new Promise((resolve) => {
    exited = resolve;
  });
  // The workbench calls these hooks when it finds them on window (its test-automation driver).
  await page.exposeFunction('codeAutomationLog', (type, args) => {
    if (type === 'trace' || type === 'debug') return;
    const line = format(...(Array.isArray(args) ? args : [args]));
    const tagged = type === 'log' || type === 'info' ? line : `[${type}] ${line}`;
    workbenchLog.write(tagged + '\n');
    const shot = /^agentrl-e2e:screenshot (\S+)(?: (page|webview) ?(.*))?$/.exec(line);
    if (shot) {
      shots = shots.then(() => screenshot(page, shot[1], shot[2], shot[3]));
      return;
    }
    if (process.env.EXTHOST_VERBOSE || !NOISE.test(line)) console.log(tagged);
  });
  await page.exposeFunction('codeAutomationExit', (exitCode) => exited(exitCode));
  await page.goto(url);
  await page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
  lap('workbench ready; extension-host tests running');
  const limitS = Number(process.env.EXTHOST_TIMEOUT_S || 900);
  code = await Promise.race([
    exit,
    new Promise((r) => setTimeout(() => r(`timeout after ${limitS} s`), limitS * 1000)),
  ]);
  await shots;
  await page.screenshot({ path: path.join(SHOTS, 'exthost-end.png') }).catch(() => {});
} finally {
  await context.close();
  workbenchLog.end();
}
// The tests' own record (written by test/exthost/index.ts); the exit code alone does not say what ran.
let results;
try {
  results = JSON.parse(fs.readFileSync(resultsFile, 'utf8'));
} catch {
  /* the tests never finished */
}
fs.rmSync(profile, { recursive: true, force: true });
if (results) {
  for (const r of results.results)
    console.log(
      `${r.state.padEnd(7)} ${r.title}${r.ms !== undefined ? ` (${(r.ms / 1000).toFixed(1)} s)` : ''}${r.error ? `\n${r.error}` : ''}`,
    );
  const count = (s) => results.results.filter((r) => r.state === s).length;
  lap(
    `${count('passed')} passed, ${count('failed')} failed, ${count('pending')} pending (files: ${results.files.join(', ')})`,
  );
} else {
  lap('no results file: the tests did not finish');
}
lap(`exit code ${code}`);
process.exit(code === 0 && results && results.failures === 0 && results.results.length > 0 ? 0 : 1);
