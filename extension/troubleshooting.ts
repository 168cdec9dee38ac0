// Where each failure the user is told of is explained: every error code a trainer answers with
// (protocol/schemas/rpc.schema.json, `$defs/errorCode`) and every failure the editor finds itself has a section of
// docs/troubleshooting.md, which the "Learn more" button of its error notification opens (ctx.ts, `showError`). The
// page ships in the .vsix and opens in VS Code's Markdown preview, so it works offline and on a remote machine; a
// unit test fails when a code or a kind has no section there. No `vscode` import: the local server and the client
// throw these failures too.
import { ErrorCode } from '../protocol/generated/rpc';
import { TrainerConnectError, TrainerRequestError } from './trainerClient';

/** The page, relative to the extension's folder (`.vscodeignore` lets docs/*.md into the package). */
export const TROUBLESHOOTING_PAGE = 'docs/troubleshooting.md';

/** A failure the editor finds itself, rather than a trainer's error answer. */
export type FailureKind =
  | 'untrusted'
  | 'noFolder'
  | 'noPython'
  | 'localServerFailed'
  | 'localServerLost'
  | 'connectionFailed'
  | 'certificateChanged'
  | 'notConnected'
  | 'timeout'
  | 'disconnected'
  | 'noEnvironment'
  | 'configInvalid'
  | 'envCheckFailed'
  | 'trajectoriesUnreadable'
  | 'languageServerStopped'
  | 'installFailed'
  | 'healthError'
  | 'other';

/** An error whose kind the editor knows, so its notification's Learn more opens the section about it. */
export class EditorFailure extends Error {
  constructor(
    readonly kind: FailureKind,
    message: string,
  ) {
    super(message);
    this.name = 'EditorFailure';
  }
}

/** Each section's anchor is the slug of a `###` heading of words and digits only, which MkDocs and VS Code's preview
 *  slug alike (a test checks both the heading and its characters). */
export const FAILURE_SECTIONS: Record<FailureKind, string> = {
  untrusted: 'workspace-not-trusted',
  noFolder: 'no-folder-open',
  noPython: 'python-or-the-trainer-not-found',
  localServerFailed: 'the-local-server-did-not-start',
  localServerLost: 'the-local-server-exited',
  connectionFailed: 'could-not-connect-to-the-server',
  certificateChanged: 'the-server-certificate-changed',
  notConnected: 'not-connected-to-a-trainer',
  timeout: 'the-server-did-not-answer-in-time',
  disconnected: 'the-connection-was-lost',
  noEnvironment: 'no-environment-in-the-workspace',
  configInvalid: 'invalid-run-config',
  envCheckFailed: 'the-env-check-found-errors',
  trajectoriesUnreadable: 'trajectories-could-not-be-loaded',
  languageServerStopped: 'the-run-config-language-server-stopped',
  installFailed: 'installing-the-trainer-failed',
  healthError: 'a-run-stopped-on-a-health-alert',
  other: 'any-other-error',
};

/** Every code of rpc.schema.json: the type makes a new code a compile error here until it has its section. */
export const ERROR_CODE_SECTIONS: Record<ErrorCode, string> = {
  [ErrorCode.PARSE_ERROR]: 'the-server-did-not-understand-a-request',
  [ErrorCode.INVALID_REQUEST]: 'the-server-did-not-understand-a-request',
  [ErrorCode.METHOD_NOT_FOUND]: 'the-server-did-not-understand-a-request',
  [ErrorCode.NOT_INITIALIZED]: 'the-server-did-not-understand-a-request',
  [ErrorCode.INVALID_PARAMS]: 'invalid-params',
  [ErrorCode.INTERNAL_ERROR]: 'internal-error-in-the-server',
  [ErrorCode.INCOMPATIBLE_PROTOCOL]: 'incompatible-protocol-version',
  [ErrorCode.MESSAGE_TOO_LARGE]: 'message-too-large',
  [ErrorCode.RUN_NOT_FOUND]: 'run-not-found',
  [ErrorCode.RUN_STATE_CONFLICT]: 'run-state-conflict',
  [ErrorCode.CONFIG_INVALID]: 'invalid-run-config',
  [ErrorCode.BUNDLE_REJECTED]: 'env-bundle-rejected',
  [ErrorCode.BUNDLE_NOT_FOUND]: 'env-bundle-not-found',
  [ErrorCode.TRAJECTORY_NOT_FOUND]: 'trajectory-not-found',
  [ErrorCode.CODE_NOT_ALLOWED]: 'running-code-on-a-remote-server-is-refused',
  [ErrorCode.TOOL_RERUN_FAILED]: 'tool-rerun-failed',
  [ErrorCode.MCP_SERVER_UNAVAILABLE]: 'mcp-server-unavailable',
  [ErrorCode.REROLL_FAILED]: 'episode-reroll-failed',
};

/** What this side of a request can fail with, as the kinds above. */
const CLIENT_FAILURES: Record<Exclude<TrainerRequestError['code'], number>, FailureKind> = {
  timeout: 'timeout',
  disconnected: 'disconnected',
  'not-connected': 'notConnected',
};

/** The anchor of the section that explains `cause`: a trainer's error (by its code), a failed connection, an
 *  EditorFailure (by its kind), or a FailureKind itself; anything else gets the general section. */
export function sectionFor(cause: unknown): string {
  if (cause instanceof TrainerRequestError)
    return typeof cause.code === 'number'
      ? (ERROR_CODE_SECTIONS[cause.code as ErrorCode] ?? FAILURE_SECTIONS.other) // a newer server's code
      : FAILURE_SECTIONS[CLIENT_FAILURES[cause.code]];
  if (cause instanceof TrainerConnectError) return FAILURE_SECTIONS.connectionFailed; // refused token, no server, ...
  if (cause instanceof EditorFailure) return FAILURE_SECTIONS[cause.kind];
  if (typeof cause === 'string' && cause in FAILURE_SECTIONS) return FAILURE_SECTIONS[cause as FailureKind];
  return FAILURE_SECTIONS.other;
}
