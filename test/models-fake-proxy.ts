/**
 * Helpers for the models suites: a stand-in for LiteLLM's management API (test/stand-in-server.ts)
 * that records every call (method, path, headers, body) and keeps the models and virtual keys it
 * was given, with failures on demand; model registration over HTTP; and a client that keeps every
 * response body so a suite can check that no stored secret ever appears in one.
 */
import { randomBytes } from 'node:crypto';
import * as assert from 'uvu/assert';
import { client, type RequestOptions } from './helpers.js';
import { routes, StandIn, type Answer, type Recorded } from './stand-in-server.js';

export interface Failure {
  status: number;
  /** Act on the request before failing (the proxy stored it but answered an error). */
  apply?: boolean;
  /** How many calls fail (default 1). */
  times?: number;
}

export class FakeLiteLlm {
  /** By model_info.id. */
  readonly models = new Map<string, { model_name: string; litellm_params: Record<string, string>; model_info: { id: string } }>();
  /** By key value. */
  readonly keys = new Map<string, { models: string[]; key_alias: string; metadata: Record<string, string> }>();
  /** Every virtual key ever issued (to scan responses for). */
  readonly issued: string[] = [];
  private server!: StandIn;

  constructor(readonly masterKey = `sk-master-${randomBytes(12).toString('hex')}`) {}

  async start(): Promise<this> {
    // A body that is not JSON is kept as its text: the proxy is asked in JSON, and a test should see anything else.
    this.server = await StandIn.start({ respond: (req) => this.handle(req), nonJson: 'text' });
    return this;
  }

  /** Every call received, in order (`path` without the query). */
  get calls(): Recorded[] {
    return this.server.received;
  }

  get url(): string {
    return this.server.url;
  }

  async close(): Promise<void> {
    await this.server.close();
  }

  /** The environment that points a Steward at this proxy. */
  env(): Record<string, string> {
    return { PROXY_BASE_URL: this.url, PROXY_MASTER_KEY: this.masterKey };
  }

  /** Makes the next call(s) to `path` fail. */
  fail(path: string, f: Failure): void {
    this.server.fail(path, { ...f, body: { error: { message: 'Internal Server Error', type: 'internal' } } });
  }

  clearCalls(): void {
    this.server.clear();
  }

  /** The key whose alias starts with `steward-workspace-<workspaceId>-`. */
  keyOf(workspaceId: string): { key: string; models: string[]; key_alias: string; metadata: Record<string, string> } | null {
    for (const [key, v] of this.keys) if (v.key_alias.startsWith(`steward-workspace-${workspaceId}-`)) return { key, ...v };
    return null;
  }

  private handle(req: Recorded): Answer | Promise<Answer> {
    if (req.headers.authorization !== `Bearer ${this.masterKey}`) return { status: 401, body: { error: { message: 'Authentication Error' } } };
    if (req.method !== 'POST') return { status: 405, body: { detail: 'Method Not Allowed' } };
    return this.routes(req);
  }

  private readonly routes = routes(
    {
      '/model/new': ({ body }) => {
        this.models.set(body.model_info.id, body);
        return { status: 200, body: { model_id: body.model_info.id, model_name: body.model_name } };
      },
      '/model/delete': ({ body }) => {
        if (!this.models.delete(body.id)) return { status: 404, body: { detail: `Model with id=${body.id} not found` } };
        return { status: 200, body: { message: `Model: ${body.id} deleted successfully` } };
      },
      '/key/generate': ({ body }) => {
        for (const v of this.keys.values()) if (v.key_alias === body.key_alias) return { status: 400, body: { error: { message: 'Unique key aliases across all keys are required' } } };
        const key = `sk-virtual-${randomBytes(12).toString('hex')}`;
        this.keys.set(key, { models: body.models, key_alias: body.key_alias, metadata: body.metadata });
        this.issued.push(key);
        return { status: 200, body: { key, key_alias: body.key_alias, models: body.models } };
      },
      '/key/update': ({ body }) => {
        const k = this.keys.get(body.key);
        if (!k) return { status: 404, body: { detail: 'key not found' } };
        k.models = body.models;
        return { status: 200, body: { key: body.key, models: body.models } };
      },
      '/key/delete': ({ body }) => {
        const deleted: string[] = [];
        for (const key of body.keys ?? []) if (this.keys.delete(key)) deleted.push(key);
        for (const alias of body.key_aliases ?? []) {
          for (const [key, v] of this.keys) if (v.key_alias === alias && this.keys.delete(key)) deleted.push(key);
        }
        if (deleted.length === 0) return { status: 404, body: { detail: 'no such key' } };
        return { status: 200, body: { deleted_keys: deleted } };
      },
    },
    { status: 404, body: { detail: 'Not Found' } },
  );
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

/** Registers a model over HTTP (`POST /api/admin/models`, asserted 201) and returns its id. */
export async function createModel(api: Pick<ReturnType<typeof client>, 'post'>, body: Record<string, unknown>): Promise<string> {
  const r = await api.post('/api/admin/models', body);
  assert.is(r.status, 201, r.text);
  return r.body.model.id as string;
}

/** The secrets that `seenBodies` contains, among `secrets`. */
export function leaked(secrets: string[]): string[] {
  return secrets.filter((s) => s && seenBodies.some((b) => b.includes(s)));
}
