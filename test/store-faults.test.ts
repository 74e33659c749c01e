/**
 * What a failing store does to a running server: a store call that fails in the middle of
 * authenticating a feed socket, of the channel writer's recovery, or of a write too large for the
 * store. The server keeps running, answers the request that met the fault, and serves the next
 * one. Every fault is injected through test/fault-store.ts under a real server; the suite runs on
 * the embedded store and on MongoStore through the MongoDB stand-in (there also with an election and
 * an outage the stand-in injects under the official driver), or on MONGODB_URI's server.
 */
import { suite } from 'uvu';
import { assign, setup } from 'xstate';
import * as assert from 'uvu/assert';
import { DocumentTooLargeError, DuplicateKeyError, MAX_DOCUMENT_BYTES } from '../src/store/types.js';
import type { SnapshotDoc } from '../src/actors/host.js';
import { waitFor, type TestServer } from './helpers.js';
import { FaultInjector } from './fault-store.js';
import { backend, standin, storeKind, type Backend } from './store-backend.js';
import type { TestUser } from './fixtures.js';
import { FeedClient, makeChannel, makeWorkspace } from './channels-helpers.js';
import { isError } from './people-helpers.js';
import { fleet, startWithOwner } from './fleet-helpers.js';

const test = suite(`store faults under a running server (${storeKind})`);
const faults = new FaultInjector();
let store: Backend;
let s: TestServer;
let owner: TestUser;

/** `p`, or a failure naming `what` if it is not settled within a generous bound (a hang, not a speed). */
function answered<T>(p: Promise<T>, what: string, ms = 15_000): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    p.then(
      (v) => (clearTimeout(t), resolve(v)),
      (e: unknown) => (clearTimeout(t), reject(e)),
    );
  });
}

/** Opens a feed socket, sends the auth frame, and collects frames until the server closes it. */
async function feedAuthUntilClose(url: string, token: string): Promise<{ frames: any[]; code: number }> {
  const c = new FeedClient(url);
  await c.open();
  c.send({ type: 'auth', token });
  const { code } = await c.waitClosed(15_000);
  return { frames: c.frames, code };
}

test.before(async () => {
  store = await backend();
  ({ s, owner } = await startWithOwner({ BODY_LIMIT_BYTES: String(32 * 1024 * 1024), ...store.env }, { wrapStore: faults.wrap }));
});

test.after.each(() => {
  faults.clear();
});

test.after(async () => {
  await s?.stop(true);
  await store?.drop();
});

test('a store error while the feed authenticates: an error frame and close 1011, the server lives, and the next authentication works', async () => {
  faults.add({ collection: 'users', op: 'findById', mode: 'fail', when: (args) => args[0] === owner.user._id });
  const { frames, code } = await answered(feedAuthUntilClose(s.url, owner.token), 'the feed socket');
  assert.equal(faults.injected, ['users.findById fail']);
  assert.equal(frames, [{ type: 'error', code: 'unavailable', message: 'the server could not answer; try again' }]);
  assert.is(code, 1011, 'closed as a server fault: the client reconnects');
  // The same token on a new socket: the store answers again.
  const again = await answered(FeedClient.connect(s.url, owner.token), 'the second feed socket');
  again.close();
  const health = await s.ctx.c.users.findById(owner.user._id);
  assert.is(health?._id, owner.user._id);
});

test('a store error after a feed socket is authenticated: an error frame, and the socket stays open for the next frame', async () => {
  const f = await FeedClient.connect(s.url, owner.token);
  const ws = await makeWorkspace(owner, `Feed faults ${Date.now()}`);
  const ch = await makeChannel(owner, { name: 'feed-fault', workspaceId: ws.id });
  // The channel check reads the channel; make the whole subscription handler fail once.
  const feed = fleet(s).feed;
  const realAccess = feed.channelAccess!;
  let calls = 0;
  feed.channelAccess = async (user, channelId) => {
    if (calls++ === 0) throw new Error('injected: the channel check failed');
    return realAccess(user, channelId);
  };
  try {
    f.send({ type: 'subscribe', channelId: ch.id });
    assert.equal(await f.next((x) => x.type === 'error'), { type: 'error', code: 'unavailable', message: 'the server could not answer; try again' });
    assert.equal(await f.subscribe(ch.id), { type: 'subscribed', channelId: ch.id });
  } finally {
    feed.channelAccess = realAccess;
    f.close();
  }
});

test("a store error in the channel writer's recovery after a collision: the post gets 503, later posts are stored in order", async () => {
  const ws = await makeWorkspace(owner, `Writer faults ${Date.now()}`);
  const ch = await makeChannel(owner, { name: 'writer-fault', workspaceId: ws.id });
  const first = await owner.api.post(`/api/channels/${ch.id}/messages`, { content: 'first' });
  assert.is(first.status, 201, first.text);
  // The batch insert collides, the one-by-one insert collides, and the read that decides whether
  // the message was stored after all fails.
  const duplicate = () => new DuplicateKeyError('channel_messages', 'channel_message_seq_unique');
  faults.add({ collection: 'channel_messages', op: 'insertMany', mode: 'fail', error: duplicate });
  faults.add({ collection: 'channel_messages', op: 'insertOne', mode: 'fail', error: duplicate });
  faults.add({ collection: 'channel_messages', op: 'findById', mode: 'fail' });
  const failed = await answered(owner.api.post(`/api/channels/${ch.id}/messages`, { content: 'lost' }), 'the post that met the fault');
  isError(failed, 503, 'store_unavailable');
  assert.equal(faults.injected.slice(-3), ['channel_messages.insertMany fail', 'channel_messages.insertOne fail', 'channel_messages.findById fail']);
  // The channel's writer goes on.
  const third = await answered(owner.api.post(`/api/channels/${ch.id}/messages`, { content: 'third' }), 'the post after the fault');
  assert.is(third.status, 201, third.text);
  const list = await owner.api.get(`/api/channels/${ch.id}/messages?limit=10`);
  assert.is(list.status, 200, list.text);
  assert.equal(
    list.body.messages.map((m: { content: string }) => m.content),
    ['third', 'first'],
  );
});

test('a record too large for the store: 413 in the error shape, nothing stored, and the server goes on', async () => {
  const ws = await makeWorkspace(owner, `Large ${Date.now()}`);
  const definition = { steps: [{ id: 'a', name: 'a', action: 'delay', params: { ms: 1, blob: 'x'.repeat(MAX_DOCUMENT_BYTES) } }] };
  const r = await owner.api.post('/api/workflows', { name: 'too-large', workspaceId: ws.id, definition });
  isError(r, 413, 'payload_too_large');
  assert.match(r.body.error.message, '16 MiB');
  const list = await owner.api.get(`/api/workflows?workspaceId=${ws.id}`);
  assert.is(list.status, 200, list.text);
  assert.equal(list.body.workflows, []);
  const ok = await owner.api.post('/api/workflows', { name: 'small', workspaceId: ws.id, definition: { steps: [{ id: 'a', name: 'a', action: 'delay', params: { ms: 1 } }] } });
  assert.is(ok.status, 201, ok.text);
});

// An actor kind of the test's own, whose context holds whatever it is sent.
const blob = setup({
  types: { context: {} as { data: string }, events: {} as { type: 'SET'; data: string } },
}).createMachine({
  id: 'blob',
  context: { data: '' },
  on: { SET: { actions: assign({ data: ({ event }) => event.data }) } },
});

test('a snapshot too large for the store fails alone: the rest of its batch is written, it is reported, and not retried until its actor changes', async () => {
  const host = s.ctx.actors;
  host.define('test-blob', { machine: blob });
  const snapshots = s.ctx.store.collection<SnapshotDoc>('actor_snapshots');
  const stored = async (id: string) => {
    const doc = await snapshots.findById(`test-blob:${id}`);
    return doc ? (JSON.parse(doc.snapshot) as { context: { data: string } }).context.data : undefined;
  };
  const ids = ['a', 'b', 'c'];
  for (const id of ids) (await host.get('test-blob', id)).send({ type: 'SET', data: `${id}0` });
  await host.flush();
  for (const id of ids) assert.is(await stored(id), `${id}0`);

  const before = { ...host.stats };
  const huge = 'x'.repeat(MAX_DOCUMENT_BYTES);
  // One round writes all three: a and c change beside b's oversized snapshot.
  for (const id of ids) host.getLive('test-blob', id)!.send({ type: 'SET', data: id === 'b' ? huge : `${id}1` });
  const waiting = host.persist('test-blob', 'b').then(
    () => null,
    (err: unknown) => err,
  );
  await host.flush();
  assert.instance(await waiting, DocumentTooLargeError, 'who waits for the write is told');
  assert.is(await stored('a'), 'a1');
  assert.is(await stored('c'), 'c1');
  assert.is(await stored('b'), 'b0', 'the store keeps the last snapshot it took');
  assert.is(host.stats.tooLarge - before.tooLarge, 1);
  assert.is(host.stats.writes - before.writes, 2);
  assert.is(host.pendingWrites(), 0, 'nothing is left to retry');

  // Nothing more is attempted for it until it changes...
  const calls = host.stats.writeBatches + host.stats.failures;
  await host.flush();
  assert.is(host.stats.writeBatches + host.stats.failures, calls);
  // ...and then its new snapshot is written.
  host.getLive('test-blob', 'b')!.send({ type: 'SET', data: 'b2' });
  await host.flush();
  await waitFor(async () => (await stored('b')) === 'b2');
  for (const id of ids) await host.remove('test-blob', id);
});

if (storeKind === 'standin') {
  test('through the driver: writes ride through an election and a store down for a moment, and the server keeps serving', async () => {
    const server = await standin();
    const ws = await makeWorkspace(owner, `Election ${Date.now()}`);
    const ch = await makeChannel(owner, { name: 'election', workspaceId: ws.id });
    // Every write command refused once by a primary that steps down: the driver retries each.
    const fired = server.faults.fired['not-writable-primary'];
    server.faults.inject({ kind: 'not-writable-primary', commands: ['insert', 'update', 'findAndModify'], times: 3 });
    const during = await answered(owner.api.post(`/api/channels/${ch.id}/messages`, { content: 'during the election' }), 'a post during the election');
    assert.is(during.status, 201, during.text);
    await waitFor(() => server.faults.fired['not-writable-primary'] > fired, 10_000);
    // The store down: a post made meanwhile waits, and is stored once it is back.
    await server.down();
    let settled = false;
    const pending = owner.api.post(`/api/channels/${ch.id}/messages`, { content: 'while down' });
    void pending.then(() => (settled = true));
    await waitFor(async () => (await owner.api.get('/readyz')).status === 503, 20_000);
    assert.not.ok(settled, 'the post waits for the store');
    await server.up();
    const later = await answered(pending, 'a post while the store was down');
    assert.is(later.status, 201, later.text);
    const listed = await owner.api.get(`/api/channels/${ch.id}/messages?limit=10`);
    assert.equal((listed.body.messages as Array<{ content: string }>).map((m) => m.content).reverse(), ['during the election', 'while down']);
  });
}

test.run();
