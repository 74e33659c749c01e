/**
 * Helpers for the models suites: a local HTTP server playing LiteLLM's management API that
 * records every call (method, path, headers, body) and keeps the models and virtual keys it was
 * given, with failures on demand; a port where nothing listens; and a client that keeps every
 * response body so a suite can check that no stored secret ever appears in one.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { client, type RequestOptions } from './helpers.js';

export interface ProxyCall {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
}

export interface Failure {
  status: number;
  /** Act on the request before failing (the proxy stored it but answered an error). */
  apply?: boolean;
  /** How many calls fail (default 1). */
  times?: number;
}

export class FakeLiteLlm {
  readonly calls: ProxyCall[] = [];
  /** By model_info.id. */
  readonly models = new Map<string, { model_name: string; litellm_params: Record<string, string>; model_info: { id: string } }>();
  /** By key value. */
  readonly keys = new Map<string, { models: string[]; key_alias: string; metadata: Record<string, string> }>();
  /** Every virtual key ever issued (to scan responses for). */
  readonly issued: string[] = [];
  private readonly failures = new Map<string, Failure>();
  private server!: Server;
  url = '';

  constructor(readonly masterKey = `sk-master-${randomBytes(12).toString('hex')}`) {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: any = null;
        try {
          body = text ? JSON.parse(text) : null;
        } catch {
          body = text;
        }
        const path = (req.url ?? '').split('?')[0]!;
        this.calls.push({ method: req.method ?? '', path, headers: req.headers, body });
        const [status, answer] = this.handle(req, path, body);
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(answer));
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** The environment that points a Steward at this proxy. */
  env(): Record<string, string> {
    return { PROXY_BASE_URL: this.url, PROXY_MASTER_KEY: this.masterKey };
  }

  /** Makes the next call(s) to `path` fail. */
  fail(path: string, f: Failure): void {
    this.failures.set(path, { times: 1, ...f });
  }

  clearCalls(): void {
    this.calls.length = 0;
  }

  callsTo(path: string): ProxyCall[] {
    return this.calls.filter((c) => c.path === path);
  }

  /** The key whose alias starts with `steward-workspace-<workspaceId>-`. */
  keyOf(workspaceId: string): { key: string; models: string[]; key_alias: string; metadata: Record<string, string> } | null {
    for (const [key, v] of this.keys) if (v.key_alias.startsWith(`steward-workspace-${workspaceId}-`)) return { key, ...v };
    return null;
  }

  private handle(req: IncomingMessage, path: string, body: any): [number, unknown] {
    if (req.headers.authorization !== `Bearer ${this.masterKey}`) return [401, { error: { message: 'Authentication Error' } }];
    if (req.method !== 'POST') return [405, { detail: 'Method Not Allowed' }];
    const failure = this.failures.get(path);
    if (failure) {
      failure.times = (failure.times ?? 1) - 1;
      if (failure.times <= 0) this.failures.delete(path);
      if (failure.apply) this.apply(path, body);
      return [failure.status, { error: { message: 'Internal Server Error', type: 'internal' } }];
    }
    return this.apply(path, body);
  }

  private apply(path: string, body: any): [number, unknown] {
    switch (path) {
      case '/model/new':
        this.models.set(body.model_info.id, body);
        return [200, { model_id: body.model_info.id, model_name: body.model_name }];
      case '/model/delete':
        if (!this.models.delete(body.id)) return [404, { detail: `Model with id=${body.id} not found` }];
        return [200, { message: `Model: ${body.id} deleted successfully` }];
      case '/key/generate': {
        for (const v of this.keys.values()) if (v.key_alias === body.key_alias) return [400, { error: { message: 'Unique key aliases across all keys are required' } }];
        const key = `sk-virtual-${randomBytes(12).toString('hex')}`;
        this.keys.set(key, { models: body.models, key_alias: body.key_alias, metadata: body.metadata });
        this.issued.push(key);
        return [200, { key, key_alias: body.key_alias, models: body.models }];
      }
      case '/key/update': {
        const k = this.keys.get(body.key);
        if (!k) return [404, { detail: 'key not found' }];
        k.models = body.models;
        return [200, { key: body.key, models: body.models }];
      }
      case '/key/delete': {
        const deleted: string[] = [];
        for (const key of body.keys ?? []) if (this.keys.delete(key)) deleted.push(key);
        for (const alias of body.key_aliases ?? []) {
          for (const [key, v] of this.keys) if (v.key_alias === alias && this.keys.delete(key)) deleted.push(key);
        }
        if (deleted.length === 0) return [404, { detail: 'no such key' }];
        return [200, { deleted_keys: deleted }];
      }
      default:
        return [404, { detail: 'Not Found' }];
    }
  }
}

/** A loopback URL where nothing listens (a proxy that is down). */
export async function deadUrl(): Promise<string> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/** Every response body any recording client received. */
export const seenBodies: string[] = [];

/** A client like `client()` that keeps every response body in `seenBodies`. */
export function recordingClient(baseUrl: string, token?: string) {
  const inner = client(baseUrl, token);
  const keep = async <T>(p: Promise<T & { text: string }>) => {
    const r = await p;
    seenBodies.push(r.text);
    return r;
  };
  return {
    get: (path: string, opts?: RequestOptions) => keep(inner.get(path, opts)),
    post: (path: string, json?: unknown, opts?: RequestOptions) => keep(inner.post(path, json, opts)),
    put: (path: string, json?: unknown, opts?: RequestOptions) => keep(inner.put(path, json, opts)),
    patch: (path: string, json?: unknown, opts?: RequestOptions) => keep(inner.patch(path, json, opts)),
    del: (path: string, opts?: RequestOptions) => keep(inner.del(path, opts)),
  };
}

/** The secrets that `seenBodies` contains, among `secrets`. */
export function leaked(secrets: string[]): string[] {
  return secrets.filter((s) => s && seenBodies.some((b) => b.includes(s)));
}
