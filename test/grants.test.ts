import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { http, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { enc, isError, makeAgent, startWithOwner } from './people-helpers.js';
import { hasGrant } from '../src/services/grants.js';
import type { AgentDoc } from '../src/store/collections.js';

const test = suite('grants');
let s: TestServer;
let owner: TestUser;
let admin: TestUser; // role admin without the global admin flag: reads and revokes, does not issue
let user: TestUser;
let agent: AgentDoc;
let other: AgentDoc;

const future = (ms: number) => new Date(Date.now() + ms).toISOString();
const GRANT_KEYS = ['agentDid', 'capabilities', 'createdAt', 'expiresAt', 'id'];

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  admin = await makeUser(s, { role: 'admin' });
  user = await makeUser(s, { name: 'Grantee' });
  agent = await makeAgent(s, 'target');
  other = await makeAgent(s, 'bystander');
});

test.after(async () => {
  await s.stop(true);
});

test('POST /api/grants: 201 {grant} with exactly the Grant fields; audited', async () => {
  const expiresAt = future(3_600_000);
  const r = await owner.api.post('/api/grants', {
    userDid: user.user.did,
    agentDid: agent._id,
    capabilities: ['file_access', 'api_call', 'file_access'],
    expiresAt,
  });
  assert.is(r.status, 201, r.text);
  assert.equal(Object.keys(r.body), ['grant']);
  const g = r.body.grant;
  assert.equal(Object.keys(g).sort(), GRANT_KEYS);
  assert.is(g.agentDid, agent._id);
  assert.equal(g.capabilities, ['file_access', 'api_call']);
  assert.is(g.expiresAt, expiresAt);
  assert.ok(Date.parse(g.createdAt) > 0);
  const entry = await s.ctx.c.audit.findOne({ action: 'grant.create', target: g.id });
  assert.ok(entry);
  assert.is(entry!.details.userDid, user.user.did);
  assert.is(entry!.actor, owner.user.did);
});

test('POST /api/users/{did}/grants: 201; agentDid null covers all agents; expiresAt may be absent (no end)', async () => {
  const r = await owner.api.post(`/api/users/${enc(user.user.did!)}/grants`, { agentDid: null, capabilities: ['knowledge_search'] });
  assert.is(r.status, 201, r.text);
  assert.is(r.body.grant.agentDid, null);
  assert.is(r.body.grant.expiresAt, null);
  // An expiry with an offset is stored as UTC.
  const r2 = await owner.api.post(`/api/users/${enc(user.user.did!)}/grants`, {
    agentDid: other._id,
    capabilities: ['mail_send'],
    expiresAt: '2999-01-01T02:00:00+02:00',
  });
  assert.is(r2.status, 201, r2.text);
  assert.is(r2.body.grant.expiresAt, '2999-01-01T00:00:00.000Z');
});

test('an unclaimed user cannot be granted anything (400); an unknown user is 404', async () => {
  const pending = await makeUser(s, { unclaimed: true });
  isError(await owner.api.post('/api/grants', { userDid: pending.user._id, agentDid: null, capabilities: ['api_call'] }), 400, 'unclaimed_user');
  isError(await owner.api.post(`/api/users/${pending.user._id}/grants`, { agentDid: null, capabilities: ['api_call'] }), 400, 'unclaimed_user');
  isError(await owner.api.post('/api/grants', { userDid: 'did:key:z6MkNobody', agentDid: null, capabilities: ['api_call'] }), 404, 'not_found');
});

test('capabilities: non-empty, each from the list; the bad value is named', async () => {
  const path = `/api/users/${enc(user.user.did!)}/grants`;
  const bad = await owner.api.post(path, { agentDid: null, capabilities: ['file_access', 'teleport'] });
  isError(bad, 400, 'unknown_capability');
  assert.match(bad.body.error.message, /'teleport'/);
  isError(await owner.api.post(path, { agentDid: null, capabilities: [] }), 400, 'validation_failed');
  isError(await owner.api.post(path, { agentDid: null }), 400, 'validation_failed');
});

test('agentDid must be given (null for all agents) and name a known agent, not a rejected registration; expiresAt in the future', async () => {
  const path = `/api/users/${enc(user.user.did!)}/grants`;
  isError(await owner.api.post(path, { capabilities: ['api_call'] }), 400, 'validation_failed');
  isError(await owner.api.post(path, { agentDid: 'did:key:z6MkNoAgent', capabilities: ['api_call'] }), 404, 'not_found');
  // A registration awaiting approval may be granted to in advance; a rejected one is no agent.
  const waiting = await makeAgent(s, 'waiting');
  await s.ctx.c.agents.updateOne({ _id: waiting._id }, { $set: { status: 'pending' } });
  await s.ctx.fleet.roster.changed([waiting._id]);
  const grantee = await makeUser(s); // not `user`: later tests count that user's grants
  const granteePath = `/api/users/${enc(grantee.user.did!)}/grants`;
  assert.is((await owner.api.post(granteePath, { agentDid: waiting._id, capabilities: ['api_call'] })).status, 201);
  await s.ctx.c.agents.updateOne({ _id: waiting._id }, { $set: { status: 'rejected' } });
  await s.ctx.fleet.roster.changed([waiting._id]);
  isError(await owner.api.post(granteePath, { agentDid: waiting._id, capabilities: ['api_call'] }), 404, 'not_found');
  isError(await owner.api.post(path, { agentDid: null, capabilities: ['api_call'], expiresAt: '2001-01-01T00:00:00Z' }), 400, 'expired');
  isError(await owner.api.post(path, { agentDid: null, capabilities: ['api_call'], expiresAt: 'tomorrow' }), 400, 'validation_failed');
});

test('issuing is for global admins only: admin role 403, member 403, anonymous 401', async () => {
  const body = { agentDid: null, capabilities: ['api_call'] };
  isError(await admin.api.post(`/api/users/${enc(user.user.did!)}/grants`, body), 403, 'forbidden');
  isError(await admin.api.post('/api/grants', { userDid: user.user.did, ...body }), 403, 'forbidden');
  isError(await user.api.post('/api/grants', { userDid: user.user.did, ...body }), 403, 'forbidden');
  isError(await http(s.url, 'POST', '/api/grants', { json: { userDid: user.user.did, ...body } }), 401, 'unauthorized');
});

test('GET /api/users/{did}/grants: admins read {grants}, newest first', async () => {
  const r = await admin.api.get(`/api/users/${enc(user.user.did!)}/grants`);
  assert.is(r.status, 200);
  assert.equal(Object.keys(r.body), ['grants']);
  assert.is(r.body.grants.length, 3);
  for (const g of r.body.grants) assert.equal(Object.keys(g).sort(), GRANT_KEYS);
  const created = r.body.grants.map((g: any) => g.createdAt);
  assert.equal(created, [...created].sort().reverse());
  isError(await user.api.get(`/api/users/${enc(user.user.did!)}/grants`), 403, 'forbidden');
  isError(await admin.api.get(`/api/users/${enc('did:key:z6MkNobody')}/grants`), 404, 'not_found');
});

test('hasGrant: the agent itself or all agents, the capability, unexpired', async () => {
  const c = s.ctx.c;
  const u = await makeUser(s);
  assert.is(await hasGrant(c, u.user._id, agent._id, 'file_access'), false);
  const one = await owner.api.post(`/api/users/${enc(u.user.did!)}/grants`, { agentDid: agent._id, capabilities: ['file_access'], expiresAt: future(60_000) });
  assert.is(one.status, 201);
  assert.is(await hasGrant(c, u.user._id, agent._id, 'file_access'), true);
  assert.is(await hasGrant(c, u.user._id, agent._id, 'api_call'), false, 'another capability');
  assert.is(await hasGrant(c, u.user._id, other._id, 'file_access'), false, 'another agent');
  // Expiry: checked against the instant given.
  assert.is(await hasGrant(c, u.user._id, agent._id, 'file_access', new Date(Date.now() + 120_000)), false, 'after expiry');
  const all = await owner.api.post(`/api/users/${enc(u.user.did!)}/grants`, { agentDid: null, capabilities: ['api_call'] });
  assert.is(await hasGrant(c, u.user._id, other._id, 'api_call'), true, 'agentDid null covers every agent');
  assert.is(await hasGrant(c, u.user._id, agent._id, 'api_call', new Date('2999-01-01')), true, 'no expiry');
  const nobody = await makeUser(s);
  assert.is(await hasGrant(c, nobody.user._id, other._id, 'api_call'), false, "another user's grants do not count");

  // Revocation is immediate.
  const del = await admin.api.del(`/api/users/${enc(u.user.did!)}/grants/${all.body.grant.id}`);
  assert.is(del.status, 200);
  assert.equal(del.body, { ok: true });
  assert.is(await hasGrant(c, u.user._id, other._id, 'api_call'), false);
  assert.ok(await c.audit.findOne({ action: 'grant.revoke', target: all.body.grant.id }));
});

test('DELETE /api/users/{did}/grants/{grantId}: 404 for an unknown grant or one of another user; admins only', async () => {
  const list = await admin.api.get(`/api/users/${enc(user.user.did!)}/grants`);
  const gid = list.body.grants[0].id;
  const stranger = await makeUser(s);
  isError(await admin.api.del(`/api/users/${enc(stranger.user.did!)}/grants/${gid}`), 404, 'not_found');
  isError(await admin.api.del(`/api/users/${enc(user.user.did!)}/grants/nope`), 404, 'not_found');
  isError(await user.api.del(`/api/users/${enc(user.user.did!)}/grants/${gid}`), 403, 'forbidden');
  assert.is((await admin.api.del(`/api/users/${user.user._id}/grants/${gid}`)).status, 200);
  assert.is((await admin.api.get(`/api/users/${enc(user.user.did!)}/grants`)).body.grants.length, 2);
});

test.run();
