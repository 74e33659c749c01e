/**
 * Channel messages when the store fails ambiguously: a batch insert that stores the messages (or
 * some of them) and still reports failure. Each message is published once (answered 201, on the
 * live feed, in the listing) or reported failed (and nowhere), never both. Runs on the embedded store and
 * on MongoStore through the MongoDB stand-in (there also with faults the stand-in injects under
 * the official driver), or on MONGODB_URI's server.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { CHANNEL_ACTOR_KIND } from '../src/actors/channel.js';
import { makeUser, type TestUser } from './fixtures.js';
import { waitFor, type TestServer } from './helpers.js';
import { addMember, FeedClient, makeChannel, makeWorkspace, post, startWithOwner } from './channels-helpers.js';
import { FaultInjector, heldThenPartlyStored } from './fault-store.js';
import { backend, standin, storeKind, type Backend } from './store-backend.js';

const test = suite('channel messages: ambiguous store failures');
let store: Backend;
let faults: FaultInjector;
let s: TestServer;
let alice: TestUser;
let bob: TestUser;
let ws: { id: string };
const feeds: FeedClient[] = [];

test.before(async () => {
  store = await backend();
  faults = new FaultInjector();
  const started = await startWithOwner(store.env, { wrapStore: faults.wrap });
  s = started.s;
  ws = await makeWorkspace(started.owner, 'Faults');
  alice = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  bob = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
});
test.after(async () => {
  for (const f of feeds) f.close();
  await s.stop(true);
  await store.drop();
});
test.after.each(() => faults.clear());

/** A channel of alice's with bob in it, and bob's feed subscribed to it. */
async function channelWithFeed(name: string): Promise<{ id: string; feed: FeedClient }> {
  const ch = await makeChannel(alice, { name, workspaceId: ws.id });
  await addMember(alice, ch.id, bob.user.did!);
  const feed = await FeedClient.connect(s.url, bob.token);
  feeds.push(feed);
  assert.equal(await feed.subscribe(ch.id), { type: 'subscribed', channelId: ch.id });
  return { id: ch.id, feed };
}

/**
 * The ids of the messages published on the feed before a last post, which is made now (events of
 * a channel go out in order, so nothing of what came before is still on its way), and that post's.
 */
async function publishedIds(channelId: string, feed: FeedClient): Promise<{ ids: string[]; last: string }> {
  const last = await post(alice, channelId, 'the last one');
  const ids: string[] = [];
  for (;;) {
    const f = await feed.next((x) => x.type === 'message.created' && x.channelId === channelId);
    if (f.message.id === last.id) return { ids, last: last.id };
    ids.push(f.message.id);
  }
}

/** The ids of a channel's messages, oldest first. */
async function listedIds(channelId: string): Promise<string[]> {
  const r = await alice.api.get(`/api/channels/${channelId}/messages?limit=100`);
  assert.is(r.status, 200);
  return (r.body.messages as Array<{ id: string }>).map((m) => m.id).reverse();
}

test('a message batch that is stored and reports failure is answered 201 and published once', async () => {
  const { id, feed } = await channelWithFeed('Landed');
  faults.add({ collection: 'channel_messages', op: 'insertMany', mode: 'land-then-fail' });
  const r = await alice.api.post(`/api/channels/${id}/messages`, { content: 'stored, though the store said otherwise' });
  assert.equal(faults.injected, ['channel_messages.insertMany land-then-fail']);
  assert.is(r.status, 201, r.text);
  const published = await publishedIds(id, feed);
  assert.equal(published.ids, [r.body.message.id]);
  assert.equal(await listedIds(id), [r.body.message.id, published.last]);
});

test('a batch of which only some messages are stored: those are answered 201 and published once, the others fail and are nowhere', async () => {
  const { id, feed } = await channelWithFeed('Partly');
  await post(alice, id, 'first'); // the channel's actor is running
  await publishedIds(id, feed);
  const before = await listedIds(id);
  // The first post's insert is held until the other eight are handed to the channel's writer; they
  // are then one batch, of which the first four are stored before the call fails.
  const { calls, release, restore } = heldThenPartlyStored(s.ctx.c.channelMessages, 4, 'injected: four messages stored, then the call fails');
  const actor = (await s.ctx.actors.get(CHANNEL_ACTOR_KIND, id)) as unknown as { send: (e: { type: string }) => void };
  const send = actor.send.bind(actor);
  let posts = 0;
  actor.send = (e) => {
    send(e);
    if (e.type === 'POST') posts++;
  };
  let answers;
  try {
    const pending = Array.from({ length: 9 }, (_, i) => alice.api.post(`/api/channels/${id}/messages`, { content: `message ${i}` }));
    await waitFor(() => posts === 9);
    release();
    answers = await Promise.all(pending);
  } finally {
    restore();
    actor.send = send;
  }
  assert.equal(calls, [1, 8]);
  const stored = answers.filter((r) => r.status === 201).map((r) => r.body.message.id as string);
  const failed = answers.filter((r) => r.status !== 201);
  assert.is(stored.length, 5, 'the first post and four of the batch');
  assert.is(failed.length, 4);
  for (const r of failed) assert.equal([r.status, r.body.error.code], [503, 'store_unavailable']);
  const published = await publishedIds(id, feed);
  assert.equal(published.ids, stored, 'each stored message published once, no other');
  assert.equal(await listedIds(id), [...before, ...stored, published.last], 'and no failed one stored');
});

test('a failed batch the store cannot tell about is reported failed, published nowhere and not left stored', async () => {
  const { id, feed } = await channelWithFeed('Unknown');
  faults.add({ collection: 'channel_messages', op: 'insertMany', mode: 'land-then-fail' });
  faults.add({ collection: 'channel_messages', op: 'find', mode: 'fail', times: Infinity, when: (args) => JSON.stringify(args[0]).includes('$in') });
  const r = await alice.api.post(`/api/channels/${id}/messages`, { content: 'who knows' });
  assert.equal([r.status, r.body.error.code], [503, 'store_unavailable']);
  assert.ok(faults.injected.filter((f) => f === 'channel_messages.find fail').length >= 1);
  faults.clear();
  const published = await publishedIds(id, feed);
  assert.equal(published.ids, []);
  assert.equal(await listedIds(id), [published.last]);
});

if (storeKind === 'standin') {
  test('through the driver: a message insert cut off after it landed, or refused in an election, is answered 201 and published once', async () => {
    const server = await standin();
    const { id, feed } = await channelWithFeed('Driver faults');
    const posted: string[] = [];
    for (const kind of ['close-after', 'not-writable-primary'] as const) {
      const fired = server.faults.fired[kind];
      server.faults.inject({ kind, commands: ['insert'], collection: 'channel_messages' });
      const r = await alice.api.post(`/api/channels/${id}/messages`, { content: `through ${kind}` });
      assert.is(r.status, 201, `${kind}: ${JSON.stringify(r.body)}`);
      assert.is(server.faults.fired[kind], fired + 1, `${kind} fired`);
      posted.push(r.body.message.id);
    }
    const { ids, last } = await publishedIds(id, feed);
    assert.equal(ids, posted, 'each published once, in order');
    assert.equal(await listedIds(id), [...posted, last], 'each stored once');
  });
}

test.run();
