import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { client, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { addMember, isError, makeChannel, makeWorkspace, MESSAGE_KEYS, post, sessionAgent, startWithOwner, TOP_MESSAGE_KEYS } from './channels-helpers.js';
import { findMentions } from '../src/domain/mentions.js';
import { CHANNEL_ACTOR_KIND } from '../src/actors/channel.js';

const test = suite('channel messages');
let s: TestServer;
let owner: TestUser;
let ws: { id: string; slug: string };
let chOwner: TestUser;
let moderator: TestUser;
let alice: TestUser;
let bob: TestUser;
let ch: any;

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  ws = await makeWorkspace(owner, 'Talk');
  chOwner = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  moderator = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  alice = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  bob = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  ch = await makeChannel(chOwner, { name: 'Main', workspaceId: ws.id });
  await addMember(chOwner, ch.id, moderator.user.did!, 'user', 'moderator');
  await addMember(chOwner, ch.id, alice.user.did!);
  await addMember(chOwner, ch.id, bob.user.did!);
});

test.after(async () => {
  await s.stop(true);
});

const messages = async (u: TestUser, channelId: string, qs = '') => {
  const r = await u.api.get(`/api/channels/${channelId}/messages${qs}`);
  assert.is(r.status, 200, r.text);
  return r.body.messages as any[];
};

// --- posting ----------------------------------------------------------------------------------------

test('post: 201 {message} in the interface shape; Markdown content and metadata kept as given', async () => {
  const content = '  **bold** and `code`\n\n    indented block';
  const metadata = { source: 'test', nested: { 'dotted.key': 1, $dollar: [1, 2] } };
  const r = await alice.api.post(`/api/channels/${ch.id}/messages`, { content, metadata });
  assert.is(r.status, 201, r.text);
  assert.equal(Object.keys(r.body), ['message']);
  const m = r.body.message;
  assert.equal(Object.keys(m).sort(), TOP_MESSAGE_KEYS);
  assert.is(m.channelId, ch.id);
  assert.is(m.threadId, null);
  assert.is(m.authorDid, alice.user.did);
  assert.is(m.authorType, 'user');
  assert.is(m.content, content);
  assert.equal(m.metadata, metadata);
  assert.equal(m.reactions, {});
  assert.is(m.editedAt, null);
  assert.is(m.deletedAt, null);
  assert.ok(!Number.isNaN(Date.parse(m.createdAt)));
  const [listed] = await messages(bob, ch.id, '?limit=1');
  assert.equal(listed, m);
});

test('post: 400 for blank or missing content, a bad threadId, bad or oversized metadata; nothing is stored', async () => {
  const c = await makeChannel(chOwner, { name: 'Refusals', workspaceId: ws.id });
  const elsewhere = await post(chOwner, ch.id, 'in another channel');
  isError(await chOwner.api.post(`/api/channels/${c.id}/messages`, { content: '' }), 400, 'validation_failed');
  isError(await chOwner.api.post(`/api/channels/${c.id}/messages`, { content: ' \n\t ' }), 400, 'validation_failed');
  isError(await chOwner.api.post(`/api/channels/${c.id}/messages`, {}), 400, 'validation_failed');
  isError(await chOwner.api.post(`/api/channels/${c.id}/messages`, { content: 42 }), 400, 'validation_failed');
  isError(await chOwner.api.post(`/api/channels/${c.id}/messages`, { content: 'x', threadId: 'no-such-message' }), 400, 'unknown_thread');
  isError(await chOwner.api.post(`/api/channels/${c.id}/messages`, { content: 'x', threadId: elsewhere.id }), 400, 'unknown_thread');
  isError(await chOwner.api.post(`/api/channels/${c.id}/messages`, { content: 'x', metadata: [1] }), 400, 'validation_failed');
  isError(await chOwner.api.post(`/api/channels/${c.id}/messages`, { content: 'x', metadata: 'text' }), 400, 'validation_failed');
  isError(await chOwner.api.post(`/api/channels/${c.id}/messages`, { content: 'x', metadata: { big: 'y'.repeat(20_000) } }), 400, 'metadata_too_large');
  isError(await chOwner.api.post(`/api/channels/${c.id}/messages`, { content: 'x', extra: 1 }), 400, 'validation_failed');
  isError(await chOwner.api.post(`/api/channels/${c.id}/messages`, { content: 'x'.repeat(40_001) }), 400, 'validation_failed');
  isError(await chOwner.api.post('/api/channels/nope/messages', { content: 'x' }), 404, 'not_found');
  assert.equal(await messages(chOwner, c.id), []);
  assert.is((await chOwner.api.get(`/api/channels/${c.id}`)).body.stats.messageCount, 0);
});

// --- paging and order ----------------------------------------------------------------------------------

test('list: newest first; limit defaults to 50 and is capped at 100; offset pages without overlap; 400 for bad values', async () => {
  const c = await makeChannel(chOwner, { name: 'Paging', workspaceId: ws.id });
  for (let i = 1; i <= 130; i++) await post(chOwner, c.id, `m${i}`);
  const first = await messages(alice, c.id);
  assert.is(first.length, 50);
  assert.is(first[0].content, 'm130');
  assert.is(first[49].content, 'm81');
  assert.is((await messages(alice, c.id, '?limit=500')).length, 100, 'limit is capped at 100');
  const page2 = await messages(alice, c.id, '?limit=50&offset=50');
  assert.equal(page2.map((m) => m.content), Array.from({ length: 50 }, (_, i) => `m${80 - i}`));
  const tail = await messages(alice, c.id, '?limit=50&offset=100');
  assert.equal(tail.map((m) => m.content), Array.from({ length: 30 }, (_, i) => `m${30 - i}`));
  assert.equal(await messages(alice, c.id, '?offset=1000'), []);
  isError(await alice.api.get(`/api/channels/${c.id}/messages?limit=0`), 400, 'validation_failed');
  isError(await alice.api.get(`/api/channels/${c.id}/messages?limit=ten`), 400, 'validation_failed');
  isError(await alice.api.get(`/api/channels/${c.id}/messages?offset=-1`), 400, 'validation_failed');
  assert.is((await alice.api.get(`/api/channels/${c.id}`)).body.stats.messageCount, 130);
});

test('total order: concurrent posts are all stored, each in one place of the order', async () => {
  const c = await makeChannel(chOwner, { name: 'Concurrent', workspaceId: ws.id });
  await addMember(chOwner, c.id, alice.user.did!);
  await addMember(chOwner, c.id, bob.user.did!);
  const posted = await Promise.all(
    Array.from({ length: 60 }, (_, i) => post(i % 3 === 0 ? chOwner : i % 3 === 1 ? alice : bob, c.id, `c${i}`)),
  );
  const listed = await messages(chOwner, c.id, '?limit=100');
  assert.is(listed.length, 60);
  assert.equal(new Set(listed.map((m) => m.id)).size, 60);
  assert.equal(new Set(listed.map((m) => m.content)), new Set(posted.map((m) => m.content)));
  const seqs = (await s.ctx.c.channelMessages.find({ channelId: c.id }, { sort: { seq: 1 } })).map((m) => m.seq);
  assert.equal(seqs, Array.from({ length: 60 }, (_, i) => i + 1), 'sequence numbers 1..60, no gap, no repeat');
  for (let i = 1; i < listed.length; i++) assert.ok(listed[i - 1].createdAt >= listed[i].createdAt, 'newest first');
});

test('total order: numbering continues after a restart, and after a post stored by someone else', async () => {
  const c = await makeChannel(chOwner, { name: 'Durable', workspaceId: ws.id });
  await post(chOwner, c.id, 'one');
  await post(chOwner, c.id, 'two');
  s = await s.restart();
  for (const u of [owner, chOwner, moderator, alice, bob]) u.api = client(s.url, u.token);
  await post(chOwner, c.id, 'three');
  // A post stored behind the writer's back (another process on the same store).
  await s.ctx.c.channelMessages.insertOne({
    _id: 'ahead-of-snapshot',
    channelId: c.id,
    seq: 4,
    threadId: null,
    authorDid: chOwner.user.did!,
    authorType: 'user',
    content: 'four',
    metadata: '{}',
    reactions: {},
    editedAt: null,
    deletedAt: null,
    createdAt: new Date().toISOString(),
    viaBridgeId: null,
  });
  await post(chOwner, c.id, 'five');
  const docs = await s.ctx.c.channelMessages.find({ channelId: c.id }, { sort: { seq: 1 } });
  assert.equal(docs.map((d) => [d.seq, d.content]), [[1, 'one'], [2, 'two'], [3, 'three'], [4, 'four'], [5, 'five']]);
  const inspected = await s.ctx.actors.inspect(CHANNEL_ACTOR_KIND, c.id);
  assert.equal(inspected?.context, { channelId: c.id }, 'the actor context is only the channel id');
  assert.is(inspected?.state, 'open');
});

// --- threads --------------------------------------------------------------------------------------------

test('threads: replies carry threadId; the channel list shows top-level messages, ?threadId the replies', async () => {
  const c = await makeChannel(chOwner, { name: 'Threads', workspaceId: ws.id });
  await addMember(chOwner, c.id, alice.user.did!);
  const root = await post(chOwner, c.id, 'root');
  const other = await post(chOwner, c.id, 'another root');
  const r1 = await post(alice, c.id, 'reply 1', { threadId: root.id });
  const r2 = await post(chOwner, c.id, 'reply 2', { threadId: root.id });
  await post(alice, c.id, 'reply elsewhere', { threadId: other.id });
  assert.is(r1.threadId, root.id);
  assert.equal((await messages(alice, c.id)).map((m) => m.content), ['another root', 'root']);
  assert.equal((await messages(alice, c.id, `?threadId=${root.id}`)).map((m) => m.id), [r2.id, r1.id]);
  assert.equal((await messages(alice, c.id, `?threadId=${root.id}&limit=1&offset=1`)).map((m) => m.id), [r1.id]);
  isError(await alice.api.get(`/api/channels/${c.id}/messages?threadId=missing`), 400, 'unknown_thread');
  assert.is((await alice.api.get(`/api/channels/${c.id}`)).body.stats.messageCount, 5, 'replies count as messages');
});

// --- reactions ------------------------------------------------------------------------------------------

test("reactions: add and remove one's own; the message comes back with emoji -> DIDs", async () => {
  const m = await post(alice, ch.id, 'react to me');
  const path = `/api/channels/${ch.id}/messages/${m.id}/reactions`;
  const r1 = await alice.api.post(path, { emoji: '👍', add: true });
  assert.is(r1.status, 200, r1.text);
  assert.equal(Object.keys(r1.body), ['message']);
  assert.equal(r1.body.message.reactions, { '👍': [alice.user.did] });
  await bob.api.post(path, { emoji: '👍' });
  const r3 = await bob.api.post(path, { emoji: ':tada:', add: true });
  assert.equal(r3.body.message.reactions, { '👍': [alice.user.did, bob.user.did], ':tada:': [bob.user.did] });
  assert.equal((await alice.api.post(path, { emoji: '👍', add: true })).body.message.reactions['👍'], [alice.user.did, bob.user.did], 'adding twice changes nothing');
  const r4 = await alice.api.post(path, { emoji: '👍', add: false });
  assert.equal(r4.body.message.reactions, { '👍': [bob.user.did], ':tada:': [bob.user.did] });
  const r5 = await bob.api.post(path, { emoji: ':tada:', add: false });
  assert.equal(r5.body.message.reactions, { '👍': [bob.user.did] }, 'an emoji nobody uses any more disappears');
  assert.equal((await alice.api.post(path, { emoji: '🚀', add: false })).body.message.reactions, { '👍': [bob.user.did] }, 'removing a reaction one never made changes nothing');
  const [listed] = (await messages(alice, ch.id, '?limit=50')).filter((x) => x.id === m.id);
  assert.equal(listed.reactions, { '👍': [bob.user.did] });
});

test('reactions: members only (403); 404 for an unknown message; 400 for a bad emoji', async () => {
  const m = await post(alice, ch.id, 'no reactions from outside');
  const outsider = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  const path = `/api/channels/${ch.id}/messages/${m.id}/reactions`;
  isError(await outsider.api.post(path, { emoji: '👍' }), 403, 'not_a_member');
  isError(await alice.api.post(`/api/channels/${ch.id}/messages/missing/reactions`, { emoji: '👍' }), 404, 'not_found');
  for (const emoji of ['', 'a.b', '$where', '__proto__', 'two words', 'x'.repeat(65)]) {
    isError(await alice.api.post(path, { emoji }), 400, 'validation_failed');
  }
  isError(await alice.api.post(path, { emoji: '👍', add: 'yes' }), 400, 'validation_failed');
  assert.equal((await messages(alice, ch.id, '?limit=1'))[0].reactions, {});
});

// --- edit and delete ------------------------------------------------------------------------------------

test("edit: only one's own message; editedAt set; 403 for others, 404 for unknown", async () => {
  const m = await post(alice, ch.id, 'tyop');
  const path = `/api/channels/${ch.id}/messages/${m.id}`;
  isError(await bob.api.patch(path, { content: 'hijack' }), 403, 'not_author');
  isError(await chOwner.api.patch(path, { content: 'owner edit' }), 403, 'not_author');
  isError(await alice.api.patch(path, { content: '  ' }), 400, 'validation_failed');
  const r = await alice.api.patch(path, { content: 'typo' });
  assert.is(r.status, 200, r.text);
  assert.is(r.body.message.content, 'typo');
  assert.ok(r.body.message.editedAt >= r.body.message.createdAt);
  isError(await alice.api.patch(`/api/channels/${ch.id}/messages/missing`, { content: 'x' }), 404, 'not_found');
});

test('delete: the author, a channel owner or moderator, or a global admin; the message stays as a tombstone', async () => {
  const mine = await post(alice, ch.id, 'delete me', { metadata: { k: 1 } });
  await bob.api.post(`/api/channels/${ch.id}/messages/${mine.id}/reactions`, { emoji: '👀' });
  const before = (await alice.api.get(`/api/channels/${ch.id}`)).body.stats.messageCount;
  isError(await bob.api.del(`/api/channels/${ch.id}/messages/${mine.id}`), 403, 'not_author');
  const r = await alice.api.del(`/api/channels/${ch.id}/messages/${mine.id}`);
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { success: true });
  const [tomb] = (await messages(alice, ch.id, '?limit=100')).filter((x) => x.id === mine.id);
  assert.is(tomb.content, '');
  assert.equal(tomb.metadata, {});
  assert.equal(tomb.reactions, {});
  assert.ok(tomb.deletedAt);
  assert.is((await alice.api.get(`/api/channels/${ch.id}`)).body.stats.messageCount, before - 1);
  isError(await alice.api.del(`/api/channels/${ch.id}/messages/${mine.id}`), 404, 'not_found');
  isError(await alice.api.patch(`/api/channels/${ch.id}/messages/${mine.id}`, { content: 'back' }), 404, 'not_found');
  isError(await bob.api.post(`/api/channels/${ch.id}/messages/${mine.id}/reactions`, { emoji: '👀' }), 404, 'not_found');
  const b1 = await post(bob, ch.id, 'moderated');
  const b2 = await post(bob, ch.id, 'owned');
  const b3 = await post(bob, ch.id, 'admined');
  assert.is((await moderator.api.del(`/api/channels/${ch.id}/messages/${b1.id}`)).status, 200);
  assert.is((await chOwner.api.del(`/api/channels/${ch.id}/messages/${b2.id}`)).status, 200);
  assert.is((await owner.api.del(`/api/channels/${ch.id}/messages/${b3.id}`)).status, 200);
});

// --- @mentions (metadata) and the agent reply endpoint ---------------------------------------------------

test('mentions: @names of agent members are recorded in metadata.mentions (case-insensitive, names with spaces); others are not', async () => {
  const c = await makeChannel(chOwner, { name: 'Mentions', workspaceId: ws.id });
  const helper = await sessionAgent(s, 'Helper Bot', ws.id);
  const ops = await sessionAgent(s, 'ops', ws.id);
  const stranger = await sessionAgent(s, 'stranger', ws.id);
  await addMember(chOwner, c.id, helper.did, 'agent');
  await addMember(chOwner, c.id, ops.did, 'agent');
  const m1 = await post(chOwner, c.id, 'hey @helper bot and @OPS, not @stranger', { metadata: { mentions: ['forged'], keep: true } });
  assert.equal(m1.metadata, { keep: true, mentions: ['Helper Bot', 'ops'] });
  const m2 = await post(chOwner, c.id, 'mail me at someone@ops.example or @opsy', { metadata: { mentions: ['forged'] } });
  assert.equal(m2.metadata, {}, 'no mention: none recorded, and a client cannot forge them');
  const m3 = await post(chOwner, c.id, `by DID: @${ops.did}`);
  assert.equal(m3.metadata.mentions, ['ops']);
  assert.ok(stranger);
});

test('findMentions: boundaries, longest name first, each agent once', () => {
  const agents = [
    { did: 'did:key:a', name: 'ops' },
    { did: 'did:key:b', name: 'ops bot' },
    { did: 'did:key:c', name: 'Zoë' },
  ];
  assert.equal(findMentions('@ops bot, then @ops again and @ops', agents).map((a) => a.name), ['ops bot', 'ops']);
  assert.equal(findMentions('(@zoë)', agents).map((a) => a.name), ['Zoë']);
  assert.equal(findMentions('@ops-team @opsbot x@ops', agents), []);
  assert.equal(findMentions('no at sign', agents), []);
});

test('agent-response: for agent members with their session; authorType agent; people and non-members are refused', async () => {
  const c = await makeChannel(chOwner, { name: 'Agent Replies', workspaceId: ws.id });
  await addMember(chOwner, c.id, alice.user.did!);
  const bot = await sessionAgent(s, 'replier', ws.id);
  const outsiderBot = await sessionAgent(s, 'outsider-bot');
  await addMember(chOwner, c.id, bot.did, 'agent');
  const q = await post(alice, c.id, '@replier what time is it?');
  const r = await bot.api.post(`/api/channels/${c.id}/messages/agent-response`, { content: 'noon', threadId: q.id });
  assert.is(r.status, 201, r.text);
  assert.equal(Object.keys(r.body.message).sort(), MESSAGE_KEYS);
  assert.is(r.body.message.authorType, 'agent');
  assert.is(r.body.message.authorDid, bot.did);
  assert.is(r.body.message.threadId, q.id);
  assert.equal((await messages(alice, c.id, `?threadId=${q.id}`)).map((m) => m.content), ['noon']);
  isError(await alice.api.post(`/api/channels/${c.id}/messages/agent-response`, { content: 'I am a bot' }), 403, 'not_an_agent');
  await s.ctx.c.workspaceAgents.insertOne({ _id: `wa-${outsiderBot.did}`, workspaceId: ws.id, agentDid: outsiderBot.did, isPrimary: true, joinedAt: new Date().toISOString() });
  isError(await outsiderBot.api.post(`/api/channels/${c.id}/messages/agent-response`, { content: 'x' }), 403, 'not_a_member');
  isError(await bot.api.post(`/api/channels/${c.id}/messages/agent-response`, { content: '' }), 400, 'validation_failed');
  isError(await bot.api.post(`/api/channels/${c.id}/messages/agent-response`, { content: 'x', threadId: 'nope' }), 400, 'unknown_thread');
  // An agent posting through the plain endpoint is an agent author too.
  const plain = await bot.api.post(`/api/channels/${c.id}/messages`, { content: 'plain' });
  assert.is(plain.body.message.authorType, 'agent');
});

test.run();
