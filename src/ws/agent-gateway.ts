/**
 * The agent WebSocket gateway at /ws/agent, speaking the protocol of DESIGN §4 frame by frame
 * (docs/agent-protocol.md describes it for agent authors):
 *
 *   hello → challenge → auth → [registration pending → approved | rejected] →
 *   [update_capabilities] → certificate_offer → certificate_accept → ready → heartbeats, pushes
 *
 * Every inbound frame is JSON text validated against its schema (src/domain/wire-schemas.ts).
 * Binary, unparsable, unknown, invalid or out-of-order frames get an `error` frame; the
 * AGENT_INVALID_FRAME_LIMIT-th one closes the socket with 1008.
 *
 * One live socket per agent: a newly authenticated connection replaces the old one (4409).
 * A socket waiting for an admin's decision is closed after AGENT_PENDING_SOCKET_TIMEOUT_SECONDS
 * (4202: the agent reconnects and waits on); a registration past the pending-registration limits
 * is refused with 4429 (src/services/registration-limits.ts).
 * A frame sent while the send buffer is above AGENT_SEND_BUFFER_LIMIT_BYTES closes the socket (uWS
 * maxBackpressure with closeOnBackpressureLimit), so a reader that stalls cannot grow the server's
 * memory; a single frame may be larger than the limit. Frames held for `ready` are bounded likewise
 * (Outbox).
 *
 * Per-socket memory is one small AgentConn; uWS userData holds only a reference to it. What the
 * handshake needs (the hello, the nonce, pending offers) is dropped once it is done.
 */
import { randomBase64Url } from '../domain/random.js';
import { yieldToLoop } from '../domain/time-slice.js';
import { readDigits, writeDigits } from '../domain/decimal.js';
import type { AppContext } from '../server.js';
import type { WebSocket } from '../http/uws.js';
import type { Capability } from '../domain/capabilities.js';
import {
  AGENT_WS_PATH,
  CLOSE,
  type CertificateAcceptFrame,
  type HeartbeatFrame,
  type HelloFrame,
  type IntentResultFrame,
  type OutboundFrame,
  type ReadyFrame,
} from '../domain/agent-protocol.js';
import type { AgentPush, PushFrame, ReadyListener } from '../services/agent-push.js';
import { describeSchemaErrors, frameValidators, isInboundType } from '../domain/wire-schemas.js';
import { PURPOSE, decodePublicKey, resolvePublicKey, encodeBase64Url } from '../domain/did.js';
import { sameTerms, verifyEd25519Async, type CertificateTerms } from '../domain/certificate.js';
import type { FleetService, IssuedCertificate, Decision, LiveSeen } from '../services/fleet.js';
import type { StoredCertificateWithBytes } from '../services/certificates.js';
import { RegistrationError, latestRegistrationOf, pendingRegistrationOf } from '../services/registrations.js';
import { retryAfterSeconds } from '../services/rate-limits.js';
import { addressKey } from '../http/client-address.js';
import { nestsDeeperThan, tooDeepMessage } from '../domain/json-depth.js';
import { sourceOf } from '../services/registration-limits.js';

const enum Phase {
  AwaitHello,
  AwaitAuth,
  Verifying,
  WaitApproval,
  AwaitAccept,
  Ready,
  Closed,
}

interface Offer {
  issued: IssuedCertificate;
  /** The stored certificate offered again (its co-signature may be compared instead of verified). */
  reused: StoredCertificateWithBytes | null;
  /** Serial of the certificate this one replaces (deleted once this one is stored). */
  supersedes: string | null;
  /** Policy-set version the terms were computed at. */
  policyVersion: number;
}

/** One agent socket. Kept small: 18,000 of them must fit in a few kilobytes each. */
export class AgentConn {
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

interface ConnRef {
  conn: AgentConn;
}

/** The sender of a heartbeat, as its sink sees it. */
export interface HeartbeatPeer {
  readonly did: string | null;
  /** Whether the socket is still open: a delta of a closed one is dropped (the agent sends it again). */
  readonly alive: boolean;
  ackHeartbeat(seq: number): void;
}

/**
 * Receives heartbeat deltas and calls `peer.ackHeartbeat(seq)` once they are durable
 * (src/services/token-usage.ts). Nothing is allocated per heartbeat for the ack: a fleet's
 * steady heartbeats are most of what a held fleet allocates.
 */
export interface HeartbeatSink {
  record(peer: HeartbeatPeer, seq: number, promptTokens: number, completionTokens: number): void;
  /** The highest seq of the agent whose delta is stored (a heartbeat at or below it is not counted again); null when none. */
  lastStoredSeq(did: string): number | null;
}

/** Receives intent answers (src/services/intents.ts). */
export interface IntentSink {
  onResult(did: string, frame: IntentResultFrame): void;
  agentGone(did: string): void;
}

const REISSUE_CHUNK = 256;

/** The start of a certificate_offer frame; the canonical certificate text follows. */
const OFFER_HEAD = '{"type":"certificate_offer","certificate":';

/** Where frames that carry a certificate are put together (grown when one does not fit). */
let certFrameScratch = Buffer.allocUnsafeSlow(4096);

/**
 * `head`, the certificate's canonical text and `tail`, as one frame in a scratch buffer: the
 * certificate goes out as the exact bytes that were signed, and no buffer is made per frame for
 * the parts or their concatenation (two such frames per agent when ten thousand are
 * re-certified). The view returned is valid until the next call; uWS copies what it sends at once.
 */
export function certificateFrame(head: string, certificate: Buffer, tail: string): Buffer {
  const most = (head.length + tail.length) * 3 + certificate.length;
  if (most > certFrameScratch.length) certFrameScratch = Buffer.allocUnsafeSlow(Math.max(most, certFrameScratch.length * 2));
  const buf = certFrameScratch;
  let n = buf.write(head, 0, 'utf8');
  n += certificate.copy(buf, n);
  n += buf.write(tail, n, 'utf8');
  return buf.subarray(0, n);
}

const ACK_HEAD = '{"type":"heartbeat_ack","seq":';
/** Where heartbeat_ack frames are written, and a view of it for each frame length. */
const ackScratch = Buffer.alloc(ACK_HEAD.length + 17);
ackScratch.write(ACK_HEAD, 'latin1');
const ackViews: Buffer[] = [];

/**
 * The heartbeat_ack frame for `seq` (a safe non-negative integer, as the heartbeat schema
 * requires), written into a scratch buffer: a frame per heartbeat, and no string made for it.
 * The view returned is valid until the next call (uWS copies what it sends at once).
 */
export function heartbeatAckFrame(seq: number): Buffer {
  const end = writeDigits(ackScratch, ACK_HEAD.length, seq);
  ackScratch[end] = 0x7d; // }
  return (ackViews[end + 1] ??= ackScratch.subarray(0, end + 1));
}

/** Frames are decoded from uWS's ArrayBuffer directly (a Buffer view would be one more object per frame); a BOM is kept, as Buffer#toString does. */
const utf8 = new TextDecoder('utf-8', { ignoreBOM: true });

const HB_HEAD = '{"type":"heartbeat","seq":';
const HB_PROMPT = ',"sinceLastSync":{"promptTokens":';
const HB_COMPLETION = ',"completionTokens":';
/** The values of the heartbeat readCanonicalHeartbeat read last. */
let hbSeq = 0;
let hbPrompt = 0;
let hbCompletion = 0;

/**
 * A heartbeat written exactly as JSON.stringify writes the frame of the protocol (fields in their
 * order, no spaces; the SDK's and most agents' form), read without parsing it into objects: the
 * frame a held fleet sends most, and what it would otherwise allocate most. Its numbers must be
 * JSON integers of at most 15 digits (seq) and 12 digits (token counts, whose maximum is 10^12),
 * so whatever this accepts the schema accepts too. True with hbSeq, hbPrompt and hbCompletion
 * set; false for anything else, which is then parsed and validated in full.
 */
export function readCanonicalHeartbeat(text: string): boolean {
  if (!text.startsWith(HB_HEAD)) return false;
  let at = HB_HEAD.length;
  let end = digitsEnd(text, at, 15);
  if (end < 0 || !text.startsWith(HB_PROMPT, end)) return false;
  hbSeq = readDigits(text, at, end);
  at = end + HB_PROMPT.length;
  end = digitsEnd(text, at, 12);
  if (end < 0 || !text.startsWith(HB_COMPLETION, end)) return false;
  hbPrompt = readDigits(text, at, end);
  at = end + HB_COMPLETION.length;
  end = digitsEnd(text, at, 12);
  if (end < 0 || end + 2 !== text.length || text.charCodeAt(end) !== 0x7d || text.charCodeAt(end + 1) !== 0x7d) return false;
  hbCompletion = readDigits(text, at, end);
  return true;
}

/** Where the JSON integer (digits, no leading zero) starting at `from` ends; -1 when there is none or it has more than `max` digits. */
function digitsEnd(text: string, from: number, max: number): number {
  let i = from;
  for (; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (ch < 0x30 || ch > 0x39) break;
  }
  const n = i - from;
  return n === 0 || n > max || (n > 1 && text.charCodeAt(from) === 0x30) ? -1 : i;
}

/** Not narrowed by TypeScript across awaits, unlike a direct comparison of `conn.phase`. */
function isClosed(conn: AgentConn): boolean {
  return conn.phase === Phase.Closed;
}

export class AgentGateway implements AgentPush {
  /**
   * The newest authenticated connection of each agent, whatever its phase (waiting for approval,
   * certifying, ready): a newer one replaces it (4409). Online means: its phase is Ready.
   */
  private readonly conns = new Map<string, AgentConn>();
  private online = 0;
  private readonly readyListeners = new Set<ReadyListener>();
  /** Agents whose socket closed recently: their actor learns it after the grace period (flap damping). */
  private readonly leaving = new Map<string, { timer: NodeJS.Timeout; serial: string | null }>();
  heartbeats: HeartbeatSink | null = null;
  private closing = false;
  intents: IntentSink | null = null;
  private readonly heartbeatIntervalMs: number;

  constructor(
    private readonly ctx: AppContext,
    private readonly fleet: FleetService,
  ) {
    this.heartbeatIntervalMs = ctx.config.agentHeartbeatIntervalMs;
    fleet.onDecision((did, d) => this.onDecision(did, d).catch((err: unknown) => this.ctx.log.error({ err, did }, 'answering a registration decision failed')));
    fleet.dropConnection = (did, code, reason) => this.drop(did, code, reason);
    const conns = this.conns;
    fleet.collectLiveSeen = () => {
      const out: LiveSeen = { dids: [], ms: [] };
      conns.forEach((conn, did) => {
        if (conn.phase === Phase.Ready && conn.lastSeen > conn.seenCollected) {
          conn.seenCollected = conn.lastSeen;
          out.dids.push(did);
          out.ms.push(conn.lastSeen);
        }
      });
      return out;
    };
  }

  /** Registers the /ws/agent route on the uWS app. */
  attach(): void {
    const { ctx } = this;
    const cfg = ctx.config;
    ctx.app.ws<ConnRef>(AGENT_WS_PATH, {
      maxPayloadLength: cfg.agentMaxFrameBytes,
      maxBackpressure: cfg.agentSendBufferLimitBytes,
      closeOnBackpressureLimit: 1,
      idleTimeout: cfg.agentIdleTimeoutSeconds,
      sendPingsAutomatically: true,
      upgrade: (res, req, context) => {
        const conn = new AgentConn();
        const peer = Buffer.from(res.getRemoteAddressAsText()).toString();
        conn.address = addressKey(ctx.clientAddresses.of(peer, req.getHeader('x-forwarded-for') || undefined));
        res.upgrade<ConnRef>(
          { conn },
          req.getHeader('sec-websocket-key'),
          req.getHeader('sec-websocket-protocol'),
          req.getHeader('sec-websocket-extensions'),
          context,
        );
      },
      open: (ws) => {
        const conn = ws.getUserData().conn;
        conn.ws = ws;
        ctx.sockets.add('agent', ws as WebSocket<unknown>);
        this.startTimer(conn);
      },
      message: (ws, data, isBinary) => this.onMessage(ws.getUserData().conn, data, isBinary),
      drain: (ws) => ws.getUserData().conn.drained(),
      close: (ws) => this.onClose(ws.getUserData().conn, ws),
    });
  }

  // -------------------------------------------------------------------------------------------
  // Queries and pushes used by the rest of the server

  isOnline(did: string): boolean {
    return this.liveConn(did) !== undefined;
  }

  /** Last activity of a connected agent (ms), else undefined. */
  lastSeenOf(did: string): number | undefined {
    return this.liveConn(did)?.lastSeen;
  }

  /** Capabilities approved for a connected agent; undefined when it is not connected. */
  approvedCapabilities(did: string): Capability[] | undefined {
    return this.liveConn(did)?.capabilities;
  }

  onlineCount(): number {
    return this.online;
  }

  private liveConn(did: string): AgentConn | undefined {
    const conn = this.conns.get(did);
    return conn?.phase === Phase.Ready ? conn : undefined;
  }

  /** Sends a frame to a connected agent; false when it is not connected (or its buffer overflowed). */
  push(did: string, frame: PushFrame): boolean {
    const conn = this.liveConn(did);
    return conn ? this.send(conn, frame as unknown as OutboundFrame) : false;
  }

  /**
   * Runs when an agent completes its handshake, so other areas can send it their state: `ready`
   * waits for the promise a listener returns, and what was pushed meanwhile follows it.
   */
  onReady(listener: ReadyListener): () => void {
    this.readyListeners.add(listener);
    return () => {
      this.readyListeners.delete(listener);
    };
  }

  /**
   * Re-certifies connected agents whose certificate terms changed: each gets update_capabilities
   * and a fresh certificate_offer at once. Returns the DIDs that were sent one. Signing happens
   * in chunks, yielding to the event loop between them.
   */
  async reissue(targets: ReadonlyArray<{ did: string; terms: CertificateTerms }>): Promise<string[]> {
    const version = this.fleet.policies.version;
    const offers: Array<Promise<string | null>> = [];
    for (let i = 0; i < targets.length; i += REISSUE_CHUNK) {
      if (i > 0) await yieldToLoop();
      for (const { did, terms } of targets.slice(i, i + REISSUE_CHUNK)) {
        const conn = this.liveConn(did);
        if (!conn) continue;
        if (conn.policyId === terms.policyId && terms.policyId !== null) continue;
        if (conn.policyId === null && terms.policyId === null) continue;
        offers.push(
          this.offerNew(conn, terms, version, true).then(
            (sent) => (sent ? did : null),
            (err: unknown) => {
              this.ctx.log.error({ err, did }, 'certificate could not be issued');
              return null;
            },
          ),
        );
      }
    }
    return (await Promise.all(offers)).filter((did): did is string => did !== null);
  }

  // -------------------------------------------------------------------------------------------
  // Frames

  private onMessage(conn: AgentConn, data: ArrayBuffer, isBinary: boolean): void {
    if (isClosed(conn)) return;
    if (isBinary) return this.invalid(conn, 'binary_frame', 'frames are JSON text, not binary');
    const text = utf8.decode(data);
    if (readCanonicalHeartbeat(text)) {
      if (conn.phase === Phase.Ready) conn.lastSeen = Date.now();
      return this.onHeartbeat(conn, hbSeq, hbPrompt, hbCompletion);
    }
    if (nestsDeeperThan(text)) return this.invalid(conn, 'too_deep', tooDeepMessage('the frame'));
    let frame: { type?: unknown };
    try {
      frame = JSON.parse(text) as { type?: unknown };
    } catch {
      return this.invalid(conn, 'invalid_json', 'the frame is not valid JSON');
    }
    const type: unknown = typeof frame === 'object' && frame !== null ? frame.type : undefined;
    if (!isInboundType(type)) return this.invalid(conn, 'unknown_frame', `unknown frame type ${JSON.stringify(type ?? null)}`);
    const validate = frameValidators[type];
    if (!validate(frame)) return this.invalid(conn, 'schema_violation', `${type}: ${describeSchemaErrors(validate.errors)}`);
    if (conn.phase === Phase.Ready) conn.lastSeen = Date.now();
    switch (type) {
      case 'hello':
        return this.guard(conn, this.admitHello(conn, frame as HelloFrame));
      case 'auth':
        return this.guard(conn, this.onAuth(conn, (frame as { signature: string }).signature));
      case 'certificate_accept':
        return this.guard(conn, this.onAccept(conn, frame as CertificateAcceptFrame));
      case 'heartbeat': {
        const f = frame as HeartbeatFrame;
        return this.onHeartbeat(conn, f.seq, f.sinceLastSync.promptTokens, f.sinceLastSync.completionTokens);
      }
      case 'intent_result':
        if (conn.phase !== Phase.Ready) return this.unexpected(conn, 'intent_result');
        this.intents?.onResult(conn.did!, frame as IntentResultFrame);
        return;
    }
  }

  /**
   * A hello counts against its address's limit (RATE_LIMIT_AGENT_PER_ADDRESS); one over it gets an
   * error frame and close 4429, and the agent comes back later with back-off.
   */
  private async admitHello(conn: AgentConn, f: HelloFrame): Promise<void> {
    if (conn.phase !== Phase.AwaitHello) return this.unexpected(conn, 'hello');
    conn.phase = Phase.Verifying; // a frame that comes while the hello is counted is out of order
    const waitMs = await this.ctx.rateLimits.agent.address.take(conn.address ?? '');
    if (isClosed(conn)) return;
    conn.phase = Phase.AwaitHello;
    if (waitMs !== null) {
      const seconds = retryAfterSeconds(waitMs);
      this.send(conn, { type: 'error', code: 'rate_limited', message: `too many agent connections from this address; retry in ${seconds} s` });
      return this.end(conn, CLOSE.tryLater, 'rate limited; retry later');
    }
    this.onHello(conn, f);
  }

  private onHello(conn: AgentConn, f: HelloFrame): void {
    if (conn.phase !== Phase.AwaitHello) return this.unexpected(conn, 'hello');
    const key = resolvePublicKey(f.did, f.publicKey);
    if (!key) {
      this.send(conn, {
        type: 'error',
        code: 'invalid_key',
        message: f.did.startsWith('did:key:')
          ? 'publicKey does not match the key inside the did:key (or the did:key is not Ed25519)'
          : 'publicKey (base64url of the raw 32-byte Ed25519 key) is required for a DID that is not a did:key',
      });
      return this.end(conn, CLOSE.policyViolation, 'invalid key');
    }
    conn.did = f.did;
    conn.publicKey = encodeBase64Url(key);
    conn.hello = f;
    conn.nonce = randomBase64Url(24);
    conn.phase = Phase.AwaitAuth;
    this.send(conn, { type: 'challenge', nonce: conn.nonce, serverDid: this.ctx.identity.did });
  }

  private async onAuth(conn: AgentConn, signature: string): Promise<void> {
    if (conn.phase !== Phase.AwaitAuth) return this.unexpected(conn, 'auth');
    conn.phase = Phase.Verifying;
    const ok = await verifyEd25519Async(decodePublicKey(conn.publicKey!)!, Buffer.from(PURPOSE.agentAuth + conn.nonce!, 'utf8'), signature);
    conn.nonce = null;
    if (isClosed(conn)) return;
    if (!ok) return this.end(conn, CLOSE.badSignature, 'auth signature does not verify');
    const did = conn.did!;
    const hello = conn.hello!;
    const address = conn.address ?? '';
    conn.hello = null;
    conn.address = null;
    const agent = await this.ctx.c.agents.findById(did);
    if (isClosed(conn)) return;
    if (agent && agent.publicKey !== conn.publicKey) return this.end(conn, CLOSE.badSignature, 'the key does not match the registered key');

    // One socket per agent: this authenticated connection replaces an older one.
    const old = this.conns.get(did);
    if (old && old !== conn) this.end(old, CLOSE.replaced, 'replaced by a newer connection');
    this.conns.set(did, conn);

    if (!agent) {
      let registrationId: string;
      try {
        const outcome = await this.fleet.register(
          { did, publicKey: conn.publicKey!, name: hello.name, version: hello.version, capabilities: hello.capabilities, workspace: hello.workspace },
          { via: 'websocket', source: sourceOf(address) },
        );
        registrationId = outcome.registration._id;
      } catch (err) {
        if (!(err instanceof RegistrationError)) throw err;
        this.send(conn, { type: 'error', code: err.code, message: err.message });
        return this.end(conn, err.status === 429 ? CLOSE.tryLater : CLOSE.policyViolation, err.code);
      }
      return this.awaitApproval(conn, registrationId);
    }
    if (agent.status === 'pending') {
      const reg = await pendingRegistrationOf(this.ctx.c, did);
      return this.awaitApproval(conn, reg?._id ?? agent.registrationId ?? 'unknown');
    }
    if (agent.status === 'rejected') {
      const reg = await latestRegistrationOf(this.ctx.c, did);
      this.send(conn, { type: 'registration', status: 'rejected', reason: reg?.reason ?? 'rejected' });
      return this.end(conn, CLOSE.rejected, 'registration rejected');
    }
    conn.capabilities = agent.capabilities;
    await this.beginCertificate(conn);
  }

  private awaitApproval(conn: AgentConn, registrationId: string): void {
    if (isClosed(conn)) return;
    conn.phase = Phase.WaitApproval;
    this.startPendingTimer(conn);
    this.send(conn, { type: 'registration', status: 'pending', registrationId });
  }

  /**
   * Waiting for a person may take long, but not forever on one socket: after the pending timeout
   * (plus up to a tenth, so agents that began waiting together do not return together) the agent
   * is sent away with 4202 and reconnects to wait on.
   */
  private startPendingTimer(conn: AgentConn): void {
    this.clearTimer(conn);
    const ms = this.ctx.config.agentPendingSocketTimeoutMs;
    conn.timer = setTimeout(() => this.end(conn, CLOSE.stillPending, 'still pending: reconnect to keep waiting'), ms + Math.random() * ms * 0.1);
    conn.timer.unref();
  }

  private async onDecision(did: string, decision: Decision): Promise<void> {
    const conn = this.conns.get(did);
    if (!conn || conn.phase !== Phase.WaitApproval) return;
    if (decision.status === 'rejected') {
      this.send(conn, { type: 'registration', status: 'rejected', reason: decision.reason });
      return this.end(conn, CLOSE.rejected, 'registration rejected');
    }
    this.send(conn, { type: 'registration', status: 'approved', agentId: did });
    await this.guardAsync(conn, async () => {
      const agent = await this.ctx.c.agents.findById(did);
      if (!agent || isClosed(conn)) return;
      conn.capabilities = agent.capabilities;
      this.startTimer(conn);
      await this.beginCertificate(conn);
    });
  }

  /**
   * Handshake step 4. The stored certificate is offered again when it still matches the
   * agent's key and terms (its co-signature is then compared, not verified: Ed25519 signatures
   * are deterministic); otherwise a new one is issued, preceded by update_capabilities when the
   * agent had an older certificate (the capability mismatch found on reconnect, §6).
   */
  private async beginCertificate(conn: AgentConn): Promise<void> {
    conn.phase = Phase.AwaitAccept;
    const did = conn.did!;
    const version = this.fleet.policies.version;
    const [terms, stored] = await Promise.all([this.fleet.termsOf({ _id: did, capabilities: conn.capabilities }), this.fleet.certificates.current(did)]);
    if (isClosed(conn)) return;
    conn.serial = stored?.certificate.serial ?? null;
    if (
      stored &&
      stored.certificate.subjectPublicKey === conn.publicKey &&
      stored.certificate.issuer === this.ctx.identity.did &&
      sameTerms(stored.certificate, terms)
    ) {
      conn.policyId = terms.policyId;
      const issued = { certificate: stored.certificate, bytes: stored.bytes, serverSignature: stored.serverSignature };
      this.pushOffer(conn, { issued, reused: stored, supersedes: null, policyVersion: version }, false);
      return;
    }
    await this.offerNew(conn, terms, version, stored !== null);
  }

  /**
   * Issues, signs (on the crypto worker) and offers a new certificate; with `announce`,
   * update_capabilities goes first. False when the socket closed before the offer could go.
   */
  private async offerNew(conn: AgentConn, terms: CertificateTerms, version: number, announce: boolean): Promise<boolean> {
    conn.policyId = terms.policyId;
    const issued = await this.fleet.issue(conn.did!, conn.publicKey!, terms);
    if (isClosed(conn)) return false;
    const offer: Offer = { issued, reused: null, supersedes: conn.serial, policyVersion: version };
    conn.ws?.cork(() => {
      if (announce) this.send(conn, { type: 'update_capabilities', ...terms });
      this.pushOffer(conn, offer, conn.phase === Phase.Ready);
    });
    return true;
  }

  private pushOffer(conn: AgentConn, offer: Offer, reissue: boolean): void {
    (conn.offers ??= []).push(offer);
    // The certificate goes out as the canonical text that was signed (valid JSON), not re-serialised.
    const { bytes, serverSignature } = offer.issued;
    conn.sendText(certificateFrame(OFFER_HEAD, bytes, `,"serverSignature":"${serverSignature}"}`));
    if (reissue) this.fleet.tell(conn.did!, { type: 'REISSUE_OFFERED', serial: offer.issued.certificate.serial });
  }

  private async onAccept(conn: AgentConn, f: CertificateAcceptFrame): Promise<void> {
    if (conn.phase !== Phase.AwaitAccept && conn.phase !== Phase.Ready) return this.unexpected(conn, 'certificate_accept');
    const offer = conn.offers?.shift();
    if (!offer) return this.unexpected(conn, 'certificate_accept');
    if (conn.offers!.length === 0) conn.offers = null;
    const cert = offer.issued.certificate;
    const unchanged = offer.reused !== null && offer.reused.agentSignature === f.agentSignature;
    const valid = unchanged || (await verifyEd25519Async(decodePublicKey(conn.publicKey!)!, offer.issued.bytes, f.agentSignature));
    if (isClosed(conn)) return;
    if (!valid) return this.end(conn, CLOSE.badSignature, 'certificate co-signature does not verify');
    if (!unchanged) {
      await this.fleet.certificates.save(
        {
          certificate: cert,
          bytes: offer.issued.bytes,
          serverSignature: offer.issued.serverSignature,
          agentSignature: f.agentSignature,
          acceptedAt: new Date().toISOString(),
        },
        offer.supersedes,
      );
    }
    conn.serial = cert.serial;
    if (isClosed(conn) || conn.offers) return; // a newer offer is on its way; `ready` follows that one
    const did = conn.did!;
    const first = conn.phase === Phase.AwaitAccept;
    const greeting = first ? this.becomeReady(conn, cert) : null;
    const session = await this.fleet.agentSessions.sessionOf(did);
    if (greeting) await greeting;
    if (isClosed(conn)) return;
    const rest: Omit<ReadyFrame, 'type' | 'agentId' | 'certificate'> = {
      serverSignature: offer.issued.serverSignature,
      agentSignature: f.agentSignature,
      session,
      heartbeatIntervalMs: this.heartbeatIntervalMs,
      lastHeartbeatSeq: this.heartbeats?.lastStoredSeq(did) ?? null,
    };
    conn.release(certificateFrame(`{"type":"ready","agentId":${JSON.stringify(did)},"certificate":`, offer.issued.bytes, `,${JSON.stringify(rest).slice(1)}`));
    if (!first) {
      this.fleet.tell(did, { type: 'CERTIFICATE_STORED', serial: cert.serial, policyId: cert.policyId });
      return;
    }
    // A policy changed while this handshake was under way: bring the certificate up to date.
    if (offer.policyVersion !== this.fleet.policies.version) {
      const terms = await this.fleet.termsOf({ _id: did, capabilities: conn.capabilities });
      if (conn.phase === Phase.Ready && !sameTerms(cert, terms)) await this.offerNew(conn, terms, this.fleet.policies.version, true);
    }
  }

  /**
   * The agent is online from here (pushes reach it, its actor learns it); the ready listeners
   * run, and what they and anyone else send it waits in its outbox for `ready`. Resolves once
   * every listener's work has settled; null when none returned any.
   */
  private becomeReady(conn: AgentConn, cert: IssuedCertificate['certificate']): Promise<unknown> | null {
    const did = conn.did!;
    conn.phase = Phase.Ready;
    conn.lastSeen = Date.now();
    this.clearTimer(conn);
    this.online++;
    const left = this.leaving.get(did);
    if (left) {
      // Back within the grace period: to its actor it never left; only a new certificate is news.
      clearTimeout(left.timer);
      this.leaving.delete(did);
      if (left.serial !== cert.serial) this.fleet.tell(did, { type: 'CONNECTED', serial: cert.serial, policyId: cert.policyId });
    } else {
      this.fleet.tell(did, { type: 'CONNECTED', serial: cert.serial, policyId: cert.policyId });
    }
    conn.outbox = new Outbox(this.ctx.config.agentSendBufferLimitBytes);
    let pending: Array<Promise<unknown>> | null = null;
    for (const l of this.readyListeners) {
      try {
        const work = l(did);
        if (work) (pending ??= []).push(work.catch((err: unknown) => this.ctx.log.error({ err, did }, 'ready listener failed')));
      } catch (err) {
        this.ctx.log.error({ err, did }, 'ready listener failed');
      }
    }
    return pending && Promise.all(pending);
  }

  private onHeartbeat(conn: AgentConn, seq: number, promptTokens: number, completionTokens: number): void {
    if (conn.phase !== Phase.Ready) return this.unexpected(conn, 'heartbeat');
    const sink = this.heartbeats;
    if (!sink) return;
    // Seqs increase on a connection: one that does not is acknowledged (after the write, as any
    // other) with nothing counted, so a repeated heartbeat cannot count its delta twice.
    if (seq <= conn.heartbeatSeq) return sink.record(conn, seq, 0, 0);
    conn.heartbeatSeq = seq;
    sink.record(conn, seq, promptTokens, completionTokens);
  }

  // -------------------------------------------------------------------------------------------
  // Connection plumbing

  private onClose(conn: AgentConn, ws: WebSocket<ConnRef>): void {
    const wasReady = conn.phase === Phase.Ready;
    conn.phase = Phase.Closed;
    conn.ws = null;
    conn.offers = null;
    conn.outbox = null;
    conn.hello = null;
    this.clearTimer(conn);
    this.ctx.sockets.delete('agent', ws as WebSocket<unknown>);
    const did = conn.did;
    if (!did) return;
    if (this.conns.get(did) !== conn) return;
    this.conns.delete(did);
    if (wasReady) {
      this.online--;
      this.fleet.seen(did, conn.lastSeen);
      this.intents?.agentGone(did);
      this.leave(did, conn.serial);
    }
  }

  /** Tells the agent's actor it went offline, after AGENT_OFFLINE_GRACE_MS unless it is back by then. */
  private leave(did: string, serial: string | null): void {
    const grace = this.ctx.config.agentOfflineGraceMs;
    if (grace === 0 || this.closing) {
      this.fleet.tell(did, { type: 'DISCONNECTED' });
      return;
    }
    const prev = this.leaving.get(did);
    if (prev) clearTimeout(prev.timer);
    const timer = setTimeout(() => {
      this.leaving.delete(did);
      this.fleet.tell(did, { type: 'DISCONNECTED' });
    }, grace);
    timer.unref();
    this.leaving.set(did, { timer, serial: prev?.serial ?? serial });
  }

  /**
   * Ends an agent's socket (whatever its phase) and forgets the agent: the close is not reported
   * to its actor, and a pending offline notice is cancelled (the agent is being deleted).
   */
  private drop(did: string, code: number, reason: string): void {
    const conn = this.conns.get(did);
    if (conn) {
      this.conns.delete(did); // onClose then finds another (no) connection and does nothing more
      if (conn.phase === Phase.Ready) {
        this.online--;
        this.intents?.agentGone(did);
      }
      this.end(conn, code, reason);
    }
    const left = this.leaving.get(did);
    if (left) {
      clearTimeout(left.timer);
      this.leaving.delete(did);
    }
  }

  /** At shutdown: every agent still in its grace period is told now. */
  flushLeaving(): void {
    this.closing = true;
    for (const [did, { timer }] of this.leaving) {
      clearTimeout(timer);
      this.fleet.tell(did, { type: 'DISCONNECTED' });
    }
    this.leaving.clear();
  }

  send(conn: AgentConn, frame: OutboundFrame): boolean {
    return conn.sendText(JSON.stringify(frame));
  }

  private end(conn: AgentConn, code: number, reason: string): void {
    const ws = conn.ws;
    if (!ws || conn.phase === Phase.Closed) return;
    try {
      ws.end(code, reason);
    } catch {
      // already closed
    }
  }

  private invalid(conn: AgentConn, code: string, message: string): void {
    conn.invalid++;
    this.send(conn, { type: 'error', code, message });
    if (conn.invalid >= this.ctx.config.agentInvalidFrameLimit) this.end(conn, CLOSE.policyViolation, 'too many invalid frames');
  }

  private unexpected(conn: AgentConn, type: string): void {
    this.invalid(conn, 'unexpected_frame', `'${type}' is not expected at this point of the protocol`);
  }

  private startTimer(conn: AgentConn): void {
    this.clearTimer(conn);
    conn.timer = setTimeout(() => this.end(conn, CLOSE.handshakeTimeout, 'handshake timeout'), this.ctx.config.agentHandshakeTimeoutMs);
    conn.timer.unref();
  }

  private clearTimer(conn: AgentConn): void {
    if (conn.timer) clearTimeout(conn.timer);
    conn.timer = undefined;
  }

  /** Runs an async handler; an unexpected failure is logged and closes the socket with 1011. */
  private guard(conn: AgentConn, p: Promise<void>): void {
    p.catch((err: unknown) => this.failed(conn, err));
  }

  private async guardAsync(conn: AgentConn, fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (err) {
      this.failed(conn, err);
    }
  }

  private failed(conn: AgentConn, err: unknown): void {
    this.ctx.log.error({ err, did: conn.did }, 'agent socket handler failed');
    this.send(conn, { type: 'error', code: 'internal', message: 'internal error' });
    this.end(conn, CLOSE.internalError, 'internal error');
  }
}
