// Entry of the extension-host tests: VS Code loads out/exthost/index.js (this file, bundled with mocha) inside
// its real extension host and awaits run(); a rejection is a failure. Each test/exthost/*.test.ts is bundled on
// its own to out/exthost/*.test.js (`vscode` stays external: the host provides it) and loaded here by mocha.
// Started by test/e2e/exthost.mjs; results are printed (console is forwarded to the runner) and written as JSON
// to $AGENTRL_EXTHOST_RESULTS. $AGENTRL_EXTHOST_GREP runs only the tests whose full title matches.
import Mocha from 'mocha';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

interface Result {
  title: string;
  state: 'passed' | 'failed' | 'pending';
  ms?: number;
  error?: string;
}

export async function run(): Promise<void> {
  const mocha = new Mocha({ ui: 'bdd', timeout: 60_000, color: false, reporter: 'spec' });
  if (process.env.AGENTRL_EXTHOST_GREP) mocha.grep(process.env.AGENTRL_EXTHOST_GREP);
  const files = readdirSync(__dirname)
    .filter((f) => f.endsWith('.test.js'))
    .sort();
  if (files.length === 0) throw new Error(`no *.test.js beside ${__filename}`);
  for (const file of files) mocha.addFile(join(__dirname, file));

  const results: Result[] = [];
  const failures = await new Promise<number>((resolve) => {
    const runner = mocha.run(resolve);
    runner.on('pass', (t) => results.push({ title: t.fullTitle(), state: 'passed', ms: t.duration }));
    runner.on('pending', (t) => results.push({ title: t.fullTitle(), state: 'pending' }));
    runner.on('fail', (t, err: Error) =>
      results.push({ title: t.fullTitle(), state: 'failed', ms: t.duration, error: err?.stack ?? String(err) }),
    );
  });
  const out = process.env.AGENTRL_EXTHOST_RESULTS;
  if (out) writeFileSync(out, JSON.stringify({ files, failures, results }, null, 2));
  if (failures > 0) throw new Error(`${failures} extension-host test(s) failed`);
  if (results.length === 0) throw new Error('no extension-host test ran');
}
