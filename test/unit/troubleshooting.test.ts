// Every error the user is told of has its section of docs/troubleshooting.md, which the notification's Learn more
// opens in the packaged extension: each error code of rpc.schema.json and each failure kind of the editor maps to an
// anchor that is a heading of the page, slugged alike by MkDocs (the site) and VS Code's Markdown preview.
import { strict as assert } from 'node:assert';
import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ErrorCode } from '../../protocol/generated/rpc';
import { TrainerRequestError } from '../../extension/trainerClient';
import {
  EditorFailure,
  ERROR_CODE_SECTIONS,
  FAILURE_SECTIONS,
  sectionFor,
  TROUBLESHOOTING_PAGE,
} from '../../extension/troubleshooting';

const ROOT = resolve(__dirname, '..', '..');
const page = readFileSync(join(ROOT, TROUBLESHOOTING_PAGE), 'utf8');
const headings = [...page.matchAll(/^### (.+)$/gm)].map((m) => m[1]);
/** Both slug a heading of words and digits alike: lower case, spaces to hyphens. */
const slug = (heading: string): string => heading.toLowerCase().replace(/ /g, '-');
const anchors = new Set(headings.map(slug));

describe('troubleshooting sections', () => {
  it('every error code rpc.schema.json declares has a section', () => {
    const schema = JSON.parse(readFileSync(join(ROOT, 'protocol', 'schemas', 'rpc.schema.json'), 'utf8'));
    const codes: number[] = schema.$defs.errorCode.oneOf.map((code: { const: number }) => code.const);
    assert.ok(codes.length >= 17);
    for (const code of codes) {
      const section = ERROR_CODE_SECTIONS[code as ErrorCode];
      assert.ok(section, `error code ${code} has no troubleshooting section`);
      assert.ok(
        anchors.has(section),
        `error code ${code}: no heading "### ..." of ${TROUBLESHOOTING_PAGE} is #${section}`,
      );
    }
  });

  it("every failure kind of the editor's has a section", () => {
    for (const [kind, section] of Object.entries(FAILURE_SECTIONS))
      assert.ok(anchors.has(section), `${kind}: no heading of ${TROUBLESHOOTING_PAGE} is #${section}`);
  });

  it('the headings linked to slug the same on the site and in the preview, once each', () => {
    const linked = new Set([...Object.values(FAILURE_SECTIONS), ...Object.values(ERROR_CODE_SECTIONS)]);
    for (const heading of headings.filter((h) => linked.has(slug(h))))
      assert.match(heading, /^[A-Za-z0-9]+( [A-Za-z0-9]+)*$/, `"${heading}": punctuation slugs differently`);
    assert.equal(new Set(headings.map(slug)).size, headings.length, 'two headings share a slug');
  });

  it("picks a trainer error's section by its code, an editor failure's by its kind", () => {
    const failed = (code: TrainerRequestError['code']) => new TrainerRequestError('run/start', code, 'x');
    assert.equal(sectionFor(failed(ErrorCode.CODE_NOT_ALLOWED)), 'running-code-on-a-remote-server-is-refused');
    assert.equal(sectionFor(failed(ErrorCode.RUN_STATE_CONFLICT)), 'run-state-conflict');
    assert.equal(sectionFor(failed('timeout')), 'the-server-did-not-answer-in-time');
    assert.equal(sectionFor(failed('disconnected')), 'the-connection-was-lost');
    assert.equal(sectionFor(failed('not-connected')), 'not-connected-to-a-trainer');
    const undeclared = Math.min(...Object.values(ErrorCode)) - 1; // a newer server's code
    assert.equal(sectionFor(failed(undeclared)), 'any-other-error');
    assert.equal(sectionFor(new EditorFailure('noPython', 'x')), 'python-or-the-trainer-not-found');
    assert.equal(sectionFor('untrusted'), 'workspace-not-trusted');
    assert.equal(sectionFor(new Error('anything')), 'any-other-error');
  });

  it('the page and every page it links ship in the .vsix', () => {
    const shipped = readFileSync(join(ROOT, '.vscodeignore'), 'utf8');
    assert.ok(shipped.split('\n').includes('!docs/*.md'));
    const docs = new Set(readdirSync(join(ROOT, 'docs')));
    for (const [, target] of page.matchAll(/\]\(([^)#:]+\.md)(#[^)]*)?\)/g))
      assert.ok(!target.includes('/') && docs.has(target), `${target}: not a page of docs/ that ships`);
  });

  it('every error notification goes through showError, which adds Learn more', () => {
    const sources = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
        entry.isDirectory()
          ? sources(join(dir, entry.name))
          : entry.name.endsWith('.ts')
            ? [join(dir, entry.name)]
            : [],
      );
    const direct = sources(join(ROOT, 'extension'))
      .filter((file) => !file.endsWith('ctx.ts') && !file.includes('languageServer'))
      .filter((file) => readFileSync(file, 'utf8').includes('showErrorMessage('));
    assert.deepEqual(direct, [], 'show errors with ctx.ts showError');
  });
});
