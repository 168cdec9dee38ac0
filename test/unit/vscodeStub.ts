// The part of the `vscode` API the extension's modules use, enough to run its commands, views and panels outside
// VS Code. Importing this module makes `require('vscode')` return it; import it before the module under test.
// `fake` is the editor around them: what the user answers next (`answers`), and what the extension did (commands
// registered and run, prompts and messages shown, panels, problems, the status bar). Call `fake.reset()` before
// each test.
import Module from 'node:module';
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

export class ThemeColor {
  constructor(readonly id: string) {}
}

export class ThemeIcon {
  constructor(
    readonly id: string,
    readonly color?: ThemeColor,
  ) {}
}

export enum TreeItemCollapsibleState {
  None = 0,
  Collapsed = 1,
  Expanded = 2,
}

export class TreeItem {
  description?: string;
  iconPath?: ThemeIcon;
  id?: string;
  contextValue?: string;
  tooltip?: MarkdownString;
  command?: { command: string; title: string; arguments?: unknown[] };
  constructor(
    readonly label: string,
    readonly collapsibleState: TreeItemCollapsibleState,
  ) {}
}

export class Disposable {
  constructor(private readonly callOnDispose: () => void) {}
  static from(...items: Array<{ dispose(): unknown }>): Disposable {
    return new Disposable(() => items.forEach((item) => item.dispose()));
  }
  dispose(): void {
    this.callOnDispose();
  }
}

export class EventEmitter<T> {
  private readonly listeners = new Set<(value: T) => void>();
  readonly event = (listener: (value: T) => void): Disposable => {
    this.listeners.add(listener);
    return new Disposable(() => this.listeners.delete(listener));
  };
  fire(value: T): void {
    for (const listener of [...this.listeners]) listener(value);
  }
  dispose(): void {
    this.listeners.clear();
  }
}

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly fsPath: string,
    readonly fragment = '',
  ) {}
  static file(path: string): Uri {
    return new Uri('file', path);
  }
  static from({ scheme, path }: { scheme: string; path: string }): Uri {
    return new Uri(scheme, path);
  }
  static joinPath(base: Uri, ...parts: string[]): Uri {
    return Uri.file(join(base.fsPath, ...parts));
  }
  get path(): string {
    return this.fsPath;
  }
  with(change: { fragment?: string }): Uri {
    return new Uri(this.scheme, this.fsPath, change.fragment ?? this.fragment);
  }
  toString(): string {
    return `${this.scheme}://${this.fsPath}${this.fragment ? `#${this.fragment}` : ''}`;
  }
}

export class Position {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}
}

export class Range {
  readonly start: Position;
  readonly end: Position;
  constructor(start: Position | number, end: Position | number, endLine?: number, endCharacter?: number) {
    if (typeof start === 'number') {
      this.start = new Position(start, end as number);
      this.end = new Position(endLine!, endCharacter!);
    } else {
      this.start = start;
      this.end = end as Position;
    }
  }
}

export enum DiagnosticSeverity {
  Error = 0,
  Warning = 1,
  Information = 2,
  Hint = 3,
}

export class Diagnostic {
  source?: string;
  code?: string | number;
  constructor(
    readonly range: Range,
    readonly message: string,
    readonly severity: DiagnosticSeverity = DiagnosticSeverity.Error,
  ) {}
}

export class CodeLens {
  constructor(
    readonly range: Range,
    readonly command?: { title: string; command: string; arguments?: unknown[]; tooltip?: string },
  ) {}
}

export class CodeActionKind {
  static readonly QuickFix = new CodeActionKind('quickfix');
  constructor(readonly value: string) {}
}

export class CodeAction {
  command?: { title: string; command: string; arguments?: unknown[] };
  diagnostics?: Diagnostic[];
  constructor(
    readonly title: string,
    readonly kind?: CodeActionKind,
  ) {}
}

export class MarkdownString {
  isTrusted?: boolean | { enabledCommands: string[] };
  constructor(
    public value = '',
    readonly supportThemeIcons = false,
  ) {}
  appendMarkdown(value: string): MarkdownString {
    this.value += value;
    return this;
  }
  appendText(value: string): MarkdownString {
    this.value += value;
    return this;
  }
}

export class WorkspaceEdit {
  readonly replacements: Array<{ uri: Uri; range: Range; text: string }> = [];
  replace(uri: Uri, range: Range, text: string): void {
    this.replacements.push({ uri, range, text });
  }
}

export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}

export enum ProgressLocation {
  SourceControl = 1,
  Window = 10,
  Notification = 15,
}

export enum ViewColumn {
  Active = -1,
}

export enum QuickPickItemKind {
  Separator = -1,
  Default = 0,
}

/** A document read from disk when opened; edits go through `fake.workspace.applyEdit`. */
export class TextDocument {
  isDirty = false;
  constructor(
    readonly uri: Uri,
    private text: string,
  ) {}
  getText(): string {
    return this.text;
  }
  get lineCount(): number {
    return this.text.split('\n').length;
  }
  positionAt(offset: number): Position {
    const before = this.text.slice(0, offset).split('\n');
    return new Position(before.length - 1, before[before.length - 1].length);
  }
  setText(text: string): void {
    this.text = text;
  }
  async save(): Promise<boolean> {
    this.isDirty = false;
    return true;
  }
}

export class DiagnosticCollection {
  readonly entries = new Map<string, Diagnostic[]>();
  constructor(readonly name: string) {}
  set(uri: Uri, diagnostics: Diagnostic[]): void {
    this.entries.set(uri.fsPath, diagnostics);
    fake.diagnosticsChanged.fire({ uris: [uri] });
  }
  get(uri: Uri): Diagnostic[] | undefined {
    return this.entries.get(uri.fsPath);
  }
  delete(uri: Uri): void {
    if (this.entries.delete(uri.fsPath)) fake.diagnosticsChanged.fire({ uris: [uri] });
  }
  clear(): void {
    this.entries.clear();
  }
  dispose(): void {
    fake.diagnostics.delete(this.name);
  }
}

export class StatusBarItem {
  text = '';
  name?: string;
  command?: string;
  tooltip?: MarkdownString;
  accessibilityInformation?: { label: string; role: string };
  visible = false;
  constructor(readonly id: string) {}
  show(): void {
    this.visible = true;
  }
  dispose(): void {
    this.visible = false;
  }
}

/** A tree view: the text it shows above its tree. */
export class TreeView {
  /** The text shown above the tree (a view's `message`). */
  message?: string;
  dispose(): void {}
}

/** A webview panel: what the host posted to its page, and `receive` for what the page says back. */
export class WebviewPanel {
  readonly posted: unknown[] = [];
  revealed = 0;
  private readonly received = new EventEmitter<unknown>();
  private readonly disposed = new EventEmitter<void>();
  private readonly handling: Array<Promise<unknown>> = [];
  readonly webview = {
    html: '',
    options: {} as unknown,
    cspSource: 'vscode-webview:',
    asWebviewUri: (uri: Uri) => uri,
    postMessage: async (message: unknown) => {
      this.posted.push(message);
      return true;
    },
    onDidReceiveMessage: (listener: (message: unknown) => unknown) =>
      this.received.event((message) => this.handling.push(Promise.resolve(listener(message)))),
  };
  readonly onDidDispose = this.disposed.event;
  constructor(
    readonly viewType: string,
    public title: string,
  ) {}
  reveal(): void {
    this.revealed++;
  }
  /** The page posts `message`; resolves once the host has handled it. */
  async receive(message: unknown): Promise<void> {
    this.received.fire(message);
    await Promise.all(this.handling.splice(0));
  }
  dispose(): void {
    this.disposed.fire();
  }
}

export enum TaskScope {
  Global = 1,
  Workspace = 2,
}

export class ShellExecution {
  constructor(
    readonly commandLine: string,
    readonly options?: { executable?: string; shellArgs?: string[]; cwd?: string },
  ) {}
}

export class Task {
  constructor(
    readonly definition: { type: string; [key: string]: unknown },
    readonly scope: TaskScope,
    readonly name: string,
    readonly source: string,
    readonly execution: ShellExecution,
  ) {}
}

/** An answer to the next prompt: a value, or a function of the items a QuickPick offers. */
export type Answer = unknown | ((items: readonly { label: string }[]) => unknown);
/** Picks the QuickPick item with this label. */
export const pick =
  (label: string) =>
  (items: readonly { label: string }[]): unknown =>
    items.find((item) => item.label === label);

type Handler = (...args: unknown[]) => unknown;

export const fake = {
  /** Registered commands by id; `vscode.commands.executeCommand` runs them. */
  commands: new Map<string, Handler>(),
  /** Commands run that no one registered here (VS Code's own: setContext, vscode.openWith, ...). */
  executed: [] as Array<{ command: string; args: unknown[] }>,
  /** What the user answers to the next InputBox, QuickPick or open dialog, in order; none left: they dismiss it. */
  answers: [] as Answer[],
  prompts: [] as Array<{ kind: 'input' | 'quickPick' | 'openDialog'; options: Record<string, unknown> }>,
  /** Messages shown; a modal one (a confirmation) with its options. */
  messages: [] as Array<{
    severity: 'info' | 'warning' | 'error';
    text: string;
    actions: string[];
    options?: MessageOptions;
  }>,
  /** The action the user clicks on the next notification (or modal dialog) that offers it, in order; none left: they
   *  dismiss it. */
  messageChoices: [] as string[],
  /** Tasks run (`tasks.executeTask`); each ends at once with the next of `taskExitCodes` (none left: 0). */
  tasks: [] as Task[],
  taskExitCodes: [] as Array<number | undefined>,
  /** The title of each progress notification shown. */
  progress: [] as string[],
  /** Each message a progress notification reported, after its title ("title: message"). */
  progressReports: [] as string[],
  trusted: true,
  workspaceFolders: undefined as Array<{ uri: Uri }> | undefined,
  configuration: {} as Record<string, unknown>,
  textDocuments: [] as TextDocument[],
  shownDocuments: [] as Array<{ uri: Uri; selection?: Range }>,
  diagnostics: new Map<string, DiagnosticCollection>(),
  codeLensProviders: [] as Array<{ provideCodeLenses(document: TextDocument): CodeLens[] }>,
  /** Text document content providers by scheme (virtual documents such as Compare Code's). */
  contentProviders: new Map<string, { provideTextDocumentContent(uri: Uri): Promise<string> | string }>(),
  codeActionProviders: [] as Array<{
    provideCodeActions(document: TextDocument, range: Range, context: { diagnostics: Diagnostic[] }): CodeAction[];
  }>,
  statusBarItems: [] as StatusBarItem[],
  treeViews: [] as TreeView[],
  panels: [] as WebviewPanel[],
  customEditors: new Map<string, unknown>(),
  clipboard: '',
  /** Fire to tell the extension that settings changed (`affectsConfiguration` says which) or trust was granted. */
  configurationChanges: new EventEmitter<{ affectsConfiguration(section: string): boolean }>(),
  trustGranted: new EventEmitter<void>(),
  /** Fired when a diagnostic collection changes (`languages.onDidChangeDiagnostics`). */
  diagnosticsChanged: new EventEmitter<{ uris: Uri[] }>(),
  /** Fired when `openTextDocument` opens a document that was not open (what a language client listens to). */
  documentOpened: new EventEmitter<TextDocument>(),
  /** Fire to tell the extension that a document was saved (`workspace.onDidSaveTextDocument`). */
  documentSaved: new EventEmitter<TextDocument>(),
  reset(): void {
    this.commands.clear();
    this.executed = [];
    this.answers = [];
    this.prompts = [];
    this.messages = [];
    this.messageChoices = [];
    this.tasks = [];
    this.taskExitCodes = [];
    this.progress = [];
    this.progressReports = [];
    this.trusted = true;
    this.workspaceFolders = undefined;
    this.configuration = {};
    this.textDocuments = [];
    this.shownDocuments = [];
    this.diagnostics.clear();
    this.codeLensProviders = [];
    this.codeActionProviders = [];
    this.contentProviders.clear();
    this.statusBarItems = [];
    this.treeViews = [];
    this.panels = [];
    this.customEditors.clear();
    this.clipboard = '';
    this.configurationChanges.dispose();
    this.trustGranted.dispose();
    this.diagnosticsChanged.dispose();
    this.documentOpened.dispose();
    this.documentSaved.dispose();
  },
};

const answer = (items?: readonly { label: string }[]): unknown => {
  if (fake.answers.length === 0) return undefined;
  const next = fake.answers.shift();
  return typeof next === 'function' ? next(items ?? []) : next;
};

type MessageOptions = { modal?: boolean; detail?: string };

const message =
  (severity: 'info' | 'warning' | 'error') =>
  async (text: string, ...rest: Array<string | MessageOptions>): Promise<string | undefined> => {
    const options = typeof rest[0] === 'object' ? rest[0] : undefined;
    const actions = rest.filter((item): item is string => typeof item === 'string');
    fake.messages.push({ severity, text, actions, ...(options ? { options } : {}) });
    return actions.includes(fake.messageChoices[0]) ? fake.messageChoices.shift() : undefined;
  };

const commands = {
  registerCommand(id: string, handler: Handler): Disposable {
    if (fake.commands.has(id)) throw new Error(`command '${id}' already exists`);
    fake.commands.set(id, handler);
    return new Disposable(() => fake.commands.delete(id));
  },
  async executeCommand(id: string, ...args: unknown[]): Promise<unknown> {
    const handler = fake.commands.get(id);
    if (handler) return handler(...args);
    fake.executed.push({ command: id, args });
    return undefined;
  },
};

const window = {
  activeTextEditor: undefined,
  async showInputBox(options: Record<string, unknown>): Promise<unknown> {
    fake.prompts.push({ kind: 'input', options });
    return answer();
  },
  async showQuickPick(items: readonly { label: string }[], options: Record<string, unknown>): Promise<unknown> {
    fake.prompts.push({ kind: 'quickPick', options: { ...options, items } });
    return answer(items);
  },
  async showOpenDialog(options: Record<string, unknown>): Promise<unknown> {
    fake.prompts.push({ kind: 'openDialog', options });
    return answer();
  },
  async showWorkspaceFolderPick(): Promise<unknown> {
    return answer();
  },
  showInformationMessage: message('info'),
  showWarningMessage: message('warning'),
  showErrorMessage: message('error'),
  async withProgress<R>(
    options: { title: string },
    task: (
      progress: { report(value: unknown): void },
      cancel: { onCancellationRequested(listener: () => void): Disposable },
    ) => Promise<R>,
  ): Promise<R> {
    fake.progress.push(options.title);
    return task(
      { report: ({ message }: { message?: string }) => void fake.progressReports.push(`${options.title}: ${message}`) },
      { onCancellationRequested: () => new Disposable(() => undefined) },
    );
  },
  createStatusBarItem(id: string): StatusBarItem {
    const item = new StatusBarItem(id);
    fake.statusBarItems.push(item);
    return item;
  },
  createTreeView(): TreeView {
    const view = new TreeView();
    fake.treeViews.push(view);
    return view;
  },
  createWebviewPanel(viewType: string, title: string): WebviewPanel {
    const panel = new WebviewPanel(viewType, title);
    fake.panels.push(panel);
    return panel;
  },
  registerCustomEditorProvider(viewType: string, provider: unknown): Disposable {
    fake.customEditors.set(viewType, provider);
    return new Disposable(() => fake.customEditors.delete(viewType));
  },
  async showTextDocument(document: TextDocument | Uri, options?: { selection?: Range }): Promise<void> {
    fake.shownDocuments.push({ uri: document instanceof Uri ? document : document.uri, selection: options?.selection });
  },
};

const workspace = {
  get isTrusted(): boolean {
    return fake.trusted;
  },
  get workspaceFolders(): Array<{ uri: Uri }> | undefined {
    return fake.workspaceFolders;
  },
  get textDocuments(): TextDocument[] {
    return fake.textDocuments;
  },
  getConfiguration: () => ({ get: (key: string) => fake.configuration[key] }),
  asRelativePath(target: Uri | string): string {
    const path = typeof target === 'string' ? target : target.fsPath;
    const root = fake.workspaceFolders?.[0]?.uri.fsPath;
    return root ? relative(root, path) : path;
  },
  async openTextDocument(target: Uri | string): Promise<TextDocument> {
    const uri = typeof target === 'string' ? Uri.file(target) : target;
    const open = fake.textDocuments.find((d) => d.uri.fsPath === uri.fsPath);
    if (open) return open;
    const document = new TextDocument(uri, readFileSync(uri.fsPath, 'utf8'));
    fake.textDocuments.push(document);
    fake.documentOpened.fire(document);
    return document;
  },
  /** Applies whole-document replacements (what the extension makes) to the open documents. */
  async applyEdit(edit: WorkspaceEdit): Promise<boolean> {
    for (const { uri, text } of edit.replacements) (await workspace.openTextDocument(uri)).setText(text);
    return true;
  },
  fs: { readFile: async (uri: Uri): Promise<Uint8Array> => readFileSync(uri.fsPath) },
  async findFiles(): Promise<Uri[]> {
    return [];
  },
  registerTextDocumentContentProvider(
    scheme: string,
    provider: { provideTextDocumentContent(uri: Uri): Promise<string> | string },
  ): Disposable {
    fake.contentProviders.set(scheme, provider);
    return new Disposable(() => fake.contentProviders.delete(scheme));
  },
  onDidChangeTextDocument: () => new Disposable(() => undefined),
  onDidOpenTextDocument: fake.documentOpened.event,
  onDidSaveTextDocument: fake.documentSaved.event,
  onDidChangeConfiguration: fake.configurationChanges.event,
  onDidGrantWorkspaceTrust: fake.trustGranted.event,
};

const taskEnded = new EventEmitter<{ execution: { task: Task }; exitCode: number | undefined }>();
const tasks = {
  onDidEndTaskProcess: taskEnded.event,
  async executeTask(task: Task): Promise<{ task: Task }> {
    fake.tasks.push(task);
    const execution = { task };
    const exitCode = fake.taskExitCodes.length ? fake.taskExitCodes.shift() : 0;
    setTimeout(() => taskEnded.fire({ execution, exitCode }), 0);
    return execution;
  },
};

const languages = {
  /** Every collection's diagnostics on `uri`, as VS Code merges them. */
  getDiagnostics(uri: Uri): Diagnostic[] {
    return [...fake.diagnostics.values()].flatMap((collection) => collection.get(uri) ?? []);
  },
  onDidChangeDiagnostics: fake.diagnosticsChanged.event,
  createDiagnosticCollection(name: string): DiagnosticCollection {
    const collection = new DiagnosticCollection(name);
    fake.diagnostics.set(name, collection);
    return collection;
  },
  registerCodeLensProvider(_selector: unknown, provider: (typeof fake.codeLensProviders)[number]): Disposable {
    fake.codeLensProviders.push(provider);
    return new Disposable(() => undefined);
  },
  registerCodeActionsProvider(_selector: unknown, provider: (typeof fake.codeActionProviders)[number]): Disposable {
    fake.codeActionProviders.push(provider);
    return new Disposable(() => undefined);
  },
};

const env = {
  clipboard: {
    writeText: async (text: string) => {
      fake.clipboard = text;
    },
  },
};

const stub = {
  ThemeColor,
  ThemeIcon,
  TreeItemCollapsibleState,
  TreeItem,
  Disposable,
  EventEmitter,
  Uri,
  Position,
  Range,
  DiagnosticSeverity,
  Diagnostic,
  CodeLens,
  CodeActionKind,
  CodeAction,
  MarkdownString,
  WorkspaceEdit,
  StatusBarAlignment,
  ProgressLocation,
  ViewColumn,
  QuickPickItemKind,
  TaskScope,
  ShellExecution,
  Task,
  commands,
  tasks,
  window,
  workspace,
  languages,
  env,
};
const loader = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
const load = loader._load;
loader._load = function (request: string, ...rest: unknown[]) {
  return request === 'vscode' ? stub : load.call(this, request, ...rest);
};
