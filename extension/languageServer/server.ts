// The run-config language server: diagnostics, completion, hover and quick fixes for *.agentrl.yaml,
// started by the extension through vscode-languageclient (IPC).
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  CodeActionKind,
  CompletionItemKind,
  createConnection,
  DiagnosticSeverity,
  MarkupKind,
  ProposedFeatures,
  TextDocuments,
  TextDocumentSyncKind,
  type CodeAction,
  type Diagnostic,
} from 'vscode-languageserver/node';
import { TextDocument } from 'vscode-languageserver-textdocument';
import { parseDocument } from 'yaml';
import { complete, hoveredKey, hoverText } from './assist';
import { describeModelSource, modelSource } from './modelPath';
import { fitSummary } from './fit';
import {
  memoryPlanRequest,
  RUN_CONFIG_DIAGNOSTIC_SOURCE,
  trainerDevicesNotification,
  type MemoryPlanResult,
  type TrainerDevicesParams,
} from './protocol';
import { validateRunConfig, type Finding } from './validate';

const connection = createConnection(ProposedFeatures.all);
const documents = new TextDocuments(TextDocument);
let trainerDevices: TrainerDevicesParams | undefined;

const SEVERITY: Record<Finding['severity'], DiagnosticSeverity> = {
  error: DiagnosticSeverity.Error,
  warning: DiagnosticSeverity.Warning,
  information: DiagnosticSeverity.Information,
};

connection.onInitialize(() => ({
  capabilities: {
    textDocumentSync: TextDocumentSyncKind.Incremental,
    completionProvider: { triggerCharacters: [':', ' '] },
    hoverProvider: true,
    codeActionProvider: { codeActionKinds: [CodeActionKind.QuickFix] },
  },
}));

const pathOf = (document: TextDocument): string =>
  document.uri.startsWith('file:') ? fileURLToPath(document.uri) : document.uri;

function validate(document: TextDocument): void {
  const path = pathOf(document);
  const diagnostics: Diagnostic[] = validateRunConfig(document.getText(), path).map((f) => ({
    range: { start: document.positionAt(f.start), end: document.positionAt(f.end) },
    severity: SEVERITY[f.severity],
    source: RUN_CONFIG_DIAGNOSTIC_SOURCE,
    code: f.code,
    message: f.message,
    data: f.fix,
  }));
  void connection.sendDiagnostics({ uri: document.uri, diagnostics });
}

documents.onDidChangeContent((change) => validate(change.document));
documents.onDidClose((event) => void connection.sendDiagnostics({ uri: event.document.uri, diagnostics: [] }));

connection.onCompletion((params) => {
  const document = documents.get(params.textDocument.uri);
  if (!document) return [];
  return complete(document.getText(), document.offsetAt(params.position)).map((s) => ({
    label: s.label,
    kind: s.kind === 'key' ? CompletionItemKind.Property : CompletionItemKind.EnumMember,
    detail: s.detail,
    documentation: s.documentation,
    insertText: s.insertText,
  }));
});

/** The trainer's plan for this run, asked only for a hover on `model.*` (the only keys that show it). */
async function memoryPlan(
  config: Record<string, unknown> | null,
  configPath: string,
  onModelKey: boolean,
): Promise<MemoryPlanResult | null> {
  if (!onModelKey || !config || !trainerDevices) return null;
  try {
    return await connection.sendRequest(memoryPlanRequest, { config, configPath });
  } catch (err) {
    return { unavailable: err instanceof Error ? err.message : String(err) };
  }
}

connection.onHover(async (params) => {
  const document = documents.get(params.textDocument.uri);
  if (!document) return null;
  const offset = document.offsetAt(params.position);
  const config = parseDocument(document.getText()).toJS() as
    ({ model?: { path?: unknown } } & Record<string, unknown>) | null;
  const model = config?.model;
  const base = dirname(pathOf(document));
  const onModelKey = hoveredKey(document.getText(), offset)?.[0] === 'model';
  const planned = await memoryPlan(config, pathOf(document), onModelKey);
  const devices = trainerDevices && fitSummary(trainerDevices, planned);
  const modelPath = typeof model?.path === 'string' ? describeModelSource(modelSource(model.path, base)) : undefined;
  const text = hoverText(document.getText(), offset, devices, modelPath);
  return text ? { contents: { kind: MarkupKind.Markdown, value: text } } : null;
});

connection.onCodeAction((params): CodeAction[] =>
  params.context.diagnostics
    .filter((d) => d.source === RUN_CONFIG_DIAGNOSTIC_SOURCE && d.data)
    .map((d) => {
      const fix = d.data as { title: string; text: string };
      return {
        title: fix.title,
        kind: CodeActionKind.QuickFix,
        diagnostics: [d],
        isPreferred: true,
        edit: { changes: { [params.textDocument.uri]: [{ range: d.range, newText: fix.text }] } },
      };
    }),
);

connection.onNotification(trainerDevicesNotification, (params) => {
  trainerDevices = params ?? undefined;
});

documents.listen(connection);
connection.listen();
