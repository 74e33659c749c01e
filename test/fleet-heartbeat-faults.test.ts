/**
 * Token counting when the store fails ambiguously (a ledger write that lands and still reports
 * failure, a partly applied insertMany) and past 2^53. Runs on the embedded store and on MongoStore
 * through the MongoDB stand-in (there also with faults the stand-in injects under the official
 * driver), or on MONGODB_URI's server.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ownerOf, type TestUser } from './fixtures.js';
import { waitFor, type TestServer } from './helpers.js';
import { fleet, heartbeat, once, RawAgent, readyAgent, readyRawAgent, startWithOwner } from './fleet-helpers.js';
import { FaultInjector, heldThenPartlyStored } from './fault-store.js';
import { backend, standin, storeKind, type Backend } from './store-backend.js';

const test = suite('fleet heartbeats: ambiguous ledger writes, exact totals');
let store: Backend;
let faults: FaultInjector;
let s: TestServer;
let owner: TestUser;

test.before(async () => {
  store = await backend();
  faults = new FaultInjector();
  ({ s, owner } = await startWithOwner({ TOKEN_ROLLUP_INTERVAL_SECONDS: '3600', ...store.env }, { wrapStore: faults.wrap }));
});
test.after(async () => {
  await s.stop(true);
  await store.drop();
});
test.after.each(() => faults.clear());

const allTime = async () => (await owner.api.get('/api/stats/tokens')).body.allTime as { promptTokens: number; completionTokens: number };
/** Documents of the token ledger that hold an entry of `did`. */
const ledgerDocsOf = async (did: string) => (await s.ctx.c.tokenLedger.find({})).filter((d) => d.entries.includes(`${did} `)).length;
/** Resolves once `fault` is injected, counting from the moment this is called. */
function injection(fault: string): () => Promise<unknown> {
  const from = faults.injected.length;
  return () => waitFor(() => faults.injected.slice(from).includes(fault), 10_000);
}

if (storeKind === 'standin') {
  test('through the driver: a ledger insert cut off after it landed, one refused in an election, one with a write-concern error: each counted once', async () => {
    const server = await standin();
    const agent = await readyAgent(s, owner);
    const before = await allTime();
    const kinds = ['close-after', 'not-writable-primary', 'write-concern-error'] as const;
    for (const kind of kinds) {
      const fired = server.faults.fired[kind];
      server.faults.inject({ kind, commands: ['insert'], collection: 'token_ledger' });
      agent.recordUsage(1000, 100);
      const acked = once(agent, 'heartbeatAck', 20_000);
      agent.heartbeat();
      await acked;
      assert.is(server.faults.fired[kind], fired + 1, `${kind} fired`);
    }
    assert.equal(await allTime(), { promptTokens: before.promptTokens + 3000, completionTokens: before.completionTokens + 300 });
    assert.is(await ledgerDocsOf(agent.did), 3, 'one ledger document per heartbeat');
    await agent.stop();
  });
}

test('a ledger write that lands and reports failure is counted once', async () => {
  const agent = await readyAgent(s, owner);
  const before = await allTime();
  faults.add({ collection: 'token_ledger', op: 'insertMany', mode: 'land-then-fail' });
  agent.recordUsage(1000, 100);
  const acked = once(agent, 'heartbeatAck', 20_000);
  agent.heartbeat();
  assert.is(await acked, 1);
  assert.equal(faults.injected, ['token_ledger.insertMany land-then-fail']);
  assert.equal(await allTime(), { promptTokens: before.promptTokens + 1000, completionTokens: before.completionTokens + 100 });
  await fleet(s).tokens.rollup();
  assert.equal((await fleet(s).tokens.ofAgent(agent.did)).allTime, { promptTokens: 1000, completionTokens: 100 });
  assert.equal(await allTime(), { promptTokens: before.promptTokens + 1000, completionTokens: before.completionTokens + 100 });
  await agent.stop();
});

test('while a failed write waits to be completed, roll-ups leave its documents, and a resend on a new connection is counted once', async () => {
  const agent = await readyAgent(s, owner);
  const tokens = fleet(s).tokens;
  const before = await allTime();
  faults.add({ collection: 'token_ledger', op: 'insertMany', mode: 'land-then-fail' });
  // The read-back that would complete the write fails until the rule is removed.
  const readBackFails = faults.add({
    collection: 'token_ledger',
    op: 'find',
    mode: 'fail',
    times: Infinity,
    when: (args) => JSON.stringify(args[0]).includes('$in'),
  });
  const readBackFailed = injection('token_ledger.find fail');
  agent.recordUsage(700, 70);
  const acked = once(agent, 'heartbeatAck', 30_000);
  agent.heartbeat();
  await readBackFailed();
  await tokens.rollup();
  assert.is(await ledgerDocsOf(agent.did), 1, 'the landed document is still in the ledger');
  // The connection drops; the agent comes back and sends seq 1 again (ready cannot say it is stored yet).
  const arrived = tokens.stats.heartbeats;
  const back = once(agent, 'certificate');
  (agent as any).ws.terminate();
  await back;
  await waitFor(() => tokens.stats.heartbeats > arrived);
  readBackFails();
  assert.is(await acked, 1);
  assert.equal(await allTime(), { promptTokens: before.promptTokens + 700, completionTokens: before.completionTokens + 70 });
  await tokens.rollup();
  assert.equal((await tokens.ofAgent(agent.did)).allTime, { promptTokens: 700, completionTokens: 70 });
  assert.is(tokens.lastStoredSeq(agent.did), 1);
  await agent.stop();
});

test('an insertMany that stores its first document and fails is completed, not doubled', async () => {
  const { raw } = await readyRawAgent(s, owner);
  const tokens = fleet(s).tokens;
  const before = await allTime();
  // The first write is held while 2,100 more heartbeats arrive: the next write is two documents
  // (2,000 entries each at most), and only the first of them is stored before the call fails.
  const { calls, release, restore } = heldThenPartlyStored(s.ctx.c.tokenLedger, 1, 'injected: the first document is stored, then the call fails');
  try {
    raw.send(heartbeat(1, 1, 1));
    await waitFor(() => calls.length === 1);
    const arrived = tokens.stats.heartbeats;
    for (let seq = 2; seq <= 2101; seq++) raw.send(heartbeat(seq, 1000, 1));
    await waitFor(() => tokens.stats.heartbeats === arrived + 2100, 20_000);
    release();
    for (let i = 0; i < 2101; i++) await raw.next('heartbeat_ack', 20_000);
  } finally {
    restore();
  }
  assert.equal(calls, [1, 2, 1], 'held, partly stored, completed with the missing document');
  const sent = { promptTokens: 1 + 2100 * 1000, completionTokens: 2101 };
  assert.equal(await allTime(), { promptTokens: before.promptTokens + sent.promptTokens, completionTokens: before.completionTokens + sent.completionTokens });
  await tokens.rollup();
  assert.equal((await tokens.ofAgent(raw.keys.did)).allTime, sent);
  raw.close();
});

test('a write still failing at shutdown stays as it landed: after the restart its seq is known, and it is counted once', async () => {
  const { raw } = await readyRawAgent(s, owner);
  const before = await allTime();
  faults.add({ collection: 'token_ledger', op: 'insertMany', mode: 'land-then-fail' });
  faults.add({ collection: 'token_ledger', op: 'find', mode: 'fail', times: Infinity, when: (args) => JSON.stringify(args[0]).includes('$in') });
  const readBackFailed = injection('token_ledger.find fail');
  raw.send(heartbeat(1, 500, 50));
  await readBackFailed();
  raw.close();
  s = await s.restart(); // the shutdown gives up on completing the write; its roll-up leaves the document
  faults.clear();
  owner = await ownerOf(s);
  assert.equal(await allTime(), { promptTokens: before.promptTokens + 500, completionTokens: before.completionTokens + 50 });
  assert.equal((await fleet(s).tokens.ofAgent(raw.keys.did)).allTime, { promptTokens: 500, completionTokens: 50 }, 'folded at start');
  const again = new RawAgent(s.url, raw.keys);
  await again.authenticate();
  assert.is((await again.acceptNextOffer()).lastHeartbeatSeq, 1, 'stored, though never acknowledged');
  again.send(heartbeat(1, 500, 50)); // an agent that resends anyway is not counted again
  assert.is((await again.next('heartbeat_ack')).seq, 1);
  assert.equal(await allTime(), { promptTokens: before.promptTokens + 500, completionTokens: before.completionTokens + 50 });
  again.close();
});

/** The exact counts of a stats or agent text (JSON.parse would round them to doubles). */
function exactCounts(text: string, bucket: string): [bigint, bigint] {
  const m = new RegExp(`"${bucket}":\\{"promptTokens":(\\d+),"completionTokens":(\\d+)\\}`).exec(text);
  assert.ok(m, `${bucket} in ${text}`);
  return [BigInt(m![1]!), BigInt(m![2]!)];
}

test('totals stay exact past 2^53: ledger tail, roll-up (agent and global), JSON answers, restart', async () => {
  const { raw } = await readyRawAgent(s, owner);
  const did = raw.keys.did;
  const tokens = fleet(s).tokens;
  const statsText = async () => (await owner.api.get('/api/stats/tokens')).text;
  const agentText = async () => (await owner.api.get(`/api/agents/${encodeURIComponent(did)}`)).text;
  const before = exactCounts(await statsText(), 'allTime');
  // 9,007 heartbeats at the schema's largest delta, and one more: 2^53 + 1 prompt tokens (no double holds it).
  const beats: Array<[number, number]> = [];
  for (let i = 0; i < 9007; i++) beats.push([1_000_000_000_000, 1_000_000_000_000]);
  beats.push([199_254_740_993, 300_000_000_001]);
  const sent: [bigint, bigint] = [2n ** 53n + 1n, 9_007_300_000_000_001n];
  beats.forEach(([p, c], i) => raw.send(heartbeat(i + 1, p, c)));
  for (let i = 0; i < beats.length; i++) await raw.next('heartbeat_ack', 30_000);
  const expected = (extra: [bigint, bigint] = [0n, 0n]): [bigint, bigint] => [before[0] + sent[0] + extra[0], before[1] + sent[1] + extra[1]];
  // From the ledger not folded yet.
  let text = await statsText();
  assert.equal(exactCounts(text, 'allTime'), expected());
  assert.equal(exactCounts(text, 'daily'), exactCounts(text, 'allTime'), 'everything of this suite is from today');
  // From the roll-up: the agent's document and the global one.
  await tokens.rollup();
  text = await statsText();
  assert.equal(exactCounts(text, 'allTime'), expected());
  assert.equal(exactCounts(text, 'monthly'), expected());
  assert.equal(exactCounts(await agentText(), 'allTime'), sent);
  assert.equal(exactCounts(await agentText(), 'daily'), sent);
  const stored = await s.ctx.c.tokenUsage.find({ _id: { $in: ['global', did] } });
  for (const doc of stored) {
    for (const counts of [doc.allTime, ...Object.values(doc.days), ...Object.values(doc.months)]) {
      for (const n of Object.values(counts)) assert.ok(Number.isSafeInteger(n), `stored counts are safe integers: ${JSON.stringify(counts)}`);
    }
  }
  // More on top, folded into the totals already past 2^53.
  raw.send(heartbeat(beats.length + 1, 999_999_999_999, 1));
  await raw.next('heartbeat_ack');
  const more: [bigint, bigint] = [999_999_999_999n, 1n];
  await tokens.rollup();
  assert.equal(exactCounts(await statsText(), 'allTime'), expected(more));
  assert.equal(exactCounts(await agentText(), 'allTime'), [sent[0] + more[0], sent[1] + more[1]]);
  raw.close();
  // And after a restart.
  s = await s.restart();
  owner = await ownerOf(s);
  assert.equal(exactCounts(await statsText(), 'allTime'), expected(more));
  assert.equal(exactCounts(await agentText(), 'allTime'), [sent[0] + more[0], sent[1] + more[1]]);
});

test.run();
