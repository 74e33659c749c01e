import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { generateKeyPair, publicKeyFromDidKey, didKeyFromPublicKey } from '../src/domain/did.js';
import { verifyCertificateSignature } from '../src/domain/certificate.js';
import { makeUser } from './fixtures.js';
import { waitFor } from './helpers.js';
import { approve, fleet, isError, makeWorkspace, newAgent, once, RawAgent, readyAgent, startWithOwner, stopAll } from './fleet-helpers.js';

const test = suite('fleet registration');
const ctx = {} as Awaited<ReturnType<typeof startWithOwner>>;

test.before(async () => {
  Object.assign(ctx, await startWithOwner({ AGENT_OFFLINE_GRACE_MS: '0' }));
});
test.after(async () => {
  await ctx.s.stop(true);
});

test('socket registration: pending → approve a subset → certificate signed by both → ready → heartbeat → token stats', async () => {
  const { s, owner } = ctx;
  const agent = newAgent(s, { name: 'alpha', capabilities: ['file_access', 'api_call', 'mail_send'] });
  await agent.waitFor('pending');
  assert.type(agent.registrationId, 'string');

  const list = await owner.api.get('/api/registrations');
  assert.is(list.status, 200);
  assert.equal(list.body.availableCapabilities, [
    'file_access',
    'internet_access',
    'browser_control',
    'api_call',
    'mail_send',
    'code_execution',
    'system_command',
    'agent_communication',
  ]);
  const reg = list.body.registrations.find((r: any) => r.id === agent.registrationId);
  assert.ok(reg, 'the pending registration is listed');
  assert.is(reg.name, 'alpha');
  assert.is(reg.publicKey, agent['opts'].keys.publicKey);
  assert.equal(reg.requestedCapabilities, ['file_access', 'api_call', 'mail_send']);
  assert.ok(!Number.isNaN(Date.parse(reg.requestedAt)));

  const approved = once<any>(agent, 'registration');
  const r = await owner.api.post(`/api/registrations/${agent.registrationId}/approve`, { capabilities: ['file_access', 'mail_send'] });
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { success: true, agentId: agent.did });
  assert.is((await approved).status, 'approved');
  await agent.waitFor('ready');

  // The certificate carries the approved subset, no policy, and both signatures verify.
  const cur = agent.certificate!;
  assert.equal(cur.certificate.capabilities, ['file_access', 'mail_send']);
  assert.is(cur.certificate.policyId, null);
  assert.is(cur.certificate.resourceLimits, null);
  assert.is(cur.certificate.subject, agent.did);
  assert.is(cur.certificate.issuer, s.ctx.identity.did);
  assert.ok(verifyCertificateSignature(cur.certificate, publicKeyFromDidKey(s.ctx.identity.did)!, cur.serverSignature), 'server signature');
  assert.ok(verifyCertificateSignature(cur.certificate, publicKeyFromDidKey(agent.did)!, cur.agentSignature), 'agent co-signature');
  const stored = await fleet(s).service.certificates.current(agent.did);
  assert.equal(stored?.certificate, cur.certificate);
  assert.is(stored?.agentSignature, cur.agentSignature);
  assert.is(stored?.serverSignature, cur.serverSignature);

  // The agent detail shows the current certificate; the session token works for agent calls.
  const detail = await owner.api.get(`/api/agents/${encodeURIComponent(agent.did)}`);
  assert.is(detail.status, 200, detail.text);
  assert.equal(detail.body.agent.certificate.certificate, cur.certificate);
  assert.is(detail.body.agent.isOnline, true);
  assert.is(detail.body.agent.workspace.id, s.ctx.defaultWorkspace._id, 'no workspace named: the default one, primary');

  // Heartbeat with usage: acknowledged once stored, and counted in the statistics.
  const before = (await owner.api.get('/api/stats/tokens')).body;
  agent.recordUsage(120, 30);
  const acked = once<number>(agent, 'heartbeatAck');
  agent.heartbeat();
  await acked;
  assert.equal(agent.unacknowledgedUsage(), { promptTokens: 0, completionTokens: 0 });
  const after = (await owner.api.get('/api/stats/tokens')).body;
  for (const k of ['allTime', 'daily', 'monthly']) {
    assert.is(after[k].promptTokens - before[k].promptTokens, 120, k);
    assert.is(after[k].completionTokens - before[k].completionTokens, 30, k);
  }
  await agent.stop();
});

test('the actor follows the lifecycle: pending, then active and online', async () => {
  const { s, owner } = ctx;
  const agent = newAgent(s);
  await agent.waitFor('pending');
  const pending = await owner.api.get(`/api/admin/actors/${encodeURIComponent(`agent:${agent.did}`)}`);
  assert.is(pending.status, 200, pending.text);
  assert.is(pending.body.actor.state, 'pending');
  await approve(owner, agent);
  await agent.waitFor('ready');
  await waitFor(async () => {
    const a = await owner.api.get(`/api/admin/actors/${encodeURIComponent(agent.did)}?kind=agent`);
    return a.body.actor?.state?.active?.connection === 'online' && a.body.actor.state.active.certificate === 'current';
  });
  await agent.stop();
  await waitFor(async () => {
    const a = await owner.api.get(`/api/admin/actors/${encodeURIComponent(agent.did)}?kind=agent`);
    return a.body.actor?.state?.active?.connection === 'offline';
  });
});

test('rejection: the waiting agent learns the reason and is closed with 4403; the reason is stored', async () => {
  const { s, owner } = ctx;
  const agent = newAgent(s);
  await agent.waitFor('pending');
  // A reason is required, and must say something: refused, and the registration stays pending.
  for (const body of [{}, { reason: '' }, { reason: '   ' }]) isError(await owner.api.post(`/api/registrations/${agent.registrationId}/reject`, body), 400, 'validation_failed');
  assert.is((await s.ctx.c.agents.findById(agent.did))?.status, 'pending');
  const regEvent = new Promise<any>((resolve) => agent.on('registration', (f: any) => f.status === 'rejected' && resolve(f)));
  const r = await owner.api.post(`/api/registrations/${agent.registrationId}/reject`, { reason: 'unknown vendor' });
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { success: true });
  assert.is((await regEvent).reason, 'unknown vendor');
  await agent.waitFor('rejected');
  assert.is(agent.lastClose?.code, 4403);
  const reg = await s.ctx.c.registrations.findById(agent.registrationId!);
  assert.is(reg?.status, 'rejected');
  assert.is(reg?.reason, 'unknown vendor');
  assert.is((await s.ctx.c.agents.findById(agent.did))?.status, 'rejected');

  // Connecting again: told again, closed again, no new registration.
  const raw = new RawAgent(s.url, agent['opts'].keys);
  await raw.authenticate();
  const again = await raw.next('registration');
  assert.equal(again, { type: 'registration', status: 'rejected', reason: 'unknown vendor' });
  assert.is((await raw.waitClosed()).code, 4403);
  const listed = await owner.api.get('/api/registrations');
  assert.not.ok(listed.body.registrations.some((x: any) => x.agentDid === agent.did));
});

test('POST /api/agents/register: 201 with the did:key of the key; then the agent connects as pending', async () => {
  const { s, owner } = ctx;
  const keys = generateKeyPair();
  const body = { name: 'programmatic', version: '2.1.0', capabilities: ['api_call', 'knowledge_search'], publicKey: keys.publicKey };
  const r = await owner.api.post('/api/agents/register', body);
  assert.is(r.status, 201, r.text);
  assert.is(r.body.agentId, keys.did);
  assert.is(r.body.agentId, didKeyFromPublicKey(Buffer.from(keys.publicKey, 'base64url')));
  assert.type(r.body.message, 'string');

  // Without a session too (auth optional), idempotent while pending.
  const anon = await fetch(`${s.url}/api/agents/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.is(anon.status, 201);
  assert.is(((await anon.json()) as any).agentId, keys.did);

  const listed = (await owner.api.get('/api/registrations')).body.registrations.filter((x: any) => x.agentDid === keys.did);
  assert.is(listed.length, 1);
  assert.equal(listed[0].requestedCapabilities, ['api_call', 'knowledge_search']);

  const agent = newAgent(s, { keys, capabilities: ['api_call'] });
  await agent.waitFor('pending');
  assert.is(agent.registrationId, listed[0].id, 'the socket finds the same registration');
  await approve(owner, agent, ['knowledge_search']);
  await agent.waitFor('ready');
  assert.equal(agent.terms?.capabilities, ['knowledge_search']);
  await agent.stop();
});

test('POST /api/agents/register: validation and conflicts', async () => {
  const { s, owner } = ctx;
  const keys = generateKeyPair();
  const other = generateKeyPair();
  const base = { name: 'v', version: '1', capabilities: ['api_call'] };
  isError(await owner.api.post('/api/agents/register', { ...base, publicKey: 'not-a-key' }), 400);
  isError(await owner.api.post('/api/agents/register', { ...base, publicKey: keys.publicKey, capabilities: ['teleport'] }), 400);
  isError(await owner.api.post('/api/agents/register', { ...base, publicKey: keys.publicKey, did: other.did }), 400, 'invalid_public_key');
  isError(await owner.api.post('/api/agents/register', { ...base }), 400);

  // A DID of another method keeps the key given.
  const web = await owner.api.post('/api/agents/register', { ...base, publicKey: keys.publicKey, did: 'did:web:agents.example.com:v1' });
  assert.is(web.status, 201, web.text);
  assert.is(web.body.agentId, 'did:web:agents.example.com:v1');
  isError(await owner.api.post('/api/agents/register', { ...base, publicKey: other.publicKey, did: 'did:web:agents.example.com:v1' }), 409, 'key_mismatch');

  // A person's DID cannot register as an agent.
  isError(await owner.api.post('/api/agents/register', { ...base, publicKey: owner.keys.publicKey }), 409, 'did_taken');
});

test('approve: outside the requested set 400, unknown 404, twice 409, reject after approve 409, non-admin 403', async () => {
  const { s, owner } = ctx;
  const keys = generateKeyPair();
  const reg = await owner.api.post('/api/agents/register', { name: 'x', version: '1', capabilities: ['api_call'], publicKey: keys.publicKey });
  const id = (await s.ctx.c.registrations.findOne({ agentDid: reg.body.agentId }))!._id;
  isError(await owner.api.post(`/api/registrations/${id}/approve`, { capabilities: ['api_call', 'system_command'] }), 400);
  isError(await owner.api.post('/api/registrations/nope/approve', { capabilities: [] }), 404);
  isError(await owner.api.post('/api/registrations/nope/reject', { reason: 'x' }), 404);
  const member = await makeUser(s, { workspaces: { [s.ctx.defaultWorkspace._id]: 'admin' } });
  isError(await member.api.post(`/api/registrations/${id}/approve`, { capabilities: ['api_call'] }), 403);
  isError(await member.api.get('/api/registrations'), 403);
  const [a, b] = await Promise.all([
    owner.api.post(`/api/registrations/${id}/approve`, { capabilities: ['api_call'] }),
    owner.api.post(`/api/registrations/${id}/approve`, { capabilities: ['api_call'] }),
  ]);
  assert.equal([a.status, b.status].sort(), [200, 409], 'of two concurrent approvals one wins');
  isError(await owner.api.post(`/api/registrations/${id}/reject`, { reason: 'late' }), 409);
  isError(await owner.api.post(`/api/registrations/${id}/approve`, { capabilities: ['api_call'] }), 409);
  isError(await owner.api.post('/api/agents/register', { name: 'x', version: '1', capabilities: ['api_call'], publicKey: keys.publicKey }), 409, 'already_registered');
  const audit = await s.ctx.c.audit.find({ action: 'registration.approve', target: reg.body.agentId });
  assert.is(audit.length, 1);
});

test('a named workspace becomes the primary one at approval', async () => {
  const { s, owner } = ctx;
  const ws = await makeWorkspace(owner, 'Research');
  const agent = await readyAgent(s, owner, { workspace: ws.slug });
  const detail = await owner.api.get(`/api/agents/${encodeURIComponent(agent.did)}`);
  assert.is(detail.body.agent.workspace.id, ws.id);
  assert.equal(detail.body.agent.workspaces.map((w: any) => [w.id, w.isPrimary]), [[ws.id, true]]);
  await stopAll(agent);
});

test.run();
