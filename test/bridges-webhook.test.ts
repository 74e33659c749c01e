/**
 * The generic webhook bridge: signed deliveries in (signature, repeats and the opt-in replay
 * window, direction, body rules) and signed deliveries out to a local HTTP server that verifies
 * them, with retries.
 */
import { createHmac } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { http, sleep, waitFor, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { isError, makeChannel, makeWorkspace, messagesOf, post, startWithOwner } from './channels-helpers.js';
import { StandIn, type Recorded } from './stand-in-server.js';

const test = suite('webhook bridges');
let s: TestServer;
let owner: TestUser;
let alice: TestUser;
let ws: { id: string; slug: string };
let remote: StandIn;

const SECRET = 'whsec-0123456789abcdef0123456789abcdef';

test.before(async () => {
  remote = await StandIn.start();
  // Retries every few milliseconds keep the suite short. The replay window keeps its default (off);
  // the opt-in window has a server of its own below.
  ({ s, owner } = await startWithOwner({ BRIDGE_RETRY_BASE_MS: '20', BRIDGE_DELIVERY_ATTEMPTS: '4' }));
  ws = await makeWorkspace(owner, 'Hooks');
  alice = await makeUser(s, { workspaces: { [ws.id]: 'member' }, name: 'Alice Example' });
});

test.after(async () => {
  await s.stop(true);
  await remote.close();
});

async function channelWithBridge(
  name: string,
  bridge: Record<string, unknown> = {},
  config: Record<string, unknown> = {},
  who: TestUser = alice,
  workspaceId: string = ws.id,
): Promise<{ ch: any; bridge: any }> {
  const ch = await makeChannel(who, { name, workspaceId });
  const r = await who.api.post(`/api/channels/${ch.id}/bridges`, {
    externalService: 'webhook',
    externalChannelId: `ext-${name}`,
    externalChannelName: name,
    externalWorkspaceId: 'platform',
    config: { secret: SECRET, ...config },
    ...bridge,
  });
  assert.is(r.status, 201, r.text);
  return { ch, bridge: r.body.bridge };
}

function deliver(bridgeId: string, raw: string | Buffer, headers: Record<string, string> = {}, server: TestServer = s) {
  return http(server.url, 'POST', `/api/bridges/webhook/${bridgeId}/incoming`, { raw, headers: { 'content-type': 'application/json', ...headers } });
}

const signature = (raw: string | Buffer, secret = SECRET) => `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`;

// --- incoming -------------------------------------------------------------------------------------------

test('incoming: a correctly signed delivery posts {ok: true, messageId}; author defaults to webhook:external; metadata kept', async () => {
  const { ch, bridge } = await channelWithBridge('in-ok');
  const raw = JSON.stringify({ message: 'build #42 passed', metadata: { build: 42, 'a.b': true } });
  const r = await deliver(bridge.id, raw, { 'x-signature': signature(raw) });
  assert.is(r.status, 200, r.text);
  assert.equal(Object.keys(r.body).sort(), ['messageId', 'ok']);
  assert.is(r.body.ok, true);
  const [m] = await messagesOf(alice, ch.id);
  assert.is(m.id, r.body.messageId);
  assert.is(m.content, 'build #42 passed');
  assert.is(m.authorDid, 'webhook:external');
  assert.is(m.authorType, 'user');
  assert.equal(m.metadata, { build: 42, 'a.b': true });
  const raw2 = JSON.stringify({ message: 'deploy done', author: 'ci:deploybot' });
  const r2 = await deliver(bridge.id, raw2, { 'x-signature': signature(raw2).toUpperCase().replace('SHA256=', 'sha256=') });
  assert.is(r2.status, 200, 'the hex digest may be upper case');
  assert.is((await messagesOf(alice, ch.id))[0].authorDid, 'ci:deploybot');
});

test('incoming: the signature is over the raw bytes, not a re-serialisation', async () => {
  const { ch, bridge } = await channelWithBridge('in-raw');
  const raw = '{ "message" :  "spaced out",\n  "metadata": {"z": 1, "a": 2} }';
  const r = await deliver(bridge.id, raw, { 'x-signature': signature(raw) });
  assert.is(r.status, 200, r.text);
  const reserialised = JSON.stringify(JSON.parse(raw));
  isError(await deliver(bridge.id, reserialised, { 'x-signature': signature(raw) }), 401, 'invalid_signature');
  assert.is((await messagesOf(alice, ch.id)).length, 1);
});

test('incoming: 401 for a wrong, malformed or missing signature; nothing is posted', async () => {
  const { ch, bridge } = await channelWithBridge('in-401');
  const raw = JSON.stringify({ message: 'should not land' });
  isError(await deliver(bridge.id, raw, { 'x-signature': signature(raw, 'another-secret') }), 401, 'invalid_signature');
  isError(await deliver(bridge.id, raw, { 'x-signature': signature(raw).replace('sha256=', 'sha1=') }), 401, 'invalid_signature');
  isError(await deliver(bridge.id, raw, { 'x-signature': signature(raw).slice(0, -2) }), 401, 'invalid_signature');
  isError(await deliver(bridge.id, raw, { 'x-signature': 'garbage' }), 401, 'invalid_signature');
  isError(await deliver(bridge.id, raw), 401, 'signature_missing');
  const wrong = await deliver(bridge.id, raw, { 'x-signature': signature(raw, 'another-secret') });
  assert.not.ok(wrong.text.includes(SECRET));
  assert.equal(await messagesOf(alice, ch.id), []);
});

test('incoming: by default a repeated identical signed delivery is posted again (two messages)', async () => {
  const { ch, bridge } = await channelWithBridge('in-repeat');
  const raw = JSON.stringify({ message: 'deploy finished' });
  const first = await deliver(bridge.id, raw, { 'x-signature': signature(raw) });
  const second = await deliver(bridge.id, raw, { 'x-signature': signature(raw) });
  assert.is(first.status, 200, first.text);
  assert.is(second.status, 200, second.text);
  assert.is.not(second.body.messageId, first.body.messageId);
  const messages = await messagesOf(alice, ch.id);
  assert.equal(messages.map((m) => m.content), ['deploy finished', 'deploy finished']);
  assert.equal(messages.map((m) => m.id).sort(), [first.body.messageId, second.body.messageId].sort());
  assert.is(await s.ctx.c.bridgeDeliveries.count({ bridgeId: bridge.id }), 0, 'nothing is recorded while the window is off');
});

test('incoming: 401 for a request with neither Content-Type nor X-Signature; 415 only for a signed one that is not JSON', async () => {
  const { ch, bridge } = await channelWithBridge('in-bare');
  const raw = JSON.stringify({ message: 'no headers at all' });
  const bare = await http(s.url, 'POST', `/api/bridges/webhook/${bridge.id}/incoming`, { raw });
  isError(bare, 401, 'signature_missing');
  const wrong = await http(s.url, 'POST', `/api/bridges/webhook/${bridge.id}/incoming`, { raw, headers: { 'content-type': 'text/plain', 'x-signature': signature(raw, 'another-secret') } });
  isError(wrong, 401, 'invalid_signature');
  const signed = await http(s.url, 'POST', `/api/bridges/webhook/${bridge.id}/incoming`, { raw, headers: { 'x-signature': signature(raw) } });
  isError(signed, 415, 'unsupported_media_type');
  assert.equal(await messagesOf(alice, ch.id), []);
});

test('incoming, opt-in replay window (BRIDGE_REPLAY_WINDOW_SECONDS > 0): a repeat within it is 409, concurrent copies post once, and after it the delivery is accepted again', async () => {
  const { s: own, owner: ownOwner } = await startWithOwner({ BRIDGE_REPLAY_WINDOW_SECONDS: '1' });
  try {
    const w = await makeWorkspace(ownOwner, 'Replays');
    const { ch, bridge } = await channelWithBridge('in-replay', {}, {}, ownOwner, w.id);
    const send = (raw: string) => deliver(bridge.id, raw, { 'x-signature': signature(raw) }, own);
    const count = async () => (await messagesOf(ownOwner, ch.id)).length;
    const raw = JSON.stringify({ message: 'once only', metadata: { deliveryId: 'd-1' } });
    assert.is((await send(raw)).status, 200);
    isError(await send(raw), 409, 'replayed_delivery');
    const other = JSON.stringify({ message: 'once only', metadata: { deliveryId: 'd-2' } });
    assert.is((await send(other)).status, 200, 'a different body is a different delivery');
    assert.is(await count(), 2);
    await sleep(1100); // the one-second window has passed
    assert.is((await send(raw)).status, 200);
    assert.is(await count(), 3);

    const raced = JSON.stringify({ message: 'raced' });
    const answers = await Promise.all(Array.from({ length: 8 }, () => send(raced)));
    assert.equal(answers.map((a) => a.status).sort(), [200, 409, 409, 409, 409, 409, 409, 409]);
    assert.is(await count(), 4);
  } finally {
    await own.stop(true);
  }
});

test('incoming: 403 for a disabled or outgoing-only bridge; 404 for an unknown bridge or one that is not a webhook', async () => {
  const { ch, bridge } = await channelWithBridge('in-403');
  const raw = JSON.stringify({ message: 'knock knock' });
  const sig = { 'x-signature': signature(raw) };
  await alice.api.patch(`/api/channels/${ch.id}/bridges/${bridge.id}`, { isSyncEnabled: false });
  isError(await deliver(bridge.id, raw, sig), 403, 'bridge_disabled');
  await alice.api.patch(`/api/channels/${ch.id}/bridges/${bridge.id}`, { isSyncEnabled: true, syncDirection: 'outgoing' });
  isError(await deliver(bridge.id, raw, sig), 403, 'bridge_outgoing_only');
  isError(await deliver(bridge.id, raw), 401, 'signature_missing');
  await alice.api.patch(`/api/channels/${ch.id}/bridges/${bridge.id}`, { syncDirection: 'incoming' });
  assert.is((await deliver(bridge.id, raw, sig)).status, 200, 'an incoming-only bridge takes deliveries');
  isError(await deliver('no-such-bridge', raw, sig), 404, 'not_found');
  const teams = await alice.api.post(`/api/channels/${ch.id}/bridges`, {
    externalService: 'teams',
    externalChannelId: '19:x@thread',
    externalChannelName: 'T',
    externalWorkspaceId: 'team',
    config: { accessToken: 'tok', tenantId: 't', botId: 'b' },
  });
  isError(await deliver(teams.body.bridge.id, raw, sig), 404, 'not_found');
});

test('incoming: 400 for invalid JSON, a missing or empty message, bad author or metadata; 415 for a signed request without JSON content type', async () => {
  const { ch, bridge } = await channelWithBridge('in-400');
  const send = (raw: string) => deliver(bridge.id, raw, { 'x-signature': signature(raw) });
  isError(await send('{"message": '), 400, 'invalid_json');
  isError(await send('{}'), 400, 'message_required');
  isError(await send('{"message": ""}'), 400, 'message_required');
  isError(await send('{"message": "   "}'), 400, 'message_required');
  isError(await send('{"message": 5}'), 400, 'message_required');
  isError(await send('[1]'), 400, 'invalid_body');
  isError(await send('{"message": "x", "author": 7}'), 400, 'validation_failed');
  isError(await send('{"message": "x", "metadata": [1]}'), 400, 'validation_failed');
  const raw = JSON.stringify({ message: 'text' });
  isError(
    await http(s.url, 'POST', `/api/bridges/webhook/${bridge.id}/incoming`, { raw, headers: { 'content-type': 'text/plain', 'x-signature': signature(raw) } }),
    415,
    'unsupported_media_type',
  );
  assert.is((await deliver(bridge.id, raw, { 'content-type': 'application/json; charset=utf-8', 'x-signature': signature(raw) })).status, 200);
  assert.is((await messagesOf(alice, ch.id)).length, 1);
});

test('incoming: an archived channel refuses the delivery (403), and the same delivery is accepted once it reopens', async () => {
  const { ch, bridge } = await channelWithBridge('in-archived');
  await alice.api.del(`/api/channels/${ch.id}`);
  const raw = JSON.stringify({ message: 'into the archive' });
  isError(await deliver(bridge.id, raw, { 'x-signature': signature(raw) }), 403, 'channel_archived');
  await alice.api.patch(`/api/channels/${ch.id}`, { isArchived: false });
  assert.is((await deliver(bridge.id, raw, { 'x-signature': signature(raw) })).status, 200);
});

// --- outgoing -------------------------------------------------------------------------------------------

function verify(rec: Recorded): boolean {
  return rec.headers['x-signature'] === signature(rec.raw);
}

test('outgoing: each new message is POSTed as signed JSON to outgoingUrl', async () => {
  remote.clear();
  remote.respond = () => ({ status: 200 });
  const { ch, bridge } = await channelWithBridge('out-ok', {}, { outgoingUrl: `${remote.url}/hook` });
  const m = await post(alice, ch.id, 'hello outside', { metadata: { tag: 'x' } });
  const [rec] = await remote.waitFor(1);
  assert.is(rec!.method, 'POST');
  assert.is(rec!.url, '/hook');
  assert.is(rec!.headers['content-type'], 'application/json');
  assert.ok(verify(rec!), 'X-Signature is the HMAC-SHA256 of the raw body under the bridge secret');
  assert.is(rec!.headers['x-steward-attempt'], '1');
  assert.equal(rec!.body, {
    type: 'message.created',
    deliveryId: rec!.headers['x-steward-delivery'],
    bridge: { id: bridge.id, externalChannelId: 'ext-out-ok', externalWorkspaceId: 'platform' },
    channel: { id: ch.id, name: 'out-ok', slug: 'out-ok', workspaceId: ws.id },
    message: {
      id: m.id,
      channelId: ch.id,
      threadId: null,
      authorDid: alice.user.did,
      authorType: 'user',
      authorName: 'Alice Example',
      content: 'hello outside',
      metadata: { tag: 'x' },
      createdAt: m.createdAt,
    },
  });
});

test('outgoing: a failing endpoint is retried with back-off; every attempt carries the same signed body', async () => {
  remote.clear();
  let calls = 0;
  remote.respond = () => (++calls <= 2 ? { status: 503 } : { status: 204 });
  const { ch } = await channelWithBridge('out-retry', {}, { outgoingUrl: `${remote.url}/flaky` });
  await post(alice, ch.id, 'try, try again');
  const recs = await remote.waitFor(3);
  assert.equal(recs.map((r) => r.headers['x-steward-attempt']), ['1', '2', '3']);
  assert.equal(new Set(recs.map((r) => r.raw.toString())).size, 1, 'the body does not change between attempts');
  assert.equal(new Set(recs.map((r) => r.headers['x-steward-delivery'])).size, 1);
  for (const r of recs) assert.ok(verify(r));
  await sleep(200);
  assert.is(remote.received.length, 3, 'no attempt after a success');
});

test('outgoing: at most BRIDGE_DELIVERY_ATTEMPTS attempts; a 4xx answer is not retried', async () => {
  remote.clear();
  remote.respond = (r) => (r.url === '/down' ? { status: 500 } : { status: 400 });
  const { ch } = await channelWithBridge('out-giveup', {}, { outgoingUrl: `${remote.url}/down` });
  await post(alice, ch.id, 'nobody home');
  await remote.waitFor(4);
  const { ch: ch2 } = await channelWithBridge('out-400', {}, { outgoingUrl: `${remote.url}/bad` });
  await post(alice, ch2.id, 'rejected');
  await waitFor(() => remote.to('/bad').length > 0);
  // 20 + 40 + 80 ms of back-off have long passed by now for the first delivery.
  await sleep(400);
  assert.is(remote.to('/down').length, 4);
  assert.is(remote.to('/bad').length, 1);
});

test('outgoing: the poster is never delayed by a slow endpoint', async () => {
  remote.clear();
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  remote.respond = async () => {
    await held;
    return { status: 200 };
  };
  const { ch } = await channelWithBridge('out-slow', {}, { outgoingUrl: `${remote.url}/slow` });
  await post(alice, ch.id, 'first');
  await remote.waitFor(1);
  // The endpoint holds its answer; posting goes on regardless.
  const m2 = await post(alice, ch.id, 'second');
  assert.ok(m2.id);
  release();
  await remote.waitFor(2);
});

test('outgoing: not for incoming-only or disabled bridges; a message from a bridge is not sent back through it, only elsewhere', async () => {
  remote.clear();
  remote.respond = () => ({ status: 200 });
  const { ch, bridge } = await channelWithBridge('out-echo', {}, { outgoingUrl: `${remote.url}/a` });
  const b2 = await alice.api.post(`/api/channels/${ch.id}/bridges`, {
    externalService: 'webhook',
    externalChannelId: 'second',
    externalChannelName: 'second',
    externalWorkspaceId: 'platform',
    config: { secret: SECRET, outgoingUrl: `${remote.url}/b` },
  });
  const b3 = await alice.api.post(`/api/channels/${ch.id}/bridges`, {
    externalService: 'webhook',
    externalChannelId: 'third',
    externalChannelName: 'third',
    externalWorkspaceId: 'platform',
    syncDirection: 'incoming',
    config: { secret: SECRET, outgoingUrl: `${remote.url}/c` },
  });
  const b4 = await alice.api.post(`/api/channels/${ch.id}/bridges`, {
    externalService: 'webhook',
    externalChannelId: 'fourth',
    externalChannelName: 'fourth',
    externalWorkspaceId: 'platform',
    config: { secret: SECRET, outgoingUrl: `${remote.url}/d` },
  });
  await alice.api.patch(`/api/channels/${ch.id}/bridges/${b4.body.bridge.id}`, { isSyncEnabled: false });
  assert.ok(b2.body.bridge && b3.body.bridge);
  const raw = JSON.stringify({ message: 'from A' });
  assert.is((await deliver(bridge.id, raw, { 'x-signature': signature(raw) })).status, 200);
  await remote.waitFor(1);
  await post(alice, ch.id, 'from inside');
  await remote.waitFor(3);
  await sleep(100);
  const seen = remote.received.map((r) => `${r.url} ${r.body.message.content}`).sort();
  assert.equal(seen, ['/a from inside', '/b from A', '/b from inside']);
});

// --- outgoing across a restart ------------------------------------------------------------------------

/** A server of its own (the suite's keeps running), its owner, and a channel with webhook bridges to `urls`. */
async function restartableSetup(urls: string[]): Promise<{ s: TestServer; owner: TestUser; ch: any; bridges: any[] }> {
  // A first retry a second after a failure: the tests stop the server (or delete) well before it.
  const started = await startWithOwner({ BRIDGE_RETRY_BASE_MS: '1000', BRIDGE_DELIVERY_ATTEMPTS: '5' });
  const { owner } = started;
  const w = await makeWorkspace(owner, `Restart ${urls.length}-${Math.random().toString(36).slice(2, 8)}`);
  const ch = await makeChannel(owner, { name: 'restart', workspaceId: w.id });
  const bridges: any[] = [];
  for (const [i, url] of urls.entries()) {
    const r = await owner.api.post(`/api/channels/${ch.id}/bridges`, {
      externalService: 'webhook',
      externalChannelId: `ext-restart-${i}`,
      externalChannelName: `restart ${i}`,
      externalWorkspaceId: 'platform',
      config: { secret: SECRET, outgoingUrl: url },
    });
    assert.is(r.status, 201, r.text);
    bridges.push(r.body.bridge);
  }
  return { s: started.s, owner, ch, bridges };
}

test('outgoing: a delivery waiting to be retried at a stop is resumed by the next start (same id, body and signature, next attempt number); a finished one is not sent again', async () => {
  remote.clear();
  let laterUp = false;
  remote.respond = (r) => (r.url === '/later' && !laterUp ? { status: 503 } : { status: 200 });
  let { s: own, owner, ch } = await restartableSetup([`${remote.url}/later`, `${remote.url}/done`]);
  try {
    await post(owner, ch.id, 'survive a restart');
    await waitFor(() => remote.to('/later').length >= 1 && remote.to('/done').length === 1);
    // The store holds the one waiting for its retry, not the one that succeeded.
    const outbox = own.ctx.c.bridgeOutbox;
    await waitFor(async () => (await outbox.count({})) === 1 && (await outbox.find({}))[0]!.attempt >= 1);
    assert.is((await outbox.find({}))[0]!._id, remote.to('/later')[0]!.headers['x-steward-delivery']);
    // Stopped during the back-off: nothing is sent while it is down.
    await own.stop();
    const before = remote.to('/later').length;
    await sleep(450);
    assert.is(remote.to('/later').length, before, 'nothing is sent while the server is down');
    laterUp = true;
    own = await own.restart();
    await waitFor(() => remote.to('/later').length === before + 1, 8000);
    const recs = remote.to('/later');
    const resumed = recs[before]!;
    for (const r of recs) {
      assert.is(r.headers['x-steward-delivery'], recs[0]!.headers['x-steward-delivery']);
      assert.is(r.raw.toString(), recs[0]!.raw.toString());
      assert.is(r.headers['x-signature'], recs[0]!.headers['x-signature']);
    }
    assert.ok(verify(resumed));
    assert.is(recs[0]!.headers['x-steward-attempt'], '1');
    assert.ok(Number(resumed.headers['x-steward-attempt']) >= 2, 'the attempts made before the stop are counted on');
    // Both are finished now: their records are gone, and a further restart sends nothing again.
    await waitFor(async () => (await own.ctx.c.bridgeOutbox.count({})) === 0);
    own = await own.restart();
    await sleep(700);
    assert.is(remote.to('/later').length, before + 1);
    assert.is(remote.to('/done').length, 1, 'the delivery that succeeded before the stop is not sent again');
  } finally {
    await own.stop(true);
  }
});

test('outgoing: an attempt cut short by a stop is made again at the next start with the same number; a bridge deleted meanwhile gets nothing', async () => {
  remote.clear();
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let holding = true;
  remote.respond = async (r) => {
    if (r.url === '/held' && holding) await held;
    return { status: r.url === '/gone' ? 503 : 200 };
  };
  let { s: own, owner, ch, bridges } = await restartableSetup([`${remote.url}/held`, `${remote.url}/gone`]);
  try {
    await post(owner, ch.id, 'cut short');
    await waitFor(() => remote.to('/held').length === 1 && remote.to('/gone').length >= 1);
    // The /gone bridge is deleted while its delivery waits for a retry; /held is still waiting for its answer.
    const del = await owner.api.del(`/api/channels/${ch.id}/bridges/${bridges[1].id}`);
    assert.ok(del.status === 200 || del.status === 204, del.text);
    const goneBefore = remote.to('/gone').length;
    await own.stop();
    holding = false;
    release();
    own = await own.restart();
    await waitFor(() => remote.to('/held').length === 2);
    const [first, again] = remote.to('/held');
    assert.is(again!.headers['x-steward-delivery'], first!.headers['x-steward-delivery']);
    assert.equal([first!.headers['x-steward-attempt'], again!.headers['x-steward-attempt']], ['1', '1']);
    await sleep(700);
    assert.is(remote.to('/gone').length, goneBefore, 'a deleted bridge gets nothing after the restart');
    assert.is(remote.to('/held').length, 2);
  } finally {
    await own.stop(true);
  }
});

test('outgoing: deleting the workspace removes its channels\' unfinished deliveries at once; nothing is sent after it', async () => {
  remote.clear();
  remote.respond = () => ({ status: 503 });
  const { s: own, owner, ch } = await restartableSetup([`${remote.url}/orphan`]);
  try {
    await post(owner, ch.id, 'to a workspace about to go');
    const outbox = own.ctx.c.bridgeOutbox;
    await waitFor(async () => remote.to('/orphan').length === 1 && (await outbox.count({})) === 1);
    assert.is((await owner.api.del(`/api/workspaces/${ch.workspaceId}`)).status, 200);
    const sent = remote.to('/orphan').length;
    assert.is(await outbox.count({}), 0, 'the channel went with its workspace, and its bridge\'s delivery with it');
    await sleep(1300);
    assert.is(remote.to('/orphan').length, sent, 'nothing is sent once the workspace is gone');
  } finally {
    await own.stop(true);
  }
});

test.run();
