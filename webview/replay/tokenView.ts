// The token view: the exact sequence the trainer learned from. Each token shows its text; the loss mask
// (masked tokens hatched and dimmed), the advantage (background colour) and the logprob (bar under the
// token) overlay it; hover or focus shows the exact values. Rows are virtualised: only the rows in view
// exist in the DOM, so 20,000 tokens stay responsive.
import type { TrajectoryRecord } from '../../protocol/webview-messages';
import { formatNumber, h } from '../dom';

const TOKENS_PER_ROW = 32;
const ROW_HEIGHT = 26;
const OVERSCAN_ROWS = 6;

function visibleText(text: string): string {
  return text.replace(/\n/g, '⏎').replace(/\t/g, '⇥').replace(/ /g, '·') || '∅';
}

export function tokenTitle(record: TrajectoryRecord, index: number): string {
  const t = record.tokens;
  return (
    `#${index} ${JSON.stringify(t.text[index])} id ${t.ids[index]} · ${t.role[index]} · turn ${t.turn[index]} · ` +
    `loss mask ${t.loss_mask[index]} · logprob ${formatNumber(t.logprob[index], 4)} · advantage ${formatNumber(t.advantage[index], 4)}`
  );
}

export function renderTokenView(record: TrajectoryRecord, options: { compact: boolean }): HTMLElement {
  const tokens = record.tokens;
  const count = tokens.ids.length;
  const rows = Math.ceil(count / TOKENS_PER_ROW);
  const maxAdvantage = Math.max(1e-9, ...tokens.advantage.map((a) => Math.abs(a ?? 0)));
  const detail = h(
    'div',
    { class: 'token-detail', id: 'token-detail', 'aria-live': 'polite' },
    'Hover or focus a token to see its values.',
  );
  const spacer = h('div', { class: 'token-spacer' });
  spacer.style.height = `${rows * ROW_HEIGHT}px`;
  const viewport = h(
    'div',
    { class: `token-viewport${options.compact ? ' compact' : ''}`, tabindex: 0, 'aria-label': `${count} tokens` },
    spacer,
  );
  let rendered = '';

  const cell = (index: number): HTMLElement => {
    const role = tokens.role[index];
    const masked = tokens.loss_mask[index] === 0;
    const el = h(
      'span',
      {
        class: `token role-${role}${masked ? ' masked' : ''}`,
        tabindex: 0,
        'data-index': index,
        title: tokenTitle(record, index),
        'aria-label': tokenTitle(record, index),
      },
      visibleText(tokens.text[index]),
    );
    const advantage = tokens.advantage[index];
    if (advantage !== null && advantage !== undefined) {
      el.style.setProperty('--adv-alpha', (Math.min(1, Math.abs(advantage) / maxAdvantage) * 0.55).toFixed(3));
      el.classList.add(advantage >= 0 ? 'adv-pos' : 'adv-neg');
    }
    const logprob = tokens.logprob[index];
    if (logprob !== null && logprob !== undefined) el.style.setProperty('--prob', Math.exp(logprob).toFixed(3));
    const show = () => {
      detail.textContent = tokenTitle(record, index);
    };
    el.addEventListener('mouseenter', show);
    el.addEventListener('focus', show);
    return el;
  };

  const paint = () => {
    const first = Math.max(0, Math.floor(viewport.scrollTop / ROW_HEIGHT) - OVERSCAN_ROWS);
    const last = Math.min(
      rows,
      Math.ceil((viewport.scrollTop + (viewport.clientHeight || 600)) / ROW_HEIGHT) + OVERSCAN_ROWS,
    );
    const key = `${first}:${last}`;
    if (key === rendered) return;
    rendered = key;
    const lines: HTMLElement[] = [];
    for (let row = first; row < last; row++) {
      const line = h('div', { class: 'token-row' });
      line.style.top = `${row * ROW_HEIGHT}px`;
      for (let index = row * TOKENS_PER_ROW; index < Math.min(count, (row + 1) * TOKENS_PER_ROW); index++)
        line.appendChild(cell(index));
      lines.push(line);
    }
    spacer.replaceChildren(...lines);
  };
  viewport.addEventListener('scroll', () => requestAnimationFrame(paint));
  requestAnimationFrame(paint);
  queueMicrotask(paint);

  const legend = h(
    'div',
    { class: 'legend', 'aria-label': 'Legend' },
    h('span', { class: 'token role-prompt masked' }, 'prompt'),
    h('span', { class: 'token role-tool masked' }, 'tool / observation (masked)'),
    h('span', { class: 'token role-assistant' }, 'sampled (trained)'),
    h('span', { class: 'token role-assistant adv-pos swatch' }, 'advantage > 0'),
    h('span', { class: 'token role-assistant adv-neg swatch' }, 'advantage < 0'),
    h('span', { class: 'legend-note' }, 'bar under a token: its probability under the rollout policy'),
  );
  legend.querySelectorAll<HTMLElement>('.swatch').forEach((el) => el.style.setProperty('--adv-alpha', '0.45'));
  const trained = tokens.loss_mask.filter((m) => m === 1).length;
  return h(
    'section',
    { class: 'token-view', 'aria-label': 'Tokens' },
    h(
      'div',
      { class: 'token-summary' },
      `${count} tokens · ${trained} trained (loss mask 1) · ${count - trained} masked`,
    ),
    legend,
    detail,
    viewport,
  );
}
