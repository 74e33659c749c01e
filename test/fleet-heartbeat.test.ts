import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { makeUser, ownerOf } from './fixtures.js';
import { waitFor } from './helpers.js';
import { fleet, heartbeat, isError, once, readyAgent, readyRawAgent, startWithOwner } from './fleet-helpers.js';
import { makeAgent } from './people-helpers.js';
import { GLOBAL_ID, utcDay, utcMonth } from '../src/services/token-usage.js';

/** The days the fleet-wide totals keep (TOKEN_HISTORY_DAYS_KEPT, default). */
const DAYS_KEPT = 90; // TOKEN_HISTORY_DAYS_KEPT by default

const test = suite('fleet heartbeats and token statistics');
let ctx = {} as Awaited<ReturnType<typeof startWithOwner>>;

test.before(async () => {
  ctx = await startWithOwner({ TOKEN_ROLLUP_INTERVAL_SECONDS: '3600' });
});
test.after(async () => {
  await ctx.s.stop(true);
});

async function beat(agent: Awaited<ReturnType<typeof readyAgent>>, p: number, c: number) {
  agent.recordUsage(p, c);
  const acked = once<number>(agent, 'heartbeatAck');
  agent.heartbeat();
  return acked;
}

test('deltas of several agents add up, offline agents included, and survive roll-up and restart', async () => {
  const { s, owner } = ctx;
  const empty = await owner.api.get('/api/stats/tokens');
  assert.is(empty.status, 200);
  assert.equal(empty.body, {
    allTime: { promptTokens: 0, completionTokens: 0 },
    daily: { promptTokens: 0, completionTokens: 0 },
    monthly: { promptTokens: 0, completionTokens: 0 },
  });
  const a = await readyAgent(s, owner);
  const b = await readyAgent(s, owner);
  await beat(a, 100, 10);
  await beat(b, 200, 20);
  await beat(a, 1, 2);
  await b.stop(); // offline agents still count
  const expected = { promptTokens: 301, completionTokens: 32 };
  let stats = (await owner.api.get('/api/stats/tokens')).body;
  assert.equal(stats, { allTime: expected, daily: expected, monthly: expected });

  // Roll-up folds the ledger into per-agent and global buckets without counting anything twice.
  await fleet(s).tokens.rollup();
  assert.is(await s.ctx.c.tokenLedger.count({}), 0);
  stats = (await owner.api.get('/api/stats/tokens')).body;
  assert.equal(stats, { allTime: expected, daily: expected, monthly: expected });
  const now = new Date();
  const perA = await s.ctx.c.tokenUsage.findById(a.did);
  assert.equal(perA?.allTime, { promptTokens: 101, completionTokens: 12 });
  assert.equal(perA?.days[utcDay(now)], { promptTokens: 101, completionTokens: 12 });
  assert.equal(perA?.months[utcMonth(now)], { promptTokens: 101, completionTokens: 12 });
  const global = await s.ctx.c.tokenUsage.findById(GLOBAL_ID);
  assert.equal(global?.allTime, expected);
  const detail = await owner.api.get(`/api/agents/${encodeURIComponent(a.did)}`);
  assert.equal(detail.body.agent.tokenUsage.allTime, { promptTokens: 101, completionTokens: 12 });

  // More usage after the roll-up: ledger tail plus rolled-up totals.
  await beat(a, 9, 8);
  stats = (await owner.api.get('/api/stats/tokens')).body;
  assert.equal(stats.allTime, { promptTokens: 310, completionTokens: 40 });
  await a.stop();

  // A restart rolls up at shutdown and keeps everything.
  ctx.s = await s.restart();
  ctx.owner = await ownerOf(ctx.s);
  stats = (await ctx.owner.api.get('/api/stats/tokens')).body;
  assert.equal(stats.allTime, { promptTokens: 310, completionTokens: 40 });
  assert.is(await ctx.s.ctx.c.tokenLedger.count({}), 0);
});

test('ledger lines keep every count exactly, from 0 to the largest a heartbeat may carry', async () => {
  const { s, owner } = ctx;
  const agents = await Promise.all([readyAgent(s, owner), readyAgent(s, owner), readyAgent(s, owner)]);
  const counts: Array<[number, number]> = [[1_000_000_000_000, 0], [987_654_321, 10], [7, 999_999_999_999]];
  await Promise.all(agents.map((a, i) => beat(a, ...counts[i]!)));
  const texts = (await s.ctx.c.tokenLedger.find({})).map((d) => d.entries);
  assert.ok(texts.every((t) => !t.includes('\n')), 'entries are joined by ; (nothing for JSON to escape)');
  const entries = texts.flatMap((t) => t.split(';'));
  // `<did> <prompt> <completion> <seq>`: the SDK numbers an agent's first heartbeat 1.
  for (const [i, a] of agents.entries()) assert.ok(entries.includes(`${a.did} ${counts[i]![0]} ${counts[i]![1]} 1`), 'one entry per heartbeat');
  await fleet(s).tokens.rollup();
  for (const [i, a] of agents.entries()) {
    assert.equal((await fleet(s).tokens.ofAgent(a.did)).allTime, { promptTokens: counts[i]![0], completionTokens: counts[i]![1] });
    await a.stop();
  }
});

test('a roll-up after a crash between the per-agent and the global write counts nothing twice', async () => {
  const { s, owner } = ctx;
  const agent = await readyAgent(s, owner);
  await beat(agent, 50, 5);
  const tokens = fleet(s).tokens;
  // Simulate a roll-up that wrote the agent's bucket and then died: apply it by hand, leave the ledger.
  const [ledger] = await s.ctx.c.tokenLedger.find({});
  const before = (await owner.api.get('/api/stats/tokens')).body.allTime;
  await s.ctx.c.tokenUsage.updateOne(
    { _id: agent.did },
    { $inc: { 'allTime.promptTokens': 50, 'allTime.completionTokens': 5 }, $set: { rolledUpTo: ledger!._id } },
    { upsert: true },
  );
  (tokens as any).clean = false; // what a failure (or a restart) leaves behind
  await tokens.rollup();
  assert.equal((await s.ctx.c.tokenUsage.findById(agent.did))?.allTime, { promptTokens: 50, completionTokens: 5 });
  assert.equal((await owner.api.get('/api/stats/tokens')).body.allTime, before);
  await agent.stop();
});

/** Holds the token ledger's writes until `release()` (the write of a heartbeat in flight while its socket closes). */
function holdLedgerWrites(s: typeof ctx.s) {
  const ledger = s.ctx.c.tokenLedger as any;
  const original = ledger.insertMany.bind(ledger);
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let started = 0;
  ledger.insertMany = async (docs: unknown[]) => {
    started++;
    await gate;
    return original(docs);
  };
  return {
    started: () => started,
    release: () => {
      ledger.insertMany = original;
      release();
    },
  };
}

test('a heartbeat sent again under a seq already stored is acknowledged, not counted again; ready says the last seq stored, also after a restart', async () => {
  const { s, owner } = ctx;
  const { raw: first, ready } = await readyRawAgent(s, owner);
  const { keys } = first;
  const did = keys.did;
  assert.is(ready.lastHeartbeatSeq, null, 'nothing stored for this agent yet');
  first.send(heartbeat(1, 10, 1));
  first.send(heartbeat(1, 10, 1)); // the same seq again on the same connection (in the same batch, most likely)
  assert.is((await first.next('heartbeat_ack')).seq, 1);
  assert.is((await first.next('heartbeat_ack')).seq, 1, 'acknowledged too');
  first.send(heartbeat(2, 0, 0)); // nothing to store: not a stored seq
  assert.is((await first.next('heartbeat_ack')).seq, 2);
  first.close();
  await waitFor(() => !fleet(s).gateway.isOnline(did));

  const { raw: second, ready: again } = await readyRawAgent(s, owner, keys);
  assert.is(again.lastHeartbeatSeq, 1);
  second.send(heartbeat(1, 10, 1)); // its ack was "lost": sent again
  assert.is((await second.next('heartbeat_ack')).seq, 1, 'acknowledged');
  second.send(heartbeat(3, 5, 0));
  assert.is((await second.next('heartbeat_ack')).seq, 3);
  second.close();
  await waitFor(() => !fleet(s).gateway.isOnline(did));

  // A restart: the roll-up at shutdown folds seqs 1 and 3 and keeps the last one.
  ctx.s = await s.restart();
  ctx.owner = await ownerOf(ctx.s);
  const tokens = fleet(ctx.s).tokens;
  assert.equal((await tokens.ofAgent(did)).allTime, { promptTokens: 15, completionTokens: 1 }, 'seq 1 counted once');
  assert.is((await ctx.s.ctx.c.tokenUsage.findById(did))?.lastSeq, 3, 'the roll-up keeps the last seq');
  const { raw: third, ready: afterRestart } = await readyRawAgent(ctx.s, ctx.owner, keys);
  assert.is(afterRestart.lastHeartbeatSeq, 3, 'known after a restart');
  third.send(heartbeat(3, 5, 0));
  assert.is((await third.next('heartbeat_ack')).seq, 3);
  third.send(heartbeat(4, 1, 1));
  assert.is((await third.next('heartbeat_ack')).seq, 4);
  third.close();
  await tokens.rollup();
  assert.equal((await tokens.ofAgent(did)).allTime, { promptTokens: 16, completionTokens: 2 });

  // After a crash the ledger not yet folded still holds the seqs: they are read at start.
  await ctx.s.ctx.c.tokenLedger.insertOne({ _id: '~crash', at: new Date().toISOString(), day: utcDay(new Date()), month: utcMonth(new Date()), promptTokens: 1, completionTokens: 1, entries: `${did} 1 1 9` });
  await (tokens as any).loadStored();
  assert.is(tokens.lastStoredSeq(did), 9);
  await ctx.s.ctx.c.tokenLedger.deleteOne({ _id: '~crash' });
});

for (const when of ['before', 'after'] as const) {
  test(`SDK: a delta stored while its socket closed (ack lost) is counted once when ready comes ${when} the write`, async () => {
    const { s, owner } = ctx;
    const agent = await readyAgent(s, owner);
    const hold = holdLedgerWrites(s);
    try {
      const tokens = fleet(s).tokens;
      agent.recordUsage(30, 3);
      agent.heartbeat();
      await waitFor(() => hold.started() === 1); // the write has begun
      const reconnected = once(agent, 'certificate');
      (agent as any).ws.terminate(); // the connection drops; the ack will not reach the agent
      if (when === 'after') {
        hold.release(); // stored before the agent is back: its ready says seq 1 is stored
        await reconnected;
      } else {
        const arrived = tokens.stats.heartbeats;
        await reconnected; // back while the write still hangs: ready says nothing is stored ...
        await waitFor(() => tokens.stats.heartbeats > arrived); // ... so the SDK sends seq 1 again
        hold.release();
      }
      await waitFor(() => agent.unacknowledgedUsage().promptTokens === 0);
      agent.recordUsage(1, 0);
      await beat(agent, 0, 0);
      await tokens.rollup();
      assert.equal((await tokens.ofAgent(agent.did)).allTime, { promptTokens: 31, completionTokens: 3 });
    } finally {
      hold.release(); // (again: a no-op once released)
      await agent.stop();
    }
  });
}

test('heartbeats arriving together are written as one ledger document', async () => {
  const { s, owner } = ctx;
  const { raw } = await readyRawAgent(s, owner);
  const tokens = fleet(s).tokens;
  const writes = tokens.stats.ledgerWrites;
  const n = 50;
  const burst = Array.from({ length: n }, (_, i) => JSON.stringify(heartbeat(i + 1, 1, 1)));
  for (const f of burst) raw.ws.send(f);
  for (let i = 1; i <= n; i++) assert.is((await raw.next('heartbeat_ack')).seq, i, 'acks in order');
  const used = tokens.stats.ledgerWrites - writes;
  assert.ok(used >= 1 && used < n, `${n} heartbeats took ${used} ledger writes`);
  // Ack frames are written digit by digit into a scratch buffer: every length of seq comes back right.
  const seqs = [0, 9, 10, 99, 100, 123456789, 2 ** 32, Number.MAX_SAFE_INTEGER, 7];
  for (const seq of seqs) raw.send(heartbeat(seq, 0, 0));
  for (const seq of seqs) assert.is((await raw.next('heartbeat_ack')).seq, seq);
  raw.close();
});

test('TOKEN_LEDGER_WRITE_GAP_MS: heartbeats arriving within the gap after a ledger write wait and share the next one', async () => {
  const own = await startWithOwner({ TOKEN_ROLLUP_INTERVAL_SECONDS: '3600', TOKEN_LEDGER_WRITE_GAP_MS: '1000' });
  try {
    const { raw } = await readyRawAgent(own.s, own.owner);
    const tokens = fleet(own.s).tokens;
    const beat = (seq: number) => raw.send(heartbeat(seq, 1, 0));
    const writes = tokens.stats.ledgerWrites;
    beat(1);
    assert.is((await raw.next('heartbeat_ack')).seq, 1);
    // Both arrive within a second of the first write, 100 ms apart: one write for the two.
    beat(2);
    await new Promise((r) => setTimeout(r, 100));
    beat(3);
    assert.is((await raw.next('heartbeat_ack')).seq, 2);
    assert.is((await raw.next('heartbeat_ack')).seq, 3);
    assert.is(tokens.stats.ledgerWrites - writes, 2, 'three heartbeats, two ledger writes');
    // A burst of more than 64 does not wait out the gap: it is written as soon as it has gathered.
    const early = tokens.stats.earlyWrites;
    for (let i = 4; i < 4 + 300; i++) beat(i);
    for (let i = 4; i < 4 + 300; i++) assert.is((await raw.next('heartbeat_ack')).seq, i);
    assert.ok(tokens.stats.earlyWrites > early, 'a write started early');
    raw.close();
  } finally {
    await own.s.stop(true);
  }
});

test('lastSeen follows the socket; isOnline is false once it closes', async () => {
  const { s, owner } = ctx;
  const agent = await readyAgent(s, owner);
  const t0 = Date.now();
  await beat(agent, 0, 0);
  let d = (await owner.api.get(`/api/agents/${encodeURIComponent(agent.did)}`)).body.agent;
  assert.is(d.isOnline, true);
  assert.ok(Date.parse(d.lastSeen) >= t0 - 5);
  await agent.stop();
  await waitFor(() => !fleet(s).gateway.isOnline(agent.did));
  d = (await owner.api.get(`/api/agents/${encodeURIComponent(agent.did)}`)).body.agent;
  assert.is(d.isOnline, false);
  assert.ok(Date.parse(d.lastSeen) >= t0 - 5);
  await fleet(s).service.writeLastSeen();
  assert.is((await s.ctx.c.agents.findById(agent.did))?.lastSeen, d.lastSeen, 'written to the store in the next batch');
});

test('a roll-up over ledger documents of two UTC days fills each day\'s bucket, month and allTime', async () => {
  const { s, owner } = ctx;
  const tokens = fleet(s).tokens;
  await tokens.rollup();
  const [a, b] = [await makeAgent(s, 'two-days-a'), await makeAgent(s, 'two-days-b')];
  const now = Date.now();
  const [d1, d2] = [utcDay(new Date(now - 86_400_000)), utcDay(new Date(now))];
  // The first document is in the older form (entries joined by newlines), the second in the current one (by ;).
  const ledgerDoc = (id: string, day: string, lines: Array<[string, number, number]>, separator = ';') => ({
    _id: id,
    at: new Date(now).toISOString(),
    day,
    month: day.slice(0, 7),
    promptTokens: lines.reduce((t, l) => t + l[1], 0),
    completionTokens: lines.reduce((t, l) => t + l[2], 0),
    entries: lines.map((l) => l.join(' ')).join(separator),
  });
  const global0 = (await owner.api.get('/api/stats/tokens')).body;
  await s.ctx.c.tokenLedger.insertMany([
    ledgerDoc('zz-two-days-1', d1, [[a._id, 10, 1], [b._id, 20, 2], [a._id, 5, 0]], '\n'),
    ledgerDoc('zz-two-days-2', d2, [[a._id, 4, 3], [a._id, 3, 0]]),
  ]);
  await tokens.rollup();
  assert.is(await s.ctx.c.tokenLedger.count({ _id: { $in: ['zz-two-days-1', 'zz-two-days-2'] } }), 0, 'folded ledger documents are deleted');
  const ua = await s.ctx.c.tokenUsage.findById(a._id);
  const ub = await s.ctx.c.tokenUsage.findById(b._id);
  assert.equal(ua?.allTime, { promptTokens: 22, completionTokens: 4 });
  assert.equal(ua?.days, { [d1]: { promptTokens: 15, completionTokens: 1 }, [d2]: { promptTokens: 7, completionTokens: 3 } });
  const months: Record<string, { promptTokens: number; completionTokens: number }> = {};
  for (const [day, p, c] of [[d1, 15, 1], [d2, 7, 3]] as const) {
    const m = (months[day.slice(0, 7)] ??= { promptTokens: 0, completionTokens: 0 });
    m.promptTokens += p;
    m.completionTokens += c;
  }
  assert.equal(ua?.months, months, 'the month buckets (one, or two at the turn of a month)');
  assert.equal(ub?.allTime, { promptTokens: 20, completionTokens: 2 });
  assert.equal(ub?.days, { [d1]: { promptTokens: 20, completionTokens: 2 } });
  const global1 = (await owner.api.get('/api/stats/tokens')).body;
  assert.equal(global1.allTime, { promptTokens: global0.allTime.promptTokens + 42, completionTokens: global0.allTime.completionTokens + 6 });
  assert.equal(global1.daily, { promptTokens: global0.daily.promptTokens + 7, completionTokens: global0.daily.completionTokens + 3 }, "today's bucket only");
});

/**
 * Gives an agent and the global totals buckets of many ages, runs the once-a-day prune, and
 * returns which days and months each still has.
 */
async function pruneScenario(s: Awaited<ReturnType<typeof startWithOwner>>['s'], name: string) {
  const tokens = fleet(s).tokens;
  await tokens.rollup();
  const agent = await makeAgent(s, name);
  const now = new Date();
  const dayAgo = (n: number) => utcDay(new Date(now.getTime() - n * 86_400_000));
  const monthAgo = (n: number) => utcMonth(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - n, 1)));
  const bucket = { promptTokens: 1, completionTokens: 1 };
  const dayAges = [0, 1, 2, 4, 5, DAYS_KEPT - 1, DAYS_KEPT, DAYS_KEPT + 2, DAYS_KEPT + 9];
  const monthAges = [0, 1, 2, 3, 30];
  const days = Object.fromEntries(dayAges.map((n) => [dayAgo(n), bucket]));
  const months = Object.fromEntries(monthAges.map((n) => [monthAgo(n), bucket]));
  await s.ctx.c.tokenUsage.insertOne({ _id: agent._id, allTime: bucket, days, months, rolledUpTo: '', updatedAt: now.toISOString() });
  await s.ctx.c.tokenUsage.updateOne(
    { _id: GLOBAL_ID },
    { $set: { ...Object.fromEntries(Object.keys(days).map((d) => [`days.${d}`, bucket])), ...Object.fromEntries(Object.keys(months).map((m) => [`months.${m}`, bucket])) } },
    { upsert: true },
  );
  (tokens as any).prunedDay = ''; // as after a restart, or on the next UTC day
  await tokens.rollup();
  const mine = (await s.ctx.c.tokenUsage.findById(agent._id))!;
  const global = (await s.ctx.c.tokenUsage.findById(GLOBAL_ID))!;
  const ages = (keys: string[], of: (n: number) => string, all: number[]) => all.filter((n) => keys.includes(of(n)));
  return {
    agentDays: ages(Object.keys(mine.days), dayAgo, dayAges),
    agentMonths: ages(Object.keys(mine.months), monthAgo, monthAges),
    globalDays: ages(Object.keys(global.days), dayAgo, dayAges),
    globalMonths: ages(Object.keys(global.months), monthAgo, monthAges),
    allTime: mine.allTime,
  };
}

test('old buckets are pruned: an agent keeps 2 days and 2 months by default, the global totals TOKEN_HISTORY_DAYS_KEPT (90) days and every month; also days the server did not run on', async () => {
  const { s, owner } = ctx;
  const kept = await pruneScenario(s, 'old-buckets');
  assert.equal(kept.agentDays, [0, 1], 'agent: today and yesterday');
  assert.equal(kept.agentMonths, [0, 1], 'agent: this month and the last');
  assert.equal(kept.globalDays, [0, 1, 2, 4, 5, DAYS_KEPT - 1], `global: ${DAYS_KEPT} days`);
  assert.equal(kept.globalMonths, [0, 1, 2, 3, 30], 'global: every month');
  assert.equal(kept.allTime, { promptTokens: 1, completionTokens: 1 }, 'allTime untouched');
  assert.is((await owner.api.get('/api/stats/tokens')).status, 200);
});

test('TOKEN_AGENT_DAYS_KEPT and TOKEN_AGENT_MONTHS_KEPT (0: every month) set what an agent keeps', async () => {
  const other = await startWithOwner({ TOKEN_ROLLUP_INTERVAL_SECONDS: '3600', TOKEN_AGENT_DAYS_KEPT: '5', TOKEN_AGENT_MONTHS_KEPT: '0' });
  try {
    const kept = await pruneScenario(other.s, 'old-buckets-configured');
    assert.equal(kept.agentDays, [0, 1, 2, 4]);
    assert.equal(kept.agentMonths, [0, 1, 2, 3, 30]);
    assert.equal(kept.globalDays, [0, 1, 2, 4, 5, DAYS_KEPT - 1]);
  } finally {
    await other.s.stop(true);
  }
});

test('lastSeen is written in chunks: disconnected agents, then connected ones', async () => {
  const { s } = ctx;
  const service = fleet(s).service;
  await service.writeLastSeen();
  const gone = await Promise.all(Array.from({ length: 130 }, (_, i) => makeAgent(s, `gone-${i}`)));
  const live = await Promise.all(Array.from({ length: 230 }, (_, i) => makeAgent(s, `live-${i}`)));
  const t = Date.parse('2026-01-02T03:04:05.000Z');
  gone.forEach((a, i) => service.seen(a._id, t + i));
  const presence = fleet(s).gateway;
  const collect = presence.collectActive;
  let collected = 0;
  presence.collectActive = () => {
    collected++;
    return { dids: live.map((a) => a._id), ms: live.map((_, i) => t + 1000 + i) };
  };
  const writes: number[] = [];
  const bulkUpdate = s.ctx.c.agents.bulkUpdate.bind(s.ctx.c.agents);
  s.ctx.c.agents.bulkUpdate = (ops) => {
    writes.push(ops.length);
    return bulkUpdate(ops);
  };
  try {
    await service.writeLastSeen();
  } finally {
    presence.collectActive = collect;
    s.ctx.c.agents.bulkUpdate = bulkUpdate;
  }
  assert.is(collected, 1);
  assert.equal(writes, [100, 30, 100, 100, 30], 'disconnected agents first, then connected ones, 100 per store call');
  for (const [i, a] of gone.entries()) {
    assert.is((await s.ctx.c.agents.findById(a._id))?.lastSeen, new Date(t + i).toISOString());
    assert.is(service.pendingLastSeen(a._id), undefined, 'no longer pending once written');
  }
  for (const [i, a] of live.entries()) assert.is((await s.ctx.c.agents.findById(a._id))?.lastSeen, new Date(t + 1000 + i).toISOString());

  // A failed write keeps its values pending, and the next round writes them.
  const again = gone.slice(0, 3);
  again.forEach((a, i) => service.seen(a._id, t + 5000 + i));
  s.ctx.c.agents.bulkUpdate = () => Promise.reject(new Error('store down'));
  try {
    await service.writeLastSeen();
  } finally {
    s.ctx.c.agents.bulkUpdate = bulkUpdate;
  }
  for (const [i, a] of again.entries()) {
    assert.is(service.pendingLastSeen(a._id), new Date(t + 5000 + i).toISOString(), 'still pending after the failure');
    assert.is((await s.ctx.c.agents.findById(a._id))?.lastSeen, new Date(t + i).toISOString(), 'not written');
  }
  await service.writeLastSeen();
  for (const [i, a] of again.entries()) {
    assert.is((await s.ctx.c.agents.findById(a._id))?.lastSeen, new Date(t + 5000 + i).toISOString());
    assert.is(service.pendingLastSeen(a._id), undefined);
  }
});

test('each acknowledged heartbeat is observed in steward_heartbeat_ack_seconds, exposed as a Prometheus histogram', async () => {
  const { s, owner } = ctx;
  const scrape = async () => {
    const text = await (await fetch(`${s.url}/metrics`)).text();
    const value = (line: RegExp) => Number(text.match(line)?.[1]);
    const buckets = [...text.matchAll(/^steward_heartbeat_ack_seconds_bucket\{le="([^"]+)"\} (\S+)$/gm)].map((m) => [m[1]!, Number(m[2])] as const);
    return {
      text,
      buckets,
      sum: value(/^steward_heartbeat_ack_seconds_sum (\S+)$/m),
      count: value(/^steward_heartbeat_ack_seconds_count (\S+)$/m),
    };
  };
  const before = await scrape();
  assert.match(before.text, /^# TYPE steward_heartbeat_ack_seconds histogram$/m);
  const agent = await readyAgent(s, owner);
  for (let i = 0; i < 3; i++) await beat(agent, 1, 1);
  await agent.stop();
  const after = await scrape();
  assert.is(after.count - before.count, 3);
  assert.ok(after.sum > before.sum, 'the sum grows by the three latencies');
  assert.equal(after.buckets.map(([le]) => le), ['0.001', '0.0025', '0.005', '0.01', '0.02', '0.03', '0.04', '0.05', '0.075', '0.1', '0.15', '0.2', '0.25', '0.5', '1', '2.5', '+Inf']);
  for (let i = 1; i < after.buckets.length; i++) assert.ok(after.buckets[i]![1] >= after.buckets[i - 1]![1], 'buckets are cumulative');
  assert.is(after.buckets.at(-1)![1], after.count, '+Inf counts every observation');
});

test('GET /api/stats/tokens is for global admins', async () => {
  const { s } = ctx;
  const member = await makeUser(s, { workspaces: { [s.ctx.defaultWorkspace._id]: 'owner' } });
  isError(await member.api.get('/api/stats/tokens'), 403);
  const r = await fetch(`${s.url}/api/stats/tokens`);
  assert.is(r.status, 401);
});

test.run();
