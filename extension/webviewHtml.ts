// The page every webview of the extension loads: a CSP of `default-src 'none'` with its one script by nonce,
// styles and fonts only from the extension's own webview folder.
import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';

/** `bundle` names a script and stylesheet pair in dist/webview (`main` for the replay, `dashboard`). */
export function webviewHtml(webview: vscode.Webview, webviewRoot: vscode.Uri, bundle: string, title: string): string {
  const nonce = randomBytes(16).toString('base64');
  const asset = (...path: string[]): string =>
    webview.asWebviewUri(vscode.Uri.joinPath(webviewRoot, ...path)).toString();
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${webview.cspSource}; font-src ${webview.cspSource}; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${asset('codicons', 'codicon.css')}">
<link rel="stylesheet" href="${asset(`${bundle}.css`)}">
<title>${title}</title>
</head><body><div id="app"></div>
<script nonce="${nonce}" src="${asset(`${bundle}.js`)}"></script>
</body></html>`;
}
