// The `ws` WebSocket behind TrainerClient's socket interface. No `vscode` import: the integration tests use it
// against a real trainer server.
import WebSocket from 'ws';
import type { ConnectFailure, SocketFactory } from './trainerClient';

/** ws behind the client's socket interface; a refused token or origin is fatal (reconnecting cannot fix it). */
export function webSocketFactory(token: string | undefined): SocketFactory {
  return (url, handlers) => {
    const socket = new WebSocket(url, {
      headers: token ? { Authorization: `Bearer ${token}` } : {},
      maxPayload: 64 * 1024 * 1024,
      handshakeTimeout: 10_000,
    });
    let lastError = '';
    let failure: ConnectFailure | undefined;
    let ended = false;
    const end = (reason: string, fatal: boolean): void => {
      if (ended) return;
      ended = true;
      handlers.close(reason, fatal, failure);
    };
    socket.on('open', () => handlers.open());
    socket.on('message', (data) => handlers.message(data.toString()));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      lastError = err.message;
      // the one error that says for sure nothing listens there (a timeout or an unknown host say less)
      if (err.code === 'ECONNREFUSED') failure = 'refused';
    });
    socket.on('close', (code) => end(lastError || `closed with code ${code}`, false));
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
