/**
 * The agents list from rows kept in memory (src/services/agent-roster.ts): a page or a search
 * reads no agent from the store; the rows follow approvals, LLM settings, disconnections and
 * deletions at once for whoever made them; pages in every order are slices of one sorted list
 * (src/domain/page-select.ts); a failed read of changed agents is logged and tried again by itself.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { generateKeyPair } from '../src/domain/did.js';
import { selectPage } from '../src/domain/page-select.js';
import type { AgentDoc } from '../src/store/collections.js';
import { logLines, waitFor, type TestServer } from './helpers.js';
import type { TestUser } from './fixtures.js';
import { approve, enc, fleet, newAgent, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import { FaultInjector } from './fault-store.js';

const test = suite('agents list');
const faults = new FaultInjector();
const log = logLines();
let s: TestServer;
let owner: TestUser;

test.before(async () => {
  ({ s, owner } = await startWithOwner({ LOG_LEVEL: 'warn' }, { logTo: log.sink, wrapStore: faults.wrap }));
});
test.after(async () => {
  await s.stop(true);
});

/** Counts the reads of the agents collection while `fn` runs. */
async function agentReads(fn: () => Promise<void>): Promise<number> {
  const agents = s.ctx.c.agents;
  const find = agents.find.bind(agents);
  const findById = agents.findById.bind(agents);
  let reads = 0;
  agents.find = ((...args: Parameters<typeof find>) => (reads++, find(...args))) as typeof find;
  agents.findById = ((...args: Parameters<typeof findById>) => (reads++, findById(...args))) as typeof findById;
  try {
    await fn();
  } finally {
    agents.find = find;
    agents.findById = findById;
  }
  return reads;
}

test('a page or a search reads no agent from the store; what an operator changes shows in the next page at once', async () => {
  const agent = await readyAgent(s, owner, { name: 'Roster-one', capabilities: ['file_access', 'api_call'] });
  const row = async () => (await owner.api.get(`/api/agents?q=${enc(agent.did)}`)).body.agents[0];
  const reads = await agentReads(async () => {
    for (const q of ['', '?q=roster', '?sortBy=lastSeen&sortDir=desc', '?online=true', '?capabilities=api_call', '?sortBy=registeredAt&page=2&pageSize=1']) {
      const r = await owner.api.get(`/api/agents${q}`);
      assert.is(r.status, 200, r.text);
    }
    assert.equal((await owner.api.get('/api/agents/search?q=roster-ONE')).body.agents.map((a: any) => a.did), [agent.did]);
  });
  assert.is(reads, 0, 'no read of the agents collection');
  assert.is((await row()).isOnline, true);

  // An LLM setting, answered: the next page shows it.
  assert.is((await owner.api.put(`/api/agents/${enc(agent.did)}/llm-config`, { provider: 'anthropic', model: 'claude-sonnet-4' })).status, 200);
  assert.equal([(await row()).llmProvider, (await row()).llmModel], ['anthropic', 'claude-sonnet-4']);

  // Disconnected: offline, with its last activity.
  await agent.stop();
  await waitFor(() => !fleet(s).gateway.isOnline(agent.did));
  const offline = await row();
  assert.is(offline.isOnline, false);
  assert.ok(offline.lastSeen && Date.parse(offline.lastSeen) >= Date.parse(offline.registeredAt), offline.lastSeen);

  // A new agent approved: listed as soon as the approval is answered; deleted: gone as soon as that is.
  const fresh = newAgent(s, { name: 'Roster-two' });
  await fresh.waitFor('pending');
  assert.is((await owner.api.get(`/api/agents?q=${enc(fresh.did)}`)).body.total, 0, 'pending agents are not listed');
  await approve(owner, fresh);
  assert.is((await owner.api.get(`/api/agents?q=${enc(fresh.did)}`)).body.total, 1);
  await stopAll(fresh);
  assert.is((await owner.api.del(`/api/agents/${enc(agent.did)}`)).status, 200);
  assert.is((await owner.api.get(`/api/agents?q=${enc(agent.did)}`)).body.total, 0);
  assert.is((await owner.api.get(`/api/agents/search?q=${enc(agent.did)}`)).body.agents.length, 0);
});

test('pages in every order and direction are slices of one sorted list (ties by DID)', async () => {
  const names = ['ord-alpha', 'ord-Alpha', 'ord-BETA', 'ord-beta', 'ord-gamma', 'ord-Delta'];
  const times = ['2026-01-01T00:00:00.000Z', '2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z'];
  const agents: AgentDoc[] = Array.from({ length: 90 }, (_, i) => {
    const keys = generateKeyPair();
    return {
      _id: keys.did,
      name: names[i % names.length]!,
      publicKey: keys.publicKey,
      version: '1.0.0',
      status: 'active' as const,
      capabilities: ['file_access' as const],
      requestedCapabilities: ['file_access' as const],
      registeredAt: times[i % times.length]!,
      lastSeen: i % 4 === 0 ? null : times[(i * 7) % times.length]!,
      isOnline: false,
    };
  });
  await s.ctx.c.agents.insertMany(agents);
  await fleet(s).roster.changed(agents.map((a) => a._id));
  const byDid = (a: AgentDoc, b: AgentDoc) => (a._id < b._id ? -1 : a._id > b._id ? 1 : 0);
  const keyOf = {
    name: (a: AgentDoc) => a.name.toLowerCase(),
    registeredAt: (a: AgentDoc) => a.registeredAt,
    lastSeen: (a: AgentDoc) => a.lastSeen ?? '',
  };
  for (const sortBy of ['name', 'registeredAt', 'lastSeen'] as const) {
    for (const sortDir of ['asc', 'desc'] as const) {
      const d = sortDir === 'asc' ? 1 : -1;
      const expected = [...agents]
        .sort((a, b) => {
          const ka = keyOf[sortBy](a);
          const kb = keyOf[sortBy](b);
          return ka !== kb ? (ka < kb ? -d : d) : byDid(a, b);
        })
        .map((a) => a._id);
      const got: string[] = [];
      for (let page = 1; page <= 13; page++) {
        const r = await owner.api.get(`/api/agents?q=ord-&sortBy=${sortBy}&sortDir=${sortDir}&page=${page}&pageSize=7`);
        assert.is(r.status, 200, r.text);
        assert.equal([r.body.total, r.body.totalPages], [90, 13]);
        got.push(...r.body.agents.map((a: any) => a.id));
      }
      assert.equal(got, expected, `${sortBy} ${sortDir}`);
    }
  }
});

test('without a filter, pages by name and by registration are slices of the whole list, a new agent takes its place at once, and the online count follows agents coming and going', async () => {
  /** Every page of the unfiltered list in one order, 7 rows a page. */
  const pages = async (sortBy: string, sortDir: string) => {
    const first = await owner.api.get(`/api/agents?sortBy=${sortBy}&sortDir=${sortDir}&pageSize=7`);
    assert.is(first.status, 200, first.text);
    const rows: any[] = [...first.body.agents];
    for (let page = 2; page <= first.body.totalPages; page++) rows.push(...(await owner.api.get(`/api/agents?sortBy=${sortBy}&sortDir=${sortDir}&pageSize=7&page=${page}`)).body.agents);
    assert.is(rows.length, first.body.total);
    return rows;
  };
  const check = async () => {
    for (const sortBy of ['name', 'registeredAt'] as const) {
      for (const sortDir of ['asc', 'desc'] as const) {
        const rows = await pages(sortBy, sortDir);
        const key = (r: any) => (sortBy === 'name' ? r.name.toLowerCase() : r.registeredAt);
        const d = sortDir === 'asc' ? 1 : -1;
        const expected = [...rows].sort((a, b) => (key(a) !== key(b) ? (key(a) < key(b) ? -d : d) : a.id < b.id ? -1 : 1));
        assert.equal(rows.map((r) => r.id), expected.map((r) => r.id), `${sortBy} ${sortDir}`);
      }
    }
    const all = (await owner.api.get('/api/agents?pageSize=1')).body;
    const on = (await owner.api.get('/api/agents?online=true&pageSize=1')).body;
    const off = (await owner.api.get('/api/agents?online=false&pageSize=1')).body;
    assert.equal([on.total + off.total, on.total, all.online], [all.total, all.online, on.online]);
    return all.total as number;
  };
  const before = await check();
  const keys = generateKeyPair();
  await s.ctx.c.agents.insertOne({
    _id: keys.did,
    name: 'aaa-first-by-name',
    publicKey: keys.publicKey,
    version: '1.0.0',
    status: 'active',
    capabilities: ['file_access'],
    requestedCapabilities: ['file_access'],
    registeredAt: '2000-01-01T00:00:00.000Z',
    lastSeen: null,
    isOnline: false,
  } as AgentDoc);
  await fleet(s).roster.changed([keys.did]);
  assert.is(await check(), before + 1);
  assert.is((await owner.api.get('/api/agents?sortBy=registeredAt&pageSize=1')).body.agents[0].id, keys.did);

  // An agent coming online and going offline: the count and its row follow at once.
  const onlineBefore = (await owner.api.get('/api/agents?pageSize=1')).body.online;
  const agent = await readyAgent(s, owner, { name: 'aaa-online-now' });
  const firstTwo = async () => (await owner.api.get('/api/agents?pageSize=2')).body;
  assert.is((await firstTwo()).online, onlineBefore + 1);
  assert.is((await firstTwo()).agents.find((a: any) => a.id === agent.did)?.isOnline, true);
  assert.is(await check(), before + 2);
  await agent.stop();
  await waitFor(() => !fleet(s).gateway.isOnline(agent.did));
  assert.is((await firstTwo()).online, onlineBefore);
  assert.is((await firstTwo()).agents.find((a: any) => a.id === agent.did)?.isOnline, false);
});

test('selectPage: any page of any list equals the same slice of a full sort', () => {
  let seed = 7;
  const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  for (let round = 0; round < 200; round++) {
    const n = Math.floor(rand() * 300);
    const keys = Array.from({ length: n }, () => Math.floor(rand() * 20));
    const before = (a: number, b: number) => (keys[a] !== keys[b] ? keys[a]! < keys[b]! : a < b);
    const full = Array.from({ length: n }, (_, i) => i).sort((a, b) => (before(a, b) ? -1 : 1));
    const from = Math.floor(rand() * (n + 5));
    const to = from + Math.floor(rand() * 40);
    assert.equal(selectPage(n, from, to, before), full.slice(from, to), `n ${n}, [${from}, ${to})`);
  }
});

test('a failed read of changed agents is logged, and tried again by itself until the list shows the change', async () => {
  const agent = await readyAgent(s, owner, { name: 'Roster-three' });
  const row = async () => (await owner.api.get(`/api/agents?q=${enc(agent.did)}`)).body.agents[0];
  assert.is((await row()).llmModel, null);
  // The list's read of the changed agent (by DID, with the list's fields) fails twice.
  const listRead = (args: unknown[]) => JSON.stringify(args[0]).includes('$in') && JSON.stringify(args[1] ?? {}).includes('registeredAt');
  faults.add({ collection: 'agents', op: 'find', mode: 'fail', times: 2, when: listRead });
  const r = await owner.api.put(`/api/agents/${enc(agent.did)}/llm-config`, { provider: 'anthropic', model: 'claude-opus-4' });
  assert.is(r.status, 200, r.text);
  await waitFor(async () => (await row()).llmModel === 'claude-opus-4', 10_000);
  assert.equal(faults.injected, ['agents.find fail', 'agents.find fail']);
  const failures = log.lines.filter((l) => l.includes('agents list: reading changed agents failed'));
  assert.is(failures.length, 2, failures.join('\n'));
  await stopAll(agent);
});

test.run();
