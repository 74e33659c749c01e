/**
 * The people's live feed (/ws/feed, DESIGN §4b) for channels: subscribe, and see new messages,
 * edits, reactions and deletions as they happen.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { addMember, enc, FeedClient, makeChannel, makeWorkspace, post, startWithOwner } from './channels-helpers.js';

const test = suite('channel live feed');
let s: TestServer;
let owner: TestUser;
let alice: TestUser;
let bob: TestUser;
let carol: TestUser; // in the workspace, in no channel
let ws: { id: string; slug: string };
const clients: FeedClient[] = [];

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  ws = await makeWorkspace(owner, 'Feed');
  alice = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  bob = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  carol = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
});

test.after(async () => {
  for (const c of clients) c.close();
  await s.stop(true);
});

async function feed(u: TestUser): Promise<FeedClient> {
  const c = await FeedClient.connect(s.url, u.token);
  clients.push(c);
  return c;
}

test('a subscribed client sees a post, an edit, a reaction and a deletion, in that order', async () => {
  const ch = await makeChannel(alice, { name: 'Live', workspaceId: ws.id });
  await addMember(alice, ch.id, bob.user.did!);
  const f = await feed(bob);
  assert.equal(await f.subscribe(ch.id), { type: 'subscribed', channelId: ch.id });
  const m = await post(alice, ch.id, 'hello feed');
  const created = await f.next((x) => x.type === 'message.created');
  assert.equal(created, { type: 'message.created', channelId: ch.id, message: m });
  const edited = await alice.api.patch(`/api/channels/${ch.id}/messages/${m.id}`, { content: 'hello feed!' });
  assert.equal(await f.next((x) => x.type === 'message.updated'), { type: 'message.updated', channelId: ch.id, message: edited.body.message });
  const reacted = await bob.api.post(`/api/channels/${ch.id}/messages/${m.id}/reactions`, { emoji: '🎉' });
  assert.equal(await f.next((x) => x.type === 'reaction.updated'), { type: 'reaction.updated', channelId: ch.id, message: reacted.body.message });
  await alice.api.del(`/api/channels/${ch.id}/messages/${m.id}`);
  const deleted = await f.next((x) => x.type === 'message.deleted');
  assert.is(deleted.message.id, m.id);
  assert.ok(deleted.message.deletedAt);
  assert.is(deleted.message.content, '');
});

test('readers of a public channel may subscribe without being members; other channels are not delivered', async () => {
  const pub = await makeChannel(alice, { name: 'Announcements', workspaceId: ws.id });
  const elsewhere = await makeChannel(alice, { name: 'Elsewhere', workspaceId: ws.id });
  const f = await feed(carol);
  assert.is((await f.subscribe(pub.id)).type, 'subscribed');
  await post(alice, elsewhere.id, 'not for carol');
  await post(alice, pub.id, 'for everyone');
  const got = await f.next((x) => x.type === 'message.created');
  assert.is(got.message.content, 'for everyone');
  assert.ok(!f.frames.some((x) => x.type === 'message.created'), 'nothing from the channel carol did not subscribe to');
});

test('a private channel the client cannot see is refused exactly like one that does not exist', async () => {
  const priv = await makeChannel(alice, { name: 'Hidden', workspaceId: ws.id, isPublic: false });
  const f = await feed(carol);
  const refused = await f.subscribe(priv.id);
  const unknown = await f.subscribe('no-such-channel');
  assert.is(refused.type, 'error');
  assert.is(refused.code, unknown.code);
  assert.is(refused.message.replace(priv.id, 'X'), unknown.message.replace('no-such-channel', 'X'));
  await post(alice, priv.id, 'secret');
  await post(alice, priv.id, 'secret 2');
  const admin = await feed(owner);
  assert.is((await admin.subscribe(priv.id)).type, 'subscribed', 'a global admin may subscribe to any channel');
  await post(alice, priv.id, 'seen by the admin');
  assert.is((await admin.next((x) => x.type === 'message.created')).message.content, 'seen by the admin');
  assert.ok(!f.frames.some((x) => x.type === 'message.created'));
});

test('unsubscribe stops the events', async () => {
  const ch = await makeChannel(alice, { name: 'Quiet', workspaceId: ws.id });
  const f = await feed(alice);
  await f.subscribe(ch.id);
  f.send({ type: 'unsubscribe', channelId: ch.id });
  await f.next((x) => x.type === 'unsubscribed' && x.channelId === ch.id);
  await post(alice, ch.id, 'nobody listens');
  // A marker on a channel still subscribed proves the first event would have arrived by now.
  const marker = await makeChannel(alice, { name: 'Marker', workspaceId: ws.id });
  await f.subscribe(marker.id);
  await post(alice, marker.id, 'marker');
  const got = await f.next((x) => x.type === 'message.created');
  assert.is(got.message.content, 'marker');
});

test('a member removed from a private channel stops receiving its events', async () => {
  const ch = await makeChannel(alice, { name: 'Revoked', workspaceId: ws.id, isPublic: false });
  await addMember(alice, ch.id, bob.user.did!);
  const f = await feed(bob);
  await f.subscribe(ch.id);
  await post(alice, ch.id, 'while a member');
  assert.is((await f.next((x) => x.type === 'message.created')).message.content, 'while a member');
  await alice.api.del(`/api/channels/${ch.id}/members/${enc(bob.user.did!)}`);
  const ended = await f.next((x) => x.type === 'unsubscribed' && x.channelId === ch.id);
  assert.is(ended.reason, 'access_lost');
  await post(alice, ch.id, 'after the removal');
  const marker = await makeChannel(alice, { name: 'Marker 2', workspaceId: ws.id });
  await f.subscribe(marker.id);
  await post(alice, marker.id, 'marker');
  assert.is((await f.next((x) => x.type === 'message.created')).message.content, 'marker');
});

test('a person removed from the workspace stops receiving its public channels', async () => {
  const dave = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  const ch = await makeChannel(alice, { name: 'Open Hall', workspaceId: ws.id });
  const f = await feed(dave);
  assert.is((await f.subscribe(ch.id)).type, 'subscribed', 'a workspace member reads a public channel');
  const r = await owner.api.del(`/api/workspaces/${ws.id}/members/${dave.user._id}`);
  assert.is(r.status, 200, r.text);
  const ended = await f.next((x) => x.type === 'unsubscribed' && x.channelId === ch.id);
  assert.is(ended.reason, 'access_lost');
  // A marker subscription proves later posts to the hall would have arrived by now.
  const global = await makeChannel(owner, { name: 'Everyone Hall' });
  assert.is((await f.subscribe(global.id)).type, 'subscribed');
  await post(alice, ch.id, 'not for dave');
  await post(owner, global.id, 'marker');
  assert.is((await f.next((x) => x.type === 'message.created')).message.content, 'marker');
});

test.run();
