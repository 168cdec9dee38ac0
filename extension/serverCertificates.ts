// Trust on first use for wss:// trainer servers. `agentrl serve --tls-self-signed` has a certificate no authority
// vouches for: the first connection shows its SHA-256 fingerprint for the user to compare with what the server printed,
// and a certificate the user trusts is pinned per server (host:port). The socket checks the certificate before it is
// handed to the HTTP client, so the upgrade request, and the token in it, is written only to a server whose
// certificate is the pinned one (or, none pinned, one a certificate authority vouches for). No `vscode` import: the
// integration tests use it against a real server.
import { isIP, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { TrainerConnectError } from './trainerClient';

/** What the user is told about certificates, declared once: the prompt, the refusals, the Forget command's answers. */
export const CertificateMessages = {
  trustAction: 'Trust',
  trustQuestion: (server: string): string => `Trust this certificate of ${server}?`,
  trustDetail: (fingerprint: string): string =>
    `No certificate authority vouches for the trainer server's certificate (agentrl serve --tls-self-signed makes such a one). Its SHA-256 fingerprint:\n\n${fingerprint}\n\nCompare it with the one agentrl serve printed at start ("TLS certificate SHA-256 fingerprint: ..."). Trust it only if the two are the same: from then on this editor sends the token only to a server with this certificate.`,
  untrusted: (server: string, fingerprint: string): string =>
    `the certificate of ${server} is not trusted (SHA-256 fingerprint ${fingerprint}); nothing was sent to it`,
  changed: (server: string, found: string, pinned: string): string =>
    `the certificate of ${server} changed: its SHA-256 fingerprint is ${found}, the one trusted for it ${pinned}. Nothing was sent to it. If the server has a new certificate (another RUNS_DIR/.tls, another --tls-cert), compare ${found} with the fingerprint agentrl serve printed at start, then run "Agent RL: Forget Server Certificate" and connect again; otherwise someone may be in between.`,
  downgrade: (server: string, url: string): string =>
    `${server} was reached over TLS before (its certificate is trusted): connect to ${url.replace(/^ws:/, 'wss:')}, so that the token is not sent in clear; if it serves plain ws:// now, run "Agent RL: Forget Server Certificate" first`,
  noneTrusted: 'No server certificate is trusted: the first connection to a wss:// server asks.',
  notTrusted: (server: string): string => `No certificate is trusted for ${server}.`,
  forgotten: (server: string): string =>
    `Forgot the certificate trusted for ${server}: the next connection to it shows its fingerprint again.`,
  pickTitle: 'Forget the certificate trusted for a server',
} as const;

/** A server as pins are kept: host:port, the port wss:// implies (443) when the URL names none. */
export function serverOf(url: string): string {
  const { hostname, port } = new URL(url.replace(/^ws:/, 'wss:'));
  return `${hostname}:${port || '443'}`;
}

/** Why a certificate was refused, with its fingerprint (the caller asks the user to trust an untrusted one). */
export interface CertificateRefusal {
  failure: 'untrustedCertificate' | 'certificateChanged';
  fingerprint: string;
  message: string;
}

type Connected = (err: Error | null, socket?: Socket) => void;

/** A `createConnection` for `ws` (Node's http client): TLS to the server, whose certificate is checked once the
 *  handshake is done and before the socket is passed on through `connected` (the asynchronous form Node's
 *  `agent.createConnection` documents), so no byte of HTTP is written before. The certificate passes when it is the
 *  `pinned` one, or, none pinned, when a certificate authority vouches for it and its names; otherwise the socket is
 *  destroyed and `refuse` is told why. */
export function certificateCheckingConnection(
  pinned: string | undefined,
  timeoutMs: number,
  refuse: (refusal: CertificateRefusal) => void,
): (options: ConnectionOptions, connected: Connected) => undefined {
  return (options, connected) => {
    const host = options.host ?? 'localhost';
    const server = `${host.includes(':') ? `[${host}]` : host}:${options.port}`;
    // no SNI for an address (RFC 6066), as ws does; the default check of names still compares the address
    const socket = tlsConnect({ ...options, servername: isIP(host) ? '' : host, rejectUnauthorized: false });
    let settled = false;
    const settle = (err: Error | null): void => {
      if (settled) return;
      settled = true;
      socket.setTimeout(0);
      socket.removeListener('error', settle);
      if (err) {
        socket.destroy();
        connected(err);
      } else connected(null, socket);
    };
    socket.setTimeout(timeoutMs, () => settle(new Error(`no TLS handshake with ${server} within ${timeoutMs} ms`)));
    socket.on('error', settle);
    socket.once('secureConnect', () => {
      const found = socket.getPeerCertificate().fingerprint256 ?? 'none';
      if (pinned !== undefined ? found === pinned : socket.authorized) return settle(null);
      const refusal: CertificateRefusal =
        pinned !== undefined
          ? {
              failure: 'certificateChanged',
              fingerprint: found,
              message: CertificateMessages.changed(server, found, pinned),
            }
          : {
              failure: 'untrustedCertificate',
              fingerprint: found,
              message: CertificateMessages.untrusted(server, found),
            };
      refuse(refusal);
      settle(new Error(refusal.message));
    });
    return undefined;
  };
}

/** Where pins are kept: the extension's globalState (fingerprints are not secrets; tokens stay in SecretStorage). */
export interface PinStore {
  get<T>(key: string): T | undefined;
  update(key: string, value: unknown): Thenable<void>;
}

const PINS_KEY = 'serverCertificates';

/** The SHA-256 fingerprint of the certificate trusted for each server (host:port). */
export class CertificatePins {
  constructor(private readonly store: PinStore) {}

  all(): Record<string, string> {
    return { ...(this.store.get<Record<string, string>>(PINS_KEY) ?? {}) };
  }

  get(url: string): string | undefined {
    return this.all()[serverOf(url)];
  }

  async trust(url: string, fingerprint: string): Promise<void> {
    await this.store.update(PINS_KEY, { ...this.all(), [serverOf(url)]: fingerprint });
  }

  /** Forgets the pin of `server` (host:port); false when it had none. */
  async forget(server: string): Promise<boolean> {
    const pins = this.all();
    if (!(server in pins)) return false;
    delete pins[server];
    await this.store.update(PINS_KEY, pins);
    return true;
  }
}

/** Connects with the fingerprint pinned for the URL's server, if any. A server none is pinned for, whose certificate
 *  no authority vouches for, is shown to `ask` (the server and the fingerprint); trusted, its certificate is pinned
 *  and connected to again. Resolves false when `ask` declines; any other failure is thrown as it came. */
export async function trustOnFirstUse(
  url: string,
  pins: CertificatePins,
  ask: (server: string, fingerprint: string) => Promise<boolean>,
  connect: (pinned: string | undefined) => PromiseLike<unknown>,
): Promise<boolean> {
  const pinned = pins.get(url);
  try {
    await connect(pinned);
    return true;
  } catch (err) {
    const untrusted = err instanceof TrainerConnectError && err.failure === 'untrustedCertificate' && err.fingerprint;
    if (pinned !== undefined || !untrusted) throw err;
    if (!(await ask(serverOf(url), err.fingerprint!))) return false;
    await pins.trust(url, err.fingerprint!);
    await connect(err.fingerprint);
    return true;
  }
}
