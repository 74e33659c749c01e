/**
 * Access that ends on one node ends on every node (DESIGN §4e): two Steward nodes on one store and
 * a real nats-server. A person removed from a workspace through A loses its private channel on a
 * feed socket held by B (and over HTTP through B); a channel made private through A ends B's
 * readers; a logout or the account deleted through A closes the feed socket on B (4401); an
 * agent connected to B and removed from the workspace through A is mentioned there no more.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { client, waitFor } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { addMember, FeedClient, makeChannel, makeWorkspace, post, RawAgentSink, enc } from './channels-helpers.js';
import { startCluster, type ClusterNodeServer, type TestCluster } from './cluster-nodes.js';

const test = suite('cluster: access ends on every node');
let cl: TestCluster;
let A: ClusterNodeServer;
let B: ClusterNodeServer;
let ownerA: TestUser;
let marker: { id: string };
const sockets: Array<{ close(): void }> = [];
let n = 0;

test.before(async () => {
  cl = await startCluster({ nodes: 2 });
  [A, B] = cl.nodes as [ClusterNodeServer, ClusterNodeServer];
  ownerA = { ...cl.owner, api: cl.as(A) };
  marker = await makeChannel(ownerA, { name: 'Marker' });
});

test.after(async () => {
  for (const s of sockets) s.close();
  await cl.stop();
});

async function feedOn(node: ClusterNodeServer, token: string): Promise<FeedClient> {
  const f = await FeedClient.connect(node.url, token);
  sockets.push(f);
  return f;
}

/** Nothing more from the channel on this socket: a post there, then one on the marker, and only the marker's arrives. */
async function deaf(f: FeedClient, channelId: string): Promise<void> {
  assert.is((await f.subscribe(marker.id)).type, 'subscribed');
  // Every node hears of B's interest through the bus; until then a post elsewhere reaches nobody on B.
  for (const node of cl.nodes) await waitFor(() => hasSubscribers(node, `channel:${marker.id}`));
  await post(ownerA, channelId, 'after the end');
  const tag = `marker ${++n}`;
  await post(ownerA, marker.id, tag);
  await f.next((x) => x.type === 'message.created' && x.message.content === tag);
  assert.not.ok(f.frames.some((x) => x.type === 'message.created' && x.channelId === channelId));
  assert.is((await f.subscribe(channelId)).type, 'error');
  assert.not.ok(f.frames.some((x) => x.type === 'unsubscribed' && x.channelId === channelId), 'access_lost is said once');
}

/** Whether `node` knows someone follows the feed topic (here, or on another node). */
function hasSubscribers(node: ClusterNodeServer, topic: string): boolean {
  const topics = (node.ctx.fleet.feed as unknown as { deps: { topics: { hasSubscribers(t: string): boolean } } }).deps.topics;
  return topics.hasSubscribers(topic);
}

test('removed from the workspace through A: the private channel ends on B (feed and HTTP)', async () => {
  const ws = await makeWorkspace(ownerA, `Cluster ${++n}`);
  const p = await makeUser(A, { workspaces: { [ws.id]: 'member' } });
  const ch = await makeChannel(ownerA, { name: `Secret ${n}`, workspaceId: ws.id, isPublic: false });
  await addMember(ownerA, ch.id, p.user.did!);
  const onB = client(B.url, p.token);
  assert.is((await onB.get(`/api/channels/${ch.id}/messages`)).status, 200);
  const f = await feedOn(B, p.token);
  assert.is((await f.subscribe(ch.id)).type, 'subscribed');
  const r = await ownerA.api.del(`/api/workspaces/${ws.id}/members/${p.user._id}`);
  assert.is(r.status, 200, r.text);
  const ended = await f.next((x) => x.type === 'unsubscribed' && x.channelId === ch.id);
  assert.is(ended.reason, 'access_lost');
  assert.is((await onB.get(`/api/channels/${ch.id}/messages`)).status, 404);
  assert.is((await onB.post(`/api/channels/${ch.id}/messages`, { content: 'still?' })).status, 404);
  await deaf(f, ch.id);
});

test('a channel made private through A ends it for a reader following it on B', async () => {
  const ws = await makeWorkspace(ownerA, `Cluster open ${++n}`);
  const p = await makeUser(A, { workspaces: { [ws.id]: 'member' } });
  const ch = await makeChannel(ownerA, { name: `Open ${n}`, workspaceId: ws.id });
  const f = await feedOn(B, p.token);
  assert.is((await f.subscribe(ch.id)).type, 'subscribed');
  assert.is((await ownerA.api.patch(`/api/channels/${ch.id}`, { isPublic: false })).status, 200);
  const ended = await f.next((x) => x.type === 'unsubscribed' && x.channelId === ch.id);
  assert.is(ended.reason, 'access_lost');
  await deaf(f, ch.id);
});

test('a logout through A closes the feed socket of that session on B with 4401', async () => {
  const p = await makeUser(A);
  const f = await feedOn(B, p.token);
  assert.is((await client(A.url, p.token).post('/api/auth/logout', {})).status, 200);
  const closed = await f.waitClosed();
  assert.is(closed.code, 4401);
});

test('an account deleted through A closes its feed socket on B with 4401, and its HTTP requests there are 401', async () => {
  const p = await makeUser(A);
  const f = await feedOn(B, p.token);
  assert.is((await ownerA.api.del(`/api/users/${enc(p.user.did!)}`)).status, 200);
  const closed = await f.waitClosed();
  assert.is(closed.code, 4401);
  assert.match(closed.reason, /account was deleted/);
  assert.is((await client(B.url, p.token).get('/api/me/unread')).status, 401);
});

test('an agent on B removed from the workspace through A is no longer mentioned in its channel', async () => {
  const ws = await makeWorkspace(ownerA, `Cluster agents ${++n}`);
  const name = `clusterbot${n}`;
  const agent = await RawAgentSink.ready(B, { ...cl.owner, api: cl.as(B) }, name);
  sockets.push(agent);
  for (const node of cl.nodes) await waitFor(() => node.ctx.agents.isOnline(agent.did));
  assert.is((await ownerA.api.post(`/api/workspaces/${ws.id}/agents`, { agentDid: agent.did })).status, 201);
  const ch = await makeChannel(ownerA, { name: `Agents ${n}`, workspaceId: ws.id, isPublic: false });
  await addMember(ownerA, ch.id, agent.did, 'agent');
  await addMember(ownerA, marker.id, agent.did, 'agent');
  await post(ownerA, ch.id, `@${name} before`);
  assert.is((await agent.agent.next('channel_message_send')).channelId, ch.id);
  const r = await ownerA.api.del(`/api/workspaces/${ws.id}/agents/${enc(agent.did)}`);
  assert.is(r.status, 200, r.text);
  await post(ownerA, ch.id, `@${name} after`);
  const tag = `@${name} marker ${++n}`;
  await post(ownerA, marker.id, tag);
  const next = await agent.agent.next('channel_message_send');
  assert.is(next.channelId, marker.id, 'the first push after the removal is the marker’s');
  assert.is((await client(B.url, agent.session.token).get(`/api/channels/${ch.id}/messages`)).status, 404);
});

test.run();
