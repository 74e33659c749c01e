/**
 * The admin commands' HTTP client: JSON calls to one server with the saved session's bearer
 * token, every failure turned into a CliError in words (the API's own message) with the exit
 * code scripts rely on (errors.ts).
 */
import type { StewardCommand } from '../../domain/cli-command.js';
import { CliError, EXIT } from './errors.js';
import { CLI_USER_AGENT } from '../user-agent.js';

export type Query = Record<string, string | number | boolean | undefined>;

/** A server URL as given, checked and without a trailing slash: `http://host:8080`. */
export function serverUrl(input: string): string {
  let u: URL;
  try {
    u = new URL(input);
  } catch {
    throw new CliError(EXIT.usage, `not a server URL: ${input} (expected http://host:port or https://host)`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new CliError(EXIT.usage, `not a server URL: ${input} (expected http:// or https://)`);
  return (u.origin + u.pathname).replace(/\/+$/, '');
}

export class Api {
  constructor(
    readonly server: string,
    private readonly token?: string,
    /** How hints name the command: as it was started (src/domain/cli-command.ts). */
    readonly cmd: StewardCommand = 'steward',
  ) {}

  get<T>(path: string, query?: Query): Promise<T> {
    return this.call<T>('GET', path, { query });
  }

  post<T>(path: string, body: unknown = {}): Promise<T> {
    return this.call<T>('POST', path, { body });
  }

  delete<T>(path: string): Promise<T> {
    return this.call<T>('DELETE', path, {});
  }

  async call<T>(method: string, path: string, opts: { query?: Query; body?: unknown }): Promise<T> {
    const url = new URL(this.server + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': CLI_USER_AGENT };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(url, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
    } catch (err) {
      throw new CliError(EXIT.unreachable, `cannot reach ${this.server}: ${url.protocol === 'https:' && noTlsAnswer(err) ? noTlsHint(url) : causeOf(err)}`);
    }
    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      throw new CliError(EXIT.unreachable, `the connection to ${this.server} broke: ${causeOf(err)}`);
    }
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    if (!res.ok) throw this.failure(res, json);
    if (json === undefined) throw new CliError(EXIT.failed, `${this.server} answered ${method} ${path} with ${res.status} but no JSON (is this a Steward server?)`);
    return json as T;
  }

  private failure(res: Response, body: unknown): CliError {
    const { status } = res;
    const e = (body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
    // Something other than Steward answered (a proxy's error page, another web server): say so.
    const message = typeof e?.message === 'string' ? e.message : `${this.server} answered ${status} ${res.statusText} without Steward's error body (is this a Steward server?)`;
    if (status === 401) {
      // The saved session is what failed: say so in the CLI's words, and how to get a new one.
      const why = e?.code === 'session_expired' ? 'the session has expired' : 'the session has expired or was ended';
      return new CliError(EXIT.session, `not logged in to ${this.server}: ${why}; log in again with '${this.cmd} login ${this.server}'`);
    }
    if (status === 404) return new CliError(EXIT.notFound, message);
    if (typeof e?.code !== 'string') return new CliError(EXIT.failed, message);
    return new CliError(EXIT.failed, `${message} (${status} ${e.code})`);
  }
}

/**
 * An https:// address whose server does not speak TLS (Steward's plain-HTTP port): the handshake
 * gets no answer, or one that is not TLS.
 */
function noTlsAnswer(err: unknown): boolean {
  const code = (err as { cause?: { code?: string } }).cause?.code ?? '';
  return ['UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT', 'ECONNRESET', 'UND_ERR_SOCKET', 'EPROTO', 'ERR_SSL_WRONG_VERSION_NUMBER', 'ERR_SSL_PACKET_LENGTH_TOO_LONG'].includes(code);
}

function noTlsHint(url: URL): string {
  return `the server did not answer TLS at ${url.host} (a plain-HTTP port? then the address is http://${url.host})`;
}

/** Why a fetch did not get an answer, in words: `connection refused`, `host not found`, ... */
function causeOf(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  switch (cause?.code) {
    case 'ECONNREFUSED':
      return 'connection refused (is Steward running there?)';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host not found';
    case 'ECONNRESET':
    case 'UND_ERR_SOCKET':
      return 'the connection was closed before an answer came';
    case 'ETIMEDOUT':
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'timed out connecting';
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return 'timed out waiting for an answer';
    default:
      return cause?.message ?? cause?.code ?? (err as Error).message;
  }
}
