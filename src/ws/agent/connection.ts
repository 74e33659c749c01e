/**
 * One agent socket: its phase in the protocol, what the handshake needs until it is done, and the
 * outbox that holds frames for `ready`. Kept small: 18,000 of them must fit in a few kilobytes
 * each, and uWS userData holds only a reference to it.
 */
import type { WebSocket } from '../../http/uws.js';
import type { Capability } from '../../domain/capabilities.js';
import { CLOSE, type HelloFrame, type OutboundFrame } from '../../domain/agent-protocol.js';
import type { Logger } from '../../log.js';
import type { HeartbeatPeer } from '../../services/ports.js';
import type { IssuedCertificate, StoredCertificateWithBytes } from '../../services/certificates.js';
import { heartbeatAckFrame } from './frames.js';

export const enum Phase {
  AwaitHello,
  AwaitAuth,
  Verifying,
  WaitApproval,
  AwaitAccept,
  Ready,
  Closed,
}

export interface Offer {
  issued: IssuedCertificate;
  /** The stored certificate offered again (its co-signature may be compared instead of verified). */
  reused: StoredCertificateWithBytes | null;
  /** Serial of the certificate this one replaces (deleted once this one is stored). */
  supersedes: string | null;
  /** Policy-set version the terms were computed at. */
  policyVersion: number;
}

/** One agent socket. Kept small: 18,000 of them must fit in a few kilobytes each. */
export class AgentConn implements HeartbeatPeer {
  ws: WebSocket<ConnRef> | null = null;
  phase = Phase.AwaitHello;
  /** The key of the client's address (rate limits, registration limits), until the handshake has used it. */
  address: string | null = null;
  did: string | null = null;
  /** base64url raw Ed25519 key. */
  publicKey: string | null = null;
  nonce: string | null = null;
  hello: HelloFrame | null = null;
  invalid = 0;
  timer: NodeJS.Timeout | undefined = undefined;
  /** Capabilities approved at registration. */
  capabilities: Capability[] = [];
  /** Policy of the newest certificate offered or accepted. */
  policyId: string | null = null;
  /** Serial of the certificate in force. */
  serial: string | null = null;
  offers: Offer[] | null = null;
  /** Frames held back until `ready` goes out (see Outbox); null otherwise. */
  outbox: Outbox | null = null;
  /** Last frame received (ms) and the value last handed to the lastSeen writer. */
  lastSeen = 0;
  seenCollected = 0;
  /** The highest heartbeat seq received on this connection (-1: none yet). */
  heartbeatSeq = -1;

  /** Whether the socket is still open (HeartbeatPeer). */
  get alive(): boolean {
    return this.phase !== Phase.Closed;
  }

  /** Sends a frame already serialised (UTF-8 JSON text); false when it was not sent. */
  sendText(text: string | Buffer): boolean {
    const ws = this.ws;
    if (!ws || this.phase === Phase.Closed) return false;
    if (this.outbox) return this.outbox.hold(ws, text);
    return sendNow(ws, text);
  }

  /**
   * Sends `first`, then whatever the outbox held, in one write as far as the send buffer allows;
   * the rest follows as the socket drains (Outbox.flush). From then on frames go out at once.
   */
  release(first: string | Buffer): void {
    const held = this.outbox;
    const ws = this.ws;
    // Frames of an earlier hand-over still waiting for the socket to drain: this one goes after them.
    if (held?.released) {
      this.sendText(first);
      return;
    }
    this.outbox = null;
    if (!held || held.empty || !ws) {
      this.sendText(first);
      return;
    }
    ws.cork(() => {
      if (!this.sendText(first)) return;
      held.released = true;
      if (!held.flush(ws) && this.phase !== Phase.Closed) this.outbox = held;
    });
  }

  /** Hands on held frames that were waiting for the socket's send buffer to drain (uWS drain). */
  drained(): void {
    const held = this.outbox;
    const ws = this.ws;
    if (!held?.released || !ws || this.phase === Phase.Closed) return;
    ws.cork(() => {
      if (held.flush(ws) && this.outbox === held) this.outbox = null;
    });
  }

  /** Acknowledges a heartbeat whose delta is durable (HeartbeatPeer). */
  ackHeartbeat(seq: number): void {
    this.sendText(heartbeatAckFrame(seq));
  }

  /** Sends a frame as JSON text; false when it was not sent. */
  send(frame: OutboundFrame): boolean {
    return this.sendText(JSON.stringify(frame));
  }

  /** Ends the socket with a close code (whatever its phase); nothing when it is closed already. */
  end(code: number, reason: string): void {
    const ws = this.ws;
    if (!ws || this.phase === Phase.Closed) return;
    try {
      ws.end(code, reason);
    } catch {
      // already closed
    }
  }

  /** Ends the socket with `code` after `ms` unless the timer is cleared or armed again first. */
  arm(ms: number, code: number, reason: string): void {
    this.clearTimer();
    this.timer = setTimeout(() => this.end(code, reason), ms);
    this.timer.unref();
  }

  clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/** Sends a frame on the socket now; false when it was not sent. */
function sendNow(ws: WebSocket<ConnRef>, text: string | Buffer): boolean {
  try {
    return ws.send(text) !== 2; // 2: dropped at the send-buffer limit (and the socket closes)
  } catch {
    return false; // closed under our feet
  }
}

/**
 * Frames for an agent whose `ready` is about to go out: what the areas send it at connect
 * (llm_config, skills_config) and anything else pushed meanwhile. They follow `ready`, in the order
 * they were sent, in the same write: one system call instead of one per frame, for each of ten
 * thousand agents reconnecting at once.
 *
 * Held frames count against the send-buffer limit as the socket's own buffer does. uWS takes a
 * frame of any size while its buffer is within the limit, so the buffer may pass the limit by one
 * frame; held frames may likewise pass it by one frame, their largest, whichever order they came
 * in (an agent's skill set larger than the limit does not keep it from coming online). A frame
 * that would bring the held frames other than the largest past the limit is refused and the
 * socket closed, as uWS does.
 *
 * Once `ready` has gone out, held frames are handed to the socket only while its buffer is within
 * the limit, so that uWS never drops one (a large frame the kernel does not take at once would
 * otherwise get the next one dropped and the socket closed); the rest wait for the buffer to
 * drain, and frames sent meanwhile queue behind them, under the same limit. A reader that stops
 * reading is therefore still closed once frames pile up.
 */
export class Outbox {
  private readonly frames: Array<string | Buffer> = [];
  private readonly sizes: number[] = [];
  /** The first frame not yet handed to the socket. */
  private next = 0;
  /** Bytes of the frames not yet handed to the socket, and the largest of them. */
  private bytes = 0;
  private largest = 0;
  /** Whether `ready` has gone out: frames are handed to the socket as its buffer allows. */
  released = false;

  constructor(private readonly limitBytes: number) {}

  /** Whether no frame is waiting. */
  get empty(): boolean {
    return this.next === this.frames.length;
  }

  hold(ws: WebSocket<ConnRef>, text: string | Buffer): boolean {
    const size = typeof text === 'string' ? Buffer.byteLength(text) : text.length;
    const largest = Math.max(this.largest, size);
    if (this.bytes + size - largest > this.limitBytes) {
      ws.close(); // as uWS does at the limit (closeOnBackpressureLimit)
      return false;
    }
    this.bytes += size;
    this.largest = largest;
    // Frames made in scratch buffers (certificate frames, acks) are valid only until the next one: keep a copy.
    this.frames.push(typeof text === 'string' ? text : Buffer.from(text));
    this.sizes.push(size);
    return true;
  }

  /**
   * Hands frames to the socket, in order, while its buffer is within the limit (uWS drops a frame
   * sent past it and closes the socket). True once none is left.
   */
  flush(ws: WebSocket<ConnRef>): boolean {
    const { frames, sizes } = this;
    while (this.next < frames.length) {
      if (ws.getBufferedAmount() > this.limitBytes) {
        let largest = 0;
        for (let i = this.next; i < sizes.length; i++) if (sizes[i]! > largest) largest = sizes[i]!;
        this.largest = largest;
        return false;
      }
      const i = this.next++;
      const frame = frames[i]!;
      frames[i] = ''; // let it go once uWS has it
      this.bytes -= sizes[i]!;
      if (!sendNow(ws, frame)) return false;
    }
    return true;
  }
}

export interface ConnRef {
  conn: AgentConn;
}

/** Answers a frame that is refused with an error frame; the `limit`-th one closes the socket with 1008. */
export function refuse(conn: AgentConn, code: string, message: string, limit: number): void {
  conn.invalid++;
  conn.send({ type: 'error', code, message });
  if (conn.invalid >= limit) conn.end(CLOSE.policyViolation, 'too many invalid frames');
}

/** A frame that is valid but comes at the wrong point of the protocol. */
export function unexpected(conn: AgentConn, type: string, limit: number): void {
  refuse(conn, 'unexpected_frame', `'${type}' is not expected at this point of the protocol`, limit);
}

/** An unexpected failure of a handler: logged, an error frame, and close 1011 (the agent reconnects). */
export function failed(conn: AgentConn, err: unknown, log: Logger): void {
  log.error({ err, did: conn.did }, 'agent socket handler failed');
  conn.send({ type: 'error', code: 'internal', message: 'internal error' });
  conn.end(CLOSE.internalError, 'internal error');
}

/** Not narrowed by TypeScript across awaits, unlike a direct comparison of `conn.phase`. */
export function isClosed(conn: AgentConn): boolean {
  return conn.phase === Phase.Closed;
}
