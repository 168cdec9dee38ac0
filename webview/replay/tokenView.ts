// The token view: the exact sequence the trainer learned from. Each token shows its text; the loss mask
// (masked tokens hatched and dimmed), an overlay (background colour: the token advantage, or, on a training step's
// episodes, the trainer-vs-rollout logprob mismatch, the entropy or the importance weight) and the logprob (bar
// under the token) overlay it; hover or focus shows the exact values, and the largest mismatches are listed, each
// a jump to its token. Tokens wrap at the view's width, as text does, and
// rows are virtualised: only the rows in view exist in the DOM, so 20,000 tokens stay responsive.
import type { TrajectoryRecord } from '../../protocol/webview-messages';
import { ADVANTAGE } from './advantage';
import { formatNumber, h } from '../dom';
import {
  availableOverlays,
  largestMismatches,
  learnerFigure,
  mismatch,
  OVERLAYS,
  type TokenOverlay,
} from './tokenOverlays';

const ROW_HEIGHT = 26;
/** Rows drawn above and below the view: at full width a row holds about 60 tokens, twice the 32 of a fixed row. */
const OVERSCAN_ROWS = 3;

/** A token's text with its whitespace made visible. */
export function visibleText(text: string): string {
  return text.replace(/\n/g, '⏎').replace(/\t/g, '⇥').replace(/ /g, '·') || '∅';
}

export function tokenTitle(record: TrajectoryRecord, index: number): string {
  const t = record.tokens;
  const trainer = learnerFigure(t, 'trainer_logprob', index);
  const learner =
    trainer !== null
      ? ` · trainer logprob ${formatNumber(trainer, 4)} (${formatSigned(mismatch(t, index))})` +
        ` · entropy ${formatNumber(learnerFigure(t, 'entropy', index), 3)}` +
        (t.is_weight ? ` · importance weight ${formatNumber(learnerFigure(t, 'is_weight', index), 3)}` : '')
      : '';
  return (
    `#${index} ${JSON.stringify(t.text[index])} id ${t.ids[index]} · ${t.role[index]} · turn ${t.turn[index]} · ` +
    `loss mask ${t.loss_mask[index]} · logprob ${formatNumber(t.logprob[index], 4)}${learner} · ` +
    `advantage ${formatNumber(t.advantage[index], 4)}`
  );
}

function formatSigned(value: number | null): string {
  return value === null ? '–' : `${value >= 0 ? '+' : ''}${value.toFixed(4)}`;
}

export interface TokenViewOptions {
  compact: boolean;
  /** What colours the chips (one the episode lacks falls back to the advantage). */
  overlay: TokenOverlay;
  setOverlay: (overlay: TokenOverlay) => void;
  /** A token to scroll to and focus once drawn (a click on a step's largest mismatch). */
  focus?: number | null;
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

export function renderTokenView(record: TrajectoryRecord, options: TokenViewOptions): HTMLElement {
  const tokens = record.tokens;
  const count = tokens.ids.length;
  const overlays = availableOverlays(record);
  const overlay = OVERLAYS[overlays.includes(options.overlay) ? options.overlay : 'advantage'];
  const values = tokens.ids.map((_, index) => overlay.value(tokens, index));
  const largest = Math.max(1e-9, ...values.map((v) => Math.abs(v ?? 0)));
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
    const value = values[index];
    if (value !== null) {
      el.style.setProperty('--adv-alpha', (Math.min(1, Math.abs(value) / largest) * 0.55).toFixed(3));
      el.classList.add(!overlay.signed ? 'heat' : value >= 0 ? 'adv-pos' : 'adv-neg');
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
  /** Scrolls the token at `index` into the view's upper third and focuses it (its row drawn first). */
  const reveal = (index: number): void => {
    wrap();
    let row = starts.length - 1;
    while (row > 0 && starts[row] > index) row--;
    viewport.scrollTop = Math.max(0, row * ROW_HEIGHT - viewport.clientHeight / 3);
    paint();
    spacer.querySelector<HTMLElement>(`.token[data-index="${index}"]`)?.focus();
  };
  viewport.addEventListener('scroll', () => requestAnimationFrame(paint));
  // painted in the next frame: a repaint that adds a scrollbar resizes the view again, which the observer would
  // otherwise have to report in this one ("ResizeObserver loop completed with undelivered notifications")
  const resized = new ResizeObserver(() =>
    viewport.isConnected ? requestAnimationFrame(paint) : resized.disconnect(),
  );
  resized.observe(viewport);
  requestAnimationFrame(() => (options.focus != null ? reveal(options.focus) : paint()));
  queueMicrotask(paint);

  const swatch = (cls: string, text: string) =>
    h('span', { class: `token role-assistant ${cls} swatch`, title: overlay.help }, text);
  const legend = h(
    'div',
    { class: 'legend', 'aria-label': 'Legend' },
    h('span', { class: 'token role-prompt masked' }, 'prompt'),
    h('span', { class: 'token role-tool masked' }, 'tool / observation (masked)'),
    h('span', { class: 'token role-assistant' }, 'sampled (trained)'),
    ...(overlay.signed
      ? [swatch('adv-pos', `${overlay.label} > 0`), swatch('adv-neg', `${overlay.label} < 0`)]
      : [swatch('heat', `${overlay.label}: darker, larger`)]),
    h('span', { class: 'legend-note' }, 'bar under a token: its probability under the rollout policy'),
    overlays.length > 1 ? overlayControl(overlays, overlay, options.setOverlay) : null,
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
    mismatchList(largestMismatches([record]), 'Largest trainer − rollout mismatches', (m) => reveal(m.index)),
    detail,
    viewport,
  );
}

/** The overlay buttons, the shown one pressed. */
function overlayControl(
  overlays: TokenOverlay[],
  shown: (typeof OVERLAYS)[TokenOverlay],
  choose: (overlay: TokenOverlay) => void,
): HTMLElement {
  return h(
    'span',
    { class: 'segmented', role: 'group', 'aria-label': 'Colour the tokens by' },
    ...overlays.map((id) => {
      const button = h(
        'button',
        { 'aria-pressed': String(OVERLAYS[id] === shown), 'data-overlay': id, title: OVERLAYS[id].help },
        OVERLAYS[id].label,
      );
      button.addEventListener('click', () => choose(id));
      return button;
    }),
  );
}

/** A list of mismatched tokens, each a button that `open`s it; nothing when there are none. (Also the group view's,
 *  over a step's episodes.) */
export function mismatchList(
  found: ReturnType<typeof largestMismatches>,
  title: string,
  open: (mismatch: ReturnType<typeof largestMismatches>[number]) => void,
): HTMLElement | null {
  if (!found.length) return null;
  return h(
    'div',
    { class: 'mismatches', 'aria-label': title },
    h('span', { class: 'legend-note', title: OVERLAYS.mismatch.help }, `${title}:`),
    ...found.map((m) => {
      const button = h(
        'button',
        { class: 'mismatch', 'data-record': m.recordId, 'data-index': m.index },
        `${JSON.stringify(m.text)} ${formatSigned(m.gap)}`,
      );
      button.title = `token #${m.index} of ${m.recordId}: trainer − rollout logprob ${formatSigned(m.gap)}`;
      button.addEventListener('click', () => open(m));
      return button;
    }),
  );
}
