import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { makeUser, type TestUser } from './fixtures.js';
import { client, http } from './helpers.js';
import { enc, fleet, isError, makeWorkspace, once, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import { historyDays, utcDay, utcMonth } from '../src/services/token-usage.js';
import type { StewardAgent } from '../src/agent/index.js';

const test = suite('token usage series');
const DAY = 86_400_000;
const T0 = Date.now();
const dayAt = (k: number) => utcDay(new Date(T0 - k * DAY));
const ctx = {} as Awaited<ReturnType<typeof startWithOwner>> & {
  wsA: { id: string; slug: string; name: string };
  wsB: { id: string; slug: string; name: string };
  a: StewardAgent; // in A
  b: StewardAgent; // in B
  member: TestUser;
};
/** What each agent used, by days ago: [prompt, completion]. */
const USED = {
  a: { 40: [100, 10], 39: [200, 20], 1: [300, 30], 0: [400, 40] },
  b: { 40: [5, 5] },
} as const;

async function beat(agent: StewardAgent, p: number, c: number) {
  agent.recordUsage(p, c);
  const acked = once<number>(agent, 'heartbeatAck');
  agent.heartbeat();
  await acked;
}

test.before(async () => {
  Object.assign(ctx, await startWithOwner({ TOKEN_ROLLUP_INTERVAL_SECONDS: '3600' }));
  const { s, owner } = ctx;
  ctx.wsA = await makeWorkspace(owner, 'Alpha');
  ctx.wsB = await makeWorkspace(owner, 'Beta');
  ctx.a = await readyAgent(s, owner, { name: 'agent-a', workspace: ctx.wsA.id });
  ctx.b = await readyAgent(s, owner, { name: 'agent-b', workspace: ctx.wsB.id });
  ctx.member = await makeUser(s, { workspaces: { [ctx.wsA.id]: 'member' } });
  // Heartbeats dated by the roll-up's clock, days apart, each day rolled up (and pruned once a day) as the server would.
  const tokens = fleet(s).tokens;
  for (const ago of [40, 39, 1, 0]) {
    tokens.clock = () => T0 - ago * DAY;
    for (const [agent, used] of [[ctx.a, USED.a], [ctx.b, USED.b]] as const) {
      const counts = (used as Record<number, readonly [number, number]>)[ago];
      if (counts) await beat(agent, counts[0], counts[1]);
    }
    await tokens.rollup();
  }
});
test.after(async () => {
  await stopAll(ctx.a, ctx.b);
  await ctx.s.stop(true);
});

/** The expected points of a day range, zeros included. */
function expectedDays(used: Record<number, readonly [number, number]>[], fromAgo: number, toAgo: number) {
  const out: Array<{ bucket: string; tokens: number; promptTokens: number; completionTokens: number }> = [];
  for (let k = fromAgo; k >= toAgo; k--) {
    let p = 0;
    let c = 0;
    for (const u of used) {
      p += u[k]?.[0] ?? 0;
      c += u[k]?.[1] ?? 0;
    }
    out.push({ bucket: dayAt(k), tokens: p + c, promptTokens: p, completionTokens: c });
  }
  return out;
}

const get = async (api: ReturnType<typeof client>, query: string) => {
  const r = await api.get(`/api/stats/tokens/series?${query}`);
  assert.is(r.status, 200, r.text);
  return r.body;
};

test('the roll-up keeps the history: past days in month documents, recent ones in the usage document', async () => {
  const { c } = ctx.s.ctx;
  const heldDays = async (did: string) =>
    (await c.tokenAgentMonths.find({ agentDid: did })).flatMap((m) => historyDays(m.days).map(([dd, p, cc]) => [`${m.month}-${dd}`, Number(p), Number(cc)])).sort();
  assert.equal(await heldDays(ctx.a.did), [[dayAt(40), 100, 10], [dayAt(39), 200, 20]].sort());
  const usage = await c.tokenUsage.findById(ctx.a.did);
  assert.equal(Object.keys(usage!.days).sort(), [dayAt(1), dayAt(0)].sort(), 'the usage document keeps TOKEN_AGENT_DAYS_KEPT days');
  assert.equal(await heldDays(ctx.b.did), [[dayAt(40), 5, 5]], 'only days with usage');
});

test('an agent: every day of the range, its usage where the test made it, zeros elsewhere', async () => {
  const body = await get(ctx.owner.api, `scope=agent&id=${enc(ctx.a.did)}&granularity=day&from=${dayAt(45)}&to=${dayAt(0)}`);
  assert.is(body.scope, 'agent');
  assert.is(body.id, ctx.a.did);
  assert.is(body.granularity, 'day');
  assert.equal(body.points, expectedDays([USED.a], 45, 0));
  assert.is(body.total, 1100);
  assert.is(body.budget, null, 'no policy sets a daily budget');
});

test('default range: the last 30 days', async () => {
  const body = await get(ctx.owner.api, `scope=agent&id=${enc(ctx.a.did)}`);
  assert.is(body.points.length, 30);
  assert.is(body.points[29].bucket, dayAt(0));
  assert.is(body.total, 770, 'yesterday and today');
});

test('per month, for an agent, a workspace and the server', async () => {
  const months = new Map<string, number>();
  const add = (k: number, n: number) => months.set(utcMonth(new Date(T0 - k * DAY)), (months.get(utcMonth(new Date(T0 - k * DAY))) ?? 0) + n);
  for (const [k, [p, c]] of Object.entries(USED.a)) add(Number(k), p + c);
  const from = utcMonth(new Date(T0 - 40 * DAY));
  const to = utcMonth(new Date(T0));
  const agent = await get(ctx.owner.api, `scope=agent&id=${enc(ctx.a.did)}&granularity=month&from=${from}&to=${to}`);
  assert.equal(agent.points[0].bucket, from);
  assert.equal(agent.points[agent.points.length - 1].bucket, to);
  assert.equal(new Map(agent.points.filter((p: any) => p.tokens > 0).map((p: any) => [p.bucket, p.tokens])), months);
  const ws = await get(ctx.owner.api, `scope=workspace&id=${ctx.wsA.slug}&granularity=month&from=${from}&to=${to}`);
  assert.equal(ws.points, agent.points, "the workspace's usage is its agent's");
  assert.is(ws.id, ctx.wsA.id);
  const server = await get(ctx.owner.api, `scope=server&granularity=month&from=${from}&to=${to}`);
  assert.is(server.total, 1110);
  assert.is(server.id, null);
  const year = await get(ctx.owner.api, 'scope=server&granularity=month');
  assert.is(year.points.length, 12, 'default: the last 12 months');
  assert.is(year.total, 1110);
});

test('a workspace and the server per day', async () => {
  const b = await get(ctx.owner.api, `scope=workspace&id=${ctx.wsB.id}&from=${dayAt(41)}&to=${dayAt(38)}`);
  assert.equal(b.points, expectedDays([USED.b], 41, 38));
  const server = await get(ctx.owner.api, `scope=server&from=${dayAt(45)}&to=${dayAt(0)}`);
  assert.equal(server.points, expectedDays([USED.a, USED.b], 45, 0));
});

test("the budget: today's use against the agent's policy's maxTokensPerDay", async () => {
  const created = await ctx.owner.api.post('/api/policies', { agentDid: ctx.a.did, capabilities: ['file_access'], resourceLimits: { maxTokensPerDay: 1000 } });
  assert.is(created.status, 201, created.text);
  try {
    const body = await get(ctx.member.api, `scope=agent&id=${enc(ctx.a.did)}`);
    assert.equal(body.budget, { maxTokensPerDay: 1000, todayUsed: 440, todayFraction: 0.44 });
  } finally {
    await ctx.owner.api.del(`/api/policies/${created.body.policy.id}`);
  }
});

test('who may read which series: members their workspaces and agents, agents their own workspaces, the server for global admins', async () => {
  const { s } = ctx;
  const operator = await makeUser(s, { workspaces: { [ctx.wsA.id]: 'operator' } });
  const admin = await makeUser(s, { workspaces: { [ctx.wsA.id]: 'admin' } });
  for (const who of [ctx.member, operator, admin]) {
    assert.is((await get(who.api, `scope=workspace&id=${ctx.wsA.id}`)).total, 770);
    assert.is((await get(who.api, `scope=agent&id=${enc(ctx.a.did)}`)).total, 770);
    isError(await who.api.get(`/api/stats/tokens/series?scope=workspace&id=${ctx.wsB.id}`), 404);
    isError(await who.api.get(`/api/stats/tokens/series?scope=agent&id=${enc(ctx.b.did)}`), 404);
    isError(await who.api.get('/api/stats/tokens/series?scope=server'), 403);
  }
  const asAgent = client(s.url, ctx.a.session!.token);
  assert.is((await get(asAgent, `scope=workspace&id=${ctx.wsA.slug}`)).total, 770);
  assert.is((await get(asAgent, `scope=agent&id=${enc(ctx.a.did)}`)).total, 770);
  isError(await asAgent.get(`/api/stats/tokens/series?scope=agent&id=${enc(ctx.b.did)}`), 404);
  isError(await asAgent.get('/api/stats/tokens/series?scope=server'), 403);
  isError(await http(s.url, 'GET', '/api/stats/tokens/series?scope=server'), 401);
  isError(await ctx.owner.api.get('/api/stats/tokens/series?scope=workspace&id=nowhere'), 404);
  isError(await ctx.owner.api.get('/api/stats/tokens/series?scope=agent&id=did%3Akey%3Anope'), 404);
});

test('bad ranges are refused with 400', async () => {
  const api = ctx.owner.api;
  for (const query of [
    `scope=server&from=${dayAt(0)}&to=${dayAt(1)}`,
    `scope=server&from=${dayAt(366)}&to=${dayAt(0)}`,
    'scope=server&from=2026-02-30',
    'scope=server&from=yesterday',
    'scope=server&granularity=month&from=2025-01&to=2026-02',
    'scope=server&granularity=month&from=2026-13',
    'scope=agent',
    'scope=workspace',
    'scope=planet',
  ]) {
    isError(await api.get(`/api/stats/tokens/series?${query}`), 400);
  }
  assert.is((await api.get(`/api/stats/tokens/series?scope=server&from=${dayAt(365)}&to=${dayAt(0)}`)).body.points.length, 366);
});

test('top: the agents and workspaces that used the most in a day or month (global admins)', async () => {
  const api = ctx.owner.api;
  const old = await api.get(`/api/stats/tokens/top?by=agent&granularity=day&bucket=${dayAt(40)}`);
  assert.is(old.status, 200, old.text);
  assert.equal(old.body, {
    by: 'agent',
    granularity: 'day',
    bucket: dayAt(40),
    items: [
      { id: ctx.a.did, name: 'agent-a', tokens: 110 },
      { id: ctx.b.did, name: 'agent-b', tokens: 10 },
    ],
  });
  const today = await api.get('/api/stats/tokens/top');
  assert.equal(today.body.items, [{ id: ctx.a.did, name: 'agent-a', tokens: 440 }], 'default: agents, today');
  const limited = await api.get(`/api/stats/tokens/top?by=agent&bucket=${dayAt(40)}&limit=1`);
  assert.equal(limited.body.items.map((i: any) => i.id), [ctx.a.did]);
  const month = utcMonth(new Date(T0 - 40 * DAY));
  const ws = await api.get(`/api/stats/tokens/top?by=workspace&granularity=month&bucket=${month}`);
  assert.equal(ws.body.items.find((i: any) => i.id === ctx.wsB.id), { id: ctx.wsB.id, name: 'Beta', tokens: 10 });
  assert.equal(ws.body.items[0].id, ctx.wsA.id);
  isError(await api.get('/api/stats/tokens/top?bucket=2026-1-1'), 400);
  isError(await ctx.member.api.get('/api/stats/tokens/top'), 403);
  isError(await client(ctx.s.url, ctx.a.session!.token).get('/api/stats/tokens/top'), 403);
  isError(await http(ctx.s.url, 'GET', '/api/stats/tokens/top'), 401);
});

test.run();
