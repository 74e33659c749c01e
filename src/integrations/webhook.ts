/**
 * Signed webhooks: the `X-Signature: sha256=<hex>` scheme both directions use, and the one HTTP
 * POST every outgoing bridge delivery makes.
 *
 * The signature is the HMAC-SHA256 of the raw body bytes (never a re-serialisation) keyed with
 * the bridge's shared secret, as lowercase hex. Verification compares digests in constant time.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'x-signature';
const SIGNATURE_RE = /^sha256=([0-9a-fA-F]{64})$/;

/** `sha256=<hex>` of `body` under `secret`. */
export function sign(body: Buffer | string, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/**
 * The hex digest a signature header carries when it is well formed and matches `body` under
 * `secret` (lowercased, so it can key replay records); null otherwise.
 */
export function verifySignature(header: string | undefined, body: Buffer, secret: string): string | null {
  const m = header ? SIGNATURE_RE.exec(header.trim()) : null;
  if (!m) return null;
  const given = Buffer.from(m[1]!, 'hex');
  const expected = createHmac('sha256', secret).update(body).digest();
  return given.length === expected.length && timingSafeEqual(given, expected) ? m[1]!.toLowerCase() : null;
}

export interface PostResult {
  ok: boolean;
  /** HTTP status when an answer came. */
  status?: number;
  /** Network error or timeout. */
  error?: string;
  /** Whether trying again may help: network errors, timeouts, 408, 429 and 5xx. */
  retryable: boolean;
}

/** POSTs a JSON body; never throws. Redirects are not followed (they count as failures). */
export async function postJson(
  url: string,
  body: string,
  headers: Record<string, string>,
  opts: { timeoutMs: number; signal?: AbortSignal },
): Promise<PostResult> {
  const signals = [AbortSignal.timeout(opts.timeoutMs), ...(opts.signal ? [opts.signal] : [])];
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
      redirect: 'manual',
      signal: AbortSignal.any(signals),
    });
    // Drain the answer so the connection can be reused; its content is not needed.
    await res.arrayBuffer().catch(() => undefined);
    const ok = res.status >= 200 && res.status < 300;
    return { ok, status: res.status, retryable: !ok && (res.status === 408 || res.status === 429 || res.status >= 500) };
  } catch (err) {
    const e = err as Error;
    const error = e.name === 'TimeoutError' ? `no answer within ${opts.timeoutMs} ms` : e.name === 'AbortError' ? 'aborted' : describeFetchError(e);
    return { ok: false, error, retryable: e.name !== 'AbortError' };
  }
}

/**
 * A fetch failure in a few words that never repeat the URL (its path, query or credentials may
 * be a secret of the bridge): the system error code when there is one (ECONNREFUSED, ENOTFOUND).
 */
function describeFetchError(e: Error): string {
  const cause = (e as { cause?: { code?: unknown } }).cause;
  return typeof cause?.code === 'string' ? cause.code : 'request failed';
}
