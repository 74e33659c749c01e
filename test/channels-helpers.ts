/**
 * Helpers for the channel and bridge suites: channels created over HTTP, agents with an HTTP
 * session (as their WebSocket handshake would grant), and a live-feed client.
 */
import * as assert from 'uvu/assert';
import WebSocket from 'ws';
import type { TestServer } from './helpers.js';
import { client, waitFor } from './helpers.js';
import type { TestUser } from './fixtures.js';
import { makeAgent } from './people-helpers.js';
import type { AgentDoc } from '../src/store/collections.js';
import { RawAgent } from './fleet-helpers.js';

export { isError, enc, makeAgent, makeWorkspace } from './people-helpers.js';
export { startWithOwner } from './fleet-helpers.js';

export const CHANNEL_KEYS = ['createdAt', 'creatorDid', 'description', 'id', 'isArchived', 'isPublic', 'name', 'slug', 'topic', 'updatedAt', 'workspaceId'];
export const MESSAGE_KEYS = ['authorDid', 'authorType', 'channelId', 'content', 'createdAt', 'deletedAt', 'editedAt', 'id', 'metadata', 'reactions', 'threadId'];

/** Creates a channel over HTTP as `who` and returns it. */
export async function makeChannel(who: TestUser, body: Record<string, unknown>): Promise<any> {
  const r = await who.api.post('/api/channels', body);
  assert.is(r.status, 201, `create channel ${JSON.stringify(body)}: ${r.text}`);
  return r.body.channel;
}

/** Adds a member over HTTP as `who`. */
export async function addMember(who: TestUser, channelId: string, memberDid: string, memberType: 'user' | 'agent' = 'user', role?: string): Promise<any> {
  const r = await who.api.post(`/api/channels/${channelId}/members`, { memberDid, memberType, ...(role ? { role } : {}) });
  assert.is(r.status, 201, `add member: ${r.text}`);
  return r.body.member;
}

export async function post(who: { api: ReturnType<typeof client> }, channelId: string, content: string, extra: Record<string, unknown> = {}): Promise<any> {
  const r = await who.api.post(`/api/channels/${channelId}/messages`, { content, ...extra });
  assert.is(r.status, 201, `post: ${r.text}`);
  return r.body.message;
}

export interface SessionAgent {
  doc: AgentDoc;
  did: string;
  token: string;
  api: ReturnType<typeof client>;
}

/** An active agent with an HTTP session (what the handshake's `ready` hands out). */
export async function sessionAgent(s: TestServer, name: string): Promise<SessionAgent> {
  const doc = await makeAgent(s, name);
  const token = (await s.ctx.sessions.create('agent', doc._id)).token;
  return { doc, did: doc._id, token, api: client(s.url, token) };
}

/** A live-feed client authenticated with the token frame; `next()` waits for a frame. */
export class FeedClient {
  readonly ws: WebSocket;
  readonly frames: any[] = [];
  private waiters: Array<() => void> = [];

  constructor(url: string) {
    this.ws = new WebSocket(url.replace(/^http/, 'ws') + '/ws/feed');
    this.ws.on('message', (data) => {
      this.frames.push(JSON.parse(data.toString()));
      const w = this.waiters;
      this.waiters = [];
      for (const f of w) f();
    });
  }

  static async connect(url: string, token: string): Promise<FeedClient> {
    const c = new FeedClient(url);
    await new Promise<void>((resolve, reject) => {
      c.ws.once('open', () => resolve());
      c.ws.once('error', reject);
    });
    c.send({ type: 'auth', token });
    await c.next((f) => f.type === 'welcome');
    return c;
  }

  send(frame: unknown): void {
    this.ws.send(JSON.stringify(frame));
  }

  /** The next unread frame matching `pred` (earlier non-matching frames stay queued). */
  async next(pred: (f: any) => boolean, timeoutMs = 5000): Promise<any> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const i = this.frames.findIndex(pred);
      if (i >= 0) return this.frames.splice(i, 1)[0];
      const left = end - Date.now();
      if (left <= 0) throw new Error(`no matching feed frame within ${timeoutMs} ms; got ${JSON.stringify(this.frames)}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  async subscribe(channelId: string): Promise<any> {
    this.send({ type: 'subscribe', channelId });
    return this.next((f) => (f.type === 'subscribed' && f.channelId === channelId) || f.type === 'error');
  }

  close(): void {
    this.ws.close();
  }
}

/** A raw protocol agent taken through registration, approval and the certificate to `ready`. */
export class RawAgentSink {
  private constructor(
    readonly agent: RawAgent,
    readonly did: string,
    readonly session: { token: string },
  ) {}

  static async ready(s: TestServer, admin: TestUser, name: string): Promise<RawAgentSink> {
    const agent = new RawAgent(s.url);
    await agent.authenticate({ name });
    const pending = await agent.next('registration');
    const r = await admin.api.post(`/api/registrations/${pending.registrationId}/approve`, { capabilities: ['file_access'] });
    assert.is(r.status, 200, r.text);
    const ready = await agent.acceptNextOffer();
    await waitFor(() => s.ctx.agentPush.isOnline(agent.keys.did));
    return new RawAgentSink(agent, agent.keys.did, ready.session);
  }

  close(): void {
    this.agent.close();
  }
}
