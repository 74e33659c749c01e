/**
 * StewardAgent: an agent's side of the protocol (docs/agent-protocol.md) over the `ws` package.
 *
 * - Connects to /ws/agent and keeps trying, with jittered exponential back-off, whatever goes
 *   wrong (Steward down or restarting, a wrong address, DNS, TLS, an HTTP error), until stop() or
 *   a close that means stop (FATAL_CLOSE_CODES: 1008, 4401, 4403, 4409). Each failure is reported
 *   in words (`disconnected` event, `lastDisconnect`); the retry timer keeps the process alive.
 * - Handshake: hello → signs the challenge → waits out a pending registration → verifies each
 *   certificate offer (schema, the server's signature with the key of the server's did:key, its
 *   own DID and key as subject) → co-signs it → ready (the HTTP session token).
 * - Heartbeats every interval; token usage recorded with `recordUsage` is sent as deltas and
 *   kept until the server acknowledges it (re-sent after a reconnect, never twice).
 * - Pushes: update_capabilities (applied at once; the fresh certificate follows), llm_config,
 *   skills_config (the latest set is kept), channel_message_send (with a `reply` helper), intents
 *   (the four gates of src/agent/gates.ts, then your handler).
 */
import { EventEmitter } from 'node:events';
import WebSocket from 'ws';
import type { Capability } from '../domain/capabilities.js';
import { PURPOSE, publicKeyFromDidKey, signMessage, type Ed25519KeyPair } from '../domain/did.js';
import { certificateBytes, certificateShapeError, termsOf, verifyCertificateSignature, type Certificate, type CertificateTerms } from '../domain/certificate-format.js';
import {
  AGENT_WS_PATH,
  CLOSE,
  FATAL_CLOSE_CODES,
  reconnectDelayMs,
  type ChannelMessageSendFrame,
  type ErrorFrame,
  type IntentFrame,
  type LlmConfigFrame,
  type OutboundFrame,
  type ReadyFrame,
  type RegistrationFrame,
  type SkillsConfigFrame,
  type TokenDelta,
} from '../domain/agent-protocol.js';
import { Gates, type Clock, type GateStateStore } from './gates.js';
import { describeClose, describeError, describeHttpStatus, type Disconnection, type Failure } from './disconnection.js';

/** How long an attempt may take to get the WebSocket upgrade answered (unless socketOptions.handshakeTimeout says otherwise). */
const CONNECT_TIMEOUT_MS = 30_000;

export type AgentStatus = 'idle' | 'connecting' | 'authenticating' | 'pending' | 'certifying' | 'ready' | 'reconnecting' | 'rejected' | 'stopped';

export interface IntentContext {
  intentId: string;
  action: Capability;
  params: Record<string, unknown>;
  requestedBy: string;
}

export interface ChannelMessageContext {
  channelId: string;
  message: ChannelMessageSendFrame['message'];
  /** Posts the agent's answer to the channel (the thread of the message unless another is given). */
  reply(content: string, threadId?: string | null): Promise<unknown>;
}

export interface StewardAgentHandlers {
  /** Performs an allowed intent; the value returned is the output, a thrown error the refusal. */
  onIntent?: (intent: IntentContext) => unknown | Promise<unknown>;
  onLlmConfig?: (config: LlmConfigFrame['config']) => void;
  onSkillsConfig?: (skills: SkillsConfigFrame['skills'], frame: SkillsConfigFrame) => void;
  onChannelMessage?: (ctx: ChannelMessageContext) => void | Promise<void>;
}

/** The reconnect back-off; each defaults to its RECONNECT_* constant of the agent protocol (500 ms, 8 s). */
export interface ReconnectOptions {
  initialDelayMs?: number;
  maxDelayMs?: number;
}

export interface StewardAgentOptions extends StewardAgentHandlers {
  /** Steward's base URL (http[s]://host:port) or the full ws[s]:// address of /ws/agent. */
  url: string;
  keys: Ed25519KeyPair;
  name: string;
  version: string;
  capabilities: Capability[];
  /** Workspace id or slug to register into (default workspace when absent). */
  workspace?: string;
  /** Overrides the heartbeat interval the server asks for in `ready`. */
  heartbeatIntervalMs?: number;
  /** false disables reconnecting (the agent stops after its first failure or close). */
  reconnect?: ReconnectOptions | false;
  /** Clock of the gates (ms since the epoch); tests inject one. */
  clock?: Clock;
  /**
   * Where the gates keep today's token count and the last hour's executions between runs of the
   * agent (e.g. `fileGateState('./agent-gates.json')`). Without one they start from zero with
   * every new StewardAgent, so a restarted agent process gets a fresh daily budget and hour.
   */
  gateState?: GateStateStore;
  /** Pin the server's DID; otherwise the one named in the challenge is trusted for the connection. */
  serverDid?: string;
  /** Extra options for the `ws` client (e.g. localAddress). */
  socketOptions?: WebSocket.ClientOptions;
}

export interface CurrentCertificate {
  certificate: Certificate;
  serverSignature: string;
  agentSignature: string;
}

/** An intent the gates refused: the frame and the gate's message (also sent back as the intent's error). */
export type RefusedIntent = IntentFrame & { error: string };

/** The events of a StewardAgent and their arguments (`agent.on('status', (status) => …)`). */
export interface StewardAgentEvents {
  /** Every change of `status`. */
  status: [status: AgentStatus];
  /** A `registration` frame: pending (with its id), approved, or rejected (with the reason). */
  registration: [frame: RegistrationFrame];
  /** New terms from `update_capabilities`, in force at once; the certificate carrying them follows. */
  capabilities: [terms: CertificateTerms];
  /** A co-signed certificate came into force (after the handshake and after each re-certification). */
  certificate: [certificate: CurrentCertificate];
  /** Steward stored the token delta of the heartbeat with this seq. */
  heartbeatAck: [seq: number];
  intentRefused: [intent: RefusedIntent];
  llmConfig: [config: LlmConfigFrame['config']];
  skillsConfig: [skills: SkillsConfigFrame['skills']];
  channelMessage: [message: ChannelMessageContext];
  /** Steward refused a frame (`error` frame); a close follows when it ends the connection. */
  serverError: [frame: ErrorFrame];
  /** The socket closed (also after stop()). */
  close: [code: number, reason: string];
  /** An attempt failed or the socket closed: why, and whether and when the agent tries again. */
  disconnected: [disconnection: Disconnection];
  /** The raw error of the WebSocket library (the `disconnected` event says it in words). */
  socketError: [error: Error];
  /** A certificate refused, or a channel-message handler that threw; emitted only when listened to. */
  error: [error: Error];
}

export class StewardAgent extends EventEmitter<StewardAgentEvents> {
  readonly did: string;
  readonly gates: Gates;
  status: AgentStatus = 'idle';
  registrationId: string | null = null;
  /** The co-signed certificate in force. */
  certificate: CurrentCertificate | null = null;
  /** The terms enforced by the gates (from the certificate, or a newer update_capabilities). */
  terms: CertificateTerms | null = null;
  /** True between update_capabilities and the `ready` of the reissued certificate. */
  reauthPending = false;
  session: { token: string; expiresAt: string } | null = null;
  llmConfig: LlmConfigFrame['config'] | null = null;
  /** The latest skill set pushed by the server. */
  skills: SkillsConfigFrame['skills'] = [];
  lastClose: { code: number; reason: string } | null = null;
  /** Why the last attempt failed or the last socket closed (also emitted as `disconnected`). */
  lastDisconnect: Disconnection | null = null;

  private readonly opts: StewardAgentOptions;
  private readonly wsUrl: string;
  private readonly wsAddress: URL;
  private readonly httpBase: string;
  private ws: WebSocket | null = null;
  private serverDid: string | null = null;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private attempt = 0;
  private seq = 0;
  private fresh: TokenDelta = { promptTokens: 0, completionTokens: 0 };
  private readonly unacked = new Map<number, TokenDelta>();
  private stopped = false;
  private offered: Certificate | null = null;
  /** Whether the current socket opened (a close before that is a failed attempt, not a close code). */
  private opened = false;
  /** Why the current attempt is failing, when known before its close (an error, an HTTP status, our own refusal). */
  private failure: Failure | null = null;

  constructor(opts: StewardAgentOptions) {
    super();
    this.opts = opts;
    this.did = opts.keys.did;
    this.gates = new Gates(opts.clock, opts.gateState);
    const base = new URL(opts.url);
    if (!['http:', 'https:', 'ws:', 'wss:'].includes(base.protocol)) {
      throw new TypeError(`url must be an http(s):// or ws(s):// address, not ${base.protocol}//`);
    }
    if (base.protocol === 'http:' || base.protocol === 'https:') {
      this.httpBase = base.origin;
      this.wsUrl = `${base.protocol === 'https:' ? 'wss' : 'ws'}://${base.host}${AGENT_WS_PATH}`;
    } else {
      this.wsUrl = base.pathname && base.pathname !== '/' ? base.href : `${base.origin}${AGENT_WS_PATH}`;
      this.httpBase = `${base.protocol === 'wss:' ? 'https' : 'http'}://${base.host}`;
    }
    this.wsAddress = new URL(this.wsUrl);
  }

  /** Connects (and keeps reconnecting until stop() or a close that means stop). */
  start(): this {
    this.stopped = false;
    this.connect();
    return this;
  }

  /** Closes the socket and stops reconnecting. */
  stop(): Promise<void> {
    this.stopped = true;
    this.setStatus('stopped');
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    this.stopHeartbeats();
    const ws = this.ws;
    if (!ws || ws.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((resolve) => {
      ws.once('close', () => resolve());
      ws.close(1000, 'agent stopping');
    });
  }

  /** Resolves when the agent reaches a status (or rejects, saying why, when it ends rejected/stopped first). */
  waitFor(status: AgentStatus, timeoutMs = 10_000): Promise<void> {
    if (this.status === status) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.off('status', on);
        reject(new Error(`agent did not reach '${status}' within ${timeoutMs} ms (now '${this.status}')`));
      }, timeoutMs);
      const on = (s: AgentStatus) => {
        if (s === status) {
          clearTimeout(timer);
          this.off('status', on);
          resolve();
        } else if ((s === 'rejected' || s === 'stopped') && status !== s) {
          clearTimeout(timer);
          this.off('status', on);
          const why = this.lastDisconnect && !this.lastDisconnect.willRetry ? `: ${this.lastDisconnect.message}` : '';
          reject(new Error(`agent ended '${s}' while waiting for '${status}'${why}`));
        }
      };
      this.on('status', on);
    });
  }

  /** Reports model usage: counted by the daily budget gate and sent with the next heartbeat. */
  recordUsage(promptTokens: number, completionTokens: number): void {
    for (const n of [promptTokens, completionTokens]) {
      if (!Number.isInteger(n) || n < 0) throw new RangeError('token counts are non-negative integers');
    }
    this.fresh.promptTokens += promptTokens;
    this.fresh.completionTokens += completionTokens;
    this.gates.recordTokens(promptTokens, completionTokens);
  }

  /** Sends a heartbeat now (normally sent on the interval). */
  heartbeat(): void {
    if (this.status !== 'ready' || !this.ws) return;
    const seq = ++this.seq;
    const delta = this.fresh;
    this.fresh = { promptTokens: 0, completionTokens: 0 };
    this.unacked.set(seq, delta);
    this.send({ type: 'heartbeat', seq, sinceLastSync: delta });
  }

  /** Usage recorded but not yet acknowledged by the server. */
  unacknowledgedUsage(): TokenDelta {
    const sum = { ...this.fresh };
    for (const d of this.unacked.values()) {
      sum.promptTokens += d.promptTokens;
      sum.completionTokens += d.completionTokens;
    }
    return sum;
  }

  // -------------------------------------------------------------------------------------------

  /** Reports a problem as an 'error' event when someone listens (an unheard 'error' would throw). */
  private fail(err: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', err instanceof Error ? err : new Error(String(err)));
  }

  private setStatus(s: AgentStatus): void {
    if (this.status === s) return;
    this.status = s;
    this.emit('status', s);
  }

  private connect(): void {
    this.reconnectTimer = undefined;
    if (this.stopped) return;
    this.setStatus('connecting');
    this.opened = false;
    this.failure = null;
    const ws = new WebSocket(this.wsUrl, { handshakeTimeout: CONNECT_TIMEOUT_MS, ...this.opts.socketOptions });
    this.ws = ws;
    ws.on('open', () => {
      this.opened = true;
      this.setStatus('authenticating');
      const hello: Record<string, unknown> = {
        type: 'hello',
        did: this.did,
        publicKey: this.opts.keys.publicKey,
        name: this.opts.name,
        version: this.opts.version,
        capabilities: this.opts.capabilities,
      };
      if (this.opts.workspace) hello.workspace = this.opts.workspace;
      ws.send(JSON.stringify(hello));
    });
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      let frame: OutboundFrame;
      try {
        frame = JSON.parse(data.toString()) as OutboundFrame;
      } catch {
        return;
      }
      this.onFrame(frame).catch((err: unknown) => this.fail(err));
    });
    // Something other than the upgrade answered (a wrong path, a proxy): say which status, then give up this attempt.
    ws.on('unexpected-response', (_req, res) => {
      if (this.ws === ws) this.failure ??= describeHttpStatus(res.statusCode ?? 0, res.statusMessage, this.wsAddress);
      res.resume();
      ws.terminate();
    });
    ws.on('error', (err) => {
      if (this.ws === ws) this.failure ??= this.opened ? { ...describeClose(1006, ''), message: `connection lost: ${err.message}` } : describeError(err, this.wsAddress);
      this.emit('socketError', err);
    });
    ws.on('close', (code, reason) => this.onClose(ws, code, reason.toString()));
  }

  private onClose(ws: WebSocket, code: number, reason: string): void {
    if (this.ws !== ws) return;
    this.ws = null;
    const opened = this.opened;
    this.opened = false;
    this.lastClose = { code, reason };
    this.stopHeartbeats();
    this.offered = null;
    // Deltas in flight were not acknowledged: they are kept under their seq, and after the next
    // handshake dropped when `ready` says they were stored, sent again otherwise.
    this.emit('close', code, reason);
    if (this.stopped) return this.setStatus('stopped');
    const found = this.failure ?? describeClose(code, reason);
    this.failure = null;
    const failure: Failure = opened ? { ...found, code, reason } : found;
    if ((opened && FATAL_CLOSE_CODES.has(code)) || this.opts.reconnect === false) {
      this.stopped = true;
      this.lastDisconnect = { ...failure, willRetry: false, retryInMs: null, attempt: this.attempt + 1 };
      this.setStatus(opened && code === CLOSE.rejected ? 'rejected' : 'stopped');
      this.emit('disconnected', this.lastDisconnect);
      return;
    }
    const r = this.opts.reconnect || {};
    const delay = reconnectDelayMs(this.attempt, r);
    this.attempt = Math.min(this.attempt + 1, 30);
    this.lastDisconnect = { ...failure, willRetry: true, retryInMs: delay, attempt: this.attempt };
    this.setStatus('reconnecting');
    // Not unref'd: an agent waiting to reconnect is what keeps its process alive.
    this.reconnectTimer = setTimeout(() => this.connect(), delay);
    this.emit('disconnected', this.lastDisconnect);
  }

  /** Closes the socket from our side, recording why (the close that follows reports it). */
  private refuse(reason: string, message: string): void {
    this.failure = { cause: 'closed', code: CLOSE.certificateRefused, reason, httpStatus: null, errorCode: null, message };
    this.ws?.close(CLOSE.certificateRefused, reason);
  }

  private send(frame: Record<string, unknown>): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(frame));
  }

  private async onFrame(f: OutboundFrame): Promise<void> {
    switch (f.type) {
      case 'challenge': {
        if (this.opts.serverDid && f.serverDid !== this.opts.serverDid) {
          this.refuse('unexpected server DID', `Steward's DID is ${f.serverDid}, not the pinned ${this.opts.serverDid}`);
          return;
        }
        this.serverDid = f.serverDid;
        this.send({ type: 'auth', signature: signMessage(this.opts.keys, PURPOSE.agentAuth + f.nonce) });
        return;
      }
      case 'registration':
        this.emit('registration', f);
        if (f.status === 'pending') {
          this.registrationId = f.registrationId ?? null;
          this.attempt = 0; // Steward answers: a later close while waiting (4202) is no failure to back off from
          this.setStatus('pending');
        } else if (f.status === 'rejected') {
          this.failure = { ...describeClose(CLOSE.rejected, ''), message: `registration rejected by an admin: ${f.reason ?? '(no reason given)'}` };
        }
        return;
      case 'update_capabilities':
        this.terms = { capabilities: f.capabilities, resourceLimits: f.resourceLimits, policyId: f.policyId, policyExpiresAt: f.policyExpiresAt };
        this.reauthPending = true;
        this.emit('capabilities', this.terms);
        return;
      case 'certificate_offer':
        return this.onOffer(f.certificate, f.serverSignature);
      case 'ready':
        return this.onReady(f);
      case 'heartbeat_ack':
        this.unacked.delete(f.seq);
        this.emit('heartbeatAck', f.seq);
        return;
      case 'llm_config':
        this.llmConfig = f.config;
        this.opts.onLlmConfig?.(f.config);
        this.emit('llmConfig', f.config);
        return;
      case 'skills_config':
        this.skills = f.skills;
        this.opts.onSkillsConfig?.(f.skills, f);
        this.emit('skillsConfig', f.skills);
        return;
      case 'channel_message_send':
        return this.onChannelMessage(f);
      case 'intent':
        return this.onIntent(f);
      case 'error':
        this.emit('serverError', f);
        return;
    }
  }

  /** Verifies an offered certificate and co-signs it; a certificate that fails is refused by closing. */
  private onOffer(cert: Certificate, serverSignature: string): void {
    const problem = this.checkCertificate(cert, serverSignature);
    if (problem) {
      this.fail(new Error(`certificate refused: ${problem}`));
      this.refuse('certificate refused', `the agent refused Steward's certificate: ${problem}`);
      return;
    }
    if (this.status !== 'ready') this.setStatus('certifying');
    this.offered = cert;
    this.send({ type: 'certificate_accept', agentSignature: signMessage(this.opts.keys, certificateBytes(cert)), serial: cert.serial });
  }

  private checkCertificate(cert: Certificate, serverSignature: string): string | null {
    const shape = certificateShapeError(cert);
    if (shape) return shape;
    if (cert.subject !== this.did) return 'subject is not this agent';
    if (cert.subjectPublicKey !== this.opts.keys.publicKey) return 'subjectPublicKey is not this agent\'s key';
    if (!this.serverDid || cert.issuer !== this.serverDid) return 'issuer is not the server';
    const serverKey = publicKeyFromDidKey(cert.issuer);
    if (!serverKey) return 'the issuer is not an Ed25519 did:key';
    if (!verifyCertificateSignature(cert, serverKey, serverSignature)) return 'the server signature does not verify';
    return null;
  }

  private onReady(f: ReadyFrame): void {
    if (!this.offered || f.certificate.serial !== this.offered.serial) return; // not the certificate we co-signed
    this.certificate = { certificate: f.certificate, serverSignature: f.serverSignature, agentSignature: f.agentSignature };
    this.terms = termsOf(f.certificate);
    this.reauthPending = false;
    this.session = f.session;
    this.offered = null;
    this.attempt = 0;
    const first = this.status !== 'ready';
    if (first) {
      this.setStatus('ready');
      this.resendUnacknowledged(f.lastHeartbeatSeq);
      this.startHeartbeats(this.opts.heartbeatIntervalMs ?? f.heartbeatIntervalMs);
    }
    this.emit('certificate', this.certificate);
  }

  /**
   * After a connection's first `ready`: the deltas whose heartbeats were not acknowledged before the
   * last connection closed. Those at or below the seq the server says it stored were counted (their
   * ack was lost): dropped. The others are sent again under their own seq, so the server counts
   * each once; new heartbeats are numbered above both. A server that does not say
   * (`lastHeartbeatSeq` absent) gets them back in the next heartbeat instead.
   */
  private resendUnacknowledged(stored: number | null | undefined): void {
    if (stored === undefined) {
      for (const d of this.unacked.values()) {
        this.fresh.promptTokens += d.promptTokens;
        this.fresh.completionTokens += d.completionTokens;
      }
      this.unacked.clear();
      return;
    }
    if (stored !== null) {
      for (const seq of [...this.unacked.keys()]) if (seq <= stored) this.unacked.delete(seq);
      if (stored > this.seq) this.seq = stored;
    }
    for (const [seq, delta] of this.unacked) this.send({ type: 'heartbeat', seq, sinceLastSync: delta });
  }

  private async onIntent(f: IntentFrame): Promise<void> {
    const answer = (ok: boolean, extra: { output?: unknown; error?: string }) =>
      this.send({ type: 'intent_result', intentId: f.intentId, ok, ...extra });
    const terms = this.terms;
    if (!terms) return answer(false, { error: 'no certificate in force' });
    const gate = this.gates.admit(f.action, terms);
    if (!gate.ok) {
      this.emit('intentRefused', { ...f, error: gate.error });
      return answer(false, { error: gate.error });
    }
    const handler = this.opts.onIntent;
    if (!handler) return answer(false, { error: 'this agent does not handle intents' });
    try {
      const output = await handler({ intentId: f.intentId, action: f.action, params: f.params, requestedBy: f.requestedBy });
      answer(true, output === undefined ? {} : { output });
    } catch (err) {
      answer(false, { error: err instanceof Error ? err.message : String(err) });
    }
  }

  private async onChannelMessage(f: ChannelMessageSendFrame): Promise<void> {
    const ctx: ChannelMessageContext = {
      channelId: f.channelId,
      message: f.message,
      reply: (content, threadId) => this.reply(f.channelId, content, threadId === undefined ? (f.message.threadId ?? f.message.id) : threadId),
    };
    this.emit('channelMessage', ctx);
    await this.opts.onChannelMessage?.(ctx);
  }

  /** POSTs a reply to /api/channels/{channelId}/messages/agent-response with the agent's session. */
  async reply(channelId: string, content: string, threadId: string | null = null): Promise<unknown> {
    if (!this.session) throw new Error('no session yet: the agent is not ready');
    const res = await fetch(`${this.httpBase}/api/channels/${encodeURIComponent(channelId)}/messages/agent-response`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${this.session.token}` },
      body: JSON.stringify({ content, threadId }),
    });
    const body = (await res.json().catch(() => undefined)) as unknown;
    if (!res.ok) throw new Error(`reply failed with ${res.status}: ${JSON.stringify(body)}`);
    return body;
  }

  private startHeartbeats(intervalMs: number): void {
    this.stopHeartbeats();
    this.heartbeatTimer = setInterval(() => this.heartbeat(), intervalMs);
    this.heartbeatTimer.unref?.();
  }

  private stopHeartbeats(): void {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
  }
}
