/**
 * Helpers for the fleet suites: real SDK agents (StewardAgent) with real Ed25519 keys, the
 * approval round trip, and a raw WebSocket client that speaks the protocol frame by frame.
 */
import * as assert from 'uvu/assert';
import type { EventEmitter } from 'node:events';
import { StewardAgent, type StewardAgentEvents, type StewardAgentOptions } from '../src/agent/index.js';
import { generateKeyPair, signMessage, PURPOSE, type Ed25519KeyPair } from '../src/domain/did.js';
import { certificateBytes, type Certificate } from '../src/domain/certificate.js';
import { frameValidators, isOutboundType } from '../src/domain/wire-schemas.js';
import { fleetOf, type Fleet } from '../src/app/handle.js';
import type { Capability } from '../src/store/collections.js';
import { waitFor, type TestServer } from './helpers.js';
import type { TestUser } from './fixtures.js';
import { FrameSocket } from './frames.js';

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

/** Approves registration `registrationId` through the HTTP API. */
export async function approveRegistration(admin: TestUser, registrationId: string, capabilities: Capability[]): Promise<void> {
  const r = await admin.api.post(`/api/registrations/${registrationId}/approve`, { capabilities });
  assert.is(r.status, 200, r.text);
}

/** Approves the agent's pending registration through the HTTP API. */
export async function approve(admin: TestUser, agent: StewardAgent, capabilities?: Capability[]): Promise<void> {
  await agent.waitFor('pending');
  await approveRegistration(admin, agent.registrationId!, capabilities ?? agent['opts'].capabilities);
}

/** A started, approved and ready SDK agent. */
export async function readyAgent(s: TestServer, admin: TestUser, opts: AgentOpts = {}, approved?: Capability[]): Promise<StewardAgent> {
  const agent = newAgent(s, opts);
  await approve(admin, agent, approved);
  await agent.waitFor('ready');
  await waitFor(() => fleet(s).gateway.isOnline(agent.did));
  return agent;
}

/** Keys of an agent that was approved and online (through the SDK) and has gone offline again. */
export async function approvedKeys(s: TestServer, admin: TestUser): Promise<Ed25519KeyPair> {
  const keys = generateKeyPair();
  const sdk = await readyAgent(s, admin, { keys });
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

/** Resolves when the agent emits `event` (with its first argument). */
export function once<T = unknown>(agent: StewardAgent, event: keyof StewardAgentEvents, timeoutMs = 5000): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no '${event}' within ${timeoutMs} ms`)), timeoutMs);
    // The caller names the type of the first argument; the untyped emitter takes its word for it.
    (agent as EventEmitter).once(event, (v: T) => {
      clearTimeout(timer);
      resolve(v);
    });
  });
}

/** A heartbeat frame: the tokens used since the last one acknowledged. */
export const heartbeat = (seq: number, promptTokens: number, completionTokens: number) => ({ type: 'heartbeat', seq, sinceLastSync: { promptTokens, completionTokens } });

/** Every frame the server sends is text, of a known outbound type, and matches its schema. */
function checkOutbound(frame: any, isBinary: boolean): void {
  assert.not.ok(isBinary, 'the server sends text frames');
  assert.ok(isOutboundType(frame.type), `known outbound frame type ${frame.type}`);
  const ok = frameValidators[frame.type as 'error'](frame);
  assert.ok(ok, `${frame.type} frame matches its schema: ${JSON.stringify(frameValidators[frame.type as 'error'].errors)}`);
}

/**
 * A raw protocol client: every frame received is checked against its schema and queued;
 * `next(type)` waits for the next frame of a type (test/frames.ts).
 */
export class RawAgent extends FrameSocket {
  constructor(
    url: string,
    readonly keys: Ed25519KeyPair = generateKeyPair(),
    headers?: Record<string, string>,
  ) {
    super(url, '/ws/agent', { headers, check: checkOutbound });
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
}

/** Stops agents, ignoring the ones already stopped. */
export async function stopAll(...agents: Array<StewardAgent | RawAgent | undefined>): Promise<void> {
  await Promise.all(agents.map((a) => (a instanceof StewardAgent ? a.stop() : a?.close())));
}
