// The Run Dashboard's Code section: the code each run shown trained with (its code.json, from `run/code`): the
// versions of Python, agentrl, torch, transformers and vLLM, and its env files with short hashes; a run after the
// first says which files differ from the first's (protocol/code-changes.ts) and offers their diff (Compare Code).
// Paths, versions and reasons come from the trainer: text, never markup.
import type { DashboardRun } from '../../protocol/dashboard-messages';
import { codeChanges, type CodeChange } from '../../protocol/code-changes';
import type { CodeVersions } from '../../protocol/generated/rpc';
import { h } from '../dom';

/** Hex digits of a SHA-256 shown; the whole hash is the cell's tooltip. */
const HASH_SHOWN = 10;
const VERSIONS = ['python', 'agentrl', 'torch', 'transformers', 'vllm'] as const;

const versionLine = (versions: CodeVersions): string =>
  VERSIONS.map((name) => `${name} ${versions[name] ?? '–'}`).join(' · ');

const changeWords = (change: CodeChange, baseName: string): string =>
  change === 'changed' ? `differs from ${baseName}` : change === 'added' ? `not in ${baseName}` : `only in ${baseName}`;

const plural = (count: number, word: string): string => `${count} ${word}${count === 1 ? '' : 's'}`;

export function renderCode(runs: DashboardRun[], compare: (runId: string, otherRunId: string) => void): HTMLElement {
  const [base] = runs;
  return h(
    'section',
    { class: 'code-section', 'aria-label': 'Code' },
    h('h2', {}, 'Code'),
    ...runs.map((run, i) => runCode(run, i > 0 ? base : undefined, compare)),
  );
}

function runCode(
  run: DashboardRun,
  base: DashboardRun | undefined,
  compare: (runId: string, otherRunId: string) => void,
): HTMLElement {
  if (!run.code)
    return h(
      'p',
      { class: 'empty', 'data-run': run.runId },
      run.code === null
        ? `${run.name}: recorded no code (it started before runs recorded the code they trained with).`
        : `${run.name}: the trainer did not say which code it ran (a server older than run/code?).`,
    );
  const { code, resumes } = run.code;
  const changes = base?.code ? codeChanges(base.code.code, code) : undefined;
  const changeOf = new Map(changes?.map((c) => [c.path, c.change]));
  const summary = h(
    'summary',
    {},
    h('strong', {}, run.name),
    `: ${plural(code.files.length, 'file')}`,
    changes && base ? ` (${changes.length} differ from ${base.name})` : '',
    ` · ${versionLine(code.versions)}`,
  );
  const removed = (changes ?? []).filter((c) => c.change === 'removed');
  const rows = [...code.files, ...removed.map(({ path }) => ({ path, sha256: '', size: undefined }))].map((file) => {
    const change = changeOf.get(file.path);
    return h(
      'tr',
      { 'data-path': file.path, class: change ? `code-${change}` : undefined },
      h('td', {}, file.path),
      h('td', { class: 'num' }, file.size ?? ''),
      h('td', { class: 'hash', title: file.sha256 || undefined }, file.sha256.slice(0, HASH_SHOWN)),
      base ? h('td', {}, change ? changeWords(change, base.name) : 'same') : null,
    );
  });
  const columns = ['file', 'bytes', 'sha256', ...(base ? [`against ${base.name}`] : [])];
  const compareButton =
    base && changes?.length
      ? h('button', { class: 'link compare-code', 'data-run': run.runId }, `compare code with ${base.name}`)
      : null;
  compareButton?.addEventListener('click', () => compare(base!.runId, run.runId));
  return h(
    'details',
    { class: 'code-run', 'data-run': run.runId },
    summary,
    h(
      'p',
      { class: 'code-where' },
      `${code.root ?? "agentrl's own env (its version says which)"} · ${code.platform} · recorded ${code.recorded_at}`,
    ),
    compareButton,
    h(
      'table',
      { class: 'grid' },
      h('thead', {}, h('tr', {}, ...columns.map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, ...rows),
    ),
    code.left_out.length
      ? h(
          'ul',
          { class: 'code-left-out', 'aria-label': 'Left out of the snapshot' },
          ...code.left_out.map((f) => h('li', {}, `${f.path}: left out, ${f.reason}`)),
        )
      : null,
    ...resumes.map((resume) =>
      h(
        'p',
        { class: 'code-resume' },
        `resumed at step ${resume.step} `,
        resume.changed.length ? `with other code: ${resume.changed.join(', ')}` : 'with the same code',
        ` · ${versionLine(resume.code.versions)}`,
      ),
    ),
  );
}
