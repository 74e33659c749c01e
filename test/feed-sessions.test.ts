/**
 * A live-feed socket lives as long as the session that opened it (docs/feed.md, "A socket and its
 * session"): logout, a session ended from the sessions list, the session's expiry and an ended
 * session met at the next subscription all close it with 4401; and one person holds at most
 * FEED_SOCKETS_PER_PERSON sockets (4413 past it).
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { TestServer } from './helpers.js';
import { client } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { FeedClient, makeChannel, post, startWithOwner } from './channels-helpers.js';

const test = suite('feed sockets and their sessions');
let s: TestServer;
let owner: TestUser;
let hall: { id: string };
const sockets: FeedClient[] = [];
const CAP = 3;

test.before(async () => {
  ({ s, owner } = await startWithOwner({ FEED_SOCKETS_PER_PERSON: String(CAP) }));
  hall = await makeChannel(owner, { name: 'Hall' });
});

test.after(async () => {
  for (const f of sockets) f.close();
  await s.stop(true);
});

async function feed(token: string): Promise<FeedClient> {
  const f = await FeedClient.connect(s.url, token);
  sockets.push(f);
  return f;
}

/** A second session of the same person, as a second device's login would make. */
async function secondSession(u: TestUser): Promise<{ token: string; id: string; api: ReturnType<typeof client> }> {
  const { token, session } = await s.ctx.sessions.create('user', u.user._id);
  return { token, id: session._id, api: client(s.url, token) };
}

test('logout closes the feed socket of that session with 4401, and only that one', async () => {
  const p = await makeUser(s);
  const other = await secondSession(p);
  const f = await feed(p.token);
  const g = await feed(other.token);
  assert.is((await f.subscribe(hall.id)).type, 'subscribed');
  assert.is((await p.api.post('/api/auth/logout', {})).status, 200);
  const closed = await f.waitClosed();
  assert.is(closed.code, 4401);
  assert.match(closed.reason, /logged out/);
  // The other session's socket still works.
  assert.is((await g.subscribe(hall.id)).type, 'subscribed');
  await post(owner, hall.id, 'still here');
  assert.is((await g.next('message.created')).message.content, 'still here');
});

test('a session ended from the sessions list closes its feed socket with 4401', async () => {
  const p = await makeUser(s);
  const phone = await secondSession(p);
  const f = await feed(phone.token);
  const r = await p.api.del(`/api/me/sessions/${phone.id}`);
  assert.is(r.status, 200, r.text);
  const closed = await f.waitClosed();
  assert.is(closed.code, 4401);
  assert.match(closed.reason, /ended by its owner/);
});

test('a session that expires closes its feed socket with 4401 when it is due', async () => {
  const p = await makeUser(s);
  const short = await secondSession(p);
  // A session about to expire (the shortest SESSION_TTL_HOURS is an hour): its expiry, moved close.
  await s.ctx.c.sessions.updateOne({ _id: short.id }, { $set: { expiresAt: new Date(Date.now() + 1500).toISOString() } });
  const f = await feed(short.token);
  assert.is((await f.subscribe(hall.id)).type, 'subscribed');
  const closed = await f.waitClosed(10_000);
  assert.is(closed.code, 4401);
  assert.match(closed.reason, /expired/);
});

test('a session that ended without a word (another node, missed news) is caught at the next subscription', async () => {
  const p = await makeUser(s);
  const quiet = await secondSession(p);
  const f = await feed(quiet.token);
  // Gone from the store, with no notice to this node.
  await s.ctx.c.sessions.deleteOne({ _id: quiet.id });
  f.send({ type: 'subscribe', channelId: hall.id });
  const closed = await f.waitClosed();
  assert.is(closed.code, 4401);
  assert.not.ok(f.frames.some((x) => x.type === 'subscribed'), 'no subscription was made');
});

test(`one person holds at most FEED_SOCKETS_PER_PERSON (${CAP}) feed sockets; one more closes with 4413`, async () => {
  const p = await makeUser(s);
  const open: FeedClient[] = [];
  for (let i = 0; i < CAP; i++) open.push(await feed(p.token));
  const extra = new FeedClient(s.url);
  sockets.push(extra);
  await extra.open();
  extra.send({ type: 'auth', token: p.token });
  const closed = await extra.waitClosed();
  assert.is(closed.code, 4413);
  assert.not.ok(extra.frames.some((x) => x.type === 'welcome'));
  // Someone else is not affected, and a socket closed makes room.
  const q = await makeUser(s);
  await feed(q.token);
  open[0]!.close();
  await open[0]!.waitClosed();
  let again: FeedClient | null = null;
  for (let attempt = 0; attempt < 50 && !again; attempt++) {
    // The server may not have seen the close yet: a refused attempt is tried again.
    const f = new FeedClient(s.url);
    sockets.push(f);
    await f.open();
    f.send({ type: 'auth', token: p.token });
    const welcomed = await f.next('welcome').then(
      () => true,
      () => false,
    );
    if (welcomed) again = f;
  }
  assert.ok(again, 'a socket closed makes room for a new one');
});

test.run();
