import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readFile } from 'node:fs/promises';
import { CLOSE, StewardAgent, closeMeaning, loadKeys, type Disconnection } from '../src/agent/index.js';
import { RECONNECT_INITIAL_DELAY_MS, RECONNECT_MAX_DELAY_MS, reconnectDelayMs } from '../src/domain/agent-protocol.js';
import { generateKeyPair } from '../src/domain/did.js';
import { agentCommand } from '../src/cli/agent.js';
import { ownerOf } from './fixtures.js';
import { startServer, tempDir, waitFor } from './helpers.js';
import { approveRegistration, fleet, newAgent, RawAgent, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import { freePort, StandIn } from './stand-in-server.js';
import { LONG, StewardProcess } from './cli-process.js';

const test = suite('agents survive faults: reconnecting, saying why, stopping only when told');

/** Collects an SDK agent's `disconnected` reports. */
function reports(agent: StewardAgent): Disconnection[] {
  const seen: Disconnection[] = [];
  agent.on('disconnected', (d: Disconnection) => seen.push(d));
  return seen;
}

test('steward agent (a child process) keeps running across a server restart on the same port and data dir, and comes back ready by itself', async () => {
  const port = await freePort();
  let { s, owner } = await startWithOwner({ PORT: String(port) });
  const keyFile = join(await tempDir(), 'agent.json');
  const agent = new StewardProcess(['agent', '--url', s.url, '--key', keyFile, '--capabilities', 'api_call']);
  try {
    await agent.seen(/registration \S+ awaits approval/);
    const regId = /registration (\S+) awaits approval/.exec(agent.out)![1]!;
    const did = /DID (did:key:\S+)/.exec(agent.out)![1]!;
    await approveRegistration(owner, regId, ['api_call']);
    await agent.seen(/status ready/);

    s = await s.restart();
    owner = await ownerOf(s);
    await agent.seen(/status ready/, 2);
    assert.match(agent.out, /disconnected: closed with 1001: Steward is shutting down/);
    await waitFor(() => fleet(s).gateway.isOnline(did), LONG);
    assert.is(agent.exit, null, 'the agent process is still running');
    // Online again with its stored certificate: an intent reaches it.
    const r = await owner.api.post(`/api/agents/${encodeURIComponent(did)}/intents`, { action: 'api_call', params: { after: 'restart' } });
    assert.is(r.status, 200, r.text);
    assert.equal(r.body.output.echo, { after: 'restart' });
  } finally {
    assert.is(await agent.stop(), 0, `Ctrl-C ends it with 0\n${agent.out}\n${agent.err}`);
    await s.stop(true);
  }
});

test('steward agent started before the server keeps trying, says the connection is refused, and comes online once the server starts', async () => {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const agent = new StewardProcess(['agent', '--url', url, '--key', join(await tempDir(), 'agent.json')]);
  let s: Awaited<ReturnType<typeof startServer>> | null = null;
  try {
    await agent.seen(new RegExp(`cannot connect: connection refused by 127\\.0\\.0\\.1:${port} \\(is Steward running there\\?\\); retrying in [\\d.]+ s`), 2);
    s = await startServer({ PORT: String(port) });
    await agent.seen(/registration \S+ awaits approval/);
    assert.is(agent.exit, null);
  } finally {
    assert.is(await agent.stop(), 0, `${agent.out}\n${agent.err}`);
    await s?.stop(true);
  }
});

test('a rejected agent (a child process) exits 1 and says it was rejected, and why', async () => {
  const { s, owner } = await startWithOwner();
  const agent = new StewardProcess(['agent', '--url', s.url, '--key', join(await tempDir(), 'agent.json')]);
  try {
    await agent.seen(/registration \S+ awaits approval/);
    const regId = /registration (\S+) awaits approval/.exec(agent.out)![1]!;
    assert.is((await owner.api.post(`/api/registrations/${regId}/reject`, { reason: 'unknown vendor' })).status, 200);
    assert.is(await agent.exited, 1, agent.out + agent.err);
    assert.match(agent.err, /steward agent: stopped: registration rejected by an admin: unknown vendor/);
    assert.match(agent.err, /an admin can delete the agent/);
    assert.not.match(agent.out, /retrying/, 'it does not try again');
  } finally {
    await agent.stop();
    await s.stop(true);
  }
});

test('steward agent replaced by another instance with the same key exits 1 and says so', async () => {
  const { s, owner } = await startWithOwner();
  const keyFile = join(await tempDir(), 'agent.json');
  let out = '';
  const io = { out: (t: string) => (out += t), err: (t: string) => (out += t) };
  const abort = new AbortController(); // ends it should the test fail
  const first = agentCommand(['--url', s.url, '--key', keyFile], {}, io, abort.signal);
  let twin: RawAgent | undefined;
  try {
    const regId = await waitFor(() => /registration (\S+) awaits approval/.exec(out)?.[1]);
    await approveRegistration(owner, regId, ['api_call']);
    await waitFor(() => out.includes('status ready'));
    twin = new RawAgent(s.url, await loadKeys(keyFile));
    await twin.authenticate();
    assert.is(await first, 1);
    assert.match(out, /steward agent: stopped: closed with 4409: another connection of this agent \(the same key\) replaced this one/);
    assert.match(out, /Is another instance running with the same key file\?/);
  } finally {
    abort.abort();
    await first;
    twin?.close();
    await s.stop(true);
  }
});

test('SDK: a wrong path, an HTTP error, TLS to a plain server and an unknown host are each reported in words, and the agent keeps trying', async () => {
  const s = await startServer();
  const plain = await StandIn.start({ respond: () => ({ status: 503, body: 'upstream down' }) });
  const plainPort = new URL(plain.url).port;
  const cases: Array<{ url: string; cause: Disconnection['cause']; message: RegExp; httpStatus?: number }> = [
    { url: `${s.url.replace('http', 'ws')}/ws/agnet`, cause: 'http', httpStatus: 404, message: /^HTTP 404 Not Found from ws:\/\/127\.0\.0\.1:\d+\/ws\/agnet instead of a WebSocket \(is the address right\? the agent endpoint is \/ws\/agent\)$/ },
    { url: `http://127.0.0.1:${plainPort}`, cause: 'http', httpStatus: 503, message: /^HTTP 503 Service Unavailable from ws:\/\/127\.0\.0\.1:\d+\/ws\/agent instead of a WebSocket/ },
    { url: `https://127.0.0.1:${plainPort}`, cause: 'tls', message: /^TLS with 127\.0\.0\.1:\d+ failed: / },
    { url: 'ws://steward.invalid:8080', cause: 'dns', message: /^DNS lookup of steward\.invalid failed \(E[A-Z_]+\)$/ },
  ];
  for (const c of cases) {
    const agent = new StewardAgent({ url: c.url, keys: generateKeyPair(), name: 'x', version: '1', capabilities: ['api_call'], reconnect: { initialDelayMs: 10, maxDelayMs: 20 } });
    const seen = reports(agent);
    agent.start();
    try {
      await waitFor(() => seen.length >= 3, 20_000);
    } finally {
      await agent.stop();
    }
    for (const d of seen) {
      assert.is(d.cause, c.cause, `${c.url}: ${d.message}`);
      assert.match(d.message, c.message);
      assert.is(d.httpStatus, c.httpStatus ?? null);
      assert.is(d.code, null, 'no socket was open');
      assert.ok(d.willRetry && d.retryInMs! >= 0, 'it tries again');
    }
    assert.equal(seen.map((d) => d.attempt), seen.map((_, i) => i + 1), 'failures in a row are counted');
    assert.equal(agent.lastDisconnect, seen[seen.length - 1]);
  }
  await plain.close();
  await s.stop(true);
});

test('the reconnect back-off doubles from 0.5 s to a cap of 8 s, each wait between half and all of it; the SDK keeps to the cap by default', async () => {
  const low = (n: number) => reconnectDelayMs(n, {}, () => 0);
  const high = (n: number) => reconnectDelayMs(n, {}, () => 1);
  assert.equal([0, 1, 2, 3, 4, 5, 6, 40].map(high), [500, 1000, 2000, 4000, 8000, 8000, 8000, 8000]);
  assert.equal([0, 1, 4, 40].map(low), [250, 500, 4000, 4000]);
  assert.is(RECONNECT_INITIAL_DELAY_MS, 500);
  assert.is(RECONNECT_MAX_DELAY_MS, 8000);
  // An SDK agent asked to start at 20 s still waits no longer than the default cap.
  const agent = new StewardAgent({ url: `http://127.0.0.1:${await freePort()}`, keys: generateKeyPair(), name: 'x', version: '1', capabilities: ['api_call'], reconnect: { initialDelayMs: 20_000 } });
  const seen = reports(agent);
  agent.start();
  try {
    await waitFor(() => seen.length >= 1);
  } finally {
    await agent.stop();
  }
  assert.is(seen[0]!.cause, 'refused');
  assert.ok(seen[0]!.retryInMs! >= 4000 && seen[0]!.retryInMs! <= 8000, `retry in ${seen[0]!.retryInMs} ms`);
});

test('SDK: across a server restart it reports the close and the refused attempts, comes back ready, and its unacknowledged usage is counted once', async () => {
  const port = await freePort();
  let { s, owner } = await startWithOwner({ PORT: String(port), TOKEN_ROLLUP_INTERVAL_SECONDS: '3600' });
  const agent = await readyAgent(s, owner, { heartbeatIntervalMs: 3_600_000, reconnect: { initialDelayMs: 20, maxDelayMs: 100 } });
  try {
    const seen = reports(agent);
    // The heartbeat's write is held until the sockets are closed: it is stored at shutdown, its ack lost.
    const ledger = s.ctx.c.tokenLedger as unknown as { insertMany: (docs: unknown[]) => Promise<void> };
    const insertMany = ledger.insertMany.bind(ledger);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let writes = 0;
    ledger.insertMany = async (docs) => {
      writes++;
      await held;
      return insertMany(docs);
    };
    agent.recordUsage(10, 5);
    agent.heartbeat();
    await waitFor(() => writes === 1);
    const stopping = s.stop();
    await waitFor(() => agent.status !== 'ready');
    release();
    agent.recordUsage(3, 2); // while Steward is away
    await stopping;
    assert.equal(agent.unacknowledgedUsage(), { promptTokens: 13, completionTokens: 7 }, 'kept: the ack never came');
    await waitFor(() => seen.some((d) => d.cause === 'refused'), 20_000);
    s = await s.restart();
    owner = await ownerOf(s);
    await agent.waitFor('ready', LONG);
    assert.is(seen[0]!.code, 1001);
    assert.match(seen[0]!.message, /^closed with 1001: Steward is shutting down/);
    assert.ok(seen.every((d) => d.willRetry));
    agent.heartbeat();
    await waitFor(() => agent.unacknowledgedUsage().promptTokens === 0 && agent.unacknowledgedUsage().completionTokens === 0, 20_000);
    const tokens = fleet(s).tokens;
    await tokens.rollup();
    assert.equal((await tokens.ofAgent(agent.did)).allTime, { promptTokens: 13, completionTokens: 7 });
  } finally {
    await stopAll(agent);
    await s.stop(true);
  }
});

test('a pending socket is closed with 4202 after AGENT_PENDING_SOCKET_TIMEOUT_SECONDS; the SDK reconnects, is still pending, then is approved and ready', async () => {
  const { s, owner } = await startWithOwner({ AGENT_PENDING_SOCKET_TIMEOUT_SECONDS: '1' });
  // The protocol, frame by frame: pending, then closed with 4202.
  const raw = new RawAgent(s.url);
  await raw.authenticate();
  const pending = await raw.next('registration');
  assert.is(pending.status, 'pending');
  await waitFor(() => raw.closed, 20_000);
  assert.equal(raw.closed, { code: 4202, reason: 'still pending: reconnect to keep waiting' });

  const agent = newAgent(s);
  try {
    const seen = reports(agent);
    const registrations: any[] = [];
    agent.on('registration', (f) => registrations.push(f));
    await agent.waitFor('pending');
    const regId = agent.registrationId;
    await waitFor(() => seen.length >= 1 && registrations.length >= 2, 20_000);
    assert.is(seen[0]!.code, 4202);
    assert.ok(seen[0]!.willRetry);
    assert.match(seen[0]!.message, /closed with 4202: the registration still awaits an admin; reconnect to keep waiting/);
    assert.equal(registrations[1], { type: 'registration', status: 'pending', registrationId: regId });
    assert.is(await s.ctx.c.registrations.count({ agentDid: agent.did }), 1, 'the registration is kept, not made again');
    await agent.waitFor('pending');
    await approveRegistration(owner, regId!, ['api_call']);
    await agent.waitFor('ready', LONG);
  } finally {
    await stopAll(agent);
    await s.stop(true);
  }
});

test('the close codes of docs/agent-protocol.md say what the protocol table says: every code, and whether to reconnect', async () => {
  const doc = await readFile(fileURLToPath(new URL('../docs/agent-protocol.md', import.meta.url)), 'utf8');
  const section = doc.slice(doc.indexOf('## Closing, and when to reconnect'), doc.indexOf('## An example exchange'));
  const rows = new Map([...section.matchAll(/^\| (\d{4}) \| .* \| (Yes|No|—)[^|]*\|$/gm)].map((m) => [Number(m[1]), m[2]]));
  assert.equal([...rows.keys()].filter((c) => c !== 1000).sort(), Object.values(CLOSE).sort());
  for (const code of Object.values(CLOSE)) assert.is(rows.get(code), closeMeaning(code).reconnect ? 'Yes' : 'No', `close ${code}`);
});

test.run();
