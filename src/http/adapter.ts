/**
 * Moves bytes between uWS and the Router: collects headers synchronously (uWS request objects
 * are only valid inside the handler), reads the body under a size limit (413 without reading the
 * rest, connection closed), survives clients that go away mid-request (onAborted), and writes
 * the answer corked, under backpressure (see `send`): a client that does not read its answers
 * holds at most one of them on the server.
 */
import { STATUS_CODES } from 'node:http';
import type { HttpResponse, TemplatedApp } from './uws.js';
import type { Cookie, RawRequest, ResponseOut, Router } from './router.js';
import { errorBody } from './errors.js';
import type { Logger } from '../log.js';
import { canonicalAddress } from './client-address.js';

export interface AdapterOptions {
  bodyLimitBytes: number;
  log: Logger;
  /** Headers added to every response. */
  baseHeaders?: Record<string, string>;
  /** Finds the client's address behind trusted proxies; without it, the peer's address. */
  clientAddress?: (peer: string, forwardedFor: string | undefined) => string;
}

const statusLine = (status: number) => `${status} ${STATUS_CODES[status] ?? 'Unknown'}`;

export function serializeCookie(c: Cookie): string {
  const parts = [`${c.name}=${encodeURIComponent(c.value)}`, `Path=${c.path ?? '/'}`];
  if (c.maxAgeSeconds !== undefined) parts.push(`Max-Age=${Math.max(0, Math.floor(c.maxAgeSeconds))}`);
  if (c.httpOnly) parts.push('HttpOnly');
  if (c.secure) parts.push('Secure');
  if (c.sameSite) parts.push(`SameSite=${c.sameSite}`);
  return parts.join('; ');
}

export function attachHttp(app: TemplatedApp, router: Router, opts: AdapterOptions): void {
  const { bodyLimitBytes, log } = opts;
  const baseHeaders = Object.entries(opts.baseHeaders ?? {});
  const clientAddress = opts.clientAddress ?? ((peer: string) => canonicalAddress(peer) ?? peer);

  app.any('/*', (res, req) => {
    const state = { aborted: false, answered: false };
    res.onAborted(() => {
      state.aborted = true;
    });

    const headers: Record<string, string> = {};
    req.forEach((k, v) => {
      headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
    });
    const raw: Omit<RawRequest, 'body'> = {
      method: req.getMethod().toUpperCase(),
      path: req.getUrl(),
      query: req.getQuery() ?? '',
      headers,
      remoteAddress: clientAddress(Buffer.from(res.getRemoteAddressAsText()).toString(), headers['x-forwarded-for']),
    };

    const write = (out: ResponseOut, closeConnection = false) => {
      if (state.aborted || state.answered) return;
      state.answered = true;
      res.cork(() => {
        res.writeStatus(statusLine(out.status));
        for (const [k, v] of baseHeaders) res.writeHeader(k, v);
        res.writeHeader('content-type', out.contentType);
        for (const [k, v] of Object.entries(out.headers)) res.writeHeader(k, v);
        for (const c of out.cookies) res.writeHeader('set-cookie', serializeCookie(c));
        if (out.headOf !== undefined) {
          // HEAD: the length of the body a GET would get, and no body. (Called with no argument,
          // uWS writes no Content-Length of its own.)
          res.writeHeader('content-length', String(out.headOf));
          res.endWithoutBody();
        } else if (closeConnection) {
          res.end(out.body, true);
        } else {
          send(res, out.body, state);
        }
      });
    };

    const tooLarge = () =>
      write(
        {
          status: 413,
          headers: {},
          cookies: [],
          contentType: 'application/json; charset=utf-8',
          body: JSON.stringify(errorBody('payload_too_large', `the request body exceeds ${bodyLimitBytes} bytes`)),
        },
        true,
      );

    const run = (body: Buffer) => {
      router.dispatch({ ...raw, body }).then(
        (out) => write(out),
        (err: unknown) => {
          // dispatch answers every error itself; this is a last resort.
          log.error({ err }, 'dispatch failed');
          write({
            status: 500,
            headers: {},
            cookies: [],
            contentType: 'application/json; charset=utf-8',
            body: JSON.stringify(errorBody('internal', 'internal error')),
          });
        },
      );
    };

    const declared = headers['content-length'];
    const chunked = /chunked/i.test(headers['transfer-encoding'] ?? '');
    if (declared !== undefined && Number(declared) > bodyLimitBytes) return tooLarge();
    if (!chunked && (declared === undefined || Number(declared) === 0)) return run(Buffer.alloc(0));
    readBody(res, bodyLimitBytes, run, tooLarge, state);
  });
}

function readBody(
  res: HttpResponse,
  limit: number,
  done: (body: Buffer) => void,
  tooLarge: () => void,
  state: { aborted: boolean; answered: boolean },
): void {
  const chunks: Buffer[] = [];
  let total = 0;
  res.onData((chunk, isLast) => {
    if (state.answered || state.aborted) return;
    total += chunk.byteLength;
    if (total > limit) {
      chunks.length = 0;
      tooLarge();
      return;
    }
    // uWS reuses the chunk's memory after this callback returns: copy it.
    chunks.push(Buffer.from(new Uint8Array(chunk).slice()));
    if (isLast) done(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total));
  });
}

/**
 * Writes a response body under backpressure: what the socket does not take now waits here, not
 * in a uWS buffer, and goes out as the client reads (onWritable). While a response waits, uWS
 * answers a further request on the connection (a pipelining client that does not read) by
 * closing it, and closes it too when nothing of the response is taken for about 10 s. So a
 * connection holds at most one response that its client has not read, however many requests it
 * sends.
 */
function send(res: HttpResponse, body: string | Buffer, state: { aborted: boolean }): void {
  const total = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
  const [, done] = res.tryEnd(body, total);
  if (done) return;
  // Offsets count bytes: a string body is kept as its bytes from here on.
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  res.onWritable((offset) => {
    if (state.aborted) return true;
    const [ok] = res.tryEnd(bytes.subarray(offset), total);
    return ok;
  });
}
