// The `ws` WebSocket behind TrainerClient's socket interface. No `vscode` import: the integration tests use it
// against a real trainer server.
import WebSocket, { type ClientOptions } from 'ws';
import { certificateCheckingConnection, type CertificateRefusal } from './serverCertificates';
import type { ConnectFailure, SocketFactory } from './trainerClient';

const HANDSHAKE_TIMEOUT_MS = 10_000;

/** ws behind the client's socket interface; a refused token or origin is fatal (reconnecting cannot fix it), as is a
 *  wss:// server's certificate that is not `pinnedCertificate` (its SHA-256 fingerprint) or, none pinned, that no
 *  certificate authority vouches for: that one is refused in the TLS handshake, before the token is sent. */
export function webSocketFactory(token: string | undefined, pinnedCertificate?: string): SocketFactory {
  return (url, handlers) => {
    let refusal: CertificateRefusal | undefined;
    const socket = new WebSocket(url, {
      headers: token ? { Authorization: `Bearer ${token}` } : {},
      maxPayload: 64 * 1024 * 1024,
      handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
      ...(url.startsWith('wss:')
        ? {
            // the (options, callback) form Node's http client accepts; ws's types know only net.createConnection's
            createConnection: certificateCheckingConnection(
              pinnedCertificate,
              HANDSHAKE_TIMEOUT_MS,
              (why) => (refusal = why),
            ) as unknown as ClientOptions['createConnection'],
          }
        : {}),
    });
    let lastError = '';
    let failure: ConnectFailure | undefined;
    let ended = false;
    const end = (reason: string, fatal: boolean): void => {
      if (ended) return;
      ended = true;
      handlers.close(reason, fatal, failure, refusal?.fingerprint);
    };
    socket.on('open', () => handlers.open());
    socket.on('message', (data) => handlers.message(data.toString()));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      lastError = err.message;
      // the one error that says for sure nothing listens there (a timeout or an unknown host say less)
      if (err.code === 'ECONNREFUSED') failure = 'refused';
      if (refusal) failure = refusal.failure;
    });
    socket.on('close', (code) => end(lastError || `closed with code ${code}`, refusal !== undefined));
    socket.on('unexpected-response', (request, response) => {
      const status = response.statusCode ?? 0;
      request.destroy();
      failure = status === 401 ? 'unauthorized' : status === 403 ? 'forbidden' : undefined;
      const why =
        status === 401
          ? `the server ${token ? 'refused the token' : 'needs a token'} (HTTP 401)`
          : status === 403
            ? "the server refused this client's origin (HTTP 403)"
            : `HTTP ${status}`;
      end(why, status === 401 || status === 403);
    });
    return { send: (text) => socket.send(text), close: () => socket.terminate() };
  };
}
