import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { nanoid } from 'nanoid';
import { makeUser, type TestUser } from './fixtures.js';
import { waitFor } from './helpers.js';
import { enc, fleet, isError, makeWorkspace, newAgent, once, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import type { StewardAgent } from '../src/agent/index.js';
import { AGENT_ACTOR_KIND } from '../src/actors/agent.js';

const test = suite('fleet: decommissioning agents');
const ctx = {} as Awaited<ReturnType<typeof startWithOwner>> & {
  wsA: { id: string; slug: string; name: string };
  wsB: { id: string; slug: string; name: string };
  adminA: TestUser;
  adminB: TestUser;
  agents: StewardAgent[];
};

test.before(async () => {
  Object.assign(ctx, await startWithOwner());
  ctx.wsA = await makeWorkspace(ctx.owner, 'Delete Alpha');
  ctx.wsB = await makeWorkspace(ctx.owner, 'Delete Beta');
  ctx.adminA = await makeUser(ctx.s, { workspaces: { [ctx.wsA.id]: 'admin' } });
  ctx.adminB = await makeUser(ctx.s, { workspaces: { [ctx.wsB.id]: 'admin' } });
  ctx.agents = [];
});
test.after(async () => {
  await stopAll(...ctx.agents);
  await ctx.s.stop(true);
});

test('deleting an online agent closes its socket with 4403 and removes everything it owned', async () => {
  const { s, owner } = ctx;
  const c = s.ctx.c;
  const agent = await readyAgent(s, owner, { name: 'doomed', workspace: ctx.wsA.id });
  ctx.agents.push(agent);
  const did = agent.did;

  // Things that belong to the agent.
  const pol = await owner.api.post('/api/policies', { agentDid: did, capabilities: ['file_access'] });
  assert.is(pol.status, 201, pol.text);
  const now = new Date().toISOString();
  await c.workspaceAgents.insertOne({ _id: nanoid(), workspaceId: ctx.wsB.id, agentDid: did, isPrimary: false, joinedAt: now });
  await c.skillOverrides.insertOne({ _id: nanoid(), skillId: 'sk', workspaceId: ctx.wsA.id, agentDid: did, enabled: false, config: null, createdAt: now, updatedAt: now, updatedBy: 'x' });
  await c.grants.insertOne({ _id: nanoid(), userId: owner.user._id, userDid: owner.keys.did, agentDid: did, capabilities: ['file_access'], expiresAt: null, createdAt: now, createdBy: 'x' });
  await c.channelMembers.insertOne({ _id: nanoid(), channelId: 'ch', memberDid: did, memberType: 'agent', role: 'member', joinedAt: now, invitedBy: null });
  await waitFor(async () => (await c.certificates.count({ agentDid: did })) > 0);
  assert.ok(await c.sessions.findById(`agent:${did}`), 'the agent has a session');

  // A workspace admin of another workspace may not.
  isError(await ctx.adminB.api.del(`/api/agents/${enc(did)}`), 403);

  const closed = once<number>(agent, 'close');
  const r = await ctx.adminA.api.del(`/api/agents/${enc(did)}`);
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { ok: true });
  assert.is(await closed, 4403, 'closed with the decommissioned code');
  await agent.waitFor('rejected');
  assert.not.ok(fleet(s).gateway.isOnline(did));

  const list = await owner.api.get('/api/agents');
  assert.not.ok(list.body.agents.some((a: any) => a.id === did));
  isError(await owner.api.get(`/api/agents/${enc(did)}`), 404);

  assert.is(await c.agents.count({ _id: did }), 0);
  assert.is(await c.workspaceAgents.count({ agentDid: did }), 0);
  assert.is(await c.policies.count({ agentDid: did }), 0);
  assert.is(fleet(s).policies.effective(did, null), null, 'the policy is gone from memory too');
  assert.is(await c.certificates.count({ agentDid: did }), 0);
  assert.is(await c.registrations.count({ agentDid: did }), 0);
  assert.is(await c.grants.count({ agentDid: did }), 0);
  assert.is(await c.skillOverrides.count({ agentDid: did }), 0);
  assert.is(await c.channelMembers.count({ memberDid: did }), 0);
  assert.is(await c.sessions.count({ subject: did }), 0);
  assert.is(await c.tokenUsage.count({ _id: did }), 0);
  await s.ctx.actors.flush();
  assert.is(s.ctx.actors.counts()[AGENT_ACTOR_KIND] ?? 0, 0, 'no agent actor left in memory');
  const audit = await c.audit.find({ action: 'agent.delete', target: did });
  assert.is(audit.length, 1);
});

test('the same key registering again starts as a new pending registration', async () => {
  const { s, owner } = ctx;
  const first = await readyAgent(s, owner, { name: 'phoenix' });
  ctx.agents.push(first);
  const keys = first['opts'].keys;
  const closed = once<number>(first, 'close');
  assert.is((await owner.api.del(`/api/agents/${enc(first.did)}`)).status, 200);
  assert.is(await closed, 4403);
  await first.stop();

  const again = newAgent(s, { name: 'phoenix', keys });
  ctx.agents.push(again);
  await again.waitFor('pending');
  const regs = await owner.api.get('/api/registrations');
  const mine = regs.body.registrations.filter((r: any) => r.agentDid === again.did);
  assert.is(mine.length, 1, JSON.stringify(regs.body));
  const doc = await s.ctx.c.agents.findById(again.did);
  assert.is(doc?.status, 'pending');
  await again.stop();
});

test('a rejected registration can be deleted; unknown agents, and ones the caller cannot see, are 404', async () => {
  const { s, owner } = ctx;
  const agent = newAgent(s, { name: 'unwanted' });
  ctx.agents.push(agent);
  await agent.waitFor('pending');
  const rej = await owner.api.post(`/api/registrations/${agent.registrationId}/reject`, { reason: 'no' });
  assert.is(rej.status, 200, rej.text);
  await agent.waitFor('rejected');
  assert.is((await s.ctx.c.agents.findById(agent.did))?.status, 'rejected');

  const member = await makeUser(s, { workspaces: { [ctx.wsA.id]: 'member' } });
  // No workspace yet: only a global admin sees it, and may delete it.
  isError(await member.api.del(`/api/agents/${enc(agent.did)}`), 404);
  isError(await ctx.adminA.api.del(`/api/agents/${enc(agent.did)}`), 404);

  const r = await owner.api.del(`/api/agents/${enc(agent.did)}`);
  assert.is(r.status, 200, r.text);
  assert.is(await s.ctx.c.agents.count({ _id: agent.did }), 0);
  assert.is(await s.ctx.c.registrations.count({ agentDid: agent.did }), 0);

  isError(await owner.api.del(`/api/agents/${enc('did:key:z6MkUnknownUnknownUnknown')}`), 404);
  isError(await owner.api.del(`/api/agents/${enc(agent.did)}`), 404);
});

test.run();
