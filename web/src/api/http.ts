/**
 * The one way the dashboard calls Steward: JSON over fetch with the session cookie, errors turned
 * into ApiError (the server's `{error: {code, message}}`), and `describeError` for the words a
 * person reads. A 401 on any call but the sign-in ones tells the session module the session ended.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

type Listener = () => void;
const unauthorizedListeners = new Set<Listener>();
/** Called when a request answers 401 (the session expired or was ended elsewhere). */
export function onUnauthorized(fn: Listener): () => void {
  unauthorizedListeners.add(fn);
  return () => unauthorizedListeners.delete(fn);
}

export type Query = Record<string, string | number | boolean | null | undefined>;

export function withQuery(path: string, query?: Query): string {
  if (!query) return path;
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') qs.set(k, String(v));
  const s = qs.toString();
  return s ? `${path}?${s}` : path;
}

/** A DID or other value inside a path. */
export const seg = (v: string) => encodeURIComponent(v);

export interface CallOptions {
  query?: Query;
  body?: unknown;
  signal?: AbortSignal;
  /** Do not report a 401 as the end of the session (sign-in calls). */
  quiet401?: boolean;
}

export async function call<T>(method: string, path: string, opts: CallOptions = {}): Promise<T> {
  let res: Response;
  try {
    res = await fetch(withQuery(path, opts.query), {
      method,
      credentials: 'same-origin',
      headers: opts.body !== undefined ? { 'content-type': 'application/json', accept: 'application/json' } : { accept: 'application/json' },
      body: opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
      signal: opts.signal,
    });
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err;
    throw new ApiError(0, 'network', 'Steward could not be reached. Check the network connection and try again.');
  }
  const text = await res.text();
  let body: unknown = undefined;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  if (!res.ok) {
    const e = (body as { error?: { code?: string; message?: string } } | undefined)?.error;
    if (res.status === 401 && !opts.quiet401) for (const fn of unauthorizedListeners) fn();
    throw new ApiError(res.status, e?.code ?? `http_${res.status}`, e?.message ?? res.statusText ?? 'request failed');
  }
  return body as T;
}

export const get = <T>(path: string, query?: Query, signal?: AbortSignal) => call<T>('GET', path, { query, signal });
export const post = <T>(path: string, body: unknown = {}) => call<T>('POST', path, { body });
export const put = <T>(path: string, body: unknown = {}) => call<T>('PUT', path, { body });
export const patch = <T>(path: string, body: unknown = {}) => call<T>('PATCH', path, { body });
export const del = <T>(path: string, query?: Query) => call<T>('DELETE', path, { query });

const capitalize = (s: string) => (s ? s[0]!.toUpperCase() + s.slice(1) : s);

/** What went wrong, in words for a person (never a JSON body). */
export function describeError(err: unknown): string {
  if (err instanceof ApiError) {
    const msg = capitalize(err.message.replace(/\s+$/, ''));
    switch (true) {
      case err.status === 0:
        return err.message;
      case err.status === 401:
        return 'Your session has ended. Sign in again.';
      case err.status === 403:
        return `You are not allowed to do this. ${msg}.`;
      case err.status === 404:
        return `Not found: ${err.message}.`;
      case err.status === 409:
        return `${msg}.`;
      case err.status === 413:
        return 'That is more than Steward accepts in one request.';
      case err.status >= 500:
        return `Steward could not complete this (${err.status}). ${msg === 'Internal error' ? 'The server log has the details.' : msg + '.'}`;
      default:
        return `${msg}.`;
    }
  }
  if (err instanceof Error) return err.message;
  return String(err);
}

export interface Page {
  total: number;
  page: number;
  pageSize: number;
  totalPages: number;
}
