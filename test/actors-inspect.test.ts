import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { makeUser } from './fixtures.js';
import { client, http, waitFor } from './helpers.js';
import { enc, isError, newAgent, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import { HISTORY_SIZE } from '../src/actors/history.js';

const test = suite('actor listing, definitions and history');
const ctx = {} as Awaited<ReturnType<typeof startWithOwner>>;

test.before(async () => {
  Object.assign(ctx, await startWithOwner({ AGENT_OFFLINE_GRACE_MS: '0' }));
});
test.after(async () => {
  await ctx.s.stop(true);
});

test("a kind's definition: XState's serialised machine, for drawing its state chart", async () => {
  const { owner } = ctx;
  const r = await owner.api.get('/api/admin/actors/kinds/agent/definition');
  assert.is(r.status, 200, r.text);
  assert.is(r.body.kind, 'agent');
  const def = r.body.definition;
  assert.is(def.id, 'agent');
  assert.ok(['boot', 'pending', 'approving', 'rejecting', 'active', 'rejected'].every((s) => s in def.states), Object.keys(def.states).join());
  assert.ok(def.states.pending.on.APPROVE[0].target.some((t: string) => t.endsWith('approving')), JSON.stringify(def.states.pending.on));
  assert.is(def.states.active.type, 'parallel');
  assert.ok(def.states.active.states.connection.states.online.on.DISCONNECTED[0].target.some((t: string) => t.endsWith('offline')));
  assert.is(def.states.rejected.type, 'final');
  isError(await owner.api.get('/api/admin/actors/kinds/ghost/definition'), 404);
});

test('listing: by kind, state and id prefix, a page at a time, with counts per kind and since when', async () => {
  const { s, owner } = ctx;
  const online = await readyAgent(s, owner);
  const offline = await readyAgent(s, owner);
  await offline.stop();
  const pending = newAgent(s);
  await pending.waitFor('pending');
  const list = async (query: string) => {
    const r = await owner.api.get(`/api/admin/actors?${query}`);
    assert.is(r.status, 200, r.text);
    return r.body;
  };
  const ids = (b: any) => b.actors.map((a: any) => a.id);
  const onlineIds = await waitFor(async () => {
    const b = await list('kind=agent&state=online&pageSize=100');
    return ids(b).includes(online.did) && !ids(b).includes(offline.did) ? ids(b) : null;
  });
  assert.not.ok(onlineIds.includes(pending.did));
  assert.equal(ids(await list(`kind=agent&state=active.connection.offline&prefix=${enc(offline.did)}`)), [offline.did]);
  assert.equal(ids(await list(`state=pending&prefix=${enc(pending.did)}`)), [pending.did]);
  assert.ok(ids(await list('state=active&pageSize=100')).includes(offline.did), 'a leading part of the state matches');
  const mine = (await list(`prefix=${enc(online.did)}`)).actors[0];
  assert.equal({ ...mine, since: 'x' }, { kind: 'agent', id: online.did, state: { active: { connection: 'online', certificate: 'current' } }, status: 'active', since: 'x' });
  assert.ok(Date.parse(mine.since) <= Date.now() && Date.parse(mine.since) > Date.now() - 60_000);
  const paged = await list('kind=agent&pageSize=1&page=2');
  assert.is(paged.actors.length, 1);
  assert.is(paged.pageSize, 1);
  assert.is(paged.page, 2);
  assert.ok(paged.total >= 3);
  assert.is(paged.totalPages, paged.total);
  const all = await list('kind=agent&pageSize=100');
  assert.equal(paged.actors[0], all.actors[1], 'pages follow one order');
  assert.equal(all.kinds.find((k: any) => k.kind === 'agent'), { kind: 'agent', count: all.total });
  assert.equal((await list('kind=agent&prefix=did%3Anothing')).actors, []);
  isError(await owner.api.get('/api/admin/actors?pageSize=101'), 400);
  await stopAll(online, pending);
});

test('an inspected actor keeps its transitions, with since when it is in its state', async () => {
  const { s, owner } = ctx;
  const agent = await readyAgent(s, owner);
  const path = `/api/admin/actors/${enc(`agent:${agent.did}`)}`;
  const first = await owner.api.get(path);
  assert.is(first.status, 200, first.text);
  assert.ok(first.body.actor.history.length <= 1, 'kept from the first inspection on (CONNECTED may still have been on its way)');
  const online = await waitFor(async () => {
    const a = (await owner.api.get(path)).body.actor;
    return a.state.active?.connection === 'online' ? a : null;
  });
  const onlineSince = Date.parse(online.since);
  assert.ok(onlineSince > 0);
  await agent.stop();
  const after = await waitFor(async () => {
    const a = (await owner.api.get(path)).body.actor;
    return a.history.some((h: any) => h.event === 'DISCONNECTED') ? a : null;
  });
  const t = after.history[after.history.length - 1];
  assert.equal(t.from, { active: { connection: 'online', certificate: 'current' } });
  assert.equal(t.to, { active: { connection: 'offline', certificate: 'current' } });
  assert.is(t.event, 'DISCONNECTED');
  assert.is(after.since, t.at, 'since: when it entered the state it is in');
  assert.ok(Date.parse(after.since) >= onlineSince);
  // Bounded: only the last HISTORY_SIZE transitions are kept.
  for (let i = 0; i < HISTORY_SIZE; i++) {
    await s.ctx.actors.send('agent', agent.did, { type: i % 2 === 0 ? 'CONNECTED' : 'DISCONNECTED', serial: 'x', policyId: null } as never);
  }
  const bounded = (await owner.api.get(path)).body.actor.history;
  assert.is(bounded.length, HISTORY_SIZE);
  assert.is(bounded[HISTORY_SIZE - 1].event, 'DISCONNECTED');
  assert.is(bounded[0].event, 'CONNECTED', 'the oldest went first');
});

test('an actor nobody inspected keeps no history', async () => {
  const { s, owner } = ctx;
  const agent = await readyAgent(s, owner);
  await agent.stop();
  await waitFor(async () => (await owner.api.get(`/api/admin/actors?prefix=${enc(agent.did)}&state=offline`)).body.total === 1);
  const a = (await owner.api.get(`/api/admin/actors/${enc(`agent:${agent.did}`)}`)).body.actor;
  assert.equal(a.history, []);
  assert.is(a.state.active.connection, 'offline');
});

test('actors are for global admins: members, workspace admins, agents and anonymous callers are refused', async () => {
  const { s, owner } = ctx;
  const agent = await readyAgent(s, owner);
  const wsAdmin = await makeUser(s, { workspaces: { [s.ctx.defaultWorkspace._id]: 'admin' } });
  const member = await makeUser(s, { workspaces: { [s.ctx.defaultWorkspace._id]: 'member' } });
  const operator = await makeUser(s, { workspaces: { [s.ctx.defaultWorkspace._id]: 'operator' } });
  const asAgent = client(s.url, agent.session!.token);
  for (const path of ['/api/admin/actors', '/api/admin/actors/kinds/agent/definition', `/api/admin/actors/${enc(`agent:${agent.did}`)}`]) {
    for (const api of [member.api, operator.api, wsAdmin.api, asAgent]) isError(await api.get(path), 403);
    isError(await http(s.url, 'GET', path), 401);
  }
  await agent.stop();
});

test.run();
