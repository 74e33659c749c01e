/**
 * Helpers for the fleet suites: real SDK agents (StewardAgent) with real Ed25519 keys, the
 * approval round trip, and a raw WebSocket client that speaks the protocol frame by frame.
 */
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import { StewardAgent, type StewardAgentOptions } from '../src/agent/index.js';
import { generateKeyPair, signMessage, PURPOSE, type Ed25519KeyPair } from '../src/domain/did.js';
import { certificateBytes, type Certificate } from '../src/domain/certificate.js';
import { frameValidators, isOutboundType } from '../src/domain/wire-schemas.js';
import { fleetOf, type Fleet } from '../src/app/handle.js';
import type { Capability } from '../src/store/collections.js';
import { startServer, waitFor, type TestServer } from './helpers.js';
import { ownerOf, type TestUser } from './fixtures.js';

export { makeWorkspace, isError, enc, startWithOwner } from './people-helpers.js';

export const fleet = (s: TestServer): Fleet => fleetOf(s.ctx);

export type AgentOpts = Partial<StewardAgentOptions> & { capabilities?: Capability[] };

/** A started SDK agent with a fresh key (not yet approved). */
export function newAgent(s: TestServer, opts: AgentOpts = {}): StewardAgent {
  return new StewardAgent({
    url: s.url,
    keys: opts.keys ?? generateKeyPair(),
    name: opts.name ?? `agent-${Math.random().toString(36).slice(2, 8)}`,
    version: '1.0.0',
    capabilities: opts.capabilities ?? ['file_access', 'api_call'],
    reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
    ...opts,
  }).start();
}

/** Approves the agent's pending registration through the HTTP API. */
export async function approve(admin: TestUser, agent: StewardAgent, capabilities?: Capability[]): Promise<void> {
  await agent.waitFor('pending');
  const r = await admin.api.post(`/api/registrations/${agent.registrationId}/approve`, { capabilities: capabilities ?? agent['opts'].capabilities });
  assert.is(r.status, 200, r.text);
}

/** A started, approved and ready SDK agent. */
export async function readyAgent(s: TestServer, admin: TestUser, opts: AgentOpts = {}, approved?: Capability[]): Promise<StewardAgent> {
  const agent = newAgent(s, opts);
  await approve(admin, agent, approved);
  await agent.waitFor('ready');
  await waitFor(() => fleet(s).gateway.isOnline(agent.did));
  return agent;
}

/** Resolves when the agent emits `event` (with its first argument). */
/** Keys of an agent that was approved (through the SDK) and has gone offline again. */
export async function approvedKeys(s: TestServer, admin: TestUser): Promise<Ed25519KeyPair> {
  const keys = generateKeyPair();
  const sdk = newAgent(s, { keys });
  await approve(admin, sdk);
  await sdk.waitFor('ready');
  await sdk.stop();
  await waitFor(() => !fleet(s).gateway.isOnline(keys.did));
  return keys;
}

/** A raw agent of an approved agent (`keys`, or a new one), through its handshake: the agent and its `ready` frame. */
export async function readyRawAgent(s: TestServer, admin: TestUser, keys?: Ed25519KeyPair): Promise<{ raw: RawAgent; ready: any }> {
  const raw = new RawAgent(s.url, keys ?? (await approvedKeys(s, admin)));
  await raw.authenticate();
  return { raw, ready: await raw.acceptNextOffer() };
}

export function once<T = unknown>(agent: StewardAgent, event: string, timeoutMs = 5000): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no '${event}' within ${timeoutMs} ms`)), timeoutMs);
    agent.once(event, (v: T) => {
      clearTimeout(timer);
      resolve(v);
    });
  });
}

/**
 * A raw protocol client: every frame received is checked against its schema and queued;
 * `next(type)` waits for the next frame of a type.
 */
export class RawAgent {
  readonly ws: WebSocket;
  readonly frames: any[] = [];
  closed: { code: number; reason: string } | null = null;
  private waiters: Array<() => void> = [];
  private readonly opened: Promise<void>;

  constructor(url: string, readonly keys: Ed25519KeyPair = generateKeyPair()) {
    this.ws = new WebSocket(url.replace(/^http/, 'ws') + '/ws/agent');
    this.opened = new Promise((resolve, reject) => {
      this.ws.once('open', () => resolve());
      this.ws.once('error', reject);
    });
    this.ws.on('message', (data, isBinary) => {
      assert.not.ok(isBinary, 'the server sends text frames');
      const frame = JSON.parse(data.toString());
      assert.ok(isOutboundType(frame.type), `known outbound frame type ${frame.type}`);
      const ok = frameValidators[frame.type as 'error'](frame);
      assert.ok(ok, `${frame.type} frame matches its schema: ${JSON.stringify(frameValidators[frame.type as 'error'].errors)}`);
      this.frames.push(frame);
      this.wake();
    });
    this.ws.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      this.wake();
    });
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  open(): Promise<void> {
    return this.opened;
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** The next unread frame of `type` (frames of other types before it stay queued). */
  async next(type: string, timeoutMs = 5000): Promise<any> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const i = this.frames.findIndex((f) => f.type === type);
      if (i >= 0) return this.frames.splice(i, 1)[0];
      if (this.closed) throw new Error(`socket closed (${this.closed.code} ${this.closed.reason}) before a '${type}' frame`);
      const left = end - Date.now();
      if (left <= 0) throw new Error(`no '${type}' frame within ${timeoutMs} ms; got ${JSON.stringify(this.frames.map((f) => f.type))}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  async waitClosed(timeoutMs = 5000): Promise<{ code: number; reason: string }> {
    await waitFor(() => this.closed, timeoutMs);
    return this.closed!;
  }

  hello(extra: Record<string, unknown> = {}): void {
    this.send({ type: 'hello', did: this.keys.did, publicKey: this.keys.publicKey, name: 'raw', version: '0.0.1', capabilities: ['file_access'], ...extra });
  }

  /** hello → challenge → auth (signed correctly unless `signature` is given). */
  async authenticate(extra: Record<string, unknown> = {}, signature?: string): Promise<void> {
    await this.open();
    this.hello(extra);
    const ch = await this.next('challenge');
    this.send({ type: 'auth', signature: signature ?? signMessage(this.keys, PURPOSE.agentAuth + ch.nonce) });
  }

  /** Co-signs the next certificate offer and waits for `ready`. */
  async acceptNextOffer(): Promise<any> {
    const offer = await this.next('certificate_offer');
    this.send({ type: 'certificate_accept', agentSignature: signMessage(this.keys, certificateBytes(offer.certificate as Certificate)) });
    return this.next('ready');
  }

  close(): void {
    this.ws.close();
  }
}

/** Stops agents, ignoring the ones already stopped. */
export async function stopAll(...agents: Array<StewardAgent | RawAgent | undefined>): Promise<void> {
  await Promise.all(agents.map((a) => (a instanceof StewardAgent ? a.stop() : a?.close())));
}
