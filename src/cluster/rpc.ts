/**
 * Request/reply with failures carried back: `serve` answers every request with an envelope,
 * `{ok: true, value}` or `{ok: false, error: {code, message}}`, and `call` unwraps it, throwing
 * BusRemoteError for a failure. A responder that fails then answers at once instead of leaving
 * the caller to wait out its timeout. What a lost request or reply means is still the caller's
 * to say (BusTimeoutError: the request may or may not have been acted on).
 */
import { BusError, type Bus, type BusLog, type BusMessage, type Unsubscribe } from './bus.js';

export interface RemoteFailure {
  code: string;
  message: string;
}

type Envelope = { ok: true; value?: unknown } | { ok: false; error: RemoteFailure };

/** The responder's handler failed; `code` and `message` are what it chose to say. */
export class BusRemoteError extends BusError {
  constructor(
    readonly subject: string,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface ServeOptions {
  log: BusLog;
  queue?: string;
  /**
   * What the caller is told of an error thrown by the handler. Default: `internal` with a fixed
   * message (the error itself is logged here, never sent: it may name things the caller must not see).
   */
  describe?: (err: unknown) => RemoteFailure;
}

const INTERNAL: RemoteFailure = { code: 'internal', message: 'the responder failed' };

/** Answers requests on `subject` with what `fn` returns (or the failure it throws). */
export function serve(bus: Bus, subject: string, fn: (data: unknown, msg: BusMessage) => unknown, options: ServeOptions): Unsubscribe {
  const answer = (msg: BusMessage, envelope: Envelope) => {
    try {
      msg.respond?.(envelope);
    } catch (err) {
      // The value could not be encoded (not JSON, too large): the caller gets a failure instead.
      options.log.error({ err, subject }, 'a reply could not be sent');
      msg.respond?.({ ok: false, error: { code: 'reply-refused', message: (err as Error).message } });
    }
  };
  return bus.subscribe(
    subject,
    async (msg) => {
      if (!msg.respond) return; // a plain publish: nobody waits for an answer
      let envelope: Envelope;
      try {
        envelope = { ok: true, value: await fn(msg.data, msg) };
      } catch (err) {
        let failure = INTERNAL;
        try {
          failure = options.describe?.(err) ?? INTERNAL;
        } catch {
          // keep INTERNAL
        }
        if (failure === INTERNAL) options.log.error({ err, subject }, 'a request handler failed');
        envelope = { ok: false, error: failure };
      }
      answer(msg, envelope);
    },
    options.queue !== undefined ? { queue: options.queue } : {},
  );
}

/** Requests `subject` from a `serve` responder: its value, or BusRemoteError; bus errors as Bus.request. */
export async function call(bus: Bus, subject: string, data: unknown, options: { timeoutMs: number }): Promise<unknown> {
  const reply = (await bus.request(subject, data, options)) as Envelope | undefined;
  if (!reply || typeof reply !== 'object' || typeof reply.ok !== 'boolean') throw new BusRemoteError(subject, 'bad-reply', 'the responder did not answer with an envelope');
  if (reply.ok) return reply.value;
  throw new BusRemoteError(subject, String(reply.error?.code ?? 'internal'), String(reply.error?.message ?? 'the responder failed'));
}
