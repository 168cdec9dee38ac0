// The replay panel's browser app. It talks to its host only through the typed messages of
// protocol/webview-messages.ts, and keeps what the user looks at in the webview state.
import type {
  EpisodeAddress,
  EpisodeQuery,
  EpisodeSource,
  HostToWebviewMessage,
  RerollEdit,
  RerollListResult,
  RerollRecords,
  Reply,
  SearchResultsMessage,
  ToolCallAddress,
  TrajectoryRecord,
  WebviewToHostMessage,
} from '../../protocol/webview-messages';
import { anchorOf } from './anchorGroups';
import { clear, h } from '../dom';
import { renderEpisode } from './episodeView';
import type { RerunState } from './toolRerunView';
import { renderGroup } from './groupView';
import { MAX_SAMPLES, MAX_TEMPERATURE, recordedText, renderReroll, type RerollForm } from './rerollView';
import { renderRunBrowser, visibleRecords } from './runBrowser';
import type { SearchState } from './searchBox';
import { restoreState, type UiState, type View } from './state';
import { buildSteps, groupOf, nextStep, type JumpTarget } from './steps';
import { renderTokenView } from './tokenView';
import '../styles.css';

const LIVE_REDRAW_MS = 1000;

interface VsCodeApi {
  postMessage(message: WebviewToHostMessage): void;
  getState(): unknown;
  setState(state: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

class ReplayApp {
  private readonly vscode = acquireVsCodeApi();
  private state: UiState = restoreState(this.vscode.getState());
  private records: TrajectoryRecord[] = [];
  private source = '';
  private live = false;
  private runStatus: string | undefined;
  private playTimer: number | undefined;
  /** The latest re-run of each tool call by `runId/trajectoryId/turn/call` (a file may hold several runs' trajectories):
   * which code it asked for, and the host's reply once it came. */
  private readonly reruns = new Map<string, RerunState>();
  /** Whether the host can search this run's episodes (a run on a connected trainer, not a file). */
  private searchable = false;
  /** Where the run's episodes came from, when the host could read its config: what a tool call offers. */
  private episodeSource: EpisodeSource | undefined;
  private search: SearchState | undefined;
  /** "Edit and re-roll from here", by episode (`runId/trajectoryId`): the run's stored re-rolls and checkpoints, the
   * trainer's last word on a re-roll running, the re-roll shown; and the form of the branch the view is on. */
  private readonly rerollLists = new Map<string, 'loading' | Reply<RerollListResult>>();
  private readonly rerollProgress = new Map<string, string>();
  private readonly rerollShown = new Map<string, 'loading' | Reply<RerollRecords>>();
  private rerollForm: RerollForm | undefined;
  private liveRedraw: number | undefined;

  constructor(private readonly root: HTMLElement) {
    window.addEventListener('message', (event: MessageEvent<HostToWebviewMessage>) => this.receive(event.data));
    document.addEventListener('keydown', (event) => this.onKey(event));
    this.render();
    this.vscode.postMessage({ type: 'ready' });
  }

  private receive(message: HostToWebviewMessage): void {
    if (message.type === 'load') {
      this.records = message.records;
      this.source = message.source;
      this.live = message.live;
      this.runStatus = message.runStatus;
      this.searchable = message.searchable ?? false;
      this.episodeSource = message.episodeSource;
      this.search = undefined;
      if (message.focusStep !== undefined) this.focusStep(message.focusStep);
      if (message.focusId !== undefined && this.records.some((r) => r.id === message.focusId))
        this.open(message.focusId);
    } else if (message.type === 'runStatus') {
      this.live = message.live;
      this.runStatus = message.runStatus;
    } else if (message.type === 'searchResults') {
      this.receiveSearch(message);
    } else if (message.type === 'toolRerun') {
      this.reruns.set(rerunKey(message), { code: message.code, reply: message.reply });
    } else if (message.type === 'rerolls') {
      this.rerollLists.set(episodeKey(message), message.reply);
    } else if (message.type === 'rerollProgress') {
      if (this.rerollProgress.has(episodeKey(message))) this.rerollProgress.set(episodeKey(message), message.message);
    } else if (message.type === 'reroll') {
      const key = episodeKey(message);
      this.rerollProgress.delete(key);
      this.rerollShown.set(key, message.reply);
      const list = this.rerollLists.get(key);
      if (message.reply.ok && list && list !== 'loading' && list.ok) {
        const made = message.reply.result.reroll;
        if (!list.result.rerolls.some((r) => r.rerollId === made.rerollId)) list.result.rerolls.push(made);
      }
    } else if (message.type === 'append') {
      const known = new Set(this.records.map((r) => r.id));
      this.records = [...this.records, ...message.records.filter((r) => !known.has(r.id))];
      if (this.state.followLive && this.state.view === 'runs') this.state.filters.step = '';
      this.redrawLive();
      return;
    } else {
      return;
    }
    this.render();
  }

  /** A live run's new episodes are drawn at most once a LIVE_REDRAW_MS: drawn at each of a fast run's appends, the
   * redraws fell behind the host's posts and held the renderer the workbench shares for minutes (no palette opened). */
  private redrawLive(): void {
    this.liveRedraw ??= window.setTimeout(() => this.render(), LIVE_REDRAW_MS);
  }

  private askSearch(query: EpisodeQuery, cursor?: string): void {
    const kept = cursor && this.search ? this.search : { ids: [], total: 0, nextCursor: null };
    this.search = { ...kept, query, pending: true };
    this.vscode.postMessage({ type: 'search', query, ...(cursor ? { cursor } : {}) });
    this.render();
  }

  /** A page of matches: their records join the panel's (a match it did not hold yet, or a newer copy). */
  private receiveSearch(message: SearchResultsMessage): void {
    if (!this.search || JSON.stringify(this.search.query) !== JSON.stringify(message.query)) return; // superseded
    if (!message.reply.ok) {
      this.search = { ...this.search, pending: false, error: message.reply.message };
      return;
    }
    const { records, total, nextCursor } = message.reply;
    const incoming = new Map(records.map((r) => [r.id, r]));
    this.records = [...this.records.filter((r) => !incoming.has(r.id)), ...records];
    const ids = records.map((r) => r.id);
    this.search = {
      query: message.query,
      pending: false,
      ids: message.more ? [...this.search.ids, ...ids] : ids,
      total,
      nextCursor,
    };
  }

  /** The group view of the step's first group; a step without trajectories lists the run filtered to it. */
  private focusStep(step: number): void {
    const first = this.records
      .filter((r) => r.step === step)
      .sort((a, b) => a.group - b.group || a.sample - b.sample)[0];
    this.stop();
    this.update((s) => {
      s.filters.step = String(step);
      s.view = first ? 'group' : 'runs';
      s.selectedId = first?.id ?? null;
      s.stepIndex = 0;
    });
  }

  private get selected(): TrajectoryRecord | undefined {
    return this.records.find((r) => r.id === this.state.selectedId) ?? visibleRecords(this.records, this.state)[0];
  }

  private update(change: (state: UiState) => void): void {
    change(this.state);
    this.vscode.setState(this.state);
    this.render();
  }

  private open(id: string, view: View = 'episode', stepIndex = 0): void {
    this.stop();
    this.update((s) => {
      s.selectedId = id;
      s.stepIndex = stepIndex;
      s.view = view;
    });
  }

  /** "Edit and re-roll from here": the re-roll view on that turn, its form holding the recorded text. */
  private rerollFrom(record: TrajectoryRecord, turn: number, edit: RerollEdit): void {
    this.stop();
    this.rerollForm = undefined;
    const key = episodeKey({ runId: record.run_id, trajectoryId: record.id });
    const list = this.rerollLists.get(key);
    if (list && list !== 'loading' && !list.ok) this.rerollLists.delete(key); // asked again: a trainer may be connected now
    this.update((s) => {
      s.reroll = { runId: record.run_id, trajectoryId: record.id, turn, edit };
      s.view = 'reroll';
    });
  }

  /** The re-roll view's episode and form (the form made from the recorded text on the view's first draw, also
   * after a reload), its run's stored re-rolls asked for once. */
  private rerollView(): { record: TrajectoryRecord; form: RerollForm; key: string } | undefined {
    const branch = this.state.reroll;
    const record = branch && this.records.find((r) => r.run_id === branch.runId && r.id === branch.trajectoryId);
    if (!branch || !record) return undefined;
    this.rerollForm ??= {
      text: recordedText(record, branch.turn, branch.edit),
      policy: 'latest',
      samples: 4,
      temperature: null,
      code: 'current',
    };
    const key = episodeKey(branch);
    if (!this.rerollLists.has(key)) {
      this.rerollLists.set(key, 'loading');
      this.vscode.postMessage({ type: 'listRerolls', runId: branch.runId, trajectoryId: branch.trajectoryId });
    }
    return { record, form: this.rerollForm, key };
  }

  private runReroll(): void {
    const branch = this.state.reroll;
    const view = this.rerollView();
    if (!branch || !view) return;
    const list = this.rerollLists.get(view.key);
    const runTemperature = list && list !== 'loading' && list.ok ? list.result.temperature : 1;
    const clamp = (value: number, low: number, high: number) => Math.min(high, Math.max(low, value));
    this.rerollProgress.set(view.key, 'Asking the trainer…');
    this.vscode.postMessage({
      type: 'rerollEpisode',
      params: {
        ...branch,
        text: view.form.text,
        policy: view.form.policy,
        samples: clamp(Math.round(view.form.samples) || 1, 1, MAX_SAMPLES),
        temperature: clamp(view.form.temperature ?? runTemperature, 0, MAX_TEMPERATURE),
        code: view.form.code,
      },
    });
    this.render();
  }

  private openStoredReroll(rerollId: string): void {
    const branch = this.state.reroll;
    if (!branch) return;
    this.rerollShown.set(episodeKey(branch), 'loading');
    this.vscode.postMessage({ type: 'openReroll', runId: branch.runId, trajectoryId: branch.trajectoryId, rerollId });
    this.render();
  }

  /** Add to Training Set: the page's records go to the host, which asks which set and says how it went. */
  private addToSet(records: TrajectoryRecord[], fromTurn: number): void {
    this.vscode.postMessage({ type: 'addToTrainingSet', records, fromTurn });
  }

  /** The episode at the assistant step of one of its turns (from the group view's anchor states). */
  private openStep(id: string, turn: number): void {
    const record = this.records.find((r) => r.id === id);
    const index = record ? buildSteps(record).findIndex((s) => s.kind === 'assistant' && s.turn === turn) : -1;
    this.open(id, 'episode', Math.max(0, index));
  }

  private goTo(index: number): void {
    const record = this.selected;
    if (!record) return;
    const last = buildSteps(record).length - 1;
    this.update((s) => {
      s.stepIndex = Math.max(0, Math.min(last, index));
    });
  }

  private jump(target: JumpTarget): void {
    const record = this.selected;
    if (record) this.goTo(nextStep(buildSteps(record), this.state.stepIndex, target));
  }

  private togglePlay(): void {
    if (this.playTimer !== undefined) {
      this.stop();
      this.render();
      return;
    }
    const tick = () => {
      const record = this.selected;
      if (!record || this.state.stepIndex >= buildSteps(record).length - 1) {
        this.stop();
        this.render();
        return;
      }
      this.goTo(this.state.stepIndex + 1);
      this.playTimer = window.setTimeout(tick, this.state.playSpeedMs);
    };
    this.playTimer = window.setTimeout(tick, this.state.playSpeedMs);
    this.render();
  }

  private stop(): void {
    window.clearTimeout(this.playTimer);
    this.playTimer = undefined;
  }

  private onKey(event: KeyboardEvent): void {
    const target = event.target as HTMLElement;
    if (target.closest('input, select, textarea') || this.state.view !== 'episode') return;
    const keys: Record<string, () => void> = {
      ArrowRight: () => this.goTo(this.state.stepIndex + 1),
      j: () => this.goTo(this.state.stepIndex + 1),
      ArrowLeft: () => this.goTo(this.state.stepIndex - 1),
      k: () => this.goTo(this.state.stepIndex - 1),
      ' ': () => this.togglePlay(),
      t: () => this.jump('tool'),
      e: () => this.jump('error'),
      r: () => this.jump('reward'),
    };
    const action = keys[event.key];
    if (action) {
      event.preventDefault();
      action();
    }
  }

  private renderRerollView(): HTMLElement {
    const branch = this.state.reroll;
    const view = this.rerollView();
    if (!branch || !view) return h('p', { class: 'empty' }, 'The episode to re-roll is not among these trajectories.');
    return renderReroll(
      {
        branch,
        record: view.record,
        form: view.form,
        list: this.rerollLists.get(view.key),
        progress: this.rerollProgress.get(view.key),
        shown: this.rerollShown.get(view.key),
      },
      {
        change: (form) => Object.assign(view.form, form),
        run: () => this.runReroll(),
        open: (rerollId) => this.openStoredReroll(rerollId),
        back: () => this.openStep(view.record.id, branch.turn),
      },
    );
  }

  private render(): void {
    window.clearTimeout(this.liveRedraw); // this draw shows every episode received so far
    this.liveRedraw = undefined;
    // The control the user was in keeps the focus through the redraw, but only while the page has it: a page that
    // is not focused still has an active element, and focusing it again (a live run redraws every second) would
    // take the focus from the editor, closing a quick pick the user has open there.
    const focusedId = document.hasFocus() ? (document.activeElement as HTMLElement | null)?.id : undefined;
    const record = this.selected;
    const views: Array<[View, string]> = [
      ['runs', 'Trajectories'],
      ['episode', 'Episode'],
      ['tokens', 'Tokens'],
      ['group', 'Group'],
      ['reroll', 'Re-roll'],
    ];
    const nav = h('nav', { class: 'views', role: 'tablist', 'aria-label': 'Views' });
    for (const [view, label] of views) {
      const button = h(
        'button',
        {
          role: 'tab',
          id: `view-${view}`,
          'aria-selected': this.state.view === view ? 'true' : 'false',
          class: this.state.view === view ? 'active' : '',
          disabled: view === 'reroll' ? !this.state.reroll : view !== 'runs' && !record,
        },
        label,
      );
      button.addEventListener('click', () =>
        this.update((s) => {
          s.view = view;
        }),
      );
      nav.appendChild(button);
    }
    const header = h(
      'header',
      {},
      nav,
      h('span', { class: 'source', title: this.source }, this.source || 'waiting for trajectories…'),
      this.live
        ? h(
            'span',
            {
              class: 'live-badge',
              title: `the run is ${this.runStatus ?? 'running'}; new episodes appear as it trains`,
            },
            'live',
          )
        : this.runStatus
          ? h(
              'span',
              { class: 'run-status-badge', title: 'the run is over: no new episodes will come' },
              this.runStatus,
            )
          : null,
      record ? h('span', { class: 'selected' }, `trajectory ${record.id}`) : null,
    );
    let body: HTMLElement;
    if (!this.records.length) {
      body = h('p', { class: 'empty' }, 'No trajectories yet.');
    } else if (this.state.view === 'runs' || !record) {
      body = renderRunBrowser(
        this.records,
        this.state,
        { update: (c) => this.update(c), open: (id) => this.open(id), addToSet: (r) => this.addToSet([r], 0) },
        this.searchable
          ? {
              state: this.search,
              run: (query) => this.askSearch(query),
              more: () => this.search?.nextCursor && this.askSearch(this.search.query, this.search.nextCursor),
              clear: () => {
                this.search = undefined;
                this.render();
              },
            }
          : undefined,
      );
    } else if (this.state.view === 'episode') {
      body = renderEpisode(
        record,
        this.state,
        this.playTimer !== undefined,
        {
          goTo: (i) => this.goTo(i),
          jump: (t) => this.jump(t),
          togglePlay: () => this.togglePlay(),
          setSpeed: (ms) =>
            this.update((s) => {
              s.playSpeedMs = ms;
            }),
          setTab: (tab) =>
            this.update((s) => {
              s.inspectorTab = tab;
            }),
          setOverlay: (overlay) =>
            this.update((s) => {
              s.tokenOverlay = overlay;
            }),
          openToolSource: (toolName) => this.vscode.postMessage({ type: 'openToolSource', toolName }),
          rerunToolCall: (turn, call, code) => {
            this.reruns.set(rerunKey({ runId: record.run_id, trajectoryId: record.id, turn, call }), { code });
            this.vscode.postMessage({
              type: 'rerunToolCall',
              runId: record.run_id,
              trajectoryId: record.id,
              turn,
              call,
              code,
            });
            this.render();
          },
          rerunOf: (turn, call) =>
            this.reruns.get(rerunKey({ runId: record.run_id, trajectoryId: record.id, turn, call })),
          anchorOf: (turn) => anchorOf(groupOf(this.records, record), record, turn),
          rerollFrom: (turn, edit) => this.rerollFrom(record, turn, edit),
          addToSetFrom: (turn) => this.addToSet([record], turn),
        },
        this.episodeSource,
      );
    } else if (this.state.view === 'reroll') {
      body = this.renderRerollView();
    } else if (this.state.view === 'tokens') {
      body = renderTokenView(record, {
        compact: false,
        overlay: this.state.tokenOverlay,
        setOverlay: (overlay) => this.update((s) => void (s.tokenOverlay = overlay)),
        focus: this.state.focusToken,
      });
      this.state.focusToken = null; // revealed once, not on every render
    } else {
      body = renderGroup(this.records, record, this.state, {
        update: (c) => this.update(c),
        open: (id) => this.open(id),
        openStep: (id, turn) => this.openStep(id, turn),
        addGroupToSet: (group) => this.addToSet(group, 0),
        openToken: (id, index) =>
          this.update((s) => {
            s.selectedId = id;
            s.view = 'tokens';
            s.tokenOverlay = 'mismatch';
            s.focusToken = index;
          }),
      });
    }
    clear(this.root);
    this.root.append(header, body);
    if (focusedId) document.getElementById(focusedId)?.focus();
  }
}

function episodeKey(address: EpisodeAddress): string {
  return `${address.runId}/${address.trajectoryId}`;
}

function rerunKey(address: ToolCallAddress): string {
  return `${address.runId}/${address.trajectoryId}/${address.turn}/${address.call}`;
}

new ReplayApp(document.getElementById('app') ?? document.body);
