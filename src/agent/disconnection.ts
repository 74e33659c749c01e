/**
 * Why an agent's connection attempt failed or its socket closed, in words a person can act on:
 * what StewardAgent reports with every `disconnected` event (and `steward agent` prints).
 */
import { STATUS_CODES } from 'node:http';
import { closeMeaning } from '../domain/agent-protocol.js';

export type DisconnectCause =
  /** Nothing listens at the address (ECONNREFUSED): Steward is not running there, or not yet. */
  | 'refused'
  /** The host name does not resolve. */
  | 'dns'
  /** The TLS handshake failed (certificate, or not a TLS server). */
  | 'tls'
  /** An HTTP answer other than the WebSocket upgrade (a wrong path, a proxy in the way). */
  | 'http'
  /** No answer in time. */
  | 'timeout'
  /** Any other network error. */
  | 'network'
  /** The socket was open and closed (see `code`). */
  | 'closed';

export interface Disconnection {
  /** What happened, in words: "connection refused by 127.0.0.1:8080 (is Steward running there?)". */
  message: string;
  cause: DisconnectCause;
  /** The WebSocket close code once a socket was open (1006 for a connection lost without one), else null. */
  code: number | null;
  /** The close reason sent with the code ('' when none). */
  reason: string;
  /** The HTTP status of a refused upgrade, else null. */
  httpStatus: number | null;
  /** The error code below (ECONNREFUSED, ENOTFOUND, ERR_SSL_WRONG_VERSION_NUMBER, ...), else null. */
  errorCode: string | null;
  /** Whether the agent tries again; false: it has stopped (status `rejected` or `stopped`). */
  willRetry: boolean;
  /** Milliseconds until the next attempt when it tries again, else null. */
  retryInMs: number | null;
  /** Attempts that failed in a row (the count restarts at `ready` and at a `registration` pending). */
  attempt: number;
}

/** A failure as found, before the agent decides whether and when to try again. */
export type Failure = Pick<Disconnection, 'message' | 'cause' | 'code' | 'reason' | 'httpStatus' | 'errorCode'>;

const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME', 'EAI_NODATA']);
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|ERR_OSSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH)/;

/** A connection error (from `ws` or the socket beneath it) of an attempt to reach `url`. */
export function describeError(err: unknown, url: URL): Failure {
  const e = err as NodeJS.ErrnoException & { library?: string };
  const errorCode = typeof e?.code === 'string' ? e.code : null;
  const text = e instanceof Error ? e.message : String(err);
  const at = url.host;
  const base = { code: null, reason: '', httpStatus: null, errorCode };
  if (errorCode === 'ECONNREFUSED') return { ...base, cause: 'refused', message: `connection refused by ${at} (is Steward running there?)` };
  if (errorCode && DNS_CODES.has(errorCode)) return { ...base, cause: 'dns', message: `DNS lookup of ${url.hostname} failed (${errorCode})` };
  if ((errorCode && TLS_CODE.test(errorCode)) || e?.library === 'SSL routines' || /\b(TLS|SSL)\b/.test(text)) {
    return { ...base, cause: 'tls', message: `TLS with ${at} failed: ${text}` };
  }
  if (errorCode === 'ETIMEDOUT' || /timed out/i.test(text)) return { ...base, cause: 'timeout', message: `no answer from ${at} in time (${text})` };
  return { ...base, cause: 'network', message: `cannot reach ${at}: ${text}` };
}

/** An HTTP answer where the WebSocket upgrade was expected. */
export function describeHttpStatus(status: number, statusText: string | undefined, url: URL): Failure {
  const words = statusText || STATUS_CODES[status] || '';
  const hint = status === 404 ? ' (is the address right? the agent endpoint is /ws/agent)' : status >= 500 ? ' (Steward, or a proxy in front of it, is not answering)' : '';
  return { cause: 'http', code: null, reason: '', httpStatus: status, errorCode: null, message: `HTTP ${status}${words ? ` ${words}` : ''} from ${url.href} instead of a WebSocket${hint}` };
}

/** A socket that was open and closed with `code`. */
export function describeClose(code: number, reason: string): Failure {
  const { meaning } = closeMeaning(code);
  const said = reason && reason !== meaning ? ` ("${reason}")` : '';
  return { cause: 'closed', code, reason, httpStatus: null, errorCode: null, message: `closed with ${code}: ${meaning}${said}` };
}
