/**
 * Helpers for the channel and bridge suites: channels created over HTTP, agents with an HTTP
 * session (as their WebSocket handshake would grant), and a live-feed client.
 */
import * as assert from 'uvu/assert';
import type { TestServer } from './helpers.js';
import { client, waitFor } from './helpers.js';
import type { TestUser } from './fixtures.js';
import { makeAgent } from './people-helpers.js';
import type { AgentDoc } from '../src/store/collections.js';
import { approveRegistration, RawAgent } from './fleet-helpers.js';
import { FrameSocket } from './frames.js';

export { isError, enc, makeAgent, makeWorkspace } from './people-helpers.js';
export { startWithOwner } from './fleet-helpers.js';

export const CHANNEL_KEYS = ['createdAt', 'creatorDid', 'description', 'id', 'isArchived', 'isPublic', 'name', 'slug', 'topic', 'updatedAt', 'workspaceId'];
export const MESSAGE_KEYS = ['authorDid', 'authorType', 'channelId', 'content', 'createdAt', 'deletedAt', 'editedAt', 'id', 'metadata', 'reactions', 'threadId'];
/** A top-level message's keys: a reply's and its thread's counters. */
export const TOP_MESSAGE_KEYS = [...MESSAGE_KEYS, 'lastReplyAt', 'replyCount'].sort();

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

/** A channel's messages as `who` lists them (the first page, newest first). */
export async function messagesOf(who: { api: ReturnType<typeof client> }, channelId: string): Promise<any[]> {
  const r = await who.api.get(`/api/channels/${channelId}/messages`);
  assert.is(r.status, 200, `list messages: ${r.text}`);
  return r.body.messages;
}

export interface SessionAgent {
  doc: AgentDoc;
  did: string;
  token: string;
  api: ReturnType<typeof client>;
}

/** An active agent (of `workspaceId`, when given) with an HTTP session (what the handshake's `ready` hands out). */
export async function sessionAgent(s: TestServer, name: string, workspaceId?: string): Promise<SessionAgent> {
  const doc = await makeAgent(s, name, undefined, workspaceId);
  const token = (await s.ctx.sessions.create('agent', doc._id)).token;
  return { doc, did: doc._id, token, api: client(s.url, token) };
}

/**
 * A live-feed client (test/frames.ts); `connect` authenticates it with the token frame. Every frame
 * must carry `at` (ISO 8601; a frame without one fails the test run); batches are unwrapped, and
 * the frames are queued without `at`. `wire` keeps the frames as they came (batches and `at`).
 */
export class FeedClient extends FrameSocket {
  readonly wire: any[];

  /** A feed socket, not yet open; `headers` go with the upgrade (a session cookie, an origin). */
  constructor(url: string, headers?: Record<string, string>) {
    const wire: any[] = [];
    super(url, '/ws/feed', { headers, expand: (frame) => unwrapFeedFrame(frame, wire) });
    this.wire = wire;
  }

  static async connect(url: string, token: string): Promise<FeedClient> {
    const c = new FeedClient(url);
    await c.open();
    c.send({ type: 'auth', token });
    await c.next('welcome');
    return c;
  }

  async subscribe(channelId: string): Promise<any> {
    this.send({ type: 'subscribe', channelId });
    return this.next((f) => (f.type === 'subscribed' && f.channelId === channelId) || f.type === 'error');
  }
}

/** What a feed frame stands for: a batch's frames, or itself; each checked for `at` and queued without it. */
function unwrapFeedFrame(frame: any, wire: any[]): any[] {
  wire.push(frame);
  const frames = frame.type === 'batch' ? [frame, ...frame.frames] : [frame];
  for (const f of frames) {
    if (typeof f.at !== 'string' || Number.isNaN(Date.parse(f.at)) || new Date(f.at).toISOString() !== f.at) {
      throw new Error(`a feed frame without an ISO 8601 'at': ${JSON.stringify(f).slice(0, 300)}`);
    }
  }
  return (frame.type === 'batch' ? frame.frames : [frame]).map(({ at: _at, ...rest }: any) => rest);
}

/** A raw protocol agent taken through registration, approval and the certificate to `ready`. */
export class RawAgentSink {
  private constructor(
    readonly agent: RawAgent,
    readonly did: string,
    readonly session: { token: string },
  ) {}

  static async ready(s: TestServer, admin: TestUser, name: string, workspace?: string): Promise<RawAgentSink> {
    const agent = new RawAgent(s.url);
    await agent.authenticate(workspace ? { name, workspace } : { name });
    const pending = await agent.next('registration');
    await approveRegistration(admin, pending.registrationId, ['file_access']);
    const ready = await agent.acceptNextOffer();
    await waitFor(() => s.ctx.agentPush.isOnline(agent.keys.did));
    return new RawAgentSink(agent, agent.keys.did, ready.session);
  }

  close(): void {
    this.agent.close();
  }
}
