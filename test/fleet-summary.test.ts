import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { makeUser, ownerOf, type TestUser } from './fixtures.js';
import { client, http, waitFor } from './helpers.js';
import { approvedKeys, enc, fleet, isError, makeWorkspace, newAgent, RawAgent, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import { createWorkflow, ended, startRun, waitRun } from './workflows-helpers.js';
import { signMessage } from '../src/domain/did.js';
import { certificateBytes } from '../src/domain/certificate.js';
import type { StewardAgent } from '../src/agent/index.js';

const test = suite('fleet summary');
const ctx = {} as Awaited<ReturnType<typeof startWithOwner>> & {
  wsA: { id: string; slug: string; name: string };
  wsB: { id: string; slug: string; name: string };
  a1: StewardAgent; // A, online
  a2: StewardAgent; // A, offline
  b1: StewardAgent; // B, online
  pending: StewardAgent;
  member: TestUser;
  operator: TestUser;
  admin: TestUser;
  both: TestUser;
};

test.before(async () => {
  Object.assign(ctx, await startWithOwner({ AGENT_OFFLINE_GRACE_MS: '0' }));
  const { s, owner } = ctx;
  ctx.wsA = await makeWorkspace(owner, 'Alpha');
  ctx.wsB = await makeWorkspace(owner, 'Beta');
  ctx.a1 = await readyAgent(s, owner, { name: 'a1', workspace: ctx.wsA.id });
  ctx.a2 = await readyAgent(s, owner, { name: 'a2', workspace: ctx.wsA.id });
  ctx.b1 = await readyAgent(s, owner, { name: 'b1', workspace: ctx.wsB.id });
  await ctx.a2.stop();
  ctx.pending = newAgent(s, { name: 'waiting' });
  await ctx.pending.waitFor('pending');
  // One rejected agent.
  const rejected = newAgent(s, { name: 'refused' });
  await rejected.waitFor('pending');
  const reg = (await owner.api.get('/api/registrations')).body.registrations.find((r: any) => r.agentDid === rejected.did);
  assert.is((await owner.api.post(`/api/registrations/${reg.id}/reject`, { reason: 'no' })).status, 200);
  await rejected.stop();
  ctx.member = await makeUser(s, { workspaces: { [ctx.wsA.id]: 'member' } });
  ctx.operator = await makeUser(s, { workspaces: { [ctx.wsA.id]: 'operator' } });
  ctx.admin = await makeUser(s, { workspaces: { [ctx.wsA.id]: 'admin' } });
  ctx.both = await makeUser(s, { workspaces: { [ctx.wsA.id]: 'member', [ctx.wsB.id]: 'member' } });
});
test.after(async () => {
  await stopAll(ctx.a1, ctx.b1, ctx.pending);
  await ctx.s.stop(true);
});

const summaryOf = async (api: ReturnType<typeof client>) => {
  const r = await api.get('/api/fleet/summary');
  assert.is(r.status, 200, r.text);
  return r.body;
};

/** Waits until the summary seen by `api` satisfies `ok` (the counters follow events, some of them a turn later). */
const summaryWhen = (api: ReturnType<typeof client>, ok: (b: any) => boolean) => waitFor(async () => {
  const b = await summaryOf(api);
  return ok(b) ? b : null;
});

test('a global admin sees the whole fleet: every status, online, per workspace, pending registrations', async () => {
  const { owner, s } = ctx;
  const b = await summaryWhen(owner.api, (x) => x.agents.online === 2 && x.agents.rejected === 1);
  assert.is(b.scope, 'server');
  assert.equal(b.agents, { total: 5, online: 2, pending: 1, rejected: 1 });
  assert.is(b.registrationsPending, 1);
  const ws = (id: string) => b.workspaces.find((w: any) => w.id === id);
  assert.equal(ws(ctx.wsA.id), { id: ctx.wsA.id, slug: ctx.wsA.slug, name: 'Alpha', total: 2, online: 1 });
  assert.equal(ws(ctx.wsB.id), { id: ctx.wsB.id, slug: ctx.wsB.slug, name: 'Beta', total: 1, online: 1 });
  assert.equal(ws(s.ctx.defaultWorkspace._id)?.total, 0, 'every workspace is listed, empty ones too');
  assert.equal(b.runs, { running: 0, failedLast24h: 0 });
  assert.is(b.policiesExpiringSoon, 0);
  assert.is(b.certificatesAwaitingReissue, 0);
  assert.ok(Date.parse(b.at) > 0);
});

test('members, operators and admins of a workspace see its agents only, without registrations', async () => {
  for (const who of [ctx.member, ctx.operator, ctx.admin]) {
    const b = await summaryOf(who.api);
    assert.is(b.scope, 'workspaces');
    assert.equal(b.agents, { total: 2, online: 1, pending: 0, rejected: 0 });
    assert.equal(b.workspaces, [{ id: ctx.wsA.id, slug: ctx.wsA.slug, name: 'Alpha', total: 2, online: 1 }]);
    assert.is(b.registrationsPending, null);
  }
  const two = await summaryOf(ctx.both.api);
  assert.equal(two.agents, { total: 3, online: 2, pending: 0, rejected: 0 });
  assert.equal(two.workspaces.map((w: any) => w.name), ['Alpha', 'Beta']);
  const nobody = await makeUser(ctx.s);
  const none = await summaryOf(nobody.api);
  assert.equal(none.agents, { total: 0, online: 0, pending: 0, rejected: 0 });
  assert.equal(none.workspaces, []);
});

test("an agent's session sees its workspaces; anonymous callers are refused", async () => {
  const b = await summaryOf(client(ctx.s.url, ctx.b1.session!.token));
  assert.is(b.scope, 'workspaces');
  assert.equal(b.workspaces.map((w: any) => w.id), [ctx.wsB.id]);
  assert.equal(b.agents, { total: 1, online: 1, pending: 0, rejected: 0 });
  isError(await http(ctx.s.url, 'GET', '/api/fleet/summary'), 401);
});

test('an agent in two workspaces counts once for someone who sees both', async () => {
  const { owner } = ctx;
  const r = await owner.api.post(`/api/workspaces/${ctx.wsB.id}/agents`, { agentDid: ctx.a1.did });
  assert.ok(r.status === 200 || r.status === 201, r.text);
  const two = await summaryWhen(ctx.both.api, (x) => x.workspaces.find((w: any) => w.id === ctx.wsB.id)?.total === 2);
  assert.equal(two.agents, { total: 3, online: 2, pending: 0, rejected: 0 }, 'a1 once');
  assert.equal(two.workspaces.map((w: any) => [w.name, w.total, w.online]), [['Alpha', 2, 1], ['Beta', 2, 2]]);
  assert.is((await owner.api.del(`/api/workspaces/${ctx.wsB.id}/agents/${enc(ctx.a1.did)}`)).status, 200);
  await summaryWhen(ctx.both.api, (x) => x.workspaces.find((w: any) => w.id === ctx.wsB.id)?.total === 1);
});

test('the counters follow registrations, approvals, connections and deletions', async () => {
  const { s, owner } = ctx;
  const before = await summaryOf(owner.api);
  const agent = newAgent(s, { name: 'late', workspace: ctx.wsA.id });
  await agent.waitFor('pending');
  let b = await summaryWhen(owner.api, (x) => x.agents.pending === before.agents.pending + 1);
  assert.is(b.agents.total, before.agents.total + 1);
  assert.is(b.registrationsPending, before.registrationsPending + 1);
  const reg = (await owner.api.get('/api/registrations')).body.registrations.find((r: any) => r.agentDid === agent.did);
  assert.is((await owner.api.post(`/api/registrations/${reg.id}/approve`, { capabilities: ['file_access'] })).status, 200);
  await agent.waitFor('ready');
  b = await summaryWhen(owner.api, (x) => x.agents.online === before.agents.online + 1);
  assert.is(b.agents.pending, before.agents.pending);
  assert.is(b.workspaces.find((w: any) => w.id === ctx.wsA.id).total, 3);
  await agent.stop();
  b = await summaryWhen(owner.api, (x) => x.agents.online === before.agents.online);
  assert.is(b.workspaces.find((w: any) => w.id === ctx.wsA.id).online, 1);
  assert.is((await owner.api.del(`/api/agents/${enc(agent.did)}`)).status, 200);
  b = await summaryWhen(owner.api, (x) => x.agents.total === before.agents.total);
  assert.is(b.workspaces.find((w: any) => w.id === ctx.wsA.id).total, 2);
});

test('runs: running and failed in the last 24 hours, per workspace', async () => {
  const { owner } = ctx;
  const waiting = await createWorkflow(owner, ctx.wsA.id, { steps: [{ id: 'wait', name: 'wait', action: 'delay', params: { ms: 600_000 } }] });
  const failing = await createWorkflow(owner, ctx.wsB.id, { steps: [{ id: 'post', name: 'post', action: 'channel.post', params: {} }] });
  const running = await startRun(owner, waiting);
  const failed = await startRun(owner, failing);
  assert.is((await waitRun(owner, failing, failed, ended)).status, 'failed');
  const b = await summaryWhen(owner.api, (x) => x.runs.failedLast24h === 1);
  assert.equal(b.runs, { running: 1, failedLast24h: 1 });
  assert.equal((await summaryOf(ctx.member.api)).runs, { running: 1, failedLast24h: 0 }, 'A: the running one');
  assert.equal((await summaryOf(client(ctx.s.url, ctx.b1.session!.token))).runs, { running: 0, failedLast24h: 1 }, 'B: the failed one');
  assert.is((await owner.api.post(`/api/workflows/${waiting}/runs/${running}/cancel`, {})).status, 200);
  await summaryWhen(owner.api, (x) => x.runs.running === 0);
});

test('policies expiring within 24 hours, scoped to the workspaces seen', async () => {
  const { owner } = ctx;
  const soon = new Date(Date.now() + 2 * 3600_000).toISOString();
  const later = new Date(Date.now() + 48 * 3600_000).toISOString();
  const mk = async (body: object) => {
    const r = await owner.api.post('/api/policies', { capabilities: ['file_access'], ...body });
    assert.is(r.status, 201, r.text);
    return r.body.policy?.id ?? r.body.id;
  };
  await mk({ workspaceId: ctx.wsA.id, expiresAt: soon });
  await mk({ workspaceId: ctx.wsB.id, expiresAt: later });
  await mk({ agentDid: ctx.b1.did, expiresAt: soon });
  await mk({ workspaceId: ctx.wsB.id });
  assert.is((await summaryOf(owner.api)).policiesExpiringSoon, 2);
  assert.is((await summaryOf(ctx.member.api)).policiesExpiringSoon, 1, "A's workspace policy");
  assert.is((await summaryOf(client(ctx.s.url, ctx.b1.session!.token))).policiesExpiringSoon, 1, "b1's own policy");
});

test('certificates awaiting re-issue: an agent offered new terms that has not co-signed them', async () => {
  const { s, owner } = ctx;
  const keys = await approvedKeys(s, owner);
  const raw = new RawAgent(s.url, keys);
  await raw.authenticate();
  await raw.acceptNextOffer();
  // a2, offline when its workspace's policy came (the online agents co-signed theirs).
  const before = (await summaryWhen(owner.api, (x) => x.certificatesAwaitingReissue === 1)).certificatesAwaitingReissue;
  const r = await owner.api.post('/api/policies', { agentDid: keys.did, capabilities: ['file_access'] });
  assert.is(r.status, 201, r.text);
  const offer = await raw.next('certificate_offer');
  await summaryWhen(owner.api, (x) => x.certificatesAwaitingReissue === before + 1);
  raw.send({ type: 'certificate_accept', agentSignature: signMessage(keys, certificateBytes(offer.certificate)) });
  await summaryWhen(owner.api, (x) => x.certificatesAwaitingReissue === before);
  await raw.close();
});

test('after a restart the counters are read from the store: same agents, none online', async () => {
  const { owner } = ctx;
  const before = await summaryOf(owner.api);
  await stopAll(ctx.a1, ctx.b1, ctx.pending);
  ctx.s = await ctx.s.restart();
  ctx.owner = await ownerOf(ctx.s);
  const after = await summaryOf(ctx.owner.api);
  assert.equal(after.agents, { ...before.agents, online: 0 });
  assert.equal(
    after.workspaces.map((w: any) => [w.id, w.total]),
    before.workspaces.map((w: any) => [w.id, w.total]),
  );
  assert.equal(after.registrationsPending, before.registrationsPending);
  assert.is(after.runs.failedLast24h, before.runs.failedLast24h);
  assert.is(after.policiesExpiringSoon, before.policiesExpiringSoon);
});

test.run();
