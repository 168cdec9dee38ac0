// The token view: the exact sequence the trainer learned from. Each token shows its text; the loss mask
// (masked tokens hatched and dimmed), the advantage (background colour) and the logprob (bar under the
// token) overlay it; hover or focus shows the exact values. Tokens wrap at the view's width, as text does, and
// rows are virtualised: only the rows in view exist in the DOM, so 20,000 tokens stay responsive.
import type { TrajectoryRecord } from '../../protocol/webview-messages';
import { ADVANTAGE } from './advantage';
import { formatNumber, h } from '../dom';

const ROW_HEIGHT = 26;
/** Rows drawn above and below the view: at full width a row holds about 60 tokens, twice the 32 of a fixed row. */
const OVERSCAN_ROWS = 3;

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

/** Wraps tokens of these widths into rows of at most `width` pixels, `gap` apart, as text wraps: a row ends before the
 *  token that would not fit (a token wider than a row has one to itself). Returns the index each row starts at. */
export function packRows(widths: readonly number[], width: number, gap: number): number[] {
  const starts: number[] = [];
  let used = Infinity;
  widths.forEach((w, index) => {
    if (used + gap + w > width) {
      starts.push(index);
      used = w;
    } else {
      used += gap + w;
    }
  });
  return starts;
}

/** Each token's chip width as the stylesheet draws it, read off a sample row in `host`: its text in the chip's font
 *  (measured on a canvas: 20,000 tokens take milliseconds, where laying out each chip would take seconds), plus its
 *  padding and border, capped at its max-width; and the row's horizontal padding and the gap between chips. */
function measure(texts: readonly string[], host: HTMLElement): { widths: number[]; padding: number; gap: number } {
  const chip = h('span', { class: 'token' }, 'x');
  const row = h('div', { class: 'token-row' }, chip);
  host.appendChild(row);
  const chipStyle = getComputedStyle(chip);
  const rowStyle = getComputedStyle(row);
  const px = (value: string) => parseFloat(value) || 0;
  const frame =
    px(chipStyle.paddingLeft) +
    px(chipStyle.paddingRight) +
    px(chipStyle.borderLeftWidth) +
    px(chipStyle.borderRightWidth);
  const max = px(chipStyle.maxWidth) || Infinity;
  const context = document.createElement('canvas').getContext('2d')!;
  context.font = chipStyle.font;
  const padding = px(rowStyle.paddingLeft) + px(rowStyle.paddingRight);
  const gap = px(rowStyle.columnGap);
  row.remove();
  const known = new Map<string, number>();
  const widths = texts.map((text) => {
    let width = known.get(text);
    if (width === undefined) {
      // rounded up: a chip the browser lays out a fraction wider than measured must not push its row over
      width = Math.min(max, Math.ceil(context.measureText(text).width + frame));
      known.set(text, width);
    }
    return width;
  });
  return { widths, padding, gap };
}

export function renderTokenView(record: TrajectoryRecord, options: { compact: boolean }): HTMLElement {
  const tokens = record.tokens;
  const count = tokens.ids.length;
  const maxAdvantage = Math.max(1e-9, ...tokens.advantage.map((a) => Math.abs(a ?? 0)));
  const detail = h(
    'div',
    { class: 'token-detail', id: 'token-detail', 'aria-live': 'polite' },
    'Hover or focus a token to see its values.',
  );
  const spacer = h('div', { class: 'token-spacer' });
  const viewport = h(
    'div',
    { class: `token-viewport${options.compact ? ' compact' : ''}`, tabindex: 0, 'aria-label': `${count} tokens` },
    spacer,
  );
  let rendered = '';

  const cell = (index: number): HTMLElement => {
    const role = tokens.role[index];
    const masked = tokens.loss_mask[index] === 0;
    const title = tokenTitle(record, index);
    const el = h(
      'span',
      {
        class: `token role-${role}${masked ? ' masked' : ''}`,
        tabindex: 0,
        'data-index': index,
        title,
        'aria-label': title,
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
    return el;
  };
  // one listener for every chip (a row at full width holds 60 of them, and they are made again as the view scrolls)
  const show = (event: Event): void => {
    const chip = (event.target as HTMLElement).closest<HTMLElement>('.token[data-index]');
    if (chip) detail.textContent = chip.title;
  };
  viewport.addEventListener('mouseover', show);
  viewport.addEventListener('focusin', show);

  let measured: ReturnType<typeof measure> | undefined;
  /** The index each row starts at, for the width they were wrapped at. */
  let starts: number[] = [];
  let wrappedAt = 0;
  /** Wraps the tokens again when the view's width changed: the first paint, a resized panel. */
  const wrap = (): void => {
    const width = viewport.clientWidth;
    if (width === wrappedAt || !viewport.isConnected) return;
    measured ??= measure(tokens.text.map(visibleText), spacer);
    starts = packRows(measured.widths, width - measured.padding, measured.gap);
    wrappedAt = width;
    spacer.style.height = `${starts.length * ROW_HEIGHT}px`;
    rendered = '';
  };

  const paint = () => {
    wrap();
    const first = Math.max(0, Math.floor(viewport.scrollTop / ROW_HEIGHT) - OVERSCAN_ROWS);
    const last = Math.min(
      starts.length,
      Math.ceil((viewport.scrollTop + (viewport.clientHeight || 600)) / ROW_HEIGHT) + OVERSCAN_ROWS,
    );
    const key = `${first}:${last}`;
    if (key === rendered) return;
    rendered = key;
    const lines: HTMLElement[] = [];
    for (let row = first; row < last; row++) {
      const line = h('div', { class: 'token-row' });
      line.style.top = `${row * ROW_HEIGHT}px`;
      for (let index = starts[row]; index < (starts[row + 1] ?? count); index++) line.appendChild(cell(index));
      lines.push(line);
    }
    spacer.replaceChildren(...lines);
  };
  viewport.addEventListener('scroll', () => requestAnimationFrame(paint));
  // painted in the next frame: a repaint that adds a scrollbar resizes the view again, which the observer would
  // otherwise have to report in this one ("ResizeObserver loop completed with undelivered notifications")
  const resized = new ResizeObserver(() =>
    viewport.isConnected ? requestAnimationFrame(paint) : resized.disconnect(),
  );
  resized.observe(viewport);
  requestAnimationFrame(paint);
  queueMicrotask(paint);

  const legend = h(
    'div',
    { class: 'legend', 'aria-label': 'Legend' },
    h('span', { class: 'token role-prompt masked' }, 'prompt'),
    h('span', { class: 'token role-tool masked' }, 'tool / observation (masked)'),
    h('span', { class: 'token role-assistant' }, 'sampled (trained)'),
    h(
      'span',
      { class: 'token role-assistant adv-pos swatch', title: ADVANTAGE.token.help },
      `${ADVANTAGE.token.label} > 0`,
    ),
    h(
      'span',
      { class: 'token role-assistant adv-neg swatch', title: ADVANTAGE.token.help },
      `${ADVANTAGE.token.label} < 0`,
    ),
    h('span', { class: 'legend-note' }, 'bar under a token: its probability under the rollout policy'),
  );
  legend.querySelectorAll<HTMLElement>('.swatch').forEach((el) => el.style.setProperty('--adv-alpha', '0.45'));
  const trained = tokens.loss_mask.filter((m) => m === 1).length;
  return h(
    'section',
    { class: 'token-view', 'aria-label': 'Tokens' },
    h(
      'div',
      { class: 'token-summary', id: 'token-summary' },
      `${count} tokens · ${trained} trained (loss mask 1) · ${count - trained} masked · `,
      h(
        'span',
        { title: ADVANTAGE.episode.help },
        `${ADVANTAGE.episode.label} ${formatNumber(record.advantage)} over the trained tokens`,
      ),
    ),
    legend,
    detail,
    viewport,
  );
}
