/**
 * The model proxy: LiteLLM's management API (PROXY_BASE_URL, PROXY_MASTER_KEY). Every call is a
 * JSON POST with `Authorization: Bearer <master key>` that must answer 2xx within
 * PROXY_TIMEOUT_MS; anything else is a ProxyError.
 *
 * ProxyError messages name the call and the status or the network error code, never the master
 * key, a provider key or a virtual key, and never the proxy's answer (which may echo what it
 * was sent). `reached` tells the caller whether the request may have been acted on, so that a
 * failed create can be undone in the proxy too. The log hears of the proxy failing once per
 * streak of failures (outage-log.ts), with the reason.
 */
import type { Logger } from '../log.js';
import { OutageLog } from './outage-log.js';

export class ProxyError extends Error {
  override name = 'ProxyError';
  constructor(
    message: string,
    /** False when the request certainly never reached the proxy (connection refused, bad address). */
    readonly reached: boolean,
    /** The proxy's HTTP status, when it answered. */
    readonly status?: number,
  ) {
    super(message);
  }
}

export interface ProxyModelRegistration {
  /** The name clients ask for (our proxyModelName). */
  modelName: string;
  /** `<provider prefix>/<backend model id>`, e.g. `openai/gpt-4o`. */
  litellmModel: string;
  apiBase?: string;
  apiKey?: string;
  /** Our registry id, stored by the proxy as `model_info.id` and used to delete it. */
  id: string;
}

export interface ProxyKeyRequest {
  models: string[];
  keyAlias: string;
  metadata: Record<string, string>;
}

/** Network failures where the request cannot have been received. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ERR_INVALID_URL']);

/** Answers that say the proxy works and refused this one request; any other failure counts against the proxy. */
const REFUSALS = new Set([400, 404, 409, 413, 422]);

export class LiteLlmClient {
  private readonly outage: OutageLog | null;

  constructor(
    private readonly opts: { baseUrl: string; masterKey: string; timeoutMs: number },
    log?: Logger,
  ) {
    this.outage = log ? new OutageLog(log, 'the model proxy', { proxy: new URL(opts.baseUrl).host }) : null;
  }

  get baseUrl(): string {
    return this.opts.baseUrl;
  }

  /** POST /model/new */
  async newModel(m: ProxyModelRegistration): Promise<void> {
    const litellmParams: Record<string, string> = { model: m.litellmModel };
    if (m.apiBase) litellmParams.api_base = m.apiBase;
    if (m.apiKey) litellmParams.api_key = m.apiKey;
    await this.call('/model/new', { model_name: m.modelName, litellm_params: litellmParams, model_info: { id: m.id } });
  }

  /** POST /model/delete; a model the proxy does not know (404) counts as deleted. */
  async deleteModel(id: string): Promise<void> {
    await this.call('/model/delete', { id }, { notFoundOk: true });
  }

  /** POST /key/generate; answers the new virtual key. */
  async generateKey(req: ProxyKeyRequest): Promise<string> {
    const body = await this.call('/key/generate', { models: req.models, key_alias: req.keyAlias, metadata: req.metadata });
    const key = (body as { key?: unknown } | null)?.key;
    if (typeof key !== 'string' || key === '') throw new ProxyError('the model proxy answered POST /key/generate without a key', true);
    return key;
  }

  /** POST /key/update: scopes an existing virtual key to exactly `models`. */
  async updateKey(key: string, models: string[]): Promise<void> {
    await this.call('/key/update', { key, models });
  }

  /** POST /key/delete by key; a key the proxy does not know (404) counts as deleted. */
  async deleteKey(key: string): Promise<void> {
    await this.call('/key/delete', { keys: [key] }, { notFoundOk: true });
  }

  /** POST /key/delete by alias (clean-up after a generate whose answer was lost). */
  async deleteKeyByAlias(alias: string): Promise<void> {
    await this.call('/key/delete', { key_aliases: [alias] }, { notFoundOk: true });
  }

  private async call(path: string, payload: unknown, opts: { notFoundOk?: boolean } = {}): Promise<unknown> {
    try {
      const answer = await this.send(path, payload, opts);
      this.outage?.worked();
      return answer;
    } catch (err) {
      if (err instanceof ProxyError && err.status !== undefined && REFUSALS.has(err.status)) this.outage?.worked();
      else this.outage?.failed((err as Error).message);
      throw err;
    }
  }

  private async send(path: string, payload: unknown, opts: { notFoundOk?: boolean }): Promise<unknown> {
    let res: Response;
    try {
      res = await fetch(`${this.opts.baseUrl}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.opts.masterKey}`, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(payload),
        signal: AbortSignal.timeout(this.opts.timeoutMs),
        redirect: 'error',
      });
    } catch (err) {
      const e = err as { name?: string; cause?: { code?: string } };
      if (e.name === 'TimeoutError' || e.name === 'AbortError') {
        throw new ProxyError(`the model proxy did not answer POST ${path} within ${this.opts.timeoutMs} ms`, true);
      }
      const code = e.cause?.code ?? 'network error';
      throw new ProxyError(`the model proxy could not be reached for POST ${path} (${code})`, !NOT_SENT.has(code));
    }
    let text: string;
    try {
      text = await res.text();
    } catch {
      throw new ProxyError(`the model proxy's answer to POST ${path} was cut off`, true, res.status);
    }
    if (res.status === 404 && opts.notFoundOk) return null;
    if (res.status < 200 || res.status > 299) {
      throw new ProxyError(`the model proxy answered ${res.status} to POST ${path}`, true, res.status);
    }
    if (!text) return null;
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new ProxyError(`the model proxy answered POST ${path} with something that is not JSON`, true, res.status);
    }
  }
}

/**
 * The `litellm_params.model` of a registry model: `<provider prefix>/<modelId>`. The prefix is
 * the provider itself, except that `openai-compatible` servers go through LiteLLM's `openai`
 * prefix (with `api_base` pointing at the server).
 */
export function litellmModelOf(provider: string, modelId: string): string {
  const prefix = provider === 'openai-compatible' ? 'openai' : provider;
  return `${prefix}/${modelId}`;
}
