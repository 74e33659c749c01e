import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { isDeepStrictEqual } from 'node:util';
import { generateKeyPair, signMessage } from '../src/domain/did.js';
import { certificateBytes } from '../src/domain/certificate.js';
import { sleep, waitFor } from './helpers.js';
import { AgentSessions } from '../src/services/agent-sessions.js';
import { approvedKeys, fleet, heartbeat, newAgent, once, RawAgent, readyAgent, readyRawAgent, startWithOwner } from './fleet-helpers.js';
import { readCanonicalHeartbeat } from '../src/ws/agent/frames.js';

/** Long enough for a reconnect on a busy machine (the handshake includes signature checks). */
const GRACE_MS = 1500;

const test = suite('fleet protocol');
const ctx = {} as Awaited<ReturnType<typeof startWithOwner>>;

test.before(async () => {
  Object.assign(
    ctx,
    await startWithOwner({ AGENT_SEND_BUFFER_LIMIT_BYTES: '65536', AGENT_HANDSHAKE_TIMEOUT_MS: '400', AGENT_INVALID_FRAME_LIMIT: '3', AGENT_OFFLINE_GRACE_MS: String(GRACE_MS) }),
  );
});
test.after(async () => {
  await ctx.s.stop(true);
});

/** An approved agent known to the server, driven by a raw client. */
const approvedRaw = () => approvedKeys(ctx.s, ctx.owner);

test('a forged auth signature closes with 4401', async () => {
  const raw = new RawAgent(ctx.s.url);
  const forger = generateKeyPair();
  await raw.open();
  raw.hello();
  const ch = await raw.next('challenge');
  assert.is(ch.serverDid, ctx.s.ctx.identity.did);
  raw.send({ type: 'auth', signature: signMessage(forger, `steward-agent-auth:${ch.nonce}`) });
  assert.is((await raw.waitClosed()).code, 4401);
});

test('a signature made for another purpose is refused (4401)', async () => {
  const raw = new RawAgent(ctx.s.url);
  await raw.open();
  raw.hello();
  const ch = await raw.next('challenge');
  raw.send({ type: 'auth', signature: signMessage(raw.keys, `steward-login:${ch.nonce}`) });
  assert.is((await raw.waitClosed()).code, 4401);
});

test('frames failing their schema get error frames; the third invalid frame closes with 1008', async () => {
  const raw = new RawAgent(ctx.s.url);
  await raw.open();
  raw.send({ type: 'hello', did: raw.keys.did, name: 'x', version: '1', capabilities: ['teleport'] });
  const e1 = await raw.next('error');
  assert.is(e1.code, 'schema_violation');
  assert.match(e1.message, /capabilities/);
  raw.ws.send(Buffer.from([1, 2, 3]), { binary: true });
  assert.is((await raw.next('error')).code, 'binary_frame');
  assert.is(raw.closed, null, 'still open after two');
  raw.send('{not json');
  assert.is((await raw.next('error')).code, 'invalid_json');
  assert.is((await raw.waitClosed()).code, 1008);
});

test('unknown and out-of-order frames are invalid too', async () => {
  const raw = new RawAgent(ctx.s.url);
  await raw.open();
  raw.send({ type: 'teleport' });
  assert.is((await raw.next('error')).code, 'unknown_frame');
  raw.send(heartbeat(1, 1, 1));
  assert.is((await raw.next('error')).code, 'unexpected_frame');
  raw.hello();
  await raw.next('challenge');
  assert.is(raw.closed, null);
});

test('a heartbeat with a negative or fractional delta is refused by its schema', async () => {
  const { s, owner } = ctx;
  const agent = await readyAgent(s, owner);
  const errors: any[] = [];
  agent.on('serverError', (f) => errors.push(f));
  agent['send'](heartbeat(99, -5, 0));
  agent['send'](heartbeat(100, 1.5, 0));
  await waitFor(() => errors.length === 2);
  assert.ok(errors.every((e) => e.code === 'schema_violation'));
  await agent.stop();
});

test('a heartbeat written as JSON.stringify writes it is read without a parse; any other form goes through parse and schema, counted the same', async () => {
  const canonical = (seq: number | string, p: number | string, c: number | string) =>
    `{"type":"heartbeat","seq":${seq},"sinceLastSync":{"promptTokens":${p},"completionTokens":${c}}}`;
  assert.is(canonical(7, 12, 3), JSON.stringify({ type: 'heartbeat', seq: 7, sinceLastSync: { promptTokens: 12, completionTokens: 3 } }));
  assert.ok(readCanonicalHeartbeat(canonical(0, 0, 0)));
  assert.ok(readCanonicalHeartbeat(canonical(123456789012345, 999999999999, 5)));
  for (const other of [
    canonical(1234567890123456, 1, 1), // seq of 16 digits: left to the schema
    canonical(1, 1000000000000, 1), // 10^12, the largest count: left to the schema
    canonical('01', 1, 1), // not JSON
    canonical(1, '-1', 1),
    canonical(1, '1.5', 1),
    canonical(1, '', 1),
    canonical(1, 1, 1) + ' ',
    '\ufeff' + canonical(1, 1, 1),
    '{"type":"heartbeat","seq":1,"sinceLastSync":{"completionTokens":1,"promptTokens":1}}',
    '{"type": "heartbeat", "seq": 1, "sinceLastSync": {"promptTokens": 1, "completionTokens": 1}}',
    '{"type":"heartbeat","seq":1,"sinceLastSync":{"promptTokens":1,"completionTokens":1},"x":1}',
  ]) {
    assert.not.ok(readCanonicalHeartbeat(other), other);
  }

  // Over a socket: both forms are acknowledged and counted; invalid ones get the schema's answer.
  const { s, owner } = ctx;
  const { raw } = await readyRawAgent(s, owner);
  const keys = raw.keys;
  raw.send(canonical(1, 10, 1));
  raw.send('{ "sinceLastSync": { "completionTokens": 2, "promptTokens": 20 }, "seq": 2, "type": "heartbeat" }');
  raw.send(canonical(3, 1000000000000, 0)); // the largest count, through the schema
  assert.equal([(await raw.next('heartbeat_ack')).seq, (await raw.next('heartbeat_ack')).seq, (await raw.next('heartbeat_ack')).seq], [1, 2, 3]);
  raw.send(canonical(4, 1000000000001, 0));
  assert.is((await raw.next('error')).code, 'schema_violation');
  raw.close();
  await fleet(s).tokens.rollup();
  assert.equal((await fleet(s).tokens.ofAgent(keys.did)).allTime, { promptTokens: 1000000000030, completionTokens: 3 });
});

test('a hello whose key does not match its did:key gets an error frame and 1008', async () => {
  const raw = new RawAgent(ctx.s.url);
  await raw.open();
  raw.hello({ publicKey: generateKeyPair().publicKey });
  assert.is((await raw.next('error')).code, 'invalid_key');
  assert.is((await raw.waitClosed()).code, 1008);
});

test('a socket that does not finish the handshake in time is closed with 4408', async () => {
  const raw = new RawAgent(ctx.s.url);
  await raw.open();
  assert.is((await raw.waitClosed(3000)).code, 4408);
});

test('a second authenticated connection of the same agent replaces the first (4409)', async () => {
  const { s, owner } = ctx;
  const first = await readyAgent(s, owner);
  const closed = once<number>(first, 'close');
  const second = new RawAgent(s.url, first['opts'].keys);
  await second.authenticate();
  await second.acceptNextOffer();
  assert.is(await closed, 4409);
  assert.is(first.status, 'stopped', 'the SDK does not reconnect after 4409');
  assert.ok(fleet(s).gateway.isOnline(first.did), 'the new connection is the live one');
  second.send(heartbeat(1, 0, 0));
  assert.equal(await second.next('heartbeat_ack'), { type: 'heartbeat_ack', seq: 1 });
  second.close();
});

test('two connections of one agent authenticating at once: the later one wins, the earlier gets 4409', async () => {
  const { s } = ctx;
  const keys = await approvedRaw();
  const a = new RawAgent(s.url, keys);
  const b = new RawAgent(s.url, keys);
  await Promise.all([a.authenticate(), b.authenticate()]);
  // Whichever authenticated second replaced the other before either was ready.
  const [first, second] = await Promise.race([
    a.waitClosed().then(() => [a, b] as const),
    b.waitClosed().then(() => [b, a] as const),
  ]);
  assert.is(first.closed!.code, 4409);
  await second.acceptNextOffer();
  assert.ok(fleet(s).gateway.isOnline(keys.did));
  assert.is(fleet(s).gateway.onlineCount() >= 1, true);
  second.close();
  await waitFor(() => !fleet(s).gateway.isOnline(keys.did));
});

test('a co-signature that does not verify closes with 4401 and leaves the old certificate in force', async () => {
  const { s } = ctx;
  const keys = await approvedRaw();
  const before = await fleet(s).service.certificates.current(keys.did);
  // Make the stored certificate stale so the next connection gets a new one.
  const other = generateKeyPair();
  await s.ctx.c.agents.updateOne({ _id: keys.did }, { $set: { capabilities: ['api_call'] } });
  await s.ctx.fleet.roster.changed([keys.did]);
  const raw = new RawAgent(s.url, keys);
  await raw.authenticate();
  await raw.next('update_capabilities');
  const offer = await raw.next('certificate_offer');
  assert.is.not(offer.certificate.serial, before!.certificate.serial);
  raw.send({ type: 'certificate_accept', agentSignature: signMessage(other, certificateBytes(offer.certificate)) });
  assert.is((await raw.waitClosed()).code, 4401);
  const after = await fleet(s).service.certificates.current(keys.did);
  assert.is(after!.certificate.serial, before!.certificate.serial);
});

/**
 * Connects `keys` with a raw client while a ready listener of the test holds `ready` back until
 * `gate` settles; resolves once the listener has run (the agent is online, ready not yet sent).
 */
async function connectHeldBack(keys: Awaited<ReturnType<typeof approvedRaw>>, gate: Promise<void>, onListener: (did: string) => void = () => undefined) {
  const gateway = fleet(ctx.s).gateway;
  let ran = false;
  const off = gateway.onReady((did) => {
    if (did !== keys.did) return;
    ran = true;
    onListener(did);
    return gate;
  });
  const raw = new RawAgent(ctx.s.url, keys);
  try {
    await raw.authenticate();
    const offer = await raw.next('certificate_offer');
    raw.send({ type: 'certificate_accept', agentSignature: signMessage(keys, certificateBytes(offer.certificate)) });
    await waitFor(() => ran);
  } finally {
    off();
  }
  return raw;
}

test('ready waits for the ready listeners; frames pushed meanwhile follow it, in order', async () => {
  const gateway = fleet(ctx.s).gateway;
  const keys = await approvedRaw();
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const pushed = (text: string) => gateway.push(keys.did, { type: 'llm_config', config: { systemPrompt: text } });
  const raw = await connectHeldBack(keys, gate, () => assert.ok(pushed('from the listener')));
  assert.ok(gateway.isOnline(keys.did), 'online (pushes reach it) while ready waits');
  assert.ok(pushed('while ready waits'));
  await sleep(100);
  assert.equal(
    raw.frames.filter((f) => f.type !== 'update_capabilities').map((f) => f.type),
    [],
    'nothing reaches the agent before ready',
  );
  release();
  await waitFor(() => raw.frames.some((f) => f.type === 'skills_config') && raw.frames.filter((f) => f.type === 'llm_config').length === 3);
  const after = raw.frames.filter((f) => f.type !== 'update_capabilities');
  assert.is(after[0].type, 'ready', 'ready first');
  const prompts = after.filter((f) => f.type === 'llm_config').map((f) => f.config.systemPrompt ?? null);
  assert.equal(prompts.filter((p) => p !== null), ['from the listener', 'while ready waits'], 'pushed frames in the order they were pushed');
  // The heartbeat that follows is acknowledged as usual: frames go out at once again.
  raw.send(heartbeat(1, 0, 0));
  assert.is((await raw.next('heartbeat_ack')).seq, 1);
  raw.close();
});

test('frames held for ready count against the send-buffer limit: past it the socket closes', async () => {
  const gateway = fleet(ctx.s).gateway;
  const keys = await approvedRaw();
  const raw = await connectHeldBack(keys, new Promise<void>(() => undefined));
  assert.ok(gateway.push(keys.did, { type: 'llm_config', config: { systemPrompt: 'x'.repeat(30_000) } }), 'under the limit (64 KiB here): held');
  assert.ok(gateway.push(keys.did, { type: 'llm_config', config: { systemPrompt: 'y'.repeat(40_000) } }), 'past it by this one frame: held, as a send buffer takes one frame past it');
  assert.not.ok(gateway.push(keys.did, { type: 'llm_config', config: { systemPrompt: 'z'.repeat(40_000) } }), 'past it by more than one frame: refused');
  await raw.waitClosed();
  await waitFor(() => !gateway.isOnline(keys.did));
  assert.not.ok(raw.frames.some((f) => f.type === 'ready' || f.type === 'llm_config'), 'nothing held went out');
});

/** The llm_config frames a test pushed (marked by their systemPrompt's first character), in the order received. */
const marked = (raw: RawAgent) =>
  raw.frames
    .filter((f) => f.type === 'llm_config' && typeof f.config.systemPrompt === 'string')
    .map((f) => `${f.config.systemPrompt[0]}:${f.config.systemPrompt.length}`);

/** The server's socket of an agent (to read its send buffer). */
const serverSocket = (did: string) => (fleet(ctx.s).gateway as any).conns.get(did).ws as import('../src/http/uws.js').WebSocket<unknown>;

test('a held frame larger than the send-buffer limit does not keep the agent from coming online, whichever order the frames came in', async () => {
  const gateway = fleet(ctx.s).gateway;
  const keys = await approvedRaw();
  let release!: () => void;
  const raw = await connectHeldBack(keys, new Promise<void>((resolve) => (release = resolve)));
  assert.ok(gateway.push(keys.did, { type: 'llm_config', config: { systemPrompt: 'b'.repeat(100_000) } }), 'larger than the limit (64 KiB here) on its own: held');
  assert.ok(gateway.push(keys.did, { type: 'llm_config', config: { systemPrompt: 's'.repeat(1_000) } }), 'a small frame after it: held');
  release();
  await raw.next('ready');
  await waitFor(() => marked(raw).length === 2);
  assert.equal(marked(raw), ['b:100000', 's:1000'], 'both, whole and in order');
  assert.is(raw.closed, null);
  // Frames go out at once again.
  raw.send(heartbeat(1, 0, 0));
  assert.is((await raw.next('heartbeat_ack')).seq, 1);
  assert.ok(gateway.isOnline(keys.did));
  raw.close();
});

/** Larger than the kernel's socket buffers take at once on loopback (a few MB), so most of it stays in the server's send buffer. */
const HUGE = 12_000_000;

/**
 * An agent whose ready is held back while a HUGE frame and then `small` bytes are pushed to it; its
 * reader is paused when ready is released, so the server's send buffer fills.
 */
async function heldBehindHuge(small: number) {
  const gateway = fleet(ctx.s).gateway;
  const keys = await approvedRaw();
  let release!: () => void;
  const raw = await connectHeldBack(keys, new Promise<void>((resolve) => (release = resolve)));
  const socket = (raw.ws as any)._socket as import('node:net').Socket;
  assert.ok(gateway.push(keys.did, { type: 'llm_config', config: { systemPrompt: 'h'.repeat(HUGE) } }));
  assert.ok(gateway.push(keys.did, { type: 'llm_config', config: { systemPrompt: 'n'.repeat(small) } }), 'waits behind the large one');
  return { gateway, keys, raw, socket, release };
}

test('held frames after ready wait for the send buffer to drain: a frame that overfills it does not get the next one dropped', async () => {
  const { gateway, keys, raw, socket, release } = await heldBehindHuge(2_000);
  assert.ok(gateway.push(keys.did, { type: 'llm_config', config: { systemPrompt: 'm'.repeat(3_000) } }));
  socket.pause();
  release();
  await waitFor(() => serverSocket(keys.did).getBufferedAmount() > 65536);
  await sleep(50);
  assert.ok(gateway.isOnline(keys.did), 'still open with its send buffer past the limit');
  assert.ok(gateway.push(keys.did, { type: 'llm_config', config: { systemPrompt: 'p'.repeat(1_000) } }), 'pushed meanwhile: queued behind');
  socket.resume();
  await waitFor(() => marked(raw).length === 4, 10_000);
  assert.equal(marked(raw), [`h:${HUGE}`, 'n:2000', 'm:3000', 'p:1000'], 'every frame, whole and in order');
  assert.is(raw.frames.findIndex((f) => f.type === 'ready'), 0, 'ready first');
  raw.send(heartbeat(1, 0, 0));
  assert.is((await raw.next('heartbeat_ack')).seq, 1);
  assert.is(raw.closed, null);
  raw.close();
});

test('a reader that stops while its held frames are handed over is closed once frames pile up past the limit', async () => {
  const { gateway, keys, raw, socket, release } = await heldBehindHuge(1_000);
  socket.pause();
  release();
  await waitFor(() => serverSocket(keys.did).getBufferedAmount() > 65536);
  let sent = 0;
  let queued = 0;
  while (gateway.isOnline(keys.did) && sent < 100) {
    if (gateway.push(keys.did, { type: 'llm_config', config: { systemPrompt: 'q'.repeat(16 * 1024) } })) queued++;
    sent++;
    await sleep(1);
  }
  assert.not.ok(gateway.isOnline(keys.did), `closed after ${sent} frames of 16 KiB`);
  assert.ok(queued >= 1, 'frames pushed while the held ones wait are queued behind them at first');
  assert.ok(sent <= 6, `closed once the queued frames pass the limit (64 KiB) by more than one frame: ${sent} pushed`);
  socket.resume();
  await raw.waitClosed();
  assert.not.ok(marked(raw).some((m) => m.startsWith('q')), 'nothing queued went out');
});

test('reconnecting with an unchanged certificate: the stored one is offered again, no new write', async () => {
  const { s } = ctx;
  const keys = await approvedRaw();
  const before = await fleet(s).service.certificates.current(keys.did);
  const raw = new RawAgent(s.url, keys);
  await raw.authenticate();
  const ready = await raw.acceptNextOffer();
  assert.is(ready.certificate.serial, before!.certificate.serial);
  assert.is(ready.agentSignature, before!.agentSignature, 'Ed25519 is deterministic: the same co-signature');
  assert.is(raw.frames.filter((f) => f.type === 'update_capabilities').length, 0);
  raw.close();
});

test('the session in ready authenticates the agent over HTTP and survives reconnects', async () => {
  const { s, owner } = ctx;
  const agent = await readyAgent(s, owner);
  const token = agent.session!.token;
  const r = await fetch(`${s.url}/api/agents/${encodeURIComponent(agent.did)}`, { headers: { authorization: `Bearer ${token}` } });
  assert.is(r.status, 200, 'an agent session reads its own detail');
  const noSession = await fetch(`${s.url}/api/agents/${encodeURIComponent(agent.did)}`, { headers: { authorization: 'Bearer nope' } });
  assert.is(noSession.status, 401);
  await agent.stop();
  const again = newAgent(s, { keys: agent['opts'].keys });
  await again.waitFor('ready');
  assert.is(again.session!.token, token);
  await again.stop();
});

test('a session row that was removed, has expired or was made anew elsewhere gives its new token at the next ready; the old one stops working', async () => {
  const { s, owner } = ctx;
  const agent = await readyAgent(s, owner);
  const keys = agent['opts'].keys;
  const first = agent.session!.token;
  const status = async (token: string) =>
    (await fetch(`${s.url}/api/agents/${encodeURIComponent(agent.did)}`, { headers: { authorization: `Bearer ${token}` } })).status;
  assert.is(await status(first), 200, 'a valid agent session');
  await agent.stop();
  /** Connects the agent again until ready; the token its `ready` carried. */
  const reconnect = async () => {
    const again = newAgent(s, { keys });
    await again.waitFor('ready');
    const token = again.session!.token;
    await again.stop();
    return token;
  };

  // The row is gone (a sweep or an operator ended it): the token remembered for it is not handed out again.
  assert.is(await s.ctx.c.sessions.deleteOne({ _id: `agent:${agent.did}` }), 1);
  await new Promise((r) => setTimeout(r, 2)); // a new row gets a later creation time
  const token2 = await reconnect();
  assert.is.not(token2, first);
  assert.is(await status(first), 401);
  assert.is(await status(token2), 200);

  // The row has expired: a new one, a new token.
  await s.ctx.c.sessions.updateOne({ _id: `agent:${agent.did}` }, { $set: { expiresAt: new Date(Date.now() - 1000).toISOString() } });
  await new Promise((r) => setTimeout(r, 2));
  const token3 = await reconnect();
  assert.is.not(token3, token2);
  assert.is(await status(token2), 401);
  assert.is(await status(token3), 200);

  // Unchanged row: the same token again.
  assert.is(await reconnect(), token3);

  // The row was made anew elsewhere (another server on the same store): its token, not the one remembered here.
  await s.ctx.c.sessions.deleteOne({ _id: `agent:${agent.did}` });
  await new Promise((r) => setTimeout(r, 2));
  const elsewhere = await new AgentSessions(s.ctx.c, s.ctx.config.sessionTtlMs, (m) => s.ctx.identity.sign(m)).sessionOf(agent.did);
  assert.is.not(elsewhere.token, token3);
  assert.is(await reconnect(), elsewhere.token);
  assert.is(await status(token3), 401);
  assert.is(await status(elsewhere.token), 200);
});

test('a socket that does not read is closed once its send buffer passes the limit', async () => {
  const { s, owner } = ctx;
  const agent = await readyAgent(s, owner, { reconnect: false });
  const socket = (agent['ws'] as any)._socket as import('node:net').Socket;
  socket.pause(); // stop reading: the kernel buffers fill, then the server's send buffer grows
  const payload = 'x'.repeat(16 * 1024);
  let sent = 0;
  while (fleet(s).gateway.isOnline(agent.did) && sent < 10_000) {
    s.ctx.agentPush.push(agent.did, { type: 'llm_config', config: { provider: 'test', model: payload } });
    sent++;
    if (sent % 50 === 0) await new Promise((r) => setImmediate(r));
  }
  assert.not.ok(fleet(s).gateway.isOnline(agent.did), `closed after ${sent} frames of 16 KiB`);
  assert.ok(sent < 10_000);
  socket.destroy();
  await agent.stop();
});

test('a reconnect within the offline grace period is no transition of the actor; a longer absence is', async () => {
  const { s, owner } = ctx;
  const agent = await readyAgent(s, owner);
  const keys = agent['opts'].keys;
  // The actor learns of the connection after the agent has its `ready`: follow it from then on.
  await waitFor(async () => isDeepStrictEqual((await s.ctx.actors.inspect('agent', agent.did))?.state, { active: { connection: 'online', certificate: 'current' } }));
  const events: string[] = [];
  const off = s.ctx.actors.onTransition((t) => t.actorId === agent.did && events.push(t.event));
  await agent.stop();
  const left = Date.now();
  assert.not.ok(fleet(s).gateway.isOnline(agent.did), 'isOnline follows the socket at once');
  const back = newAgent(s, { keys });
  await back.waitFor('ready');
  assert.ok(Date.now() - left < GRACE_MS, `back within the grace period (${Date.now() - left} ms)`);
  await new Promise((r) => setTimeout(r, left + GRACE_MS + 200 - Date.now())); // the grace period is over
  assert.equal(events, [], 'back within the grace period: no DISCONNECTED, no CONNECTED');
  await back.stop();
  await waitFor(() => events.includes('DISCONNECTED'));
  const state = await s.ctx.actors.inspect('agent', agent.did);
  assert.equal(state?.state, { active: { connection: 'offline', certificate: 'current' } });
  off();
});

test.run();
