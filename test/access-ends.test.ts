/**
 * Access that ends, ends everywhere at once (DESIGN §4e, docs/channels.md "When access ends"):
 * for each way a person or an agent loses a channel, every surface is checked before and after —
 * HTTP reads and writes, unread counts, name lookups, the live feed (`unsubscribed` with
 * `access_lost`, nothing later, no new subscription) and, for agents, the mention pushes.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { TestServer } from './helpers.js';
import { client } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { addMember, enc, FeedClient, makeChannel, makeWorkspace, post, RawAgentSink, startWithOwner } from './channels-helpers.js';

const test = suite('access ends everywhere at once');
let s: TestServer;
let owner: TestUser;
/** A global channel every person and agent may read: a marker that later frames would have come before. */
let marker: { id: string };
const closers: Array<{ close(): void }> = [];

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  marker = await makeChannel(owner, { name: 'Marker' });
});

test.after(async () => {
  for (const c of closers) c.close();
  await s.stop(true);
});

type Api = ReturnType<typeof client>;
let n = 0;

async function feedOf(token: string): Promise<FeedClient> {
  const f = await FeedClient.connect(s.url, token);
  closers.push(f);
  return f;
}

async function unreadIds(api: Api): Promise<string[]> {
  const r = await api.get('/api/me/unread');
  assert.is(r.status, 200, r.text);
  return r.body.channels.map((c: { channelId: string }) => c.channelId);
}

async function sees(api: Api, did: string): Promise<boolean> {
  const r = await api.post('/api/lookup/names', { dids: [did] });
  assert.is(r.status, 200, r.text);
  return did in r.body.names;
}

/** The feed no longer delivers the channel: a post there, then one on the marker, and only the marker's arrives. */
async function feedIsDeaf(f: FeedClient, channelId: string): Promise<void> {
  assert.is((await f.subscribe(marker.id)).type, 'subscribed');
  await postIfThere(channelId, 'after the end');
  const tag = `marker ${++n}`;
  await post(owner, marker.id, tag);
  await f.next((x) => x.type === 'message.created' && x.message.content === tag);
  assert.not.ok(f.frames.some((x) => x.channelId === channelId && x.type === 'message.created'), 'no event of the channel after access ended');
  const again = await f.subscribe(channelId);
  assert.is(again.type, 'error', 'a new subscription is refused');
  assert.is(again.code, 'not_found');
  assert.not.ok(f.frames.some((x) => x.type === 'unsubscribed' && x.channelId === channelId), 'access_lost is said once');
}

/** Posts as the owner, unless the channel went with its workspace. */
async function postIfThere(channelId: string, content: string): Promise<void> {
  const r = await owner.api.post(`/api/channels/${channelId}/messages`, { content });
  assert.ok(r.status === 201 || (r.status === 404 && (await owner.api.get(`/api/channels/${channelId}`)).status === 404), r.text);
}

// -- People ------------------------------------------------------------------------------------------

interface PersonCase {
  ws: { id: string; slug: string };
  p: TestUser;
  /** Another member of the workspace (for name lookups). */
  q: TestUser;
  ch: { id: string };
  f: FeedClient;
}

/** A person in a workspace, a member of its private channel (with one unread message), following it on the feed. */
async function personInPrivateChannel(): Promise<PersonCase> {
  const ws = await makeWorkspace(owner, `People ${++n}`);
  const p = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  const q = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  const ch = await makeChannel(owner, { name: `Private ${n}`, workspaceId: ws.id, isPublic: false });
  await addMember(owner, ch.id, p.user.did!);
  await post(owner, ch.id, 'before');
  const f = await feedOf(p.token);
  assert.is((await f.subscribe(ch.id)).type, 'subscribed');
  // Every surface answers before the end.
  assert.is((await p.api.get(`/api/channels/${ch.id}/messages`)).status, 200);
  assert.ok((await unreadIds(p.api)).includes(ch.id));
  assert.ok(await sees(p.api, q.user.did!));
  return { ws, p, q, ch, f };
}

async function assertPersonLostChannel(c: PersonCase, opts: { lookup: boolean }): Promise<void> {
  const ended = await c.f.next((x) => x.type === 'unsubscribed' && x.channelId === c.ch.id);
  assert.is(ended.reason, 'access_lost');
  assert.is((await c.p.api.get(`/api/channels/${c.ch.id}/messages`)).status, 404, 'read');
  assert.is((await c.p.api.get(`/api/channels/${c.ch.id}`)).status, 404, 'detail');
  assert.is((await c.p.api.post(`/api/channels/${c.ch.id}/messages`, { content: 'still here?' })).status, 404, 'write');
  assert.not.ok((await unreadIds(c.p.api)).includes(c.ch.id), 'unread');
  if (opts.lookup) assert.not.ok(await sees(c.p.api, c.q.user.did!), 'name lookup of the workspace’s people');
  await feedIsDeaf(c.f, c.ch.id);
}

const personWays: Array<[string, (c: PersonCase) => Promise<{ status: number; text: string }>, boolean]> = [
  ['leaving the workspace', (c) => c.p.api.del(`/api/workspaces/${c.ws.id}/members/${c.p.user._id}`), true],
  ['removed from the workspace', (c) => owner.api.del(`/api/workspaces/${c.ws.id}/members/${c.p.user._id}`), true],
  ['removed from the channel', (c) => owner.api.del(`/api/channels/${c.ch.id}/members/${enc(c.p.user.did!)}`), false],
  ['the workspace deleted', (c) => owner.api.del(`/api/workspaces/${c.ws.id}`), true],
];

for (const [way, end, lookup] of personWays) {
  test(`a person: ${way} ends the private channel on every surface`, async () => {
    const c = await personInPrivateChannel();
    const r = await end(c);
    assert.is(r.status, 200, r.text);
    await assertPersonLostChannel(c, { lookup });
  });
}

test('a person who rejoins the workspace gets its public channels back, not its private ones', async () => {
  const c = await personInPrivateChannel();
  const pub = await makeChannel(owner, { name: `Public ${n}`, workspaceId: c.ws.id });
  assert.is((await c.p.api.del(`/api/workspaces/${c.ws.id}/members/${c.p.user._id}`)).status, 200);
  await assertPersonLostChannel(c, { lookup: true });
  assert.is((await owner.api.post(`/api/workspaces/${c.ws.id}/members`, { userDid: c.p.user.did, role: 'member' })).status, 201);
  assert.is((await c.p.api.get(`/api/channels/${pub.id}/messages`)).status, 200, 'a public channel: any member reads it');
  assert.is((await c.p.api.get(`/api/channels/${c.ch.id}/messages`)).status, 404, 'the private channel stays closed');
  assert.is((await c.f.subscribe(c.ch.id)).type, 'error');
});

test('a person: the channel made private ends it for readers who are not members', async () => {
  const ws = await makeWorkspace(owner, `Going private ${++n}`);
  const p = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  const ch = await makeChannel(owner, { name: `Open ${n}`, workspaceId: ws.id });
  const f = await feedOf(p.token);
  assert.is((await f.subscribe(ch.id)).type, 'subscribed');
  assert.is((await p.api.get(`/api/channels/${ch.id}/messages`)).status, 200);
  const r = await owner.api.patch(`/api/channels/${ch.id}`, { isPublic: false });
  assert.is(r.status, 200, r.text);
  const ended = await f.next((x) => x.type === 'unsubscribed' && x.channelId === ch.id);
  assert.is(ended.reason, 'access_lost');
  assert.is((await p.api.get(`/api/channels/${ch.id}/messages`)).status, 404);
  await feedIsDeaf(f, ch.id);
});

test('a person: the account deleted ends every surface (HTTP 401, the feed closed with 4401)', async () => {
  const c = await personInPrivateChannel();
  const r = await owner.api.del(`/api/users/${enc(c.p.user.did!)}`);
  assert.is(r.status, 200, r.text);
  const closed = await c.f.waitClosed();
  assert.is(closed.code, 4401);
  assert.match(closed.reason, /account was deleted/);
  assert.is((await c.p.api.get(`/api/channels/${c.ch.id}/messages`)).status, 401);
  assert.is((await c.p.api.get('/api/me/unread')).status, 401);
  assert.is((await c.p.api.post('/api/lookup/names', { dids: [c.q.user.did!] })).status, 401);
});

test('a person: a global role lowered takes the admin routes away at the next request', async () => {
  const p = await makeUser(s, { role: 'admin' });
  assert.is((await p.api.get('/api/users')).status, 200);
  const r = await owner.api.patch(`/api/users/${enc(p.user.did!)}`, { role: 'member' });
  assert.is(r.status, 200, r.text);
  assert.is((await p.api.get('/api/users')).status, 403);
});

// -- Agents ------------------------------------------------------------------------------------------

interface AgentCase {
  ws: { id: string; slug: string };
  agent: RawAgentSink;
  name: string;
  api: Api;
  q: TestUser;
  ch: { id: string };
}

/** An online agent of the default workspace, added to another one and to its private channel (and to the marker). */
async function agentInPrivateChannel(): Promise<AgentCase> {
  const ws = await makeWorkspace(owner, `Agents ${++n}`);
  const q = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  const name = `bot${n}`;
  const agent = await RawAgentSink.ready(s, owner, name);
  closers.push(agent);
  const api = client(s.url, agent.session.token);
  assert.is((await owner.api.post(`/api/workspaces/${ws.id}/agents`, { agentDid: agent.did })).status, 201);
  const ch = await makeChannel(owner, { name: `Agent room ${n}`, workspaceId: ws.id, isPublic: false });
  await addMember(owner, ch.id, agent.did, 'agent');
  await addMember(owner, marker.id, agent.did, 'agent').catch(() => undefined);
  await post(owner, ch.id, `@${name} before`);
  const pushed = await agent.agent.next('channel_message_send');
  assert.is(pushed.channelId, ch.id);
  assert.is((await api.get(`/api/channels/${ch.id}/messages`)).status, 200);
  assert.ok((await unreadIds(api)).includes(ch.id));
  assert.ok(await sees(api, q.user.did!));
  return { ws, agent, name, api, q, ch };
}

/** No mention push for the channel any more: a mention there, then one on the marker, and only the marker's arrives. */
async function noMorePushes(c: AgentCase): Promise<void> {
  await postIfThere(c.ch.id, `@${c.name} are you there?`);
  const tag = `@${c.name} marker ${++n}`;
  await post(owner, marker.id, tag);
  const got = await c.agent.agent.next('channel_message_send');
  assert.is(got.channelId, marker.id, 'the first push after the end is the marker’s');
  assert.is(got.message.content, tag);
}

const agentWays: Array<[string, (c: AgentCase) => Promise<{ status: number; text: string }>, boolean]> = [
  ['removed from the workspace', (c) => owner.api.del(`/api/workspaces/${c.ws.id}/agents/${enc(c.agent.did)}`), true],
  ['removed from the channel', (c) => owner.api.del(`/api/channels/${c.ch.id}/members/${enc(c.agent.did)}`), false],
  ['the workspace deleted', (c) => owner.api.del(`/api/workspaces/${c.ws.id}`), true],
];

for (const [way, end, lookup] of agentWays) {
  test(`an agent: ${way} ends the private channel on every surface`, async () => {
    const c = await agentInPrivateChannel();
    const r = await end(c);
    assert.is(r.status, 200, r.text);
    assert.is((await c.api.get(`/api/channels/${c.ch.id}/messages`)).status, 404, 'read');
    assert.is((await c.api.post(`/api/channels/${c.ch.id}/messages`, { content: 'still here?' })).status, 404, 'write');
    assert.is((await c.api.post(`/api/channels/${c.ch.id}/messages/agent-response`, { content: 'still here?' })).status, 404, 'agent-response');
    assert.not.ok((await unreadIds(c.api)).includes(c.ch.id), 'unread');
    if (lookup) assert.not.ok(await sees(c.api, c.q.user.did!), 'name lookup');
    await noMorePushes(c);
  });
}

test('an agent: decommissioned, its socket closes (4403), its session ends, nothing more is pushed', async () => {
  const c = await agentInPrivateChannel();
  const r = await owner.api.del(`/api/agents/${enc(c.agent.did)}`);
  assert.is(r.status, 200, r.text);
  const closed = await c.agent.agent.waitClosed();
  assert.is(closed.code, 4403);
  assert.is((await c.api.get(`/api/channels/${c.ch.id}/messages`)).status, 401);
  assert.is((await c.api.get('/api/me/unread')).status, 401);
  const m = await post(owner, c.ch.id, `@${c.name} gone?`);
  assert.equal(m.metadata.mentions ?? [], [], 'a decommissioned agent is no longer mentioned');
});

test('an agent: the channel made private ends it for an agent of the workspace that was no member', async () => {
  const ws = await makeWorkspace(owner, `Agents private ${++n}`);
  const agent = await RawAgentSink.ready(s, owner, `reader${n}`, ws.slug);
  closers.push(agent);
  const api = client(s.url, agent.session.token);
  const ch = await makeChannel(owner, { name: `Open to agents ${n}`, workspaceId: ws.id });
  assert.is((await api.get(`/api/channels/${ch.id}/messages`)).status, 200);
  assert.is((await owner.api.patch(`/api/channels/${ch.id}`, { isPublic: false })).status, 200);
  assert.is((await api.get(`/api/channels/${ch.id}/messages`)).status, 404);
});

test.run();
