import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { publicKeyFromDidKey } from '../src/domain/did.js';
import { verifyCertificateSignature } from '../src/domain/certificate.js';
import { makeUser } from './fixtures.js';
import { sleep, waitFor } from './helpers.js';
import { approve, approvedKeys, fleet, isError, makeWorkspace, newAgent, once, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import type { StewardAgent } from '../src/agent/index.js';

const test = suite('fleet policies');
const ctx = {} as Awaited<ReturnType<typeof startWithOwner>>;

test.before(async () => {
  Object.assign(ctx, await startWithOwner());
});
test.after(async () => {
  await ctx.s.stop(true);
});

const limits = { maxTokensPerDay: 1000, maxRequestsPerHour: 10, allowedDomains: ['api.example.com', '*.example.org'] };

/** Waits for the agent's next certificate (a reissue) and checks both signatures. */
async function nextCertificate(agent: StewardAgent) {
  const cur = await once<any>(agent, 'certificate');
  const s = ctx.s;
  assert.ok(verifyCertificateSignature(cur.certificate, publicKeyFromDidKey(s.ctx.identity.did)!, cur.serverSignature));
  assert.ok(verifyCertificateSignature(cur.certificate, publicKeyFromDidKey(agent.did)!, cur.agentSignature));
  return cur.certificate;
}

test('an agent policy reaches the connected agent: update_capabilities, a fresh certificate co-signed and stored', async () => {
  const { s, owner } = ctx;
  const agent = await readyAgent(s, owner, { capabilities: ['file_access', 'api_call'] });
  const oldSerial = agent.certificate!.certificate.serial;
  const caps = once<any>(agent, 'capabilities');
  const cert = nextCertificate(agent);
  const r = await owner.api.post('/api/policies', { agentDid: agent.did, capabilities: ['api_call', 'internet_access'], resourceLimits: limits });
  assert.is(r.status, 201, r.text);
  assert.equal(r.body.sentTo, [agent.did]);
  const p = r.body.policy;
  assert.equal(
    { agentDid: p.agentDid, workspaceId: p.workspaceId, capabilities: p.capabilities, resourceLimits: p.resourceLimits, expiresAt: p.expiresAt, createdBy: p.createdBy },
    { agentDid: agent.did, workspaceId: null, capabilities: ['api_call', 'internet_access'], resourceLimits: limits, expiresAt: null, createdBy: owner.user.did },
  );
  const update = await caps;
  assert.equal(update, { capabilities: ['api_call', 'internet_access'], resourceLimits: limits, policyId: p.id, policyExpiresAt: null });
  const c = await cert;
  assert.is.not(c.serial, oldSerial, 'fresh serial');
  assert.is(c.policyId, p.id);
  assert.equal(c.resourceLimits, limits);
  assert.is(agent.reauthPending, false);
  await waitFor(async () => (await fleet(s).service.certificates.current(agent.did))?.certificate.serial === c.serial);
  await waitFor(async () => ((await s.ctx.actors.inspect('agent', agent.did))?.context as { serial?: string } | undefined)?.serial === c.serial);
  const audit = await s.ctx.c.audit.find({ action: 'policy.create', target: p.id });
  assert.is(audit.length, 1);

  // The detail shows the effective policy.
  const detail = await owner.api.get(`/api/agents/${encodeURIComponent(agent.did)}`);
  assert.is(detail.body.agent.policy.id, p.id);
  assert.is(detail.body.agent.policy.scope, 'agent');

  // Deleting it re-certifies the agent without limits, back to its approved capabilities.
  const back = nextCertificate(agent);
  const d = await owner.api.del(`/api/policies/${p.id}`);
  assert.is(d.status, 200, d.text);
  assert.equal(d.body, { ok: true, sentTo: [agent.did] });
  const c2 = await back;
  assert.is(c2.policyId, null);
  assert.is(c2.resourceLimits, null);
  assert.equal(c2.capabilities, ['file_access', 'api_call']);
  assert.is((await s.ctx.c.audit.find({ action: 'policy.delete', target: p.id })).length, 1);
  isError(await owner.api.get(`/api/policies/${p.id}`), 404);
  isError(await owner.api.del(`/api/policies/${p.id}`), 404);
  await agent.stop();
});

test('a certificate larger than the frame scratch buffer goes out whole in the offer and in ready, and a small one after it too', async () => {
  const { s, owner } = ctx;
  const agent = await readyAgent(s, owner, { capabilities: ['api_call'] });
  const allowedDomains = Array.from({ length: 1000 }, (_, i) => `host-${String(i).padStart(4, '0')}.example-domain.net`);
  const big = nextCertificate(agent); // from ready: the certificate the agent co-signed, with both signatures checked
  const r = await owner.api.post('/api/policies', { agentDid: agent.did, capabilities: ['api_call'], resourceLimits: { allowedDomains } });
  assert.is(r.status, 201, r.text);
  const c = await big;
  assert.equal(c.resourceLimits.allowedDomains, allowedDomains);
  assert.ok(JSON.stringify(c).length > 30_000);
  await waitFor(async () => (await fleet(s).service.certificates.current(agent.did))?.certificate.serial === c.serial);

  const small = nextCertificate(agent);
  const r2 = await owner.api.post('/api/policies', { agentDid: agent.did, capabilities: ['api_call'], resourceLimits: { maxTokensPerDay: 5 } });
  assert.is(r2.status, 201, r2.text);
  const c2 = await small;
  assert.equal(c2.resourceLimits, { maxTokensPerDay: 5 });
  assert.is(c2.policyId, r2.body.policy.id);
  for (const id of [r.body.policy.id, r2.body.policy.id]) assert.is((await owner.api.del(`/api/policies/${id}`)).status, 200);
  await agent.stop();
});

test('an offline agent gets the new policy when it reconnects', async () => {
  const { s, owner } = ctx;
  const keys = await approvedKeys(s, owner);
  const r = await owner.api.post('/api/policies', { agentDid: keys.did, capabilities: ['browser_control'], resourceLimits: { maxRequestsPerHour: 3 } });
  assert.is(r.status, 201);
  assert.equal(r.body.sentTo, [], 'offline: nobody received it now');
  const again = newAgent(s, { keys });
  const caps = once<any>(again, 'capabilities');
  await again.waitFor('ready');
  assert.is((await caps).policyId, r.body.policy.id, 'update_capabilities on reconnect');
  assert.is(again.certificate!.certificate.policyId, r.body.policy.id);
  assert.equal(again.certificate!.certificate.capabilities, ['browser_control']);
  await again.stop();
});

test('a policy for an agent still waiting for approval applies from its approval on', async () => {
  const { s, owner } = ctx;
  const agent = newAgent(s);
  try {
    await agent.waitFor('pending');
    const r = await owner.api.post('/api/policies', { agentDid: agent.did, capabilities: ['api_call'], resourceLimits: { maxTokensPerDay: 1000 } });
    assert.is(r.status, 201, r.text);
    assert.equal(r.body.sentTo, [], 'not connected as an approved agent: nothing sent');
    await approve(owner, agent, ['file_access', 'api_call']);
    await agent.waitFor('ready');
    assert.is(agent.certificate!.certificate.policyId, r.body.policy.id, 'the first certificate carries it');
    assert.equal(agent.certificate!.certificate.capabilities, ['api_call']);
    assert.equal(agent.certificate!.certificate.resourceLimits, { maxTokensPerDay: 1000 });
  } finally {
    await agent.stop();
  }
});

test('a workspace policy reaches exactly the connected agents whose effective policy changes', async () => {
  const { s, owner } = ctx;
  const ws = await makeWorkspace(owner, 'Fleet A');
  const a = await readyAgent(s, owner, { workspace: ws.id });
  const b = await readyAgent(s, owner, { workspace: ws.id });
  const own = await readyAgent(s, owner, { workspace: ws.id }); // has its own policy: unaffected
  const offline = await readyAgent(s, owner, { workspace: ws.id });
  const elsewhere = await readyAgent(s, owner); // default workspace
  await offline.stop();
  const mine = await owner.api.post('/api/policies', { agentDid: own.did, capabilities: ['api_call'] });
  assert.equal(mine.body.sentTo, [own.did]);

  const certA = nextCertificate(a);
  const certB = nextCertificate(b);
  const r = await owner.api.post('/api/policies', { workspaceId: ws.slug, capabilities: ['code_execution'], resourceLimits: { maxTokensPerDay: 50 } });
  assert.is(r.status, 201, r.text);
  assert.is(r.body.policy.workspaceId, ws.id, 'a slug is accepted and stored as the id');
  assert.equal([...r.body.sentTo].sort(), [a.did, b.did].sort());
  assert.is((await certA).policyId, r.body.policy.id);
  assert.is((await certB).policyId, r.body.policy.id);
  assert.is(own.certificate!.certificate.policyId, mine.body.policy.id);
  assert.is(elsewhere.certificate!.certificate.policyId, null);

  // A newer workspace policy supersedes the older one; deleting the newer one restores the older.
  const newer = await owner.api.post('/api/policies', { workspaceId: ws.id, capabilities: ['mail_send'] });
  assert.equal([...newer.body.sentTo].sort(), [a.did, b.did].sort());
  await waitFor(() => a.certificate!.certificate.policyId === newer.body.policy.id);
  const del = await owner.api.del(`/api/policies/${newer.body.policy.id}`);
  assert.equal([...del.body.sentTo].sort(), [a.did, b.did].sort());
  await waitFor(() => a.certificate!.certificate.policyId === r.body.policy.id && b.certificate!.certificate.policyId === r.body.policy.id);

  const list = await owner.api.get(`/api/policies?workspaceId=${ws.id}`);
  assert.equal(list.body.policies.map((p: any) => p.id), [r.body.policy.id]);
  const byAgent = await owner.api.get(`/api/policies?agentDid=${encodeURIComponent(own.did)}`);
  assert.equal(byAgent.body.policies.map((p: any) => p.id), [mine.body.policy.id]);
  await stopAll(a, b, own, elsewhere);
});

test('expired policies stay stored and are listed only with includeExpired', async () => {
  const { s, owner } = ctx;
  const agent = await readyAgent(s, owner);
  const expiresAt = new Date(Date.now() + 1200).toISOString();
  const r = await owner.api.post('/api/policies', { agentDid: agent.did, capabilities: ['api_call'], expiresAt });
  assert.is(r.status, 201, r.text);
  assert.is(r.body.policy.expiresAt, expiresAt);
  await waitFor(() => agent.certificate!.certificate.policyExpiresAt === expiresAt);
  let listed = await owner.api.get(`/api/policies?agentDid=${encodeURIComponent(agent.did)}`);
  assert.equal(listed.body.policies.map((p: any) => p.id), [r.body.policy.id]);
  await sleep(Date.parse(expiresAt) - Date.now() + 50);
  listed = await owner.api.get(`/api/policies?agentDid=${encodeURIComponent(agent.did)}`);
  assert.equal(listed.body.policies, []);
  listed = await owner.api.get(`/api/policies?agentDid=${encodeURIComponent(agent.did)}&includeExpired=true`);
  assert.equal(listed.body.policies.map((p: any) => p.id), [r.body.policy.id]);
  assert.is((await owner.api.get(`/api/policies/${r.body.policy.id}`)).status, 200);
  await agent.stop();
});

test('validation: scope, capabilities, limits, expiry, unknown targets, global admin only', async () => {
  const { s, owner } = ctx;
  const agent = await readyAgent(s, owner);
  const did = agent.did;
  isError(await owner.api.post('/api/policies', { capabilities: ['api_call'] }), 400, 'scope_required');
  isError(await owner.api.post('/api/policies', { agentDid: did, capabilities: [] }), 400);
  isError(await owner.api.post('/api/policies', { agentDid: did, capabilities: ['teleport'] }), 400);
  isError(await owner.api.post('/api/policies', { agentDid: did, capabilities: ['api_call'], expiresAt: new Date(Date.now() - 1000).toISOString() }), 400);
  isError(await owner.api.post('/api/policies', { agentDid: did, capabilities: ['api_call'], expiresAt: 'tomorrow' }), 400);
  // ISO 8601 forms: a zone is required on a date-time; a date alone is 00:00 UTC; stored in UTC.
  for (const bad of ['2099-06-01T12:00:00', '2099-02-30', '2099-06-01T25:00Z', '2099-06-01 12:00Z']) {
    isError(await owner.api.post('/api/policies', { agentDid: did, capabilities: ['api_call'], expiresAt: bad }), 400, 'validation_failed');
  }
  const forms: Array<[string, string]> = [
    ['2099-06-01', '2099-06-01T00:00:00.000Z'],
    ['2099-06-01T12:00Z', '2099-06-01T12:00:00.000Z'],
    ['2099-06-01T12:00:00.25+02:00', '2099-06-01T10:00:00.250Z'],
    ['2099-06-01T12:00-0530', '2099-06-01T17:30:00.000Z'],
  ];
  for (const [given, stored] of forms) {
    const ok = await owner.api.post('/api/policies', { agentDid: did, capabilities: ['api_call'], expiresAt: given });
    assert.is(ok.status, 201, ok.text);
    assert.is(ok.body.policy.expiresAt, stored);
    assert.is((await owner.api.del(`/api/policies/${ok.body.policy.id}`)).status, 200);
  }
  for (const bad of [{ maxTokensPerDay: 0 }, { maxTokensPerDay: 1.5 }, { maxRequestsPerHour: -1 }, { allowedDomains: ['not a host'] }, { other: 1 }]) {
    isError(await owner.api.post('/api/policies', { agentDid: did, capabilities: ['api_call'], resourceLimits: bad }), 400);
  }
  isError(await owner.api.post('/api/policies', { agentDid: 'did:key:z6MkNoSuchAgent', capabilities: ['api_call'] }), 404);
  isError(await owner.api.post('/api/policies', { workspaceId: 'nowhere', capabilities: ['api_call'] }), 404);
  const wsAdmin = await makeUser(s, { workspaces: { [s.ctx.defaultWorkspace._id]: 'owner' } });
  isError(await wsAdmin.api.post('/api/policies', { agentDid: did, capabilities: ['api_call'] }), 403);
  isError(await wsAdmin.api.get('/api/policies'), 403);
  isError(await wsAdmin.api.del('/api/policies/x'), 403);
  const noLimits = await owner.api.post('/api/policies', { agentDid: did, capabilities: ['api_call'], resourceLimits: null });
  assert.is(noLimits.status, 201);
  assert.is(noLimits.body.policy.resourceLimits, null);
  await agent.stop();
});

test.run();
