import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { makeUser, type TestUser } from './fixtures.js';
import { client, sleep, waitFor } from './helpers.js';
import { fleet, isError, makeWorkspace, newAgent, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import { makeAgent } from './people-helpers.js';
import type { StewardAgent } from '../src/agent/index.js';

const test = suite('fleet agents API');
const ctx = {} as Awaited<ReturnType<typeof startWithOwner>> & {
  wsA: { id: string; slug: string; name: string };
  wsB: { id: string; slug: string; name: string };
  alpha: StewardAgent; // A, online, file_access+api_call
  beta: StewardAgent; // A, offline, api_call
  gamma: StewardAgent; // B, online, api_call+mail_send
  pending: StewardAgent;
  memberA: TestUser;
};

test.before(async () => {
  Object.assign(ctx, await startWithOwner());
  const { s, owner } = ctx;
  ctx.wsA = await makeWorkspace(owner, 'Alpha Team', { color: '#112233' });
  ctx.wsB = await makeWorkspace(owner, 'Beta Team');
  ctx.alpha = await readyAgent(s, owner, { name: 'Alpha-bot', workspace: ctx.wsA.id, capabilities: ['file_access', 'api_call'] });
  await sleep(5); // distinct registeredAt
  ctx.beta = await readyAgent(s, owner, { name: 'beta-bot', workspace: ctx.wsA.slug, capabilities: ['api_call'] });
  await sleep(5);
  ctx.gamma = await readyAgent(s, owner, { name: 'Gamma', workspace: ctx.wsB.id, capabilities: ['api_call', 'mail_send'] });
  await ctx.beta.stop();
  await waitFor(() => !fleet(s).gateway.isOnline(ctx.beta.did));
  ctx.pending = newAgent(s, { name: 'waiting-bot' });
  await ctx.pending.waitFor('pending');
  ctx.memberA = await makeUser(s, { workspaces: { [ctx.wsA.id]: 'member' } });
});
test.after(async () => {
  await stopAll(ctx.alpha, ctx.gamma, ctx.pending);
  await ctx.s.stop(true);
});

const names = (r: any) => r.body.agents.map((a: any) => a.name);

test('a global admin lists every active agent with the list fields and the online count', async () => {
  const r = await ctx.owner.api.get('/api/agents');
  assert.is(r.status, 200, r.text);
  assert.equal(names(r), ['Alpha-bot', 'beta-bot', 'Gamma'], 'sorted by name (case-insensitive), pending agents left out');
  assert.is(r.body.total, 3);
  assert.is(r.body.online, 2);
  assert.is(r.body.page, 1);
  assert.is(r.body.pageSize, 20);
  assert.is(r.body.totalPages, 1);
  const a = r.body.agents[0];
  assert.equal(Object.keys(a).sort(), ['capabilities', 'capabilitiesInForce', 'id', 'isOnline', 'lastSeen', 'llmModel', 'llmProvider', 'name', 'registeredAt', 'workspace']);
  assert.is(a.id, ctx.alpha.did);
  assert.equal(a.capabilities, ['file_access', 'api_call']);
  assert.is(a.isOnline, true);
  assert.is(a.llmProvider, null);
  assert.equal(a.workspace, { id: ctx.wsA.id, name: 'Alpha Team', slug: ctx.wsA.slug, color: '#112233' });
  assert.is(r.body.agents[1].isOnline, false);
});

test('filters: q (name or DID), online, workspace (id or slug), capabilities (all of them)', async () => {
  const api = ctx.owner.api;
  // Queries hold what a random DID cannot (a hyphen), or are long enough that one will not.
  assert.equal(names(await api.get('/api/agents?q=-BOT')), ['Alpha-bot', 'beta-bot']);
  const fragment = ctx.gamma.did.slice(-10);
  assert.equal(names(await api.get(`/api/agents?q=${fragment}`)), ['Gamma']);
  assert.equal(names(await api.get('/api/agents?q=.*')), [], 'q is text, not a pattern');
  const online = await api.get('/api/agents?online=true');
  assert.equal(names(online), ['Alpha-bot', 'Gamma']);
  assert.is(online.body.online, 2);
  assert.equal(names(await api.get('/api/agents?online=false')), ['beta-bot']);
  assert.equal(names(await api.get(`/api/agents?workspace=${ctx.wsA.slug}`)), ['Alpha-bot', 'beta-bot']);
  const inB = await api.get(`/api/agents?workspace=${ctx.wsB.id}`);
  assert.equal(names(inB), ['Gamma']);
  assert.is(inB.body.online, 1);
  assert.equal(names(await api.get('/api/agents?capabilities=api_call,mail_send')), ['Gamma']);
  assert.equal(names(await api.get('/api/agents?capabilities=api_call')), ['Alpha-bot', 'beta-bot', 'Gamma']);
  isError(await api.get('/api/agents?capabilities=teleport'), 400);
  isError(await api.get('/api/agents?workspace=nowhere'), 404);
});

test('paging and sorting', async () => {
  const api = ctx.owner.api;
  const p2 = await api.get('/api/agents?pageSize=1&page=2');
  assert.equal(names(p2), ['beta-bot']);
  assert.is(p2.body.total, 3);
  assert.is(p2.body.totalPages, 3);
  assert.equal(names(await api.get('/api/agents?pageSize=2&page=3')), []);
  assert.equal(names(await api.get('/api/agents?sortBy=name&sortDir=desc')), ['Gamma', 'beta-bot', 'Alpha-bot']);
  assert.equal(names(await api.get('/api/agents?sortBy=registeredAt&sortDir=asc')), ['Alpha-bot', 'beta-bot', 'Gamma']);
  assert.equal(names(await api.get('/api/agents?sortBy=registeredAt&sortDir=desc')), ['Gamma', 'beta-bot', 'Alpha-bot']);
  const bySeen = names(await api.get('/api/agents?sortBy=lastSeen&sortDir=desc'));
  assert.is(bySeen.length, 3);
  isError(await api.get('/api/agents?pageSize=101'), 400);
  isError(await api.get('/api/agents?page=0'), 400);
  isError(await api.get('/api/agents?sortBy=color'), 400);
});

test('visibility: a member sees the agents of their workspaces only', async () => {
  const api = ctx.memberA.api;
  const r = await api.get('/api/agents');
  assert.equal(names(r), ['Alpha-bot', 'beta-bot']);
  assert.is(r.body.online, 1);
  isError(await api.get(`/api/agents?workspace=${ctx.wsB.slug}`), 404);
  isError(await api.get(`/api/agents/${encodeURIComponent(ctx.gamma.did)}`), 404);
  assert.is((await api.get(`/api/agents/${encodeURIComponent(ctx.alpha.did)}`)).status, 200);
  const search = await api.get('/api/agents/search?q=a');
  assert.equal(search.body.agents.map((a: any) => a.name).sort(), ['Alpha-bot', 'beta-bot']);
  const outsider = await makeUser(ctx.s);
  const none = await outsider.api.get('/api/agents');
  assert.equal(none.body, { agents: [], total: 0, page: 1, pageSize: 20, totalPages: 0, online: 0 });
  assert.is((await fetch(`${ctx.s.url}/api/agents`)).status, 401);
});

test("an agent's own session (from ready) sees the agents of its workspaces: list, search, detail", async () => {
  const api = client(ctx.s.url, ctx.alpha.session!.token);
  const r = await api.get('/api/agents');
  assert.is(r.status, 200, r.text);
  assert.equal(names(r), ['Alpha-bot', 'beta-bot']);
  assert.is(r.body.online, 1);
  assert.equal((await api.get('/api/agents/search?q=bot')).body.agents.map((a: any) => a.name), ['Alpha-bot', 'beta-bot']);
  const peer = await api.get(`/api/agents/${encodeURIComponent(ctx.beta.did)}`);
  assert.is(peer.status, 200, peer.text);
  assert.is(peer.body.agent.name, 'beta-bot');
  isError(await api.get(`/api/agents/${encodeURIComponent(ctx.gamma.did)}`), 404);
  isError(await api.get(`/api/agents?workspace=${ctx.wsB.slug}`), 404);
  // Still not the people's endpoints that act: an intent needs a person.
  isError(await api.post(`/api/agents/${encodeURIComponent(ctx.beta.did)}/intents`, { action: 'api_call' }), 403);
});

test('detail: list fields plus llmSystemPrompt, publicKey, policy, certificate; pending agents are not agents', async () => {
  const r = await ctx.owner.api.get(`/api/agents/${encodeURIComponent(ctx.gamma.did)}`);
  assert.is(r.status, 200);
  const d = r.body.agent;
  assert.is(d.id, ctx.gamma.did);
  assert.is(d.llmSystemPrompt, '');
  assert.is(d.publicKey, ctx.gamma['opts'].keys.publicKey);
  assert.is(d.policy, null);
  assert.is(d.certificate.certificate.subject, ctx.gamma.did);
  assert.type(d.certificate.agentSignature, 'string');
  isError(await ctx.owner.api.get(`/api/agents/${encodeURIComponent(ctx.pending.did)}`), 404);
  isError(await ctx.owner.api.get('/api/agents/did%3Akey%3Anope'), 404);
});

test('search: did, name and capabilities of matching agents', async () => {
  const r = await ctx.owner.api.get('/api/agents/search?q=gamma');
  assert.is(r.status, 200);
  assert.equal(r.body, { agents: [{ did: ctx.gamma.did, name: 'Gamma', capabilities: ['api_call', 'mail_send'] }] });
  const byDid = await ctx.owner.api.get(`/api/agents/search?q=${encodeURIComponent(ctx.alpha.did)}`);
  assert.equal(byDid.body.agents.map((a: any) => a.did), [ctx.alpha.did]);
});

test('list and detail show the capabilities approved and, beside them, those in force (the current certificate)', async () => {
  const { s, owner } = ctx;
  const inForce = async () => {
    const list = await owner.api.get('/api/agents');
    return Object.fromEntries(list.body.agents.map((a: any) => [a.name, [a.capabilities, a.capabilitiesInForce]]));
  };
  assert.equal(await inForce(), {
    'Alpha-bot': [['file_access', 'api_call'], ['file_access', 'api_call']],
    'beta-bot': [['api_call'], ['api_call']],
    Gamma: [['api_call', 'mail_send'], ['api_call', 'mail_send']],
  });

  // A policy narrows what Alpha may do: approved stays as it was, in force follows the certificate.
  const pol = await owner.api.post('/api/policies', { agentDid: ctx.alpha.did, capabilities: ['file_access'] });
  assert.is(pol.status, 201, pol.text);
  await waitFor(async () => (await fleet(s).service.certificates.current(ctx.alpha.did))?.certificate.policyId === pol.body.policy.id);
  assert.equal((await inForce())['Alpha-bot'], [['file_access', 'api_call'], ['file_access']]);
  const detail = (await owner.api.get(`/api/agents/${encodeURIComponent(ctx.alpha.did)}`)).body.agent;
  assert.equal(detail.capabilities, ['file_access', 'api_call']);
  assert.equal(detail.capabilitiesInForce, ['file_access']);
  assert.equal(detail.certificate.certificate.capabilities, detail.capabilitiesInForce);

  // Once the policy a certificate carries has expired, the agent refuses everything: nothing is in force.
  const expiresAt = new Date(Date.now() + 1500).toISOString();
  const short = await owner.api.post('/api/policies', { agentDid: ctx.gamma.did, capabilities: ['mail_send'], expiresAt });
  assert.is(short.status, 201, short.text);
  await waitFor(async () => (await fleet(s).service.certificates.current(ctx.gamma.did))?.certificate.policyId === short.body.policy.id, 20_000);
  await waitFor(async () => (await inForce()).Gamma[1].length === 0, 20_000);
  assert.equal((await inForce()).Gamma, [['api_call', 'mail_send'], []]);

  // An approved agent without a certificate yet: null.
  const bare = await makeUser(s, { isAdmin: true });
  const noCert = await makeAgent(s, 'uncertified', ['api_call'], ctx.wsA.id);
  const row = (await bare.api.get('/api/agents?q=uncertified')).body.agents[0];
  assert.equal([row.id, row.capabilities, row.capabilitiesInForce], [noCert._id, ['api_call'], null]);
});

test.run();
