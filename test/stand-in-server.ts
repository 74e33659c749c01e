/**
 * A local HTTP server standing in for an outside service (the model proxy, a webhook endpoint, the
 * team-chat graph API, the skills library and its code host). It listens on an ephemeral port of
 * 127.0.0.1, records every request (method, target, headers, raw and parsed body) and answers what
 * the test says: `respond` for every request (a route table from `routes()`, or any function), and
 * failures scripted per path ahead of it (a status, a delay, or the connection closed unanswered).
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { waitFor } from './helpers.js';

export interface Recorded {
  method: string;
  /** The request target as sent: path and query. */
  url: string;
  /** The path alone (no query). */
  path: string;
  headers: IncomingHttpHeaders;
  /** The body's bytes as received. */
  raw: Buffer;
  /** The body parsed as JSON; a body that is not JSON as the `nonJson` option says. */
  body: any;
}

export interface Answer {
  status: number;
  /** A string or bytes go as they are (text/plain); anything else as JSON (`{}` when absent). */
  body?: unknown;
  headers?: Record<string, string>;
  /** Hold the answer back this long. */
  delayMs?: number;
  /** Close the connection instead of answering. */
  hangUp?: boolean;
}

export type Respond = (req: Recorded) => Answer | Promise<Answer>;

/** An answer that pre-empts `respond` for the next request(s) to a path. */
export interface Scripted extends Answer {
  /** How many requests get it (default 1). */
  times?: number;
  /** Let `respond` act on the request first, then answer this instead (the work done, the answer lost). */
  apply?: boolean;
}

export interface StandInOptions {
  /** The answer to every request not scripted (default 200 `{}`); may be changed at any time. */
  respond?: Respond;
  /** What `body` holds when the request body is not JSON: `undefined` (the default), or its text (`null` when empty). */
  nonJson?: 'undefined' | 'text';
}

export class StandIn {
  /** Every request received, in order. */
  readonly received: Recorded[] = [];
  respond: Respond;
  url = '';
  private readonly scripted = new Map<string, Scripted>();
  private readonly problems: Error[] = [];
  private readonly server: Server;

  private constructor(private readonly opts: StandInOptions) {
    this.respond = opts.respond ?? (() => ({ status: 200, body: {} }));
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks);
        const url = req.url ?? '';
        const rec: Recorded = { method: req.method ?? '', url, path: url.split('?')[0]!, headers: req.headers, raw, body: this.parse(raw) };
        this.received.push(rec);
        this.answer(rec).then(
          async (a) => {
            if (a.delayMs) await new Promise((r) => setTimeout(r, a.delayMs).unref());
            if (a.hangUp) return void req.socket.destroy();
            const text = typeof a.body === 'string' || Buffer.isBuffer(a.body);
            res.writeHead(a.status, { 'content-type': text ? 'text/plain; charset=utf-8' : 'application/json', ...a.headers });
            res.end(text ? (a.body as string | Buffer) : JSON.stringify(a.body ?? {}));
          },
          (err: unknown) => {
            // A fault in the test's own `respond`: answered 500 here, and raised again by close().
            this.problems.push(err instanceof Error ? err : new Error(String(err)));
            res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end(`stand-in respond failed: ${String(err)}`);
          },
        );
      });
    });
  }

  /** A stand-in listening on an ephemeral port of 127.0.0.1. */
  static async start(opts: StandInOptions = {}): Promise<StandIn> {
    const s = new StandIn(opts);
    await new Promise<void>((resolve) => s.server.listen(0, '127.0.0.1', resolve));
    s.url = `http://127.0.0.1:${(s.server.address() as AddressInfo).port}`;
    return s;
  }

  /** Answers the next request(s) to `path` with `answer` instead of `respond`. */
  fail(path: string, answer: Scripted): void {
    this.scripted.set(path, { times: 1, ...answer });
  }

  /** The requests whose target is exactly `url` (path and query). */
  to(url: string): Recorded[] {
    return this.received.filter((r) => r.url === url);
  }

  /** Forgets the requests received so far. */
  clear(): void {
    this.received.length = 0;
  }

  /** Resolves with every request received once there are at least `n`. */
  async waitFor(n: number, timeoutMs = 5000): Promise<Recorded[]> {
    await waitFor(() => this.received.length >= n, timeoutMs);
    return this.received;
  }

  /** Stops listening and drops the connections still open (answers held back included). */
  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    if (this.problems.length > 0) throw this.problems[0];
  }

  private parse(raw: Buffer): unknown {
    const text = raw.toString('utf8');
    try {
      return JSON.parse(text);
    } catch {
      if (this.opts.nonJson !== 'text') return undefined;
      return text ? text : null;
    }
  }

  private async answer(rec: Recorded): Promise<Answer> {
    const script = this.scripted.get(rec.path);
    if (!script) return this.respond(rec);
    script.times = (script.times ?? 1) - 1;
    if (script.times <= 0) this.scripted.delete(rec.path);
    if (script.apply) await this.respond(rec);
    return script;
  }
}

/**
 * A `respond` from a table of `'METHOD /path'` or `'/path'` (any method) to an answer or a function
 * of the request; the path alone is matched (no query), and anything else gets `otherwise`.
 */
export function routes(table: Record<string, Answer | Respond>, otherwise: Answer = { status: 404, body: 'Not Found' }): Respond {
  return (req) => {
    const route = table[`${req.method} ${req.path}`] ?? table[req.path];
    if (route === undefined) return otherwise;
    return typeof route === 'function' ? route(req) : route;
  };
}

/**
 * A loopback port free now. A server that is to come back on its port must start on a fixed one:
 * uWS sets SO_REUSEADDR only then, and without it the connections it closed keep the port from a
 * new listener.
 */
export async function freePort(): Promise<number> {
  const srv = createNetServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

/** A loopback URL where nothing listens (an outside service that is down). */
export async function deadUrl(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}`;
}
