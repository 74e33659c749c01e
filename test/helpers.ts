/**
 * Shared test helpers: a real Steward on an ephemeral port with a fresh data directory, and a
 * small HTTP client over node:http (no keep-alive, raw bodies and headers under our control).
 */
import { request as httpRequest } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { startSteward, type StartOptions, type Steward } from '../src/server.js';
import type { Router } from '../src/http/router.js';

export interface TestServer extends Steward {
  dataDir: string;
  env: Record<string, string>;
  /** Closes the server; keeps the data directory unless `remove` is true. */
  stop(remove?: boolean): Promise<void>;
  /** Closes this server and starts a new one on the same data directory. */
  restart(extraEnv?: Record<string, string>): Promise<TestServer>;
}

export async function tempDir(prefix = 'steward-test-'): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

export interface TestStartOptions extends StartOptions {
  /** Where the log goes, at LOG_LEVEL (default: standard output). */
  logTo?: Writable;
}

/** Marks, in a test file's output, an answer that did not match its route's declared schema. */
export const RESPONSE_VIOLATION_MARK = '[response schema violation]';

/**
 * The routers of every server this process started. Each checks every answer against what its
 * route declares (STEWARD_CHECK_RESPONSES): a mismatch is answered 500, which fails the request
 * that met it, and when the process ends each one is printed and the file fails, even where the
 * test did not look at the status.
 */
const checkedRouters: Router[] = [];
process.on('exit', () => {
  const violations = checkedRouters.flatMap((r) => r.violations);
  for (const v of violations) process.stderr.write(`\n${RESPONSE_VIOLATION_MARK} ${v.method} ${v.route} answered ${v.problem}\n`);
  if (violations.length > 0) process.exitCode = 1;
});

export async function startServer(extraEnv: Record<string, string> = {}, dataDir?: string, options: TestStartOptions = {}): Promise<TestServer> {
  const dir = dataDir ?? (await tempDir());
  const env: Record<string, string> = {
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dir,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    STEWARD_CHECK_RESPONSES: '1',
    ...extraEnv,
  };
  const config = loadConfig(env);
  const { logTo, ...startOptions } = options;
  const log = createLogger(config.logLevel, logTo);
  const steward = await startSteward(config, log, startOptions);
  if (config.checkResponses) checkedRouters.push(steward.ctx.router);
  let stopped = false;
  const server: TestServer = {
    ...steward,
    dataDir: dir,
    env,
    async stop(remove = false) {
      if (!stopped) {
        stopped = true;
        await steward.close();
      }
      if (remove) await rm(dir, { recursive: true, force: true });
    },
    async restart(more = {}) {
      await server.stop(false);
      return startServer({ ...extraEnv, ...more }, dir, options);
    },
  };
  return server;
}

export interface HttpResult<T = any> {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  body: T;
  /** The body's bytes as received (node:http does not decompress). */
  bytes: Buffer;
}

export interface RequestOptions {
  headers?: Record<string, string>;
  /** A JSON value, or raw bytes/string sent as given. */
  json?: unknown;
  raw?: string | Buffer;
  token?: string;
  /** The local address to connect from (Linux accepts any of 127.0.0.0/8). */
  localAddress?: string;
}

/** One HTTP request on a fresh connection (Connection: close). */
export function http<T = any>(baseUrl: string, method: string, path: string, opts: RequestOptions = {}): Promise<HttpResult<T>> {
  const url = new URL(path, baseUrl);
  const headers: Record<string, string> = { ...opts.headers };
  let payload: Buffer | undefined;
  if (opts.json !== undefined) {
    payload = Buffer.from(JSON.stringify(opts.json));
    headers['content-type'] ??= 'application/json';
  } else if (opts.raw !== undefined) {
    payload = Buffer.isBuffer(opts.raw) ? opts.raw : Buffer.from(opts.raw);
  }
  if (payload) headers['content-length'] = String(payload.length);
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { method, hostname: url.hostname, port: url.port, path: url.pathname + url.search, headers, agent: false, localAddress: opts.localAddress },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const bytes = Buffer.concat(chunks);
          const text = bytes.toString('utf8');
          let body: unknown = undefined;
          try {
            body = text ? JSON.parse(text) : undefined;
          } catch {
            body = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body: body as T, bytes });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (payload) req.write(payload);
    req.end();
  });
}

/** A client bound to one server and, optionally, one bearer token. */
export function client(baseUrl: string, token?: string) {
  const call = <T = any>(method: string, path: string, json?: unknown, opts: RequestOptions = {}) =>
    http<T>(baseUrl, method, path, { token, ...opts, ...(json !== undefined ? { json } : {}) });
  return {
    get: <T = any>(path: string, opts?: RequestOptions) => call<T>('GET', path, undefined, opts),
    post: <T = any>(path: string, json?: unknown, opts?: RequestOptions) => call<T>('POST', path, json ?? {}, opts),
    put: <T = any>(path: string, json?: unknown, opts?: RequestOptions) => call<T>('PUT', path, json ?? {}, opts),
    patch: <T = any>(path: string, json?: unknown, opts?: RequestOptions) => call<T>('PATCH', path, json ?? {}, opts),
    del: <T = any>(path: string, opts?: RequestOptions) => call<T>('DELETE', path, undefined, opts),
  };
}

/** A log destination that keeps every line written to it, in `lines`. */
export function logLines(): { lines: string[]; sink: Writable } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  return { lines, sink };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until `list` holds more than `count` items, and resolves with the last one. */
export async function lastAfter<T>(list: T[], count: number, timeoutMs = 5000): Promise<T> {
  await waitFor(() => list.length > count, timeoutMs);
  return list[list.length - 1]!;
}

/** Polls until fn returns a truthy value (which it resolves to) or the time runs out. */
export async function waitFor<T>(fn: () => T | Promise<T>, timeoutMs = 5000, stepMs = 10): Promise<Exclude<T, null | undefined | false | 0 | ''>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as Exclude<T, null | undefined | false | 0 | ''>;
    if (Date.now() > end) throw new Error(`waitFor: condition not met within ${timeoutMs} ms`);
    await sleep(stepMs);
  }
}
