// What the user was looking at; saved with the webview's setState so it survives hide/show and reload.
import type { RerollEdit } from '../../protocol/webview-messages';
import type { TokenOverlay } from './tokenOverlays';

/** Where a re-roll starts: a turn of a recorded episode and what is edited there. */
export interface RerollBranch {
  runId: string;
  trajectoryId: string;
  turn: number;
  edit: RerollEdit;
}

export type View = 'runs' | 'episode' | 'tokens' | 'group' | 'reroll';
export type InspectorTab = 'io' | 'json' | 'tokens' | 'reward' | 'metadata';
export type RunSort = 'step' | 'reward' | '-reward' | 'length' | '-length';
export type GroupSort = 'reward' | '-reward' | 'turns' | 'sample';
/** The group view's rows: one per episode, or the episodes' steps grouped by the state they start from. */
export type GroupBy = 'episode' | 'anchor';

export interface UiState {
  view: View;
  selectedId: string | null;
  stepIndex: number;
  inspectorTab: InspectorTab;
  filters: { status: '' | 'finished' | 'truncated' | 'error'; toolErrorsOnly: boolean; step: string };
  runSort: RunSort;
  groupSort: GroupSort;
  groupBy: GroupBy;
  followLive: boolean;
  playSpeedMs: number;
  runRowLimit: number;
  /** What colours the token view's chips. */
  tokenOverlay: TokenOverlay;
  /** The token the token view scrolls to and focuses when it next opens (a step's largest mismatch clicked). */
  focusToken: number | null;
  /** The turn "Edit and re-roll from here" was opened on (the re-roll view's). */
  reroll: RerollBranch | null;
}

export const ROW_PAGE = 100;

export const DEFAULT_STATE: UiState = {
  view: 'runs',
  selectedId: null,
  stepIndex: 0,
  inspectorTab: 'io',
  filters: { status: '', toolErrorsOnly: false, step: '' },
  runSort: 'step',
  groupSort: '-reward',
  groupBy: 'episode',
  followLive: true,
  playSpeedMs: 800,
  runRowLimit: ROW_PAGE,
  tokenOverlay: 'advantage',
  focusToken: null,
  reroll: null,
};

export function restoreState(saved: unknown): UiState {
  if (!saved || typeof saved !== 'object') return structuredClone(DEFAULT_STATE);
  const partial = saved as Partial<UiState>;
  return {
    ...structuredClone(DEFAULT_STATE),
    ...partial,
    filters: { ...DEFAULT_STATE.filters, ...(partial.filters ?? {}) },
  };
}
