// New Environment's files, written as extension/scaffold.ts renders them, for the Python tests that run a scaffolded
// folder (trainer-server/tests/test_agent_templates.py): one renderer, never a copy of it in Python.
//   tsx test/renderEnvironment.ts '<EnvironmentSpec as JSON>' OUT_DIR
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type EnvironmentSpec, renderEnvironment } from '../extension/scaffold';

const [specJson, outDir] = process.argv.slice(2);
if (!specJson || !outDir) {
  console.error("usage: tsx test/renderEnvironment.ts '<EnvironmentSpec as JSON>' OUT_DIR");
  process.exit(2);
}
const files = renderEnvironment(
  JSON.parse(specJson) as EnvironmentSpec,
  resolve(__dirname, '..', 'extension', 'templates'),
);
mkdirSync(outDir, { recursive: true });
for (const [name, content] of files) writeFileSync(join(outDir, name), content);
