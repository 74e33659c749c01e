/**
 * The message bus between the nodes of a cluster: publish/subscribe on subjects, queue groups,
 * request/reply, and the connection's status. Two implementations satisfy it: in-process
 * (bus-local.ts, one process, the default) and NATS core (bus-nats.ts, cluster mode); one case
 * file (test/bus-contract.ts) runs against both.
 *
 * Delivery is AT MOST ONCE, on both. A message can be lost whenever a connection drops, a node
 * restarts or nobody listens at the moment it is published, and nothing is retried by the bus.
 * So:
 * - anything that must survive is written to the store BEFORE a message about it is sent; the
 *   message is a doorbell ("look at X"), never the only copy of X;
 * - every caller says, where it publishes or requests, what happens when the message is lost
 *   (who notices, and how the state is recovered: a periodic sweep of the store, a reconnecting
 *   client re-reading, a caller's retry after a typed error).
 *
 * Payloads are JSON (see `encodePayload`): the messages are small control messages and feed
 * frames that leave the cluster as JSON anyway; JSON needs no schema step, is readable with
 * `nats sub` while debugging, and both implementations put every payload through the same
 * encoder, so a value that would not survive NATS (a Date, a BigInt, a cycle) fails the same way
 * in a single process.
 */

export type BusStatus = 'connected' | 'reconnecting' | 'closed';

export interface BusMessage {
  readonly subject: string;
  /** The decoded payload (`undefined` for an empty one). Each subscription gets its own copy. */
  readonly data: unknown;
  /**
   * Present when the sender waits for a reply (a request). Sends one reply; false when it could
   * not be sent (the bus is not connected): the requester then sees a timeout.
   */
  readonly respond?: (data?: unknown) => boolean;
}

/**
 * Called for each message. A handler that throws or rejects is logged; the subscription goes on.
 * Handlers run one message at a time per subscription only as far as they are synchronous: an
 * async handler's next message may arrive before the previous one finished.
 */
export type BusHandler = (msg: BusMessage) => void | Promise<void>;

export interface SubscribeOptions {
  /** Queue group: each message goes to one member of the group (per group), not to all. */
  queue?: string;
}

export interface RequestOptions {
  /** How long to wait for the first reply before BusTimeoutError. */
  timeoutMs: number;
}

/** Ends a subscription; calling it again does nothing. */
export type Unsubscribe = () => void;

export interface Bus {
  readonly kind: 'local' | 'nats';
  readonly status: BusStatus;
  /** The largest encoded payload the bus carries (the NATS server's max_payload). */
  readonly maxPayloadBytes: number;
  /**
   * Sends a message to every subscriber of `subject` (no wildcards) and to one member of each
   * queue group. Returns false when the message was dropped because the bus is not connected
   * (reconnecting or closed): nothing is buffered for later. True means handed to the connection,
   * not delivered: a message can still be lost after that (see the top of this file).
   * Throws BusPayloadError (not JSON, too large) and BusSubjectError.
   */
  publish(subject: string, data?: unknown): boolean;
  /**
   * Listens on `subject`, which may use `*` (one token) and `>` (the rest, last token only).
   * Subscriptions survive reconnections; messages published while a node was disconnected are
   * not delivered to it. Throws BusUnavailableError when the bus is closed.
   */
  subscribe(subject: string, handler: BusHandler, options?: SubscribeOptions): Unsubscribe;
  /**
   * Sends a request and resolves with the first reply's payload. Rejects with
   * BusNoRespondersError when nobody listens on `subject` (at once, without waiting out the
   * timeout), BusTimeoutError when no reply came in time (the request or the reply may have been
   * lost, or the responder is slow: the request may have been acted on), BusUnavailableError when
   * the bus is not connected (nothing was sent).
   */
  request(subject: string, data: unknown, options: RequestOptions): Promise<unknown>;
  /**
   * Resolves once everything this bus sent so far (subscriptions included) has reached the server:
   * after it, a message published by another node to a subject subscribed before is delivered.
   * Rejects with BusUnavailableError when not connected.
   */
  flush(): Promise<void>;
  /** Calls `listener` with each change of status; returns the function that stops it. */
  onStatus(listener: (status: BusStatus) => void): () => void;
  /** Stops subscriptions, lets handlers of delivered messages run, sends what is pending, closes. */
  close(): Promise<void>;
}

/** What the buses log (a pino logger fits). */
export interface BusLog {
  error(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

export class BusError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A request found nobody listening on its subject (the shard owner or agent's node is gone). */
export class BusNoRespondersError extends BusError {
  constructor(readonly subject: string) {
    super(`no responders on ${subject}`);
  }
}

/** No reply came within the timeout. The request may still have been acted on. */
export class BusTimeoutError extends BusError {
  constructor(
    readonly subject: string,
    readonly timeoutMs: number,
  ) {
    super(`no reply on ${subject} within ${timeoutMs} ms`);
  }
}

/** The bus is not connected (`reconnecting`) or closed; nothing was sent. */
export class BusUnavailableError extends BusError {
  constructor(
    readonly status: Exclude<BusStatus, 'connected'>,
    options?: { cause?: unknown; message?: string },
  ) {
    super(options?.message ?? (status === 'closed' ? 'the message bus is closed' : 'the message bus is reconnecting'), options);
  }
}

/** A payload the bus cannot carry: not representable as JSON, or larger than maxPayloadBytes. */
export class BusPayloadError extends BusError {
  constructor(
    readonly reason: 'not-json' | 'too-large',
    message: string,
    readonly bytes?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A subject that is empty, has an empty token or white space, or wildcards where none may be. */
export class BusSubjectError extends BusError {}

// ---------------------------------------------------------------------------------------------
// Subjects and payloads, shared by both implementations
// ---------------------------------------------------------------------------------------------

const WHITESPACE = /\s/;

/** Throws BusSubjectError unless `subject` is valid; wildcards (`*`, final `>`) only when allowed. */
export function checkSubject(subject: string, wildcards: boolean): void {
  if (typeof subject !== 'string' || subject === '') throw new BusSubjectError('a subject must be a non-empty string');
  if (WHITESPACE.test(subject)) throw new BusSubjectError(`subject "${subject}" contains white space`);
  const tokens = subject.split('.');
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t === '') throw new BusSubjectError(`subject "${subject}" has an empty token`);
    const wild = t === '*' || t === '>';
    if (!wild && (t.includes('*') || t.includes('>'))) throw new BusSubjectError(`subject "${subject}": wildcards must stand alone as tokens`);
    if (wild && !wildcards) throw new BusSubjectError(`subject "${subject}": no wildcards where a message is sent`);
    if (t === '>' && i !== tokens.length - 1) throw new BusSubjectError(`subject "${subject}": ">" must be the last token`);
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const EMPTY = new Uint8Array(0);

/** JSON bytes of a payload (`undefined`: empty). Throws BusPayloadError. */
export function encodePayload(data: unknown, maxBytes: number): Uint8Array {
  if (data === undefined) return EMPTY;
  let text: string | undefined;
  try {
    text = JSON.stringify(data);
  } catch (err) {
    throw new BusPayloadError('not-json', `payload is not representable as JSON: ${(err as Error).message}`, undefined, { cause: err });
  }
  if (text === undefined) throw new BusPayloadError('not-json', `payload is not representable as JSON (${typeof data})`);
  const bytes = encoder.encode(text);
  if (bytes.length > maxBytes) throw new BusPayloadError('too-large', `payload of ${bytes.length} bytes exceeds the bus limit of ${maxBytes}`, bytes.length);
  return bytes;
}

/** The payload of encoded bytes. Throws on bytes that are not JSON (a foreign publisher). */
export function decodePayload(bytes: Uint8Array): unknown {
  if (bytes.length === 0) return undefined;
  return JSON.parse(decoder.decode(bytes));
}

/** Runs a handler, routing a throw or a rejection to `onError`. */
export function runHandler(handler: BusHandler, msg: BusMessage, onError: (err: unknown) => void): void {
  try {
    const r = handler(msg);
    if (r && typeof (r as Promise<void>).then === 'function') (r as Promise<void>).then(undefined, onError);
  } catch (err) {
    onError(err);
  }
}

/** A listener set for status changes; a failing listener is logged and the others still run. */
export class StatusListeners {
  private readonly listeners = new Set<(status: BusStatus) => void>();
  constructor(private readonly log: BusLog) {}

  add(listener: (status: BusStatus) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  emit(status: BusStatus): void {
    for (const l of [...this.listeners]) {
      try {
        l(status);
      } catch (err) {
        this.log.error({ err }, 'a bus status listener failed');
      }
    }
  }
}
