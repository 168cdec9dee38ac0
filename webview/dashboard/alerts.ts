// The health alerts of the runs shown: what the trainer said about why a run cannot learn, the newest first,
// each with a link to the replay at its step. Codes the dashboard does not know are shown as they come;
// severity and trajectory ids are shown when the trainer sends them. Their words are text, never markup.
import { h, icon } from '../dom';
import type { HealthEntry } from './runTimeline';

export interface RunAlerts {
  runIndex: number;
  runName: string;
  entries: HealthEntry[];
}

const SEVERITY_ICONS: Record<string, string> = { error: 'error', warning: 'warning', info: 'info' };

export function renderAlerts(
  runs: RunAlerts[],
  showRunNames: boolean,
  open: (runIndex: number, step: number) => void,
): HTMLElement {
  const items = runs
    .flatMap((run) => run.entries.map((entry) => ({ run, entry })))
    .sort((a, b) => b.entry.alert.step - a.entry.alert.step || b.entry.seq - a.entry.seq);
  const list = h('ul', { class: 'alerts', id: 'alerts' });
  for (const { run, entry } of items) {
    const { alert } = entry;
    const severity = alert.severity ?? 'warning';
    const link = h(
      'button',
      {
        class: 'link',
        'data-step': alert.step,
        'aria-label': `Open the replay of ${run.runName} at step ${alert.step}`,
      },
      `open replay at step ${alert.step}`,
    );
    link.addEventListener('click', () => open(run.runIndex, alert.step));
    const trajectories = alert.trajectory_ids?.length ? ` · ${alert.trajectory_ids.length} trajectories` : '';
    list.appendChild(
      h(
        'li',
        { class: `alert ${alert.resolved ? 'resolved' : `severity-${severity}`}`, 'data-code': alert.code },
        icon(alert.resolved ? 'pass' : (SEVERITY_ICONS[severity] ?? 'warning')),
        h(
          'span',
          { class: 'alert-head' },
          showRunNames ? `${run.runName} · ` : '',
          `step ${alert.step} · `,
          h('strong', {}, alert.code),
          alert.resolved ? ' cleared' : alert.severity ? ` (${alert.severity})` : '',
          trajectories,
        ),
        h('span', { class: 'alert-message' }, alert.message),
        alert.resolved ? null : h('span', { class: 'alert-fix' }, `Fix: ${alert.fix}`),
        link,
      ),
    );
  }
  return h(
    'section',
    { class: 'alerts-section', 'aria-label': 'Health alerts' },
    h('h2', {}, `Health alerts (${items.length})`),
    items.length
      ? list
      : h('p', { class: 'empty' }, 'No health alerts: the trainer has not said that a run cannot learn.'),
  );
}
