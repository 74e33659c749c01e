/**
 * Reply counts on top-level messages (kept as replies are posted and deleted, and computed once
 * for messages stored before), read positions (POST /api/channels/{id}/read) and unread counts
 * (GET /api/me/unread), for every role, with a store that fails on chosen operations.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { client, http, startServer, waitFor, type TestServer } from './helpers.js';
import { makeUser, ownerOf, type TestUser } from './fixtures.js';
import { addMember, isError, makeChannel, makeWorkspace, MESSAGE_KEYS, post, sessionAgent, type SessionAgent } from './channels-helpers.js';
import { FaultInjector } from './fault-store.js';
import { generateKeyPair } from '../src/domain/did.js';

const test = suite('channels: reply counts, read positions and unread counts');
const faults = new FaultInjector();
let s: TestServer;
let owner: TestUser;
let ws: { id: string; slug: string };
let chOwner: TestUser;
let alice: TestUser;
let bob: TestUser;
/** In the workspace, not a member of the channel (a public channel: may read it). */
let reader: TestUser;
let outsider: TestUser;
let globalAdmin: TestUser;
let bot: SessionAgent;
let ch: any;

test.before(async () => {
  const keys = generateKeyPair();
  s = await startServer({ STEWARD_OWNER_DID: keys.did }, undefined, { wrapStore: faults.wrap });
  owner = await ownerOf(s);
  ws = await makeWorkspace(owner, 'Unread');
  chOwner = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  alice = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  bob = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  reader = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  outsider = await makeUser(s);
  globalAdmin = await makeUser(s, { isAdmin: true, role: 'admin' });
  bot = await sessionAgent(s, 'unread-bot', ws.id);
  ch = await makeChannel(chOwner, { name: 'Threads', workspaceId: ws.id, isPublic: true });
  await addMember(chOwner, ch.id, alice.user.did!);
  await addMember(chOwner, ch.id, bob.user.did!);
  await addMember(chOwner, ch.id, bot.did, 'agent');
});

test.after(async () => {
  faults.clear();
  await s.stop(true);
});

const list = async (who: { api: ReturnType<typeof client> }, channelId: string, qs = '') => {
  const r = await who.api.get(`/api/channels/${channelId}/messages${qs}`);
  assert.is(r.status, 200, r.text);
  return r.body.messages as any[];
};
const top = async (channelId: string, id: string) => (await list(alice, channelId)).find((m) => m.id === id);
const del = async (who: { api: ReturnType<typeof client> }, channelId: string, id: string) => {
  const r = await who.api.del(`/api/channels/${channelId}/messages/${id}`);
  assert.is(r.status, 200, r.text);
};

test('replyCount and lastReplyAt: kept as replies are posted (people, agents) and deleted', async () => {
  const q = await post(alice, ch.id, 'a question');
  assert.equal([q.replyCount, q.lastReplyAt], [0, null]);
  const r1 = await post(bob, ch.id, 'first answer', { threadId: q.id });
  const r2Res = await bot.api.post(`/api/channels/${ch.id}/messages/agent-response`, { content: 'agent answer', threadId: q.id });
  assert.is(r2Res.status, 201, r2Res.text);
  const r2 = r2Res.body.message;
  const r3 = await post(alice, ch.id, 'last answer', { threadId: q.id });
  assert.equal(Object.keys(r3).sort(), MESSAGE_KEYS, 'a reply has no counters');

  let m = await top(ch.id, q.id);
  assert.equal([m.replyCount, m.lastReplyAt], [3, r3.createdAt]);
  for (const reply of await list(alice, ch.id, `?threadId=${q.id}`)) assert.not.ok('replyCount' in reply);

  await del(alice, ch.id, r3.id); // the newest: lastReplyAt goes back to the one before
  m = await top(ch.id, q.id);
  assert.equal([m.replyCount, m.lastReplyAt], [2, r2.createdAt]);
  await del(chOwner, ch.id, r1.id); // an older one, by the channel owner
  m = await top(ch.id, q.id);
  assert.equal([m.replyCount, m.lastReplyAt], [1, r2.createdAt]);
  isError(await alice.api.del(`/api/channels/${ch.id}/messages/${r3.id}`), 404, 'not_found');
  assert.is((await top(ch.id, q.id)).replyCount, 1, 'deleting a deleted reply again counts nothing');
  await del(bot, ch.id, r2.id);
  m = await top(ch.id, q.id);
  assert.equal([m.replyCount, m.lastReplyAt], [0, null]);

  // Read per page, not counted: the messages of the channel are not read to list them.
  const seen: unknown[] = [];
  const spy = faults.add({ collection: 'channel_messages', op: 'count', mode: 'fail', times: Infinity, when: (a) => (seen.push(a), false) });
  await list(alice, ch.id);
  spy();
  assert.equal(seen, []);
});

test('replyCount: a counter write that fails leaves the reply posted, and the count is recounted', async () => {
  const q = await post(alice, ch.id, 'another question');
  faults.add({ collection: 'channel_messages', op: 'bulkUpdate', mode: 'fail' });
  const r = await post(bob, ch.id, 'answer while the store hiccups', { threadId: q.id });
  assert.equal(faults.injected.at(-1), 'channel_messages.bulkUpdate fail');
  await waitFor(async () => (await top(ch.id, q.id)).replyCount === 1);
  assert.is((await top(ch.id, q.id)).lastReplyAt, r.createdAt);
  assert.ok((await list(alice, ch.id, `?threadId=${q.id}`)).some((m) => m.id === r.id), 'the reply is stored once');
});

test('read positions and unread counts: members only; forward only; no message read per request', async () => {
  const c = await makeChannel(chOwner, { name: 'Counting', workspaceId: ws.id, isPublic: true });
  await addMember(chOwner, c.id, bob.user.did!);
  await addMember(chOwner, c.id, bot.did, 'agent');
  const m1 = await post(chOwner, c.id, 'one');
  const m2 = await post(chOwner, c.id, 'two');
  const m3 = await post(chOwner, c.id, 'three');

  const unreadOf = async (who: { api: ReturnType<typeof client> }) => {
    const r = await who.api.get('/api/me/unread');
    assert.is(r.status, 200, r.text);
    return r.body.channels.find((x: any) => x.channelId === c.id);
  };
  assert.equal(await unreadOf(bob), { channelId: c.id, unread: 3, lastReadMessageId: null });

  const r = await bob.api.post(`/api/channels/${c.id}/read`, { messageId: m2.id });
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { channelId: c.id, lastReadMessageId: m2.id, unread: 1 });
  assert.equal(await unreadOf(bob), { channelId: c.id, unread: 1, lastReadMessageId: m2.id });
  // An older mark changes nothing.
  assert.equal((await bob.api.post(`/api/channels/${c.id}/read`, { messageId: m1.id })).body, { channelId: c.id, lastReadMessageId: m2.id, unread: 1 });
  assert.equal((await bob.api.post(`/api/channels/${c.id}/read`, { messageId: m2.id })).body, { channelId: c.id, lastReadMessageId: m2.id, unread: 1 });
  // Replies are messages too.
  await post(chOwner, c.id, 'a reply', { threadId: m3.id });
  assert.is((await unreadOf(bob)).unread, 2);
  // The owner's position is their own.
  assert.is((await unreadOf(chOwner)).unread, 4);

  // An agent's session, as a member.
  assert.is((await unreadOf(bot)).unread, 4);
  const b = await bot.api.post(`/api/channels/${c.id}/read`, { messageId: m3.id });
  assert.equal(b.body, { channelId: c.id, lastReadMessageId: m3.id, unread: 1 });

  // GET /api/me/unread reads no message.
  const seen: string[] = [];
  const spy = faults.add({ collection: 'channel_messages', op: 'find', mode: 'fail', times: Infinity, when: () => (seen.push('find'), false) });
  const spy2 = faults.add({ collection: 'channel_messages', op: 'count', mode: 'fail', times: Infinity, when: () => (seen.push('count'), false) });
  await unreadOf(bob);
  spy();
  spy2();
  assert.equal(seen, []);

  // Refusals: a reader who is not a member 403; who may not read the channel 404, as a message of
  // another channel or none; no session 401; bad input 400. None of them moves a position.
  isError(await reader.api.post(`/api/channels/${c.id}/read`, { messageId: m3.id }), 403, 'not_a_member');
  isError(await globalAdmin.api.post(`/api/channels/${c.id}/read`, { messageId: m3.id }), 403, 'not_a_member');
  const priv = await makeChannel(chOwner, { name: 'Private', workspaceId: ws.id, isPublic: false });
  const p1 = await post(chOwner, priv.id, 'secret');
  isError(await bob.api.post(`/api/channels/${priv.id}/read`, { messageId: p1.id }), 404, 'not_found');
  isError(await outsider.api.post(`/api/channels/${c.id}/read`, { messageId: m3.id }), 404, 'not_found');
  isError(await bob.api.post(`/api/channels/${c.id}/read`, { messageId: p1.id }), 404, 'not_found');
  isError(await bob.api.post(`/api/channels/${c.id}/read`, { messageId: 'nope' }), 404, 'not_found');
  isError(await bob.api.post(`/api/channels/nope/read`, { messageId: m3.id }), 404, 'not_found');
  isError(await http(s.url, 'POST', `/api/channels/${c.id}/read`, { json: { messageId: m3.id } }), 401);
  isError(await bob.api.post(`/api/channels/${c.id}/read`, {}), 400);
  isError(await http(s.url, 'GET', '/api/me/unread'), 401);
  assert.equal(await unreadOf(bob), { channelId: c.id, unread: 2, lastReadMessageId: m2.id });
  // Channels one is not a member of are not listed.
  assert.is(await unreadOf(reader), undefined);
  assert.equal((await outsider.api.get('/api/me/unread')).body, { channels: [] });
  assert.ok(!(await bob.api.get('/api/me/unread')).body.channels.some((x: any) => x.channelId === priv.id));
});

test('after a restart, positions and counters hold; messages stored before the counters get them once at start', async () => {
  const c = await makeChannel(chOwner, { name: 'Old', workspaceId: ws.id });
  await addMember(chOwner, c.id, bob.user.did!);
  const q = await post(chOwner, c.id, 'old question');
  await post(bob, c.id, 'old answer 1', { threadId: q.id });
  const a2 = await post(bob, c.id, 'old answer 2', { threadId: q.id });
  const a3 = await post(bob, c.id, 'old answer 3', { threadId: q.id });
  await del(bob, c.id, a3.id);
  await bob.api.post(`/api/channels/${c.id}/read`, { messageId: q.id });
  // As a store written before the counters were kept: none on messages or channels, no migration record.
  await s.ctx.c.channelMessages.updateMany({ channelId: c.id }, { $unset: { replyCount: true, lastReplyAt: true } });
  await s.ctx.c.channels.updateOne({ _id: c.id }, { $unset: { lastSeq: true } });
  await s.ctx.c.settings.deleteOne({ _id: 'migration.channelCounters' });

  s = await s.restart();
  const bobApi = client(s.url, bob.token);
  const m = (await bobApi.get(`/api/channels/${c.id}/messages`)).body.messages.find((x: any) => x.id === q.id);
  assert.equal([m.replyCount, m.lastReplyAt], [2, a2.createdAt]);
  const u = (await bobApi.get('/api/me/unread')).body.channels.find((x: any) => x.channelId === c.id);
  assert.equal(u, { channelId: c.id, unread: 3, lastReadMessageId: q.id }, 'three messages after the one read, the deleted one included');
  assert.ok(await s.ctx.c.settings.findById('migration.channelCounters'));
});

test.run();
