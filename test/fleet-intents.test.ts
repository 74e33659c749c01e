import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { nanoid } from 'nanoid';
import { makeUser } from './fixtures.js';
import { waitFor } from './helpers.js';
import { fleet, isError, makeWorkspace, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import type { StewardAgent } from '../src/agent/index.js';

const test = suite('fleet intents');
const ctx = {} as Awaited<ReturnType<typeof startWithOwner>> & { ws: { id: string }; agent: StewardAgent; other: StewardAgent };
const path = (a: StewardAgent) => `/api/agents/${encodeURIComponent(a.did)}/intents`;

test.before(async () => {
  Object.assign(ctx, await startWithOwner({ INTENT_MAX_TIMEOUT_MS: '5000' }));
  ctx.ws = await makeWorkspace(ctx.owner, 'Ops');
  const handler = async ({ action, params }: { action: string; params: Record<string, unknown> }) => {
    if (params.hang) await new Promise(() => undefined);
    if (params.fail) throw new Error('tool failed');
    return { action, echo: params };
  };
  ctx.agent = await readyAgent(ctx.s, ctx.owner, { workspace: ctx.ws.id, capabilities: ['api_call', 'file_access'], onIntent: handler });
  ctx.other = await readyAgent(ctx.s, ctx.owner, { workspace: ctx.ws.id, capabilities: ['api_call'], onIntent: handler });
});
test.after(async () => {
  await stopAll(ctx.agent, ctx.other);
  await ctx.s.stop(true);
});

async function grant(userDid: string, agentDid: string | null, capabilities: string[]) {
  const r = await ctx.owner.api.post('/api/grants', { userDid, agentDid, capabilities, expiresAt: null });
  assert.is(r.status, 201, r.text);
}

test('a global admin sends an intent and gets the agent\'s intent_result; it is audited without params', async () => {
  const r = await ctx.owner.api.post(path(ctx.agent), { action: 'api_call', params: { apiKey: 'sk-secret', q: 1 } });
  assert.is(r.status, 200, r.text);
  assert.is(r.body.ok, true);
  assert.type(r.body.intentId, 'string');
  assert.equal(r.body.output, { action: 'api_call', echo: { apiKey: 'sk-secret', q: 1 } });
  const failing = await ctx.owner.api.post(path(ctx.agent), { action: 'api_call', params: { fail: true } });
  assert.equal({ ok: failing.body.ok, error: failing.body.error }, { ok: false, error: 'tool failed' });
  const audit = await ctx.s.ctx.c.audit.find({ action: 'intent.send', target: ctx.agent.did }, { sort: { at: 1 } });
  assert.ok(audit.length >= 2);
  assert.equal(audit[0]!.details.action, 'api_call');
  assert.is(audit[0]!.details.outcome, 'ok');
  assert.is(audit[1]!.details.outcome, 'refused');
  assert.not.match(JSON.stringify(audit), /sk-secret/);
});

test('others need operator (or higher) in one of the agent\'s workspaces AND a grant', async () => {
  const { s } = ctx;
  const operator = await makeUser(s, { workspaces: { [ctx.ws.id]: 'operator' } });
  const member = await makeUser(s, { workspaces: { [ctx.ws.id]: 'member' } });
  const outsider = await makeUser(s, { workspaces: { [s.ctx.defaultWorkspace._id]: 'owner' } });
  const body = { action: 'api_call', params: {} };

  isError(await operator.api.post(path(ctx.agent), body), 403); // no grant yet
  await grant(operator.user.did!, ctx.agent.did, ['api_call']);
  const ok = await operator.api.post(path(ctx.agent), body);
  assert.is(ok.status, 200, ok.text);
  assert.is(ok.body.ok, true);
  isError(await operator.api.post(path(ctx.agent), { action: 'file_access', params: {} }), 403); // grant does not cover it
  isError(await operator.api.post(path(ctx.other), body), 403); // grant is for another agent

  await grant(member.user.did!, null, ['api_call']);
  isError(await member.api.post(path(ctx.agent), body), 403); // role too low

  await grant(outsider.user.did!, null, ['api_call']);
  isError(await outsider.api.post(path(ctx.agent), body), 404, 'not_found'); // not in the agent's workspaces: as if unknown

  // A grant on all agents (agentDid null) covers every agent; an expired grant covers none.
  const manager = await makeUser(s, { workspaces: { [ctx.ws.id]: 'manager' } });
  await s.ctx.c.grants.insertOne({
    _id: nanoid(),
    userId: manager.user._id,
    userDid: manager.user.did!,
    agentDid: null,
    capabilities: ['api_call'],
    expiresAt: new Date(Date.now() - 1000).toISOString(),
    createdAt: new Date().toISOString(),
    createdBy: ctx.owner.user.did!,
  });
  isError(await manager.api.post(path(ctx.other), body), 403);
  await grant(manager.user.did!, null, ['api_call']);
  assert.is((await manager.api.post(path(ctx.other), body)).status, 200);
  assert.is((await manager.api.post(path(ctx.agent), body)).status, 200);

  // Refusals are audited too, with who asked, the action and why.
  const refused = await s.ctx.c.audit.find({ action: 'intent.send', actor: member.user.did! });
  assert.is(refused.length, 1);
  assert.equal({ target: refused[0]!.target, action: refused[0]!.details.action, outcome: refused[0]!.details.outcome }, { target: ctx.agent.did, action: 'api_call', outcome: 'forbidden' });
  assert.match(String(refused[0]!.details.reason), /operator role/);
  const noGrant = await s.ctx.c.audit.find({ action: 'intent.send', actor: operator.user.did!, 'details.outcome': 'forbidden' });
  assert.is(noGrant.length, 3, 'no grant yet, a grant that does not cover the action, a grant for another agent');
});

test('refused by the agent\'s policy gate: 200 with ok false and the gate message', async () => {
  const p = await ctx.owner.api.post('/api/policies', { agentDid: ctx.other.did, capabilities: ['file_access'] });
  assert.is(p.status, 201);
  await waitFor(() => ctx.other.certificate?.certificate.policyId === p.body.policy.id);
  const r = await ctx.owner.api.post(path(ctx.other), { action: 'api_call', params: {} });
  assert.is(r.status, 200);
  assert.equal({ ok: r.body.ok, error: r.body.error }, { ok: false, error: "Capability 'api_call' is not granted" });
  await ctx.owner.api.del(`/api/policies/${p.body.policy.id}`);
});

test('offline 409, no answer in time 504, unknown agent 404, unknown action 400, timeout above the max 400', async () => {
  const { s, owner } = ctx;
  const gone = await readyAgent(s, owner, { capabilities: ['api_call'] });
  await gone.stop();
  await waitFor(() => !fleet(s).gateway.isOnline(gone.did));
  isError(await owner.api.post(path(gone), { action: 'api_call', params: {} }), 409, 'agent_offline');
  isError(await owner.api.post(path(ctx.agent), { action: 'api_call', params: { hang: true }, timeoutMs: 200 }), 504, 'intent_timeout');
  isError(await owner.api.post('/api/agents/did%3Akey%3Anope/intents', { action: 'api_call', params: {} }), 404);
  isError(await owner.api.post(path(ctx.agent), { action: 'teleport', params: {} }), 400);
  isError(await owner.api.post(path(ctx.agent), { action: 'api_call', params: {}, timeoutMs: 60_000 }), 400);
  const outcomes = (await s.ctx.c.audit.find({ action: 'intent.send' })).map((a) => a.details.outcome);
  assert.ok(outcomes.includes('agent_offline') && outcomes.includes('intent_timeout') && outcomes.includes('not_found'));
});

test('an agent that disconnects before answering: 502', async () => {
  const { s, owner } = ctx;
  // The agent receives the intent, then goes away without answering.
  const flaky: StewardAgent = await readyAgent(s, owner, {
    capabilities: ['api_call'],
    reconnect: false,
    onIntent: () => {
      setTimeout(() => void flaky.stop(), 20);
      return new Promise(() => undefined);
    },
  });
  isError(await owner.api.post(path(flaky), { action: 'api_call', params: {} }), 502, 'agent_disconnected');
});

test('ctx.agentIntents (for other areas) runs the same checks and returns the agent\'s answer', async () => {
  const o = ctx.owner.user;
  const principal = { kind: 'user', userId: o._id, did: o.did!, name: o.name, isOwner: true, isAdmin: true, role: 'owner', sessionId: 'test', via: 'bearer' } as const;
  const r = await ctx.s.ctx.agentIntents.send(principal, ctx.agent.did, { action: 'api_call', params: { x: 1 } });
  assert.equal({ ok: r.ok, output: r.output }, { ok: true, output: { action: 'api_call', echo: { x: 1 } } });
  const member = await makeUser(ctx.s, { workspaces: { [ctx.ws.id]: 'member' } });
  const mp = { ...principal, userId: member.user._id, did: member.user.did!, isOwner: false, isAdmin: false, role: 'member' as const };
  const refused = await ctx.s.ctx.agentIntents.send(mp, ctx.agent.did, { action: 'api_call', params: {} }).catch((e: { status?: number }) => e);
  assert.is((refused as { status?: number }).status, 403);
});

test.run();
