/**
 * The admins' list of pending invitations (never a token) and revoking one by id, and the batch
 * DID → name look-up, which answers only for people and agents the caller may see.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { http, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { isError, makeAgent, makeWorkspace, startWithOwner } from './people-helpers.js';
import { sessionAgent, type SessionAgent } from './channels-helpers.js';
import { claimWith } from './identity-helpers.js';
import { generateKeyPair } from '../src/domain/did.js';
import { hashToken } from '../src/services/sessions.js';
import type { AgentDoc } from '../src/store/collections.js';

const test = suite('people: invitations list and revoke, name look-ups');
let s: TestServer;
let owner: TestUser;
let globalAdmin: TestUser;
let defaultAdmin: TestUser;
let operator: TestUser;
let member: TestUser;
let wsX: { id: string; slug: string };
let wsY: { id: string; slug: string };
let adminX: TestUser;
let alice: TestUser;
let bob: TestUser;
let carol: TestUser;
let loner: TestUser;
let botX: SessionAgent;
let agentY: AgentDoc;
let pendingAgent: AgentDoc;

const DAY = 24 * 3600_000;
const invited: Array<{ email: string; token: string; userId: string }> = [];

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  const def = s.ctx.defaultWorkspace._id;
  globalAdmin = await makeUser(s, { isAdmin: true, role: 'admin' });
  defaultAdmin = await makeUser(s, { workspaces: { [def]: 'admin' } });
  operator = await makeUser(s, { role: 'operator', workspaces: { [def]: 'operator' } });
  member = await makeUser(s, { workspaces: { [def]: 'member' } });
  wsX = await makeWorkspace(owner, 'Names X');
  wsY = await makeWorkspace(owner, 'Names Y');
  adminX = await makeUser(s, { workspaces: { [wsX.id]: 'admin' } });
  alice = await makeUser(s, { name: 'Alice', workspaces: { [wsX.id]: 'member' } });
  bob = await makeUser(s, { name: 'Bob', workspaces: { [wsX.id]: 'member', [wsY.id]: 'member' } });
  carol = await makeUser(s, { name: 'Carol', workspaces: { [wsY.id]: 'member' } });
  loner = await makeUser(s, { name: 'Loner' });
  botX = await sessionAgent(s, 'bot-x', wsX.id);
  agentY = await makeAgent(s, 'agent-y', undefined, wsY.id);
  pendingAgent = await makeAgent(s, 'pending-x', undefined, wsX.id);
  await s.ctx.c.agents.updateOne({ _id: pendingAgent._id }, { $set: { status: 'pending' } });
  await s.ctx.fleet.roster.changed([pendingAgent._id]);

  for (const [i, email] of ['one@example.test', 'two@example.test', 'three@example.test'].entries()) {
    const r = await owner.api.post('/api/users/invite/email', { email, name: `Invitee ${i}`, role: i === 0 ? 'operator' : 'member' });
    assert.is(r.status, 200, r.text);
    invited.push({ email, ...r.body });
  }
  // An invitation older than 7 days, as an earlier week left it: not pending any more.
  await s.ctx.c.invitations.insertOne({
    _id: hashToken('old-token'),
    email: 'old@example.test',
    emailLower: 'old@example.test',
    name: 'Old',
    role: 'member',
    userId: invited[0]!.userId,
    createdAt: new Date(Date.now() - 8 * DAY).toISOString(),
    createdBy: owner.user.did,
  });
});

test.after(async () => {
  await s.stop(true);
});

test('GET /api/invitations: pending invitations, newest first, paged, never the token; admins only', async () => {
  const r = await globalAdmin.api.get('/api/invitations');
  assert.is(r.status, 200, r.text);
  assert.equal({ total: r.body.total, page: r.body.page, pageSize: r.body.pageSize, totalPages: r.body.totalPages }, { total: 3, page: 1, pageSize: 20, totalPages: 1 });
  assert.equal(r.body.invitations.map((i: any) => i.email), ['three@example.test', 'two@example.test', 'one@example.test']);
  const one = r.body.invitations[2];
  assert.equal(Object.keys(one).sort(), ['createdAt', 'email', 'expiresAt', 'id', 'invitedBy', 'name', 'role', 'workspaceId']);
  assert.equal(
    { ...one, id: undefined, createdAt: undefined },
    { id: undefined, createdAt: undefined, email: 'one@example.test', name: 'Invitee 0', role: 'operator', invitedBy: owner.user.did, workspaceId: s.ctx.defaultWorkspace._id, expiresAt: new Date(Date.parse(one.createdAt) + 7 * DAY).toISOString() },
  );
  for (const { token } of invited) assert.not.ok(r.text.includes(token), 'no token in the answer');

  const p2 = await globalAdmin.api.get('/api/invitations?page=2&pageSize=2');
  assert.equal(p2.body.invitations.map((i: any) => i.email), ['one@example.test']);
  assert.equal([p2.body.total, p2.body.totalPages], [3, 2]);

  // The owner and the admins of the workspace invited people join see the same list.
  assert.equal((await owner.api.get('/api/invitations')).body, r.body);
  assert.equal((await defaultAdmin.api.get('/api/invitations')).body, r.body);
  // Everyone else is refused.
  isError(await adminX.api.get('/api/invitations'), 403, 'forbidden');
  isError(await operator.api.get('/api/invitations'), 403, 'forbidden');
  isError(await member.api.get('/api/invitations'), 403, 'forbidden');
  isError(await botX.api.get('/api/invitations'), 403, 'forbidden');
  isError(await http(s.url, 'GET', '/api/invitations'), 401);
  isError(await globalAdmin.api.get('/api/invitations?pageSize=101'), 400);
  isError(await globalAdmin.api.get('/api/invitations?page=0'), 400);
});

test('DELETE /api/invitations/id/{id}: revokes by id; its token stops working and its claims end; audited', async () => {
  const list = (await globalAdmin.api.get('/api/invitations')).body.invitations;
  const two = list.find((i: any) => i.email === 'two@example.test');
  const token = invited.find((i) => i.email === 'two@example.test')!.token;
  const claim = await http(s.url, 'POST', '/api/users/invite/from-email', { json: { token } });
  assert.is(claim.status, 200, claim.text);

  // Refusals change nothing.
  isError(await member.api.del(`/api/invitations/id/${two.id}`), 403, 'forbidden');
  isError(await adminX.api.del(`/api/invitations/id/${two.id}`), 403, 'forbidden');
  isError(await botX.api.del(`/api/invitations/id/${two.id}`), 403, 'forbidden');
  isError(await http(s.url, 'DELETE', `/api/invitations/id/${two.id}`), 401);
  isError(await globalAdmin.api.del('/api/invitations/id/nope'), 404, 'not_found');
  isError(await globalAdmin.api.del(`/api/invitations/id/${hashToken('old-token')}`), 404, 'not_found');
  assert.is((await http(s.url, 'GET', `/api/invitations/${token}`)).status, 200);

  const r = await defaultAdmin.api.del(`/api/invitations/id/${two.id}`);
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { success: true });
  isError(await http(s.url, 'GET', `/api/invitations/${token}`), 404);
  const claimed = await claimWith(s.url, claim.body.inviteToken, generateKeyPair());
  assert.is.not(claimed.status, 200, 'the claim opened through it ended');
  assert.is((await s.ctx.c.claimSessions.findById(hashToken(claim.body.inviteToken)))?.failure, 'invitation_revoked');
  assert.ok(await s.ctx.c.audit.findOne({ action: 'invitation.revoke', actor: defaultAdmin.user.did }));
  assert.equal((await globalAdmin.api.get('/api/invitations')).body.invitations.map((i: any) => i.email), ['three@example.test', 'one@example.test']);
  isError(await globalAdmin.api.del(`/api/invitations/id/${two.id}`), 404, 'not_found');
});

const names = async (who: { api: { post: (p: string, j?: unknown) => Promise<any> } }, dids: string[]) => {
  const r = await who.api.post('/api/lookup/names', { dids });
  assert.is(r.status, 200, r.text);
  return r.body.names as Record<string, { name: string; kind: string }>;
};

test('POST /api/lookup/names: only people and agents the caller may see; the others are absent, like unknown DIDs', async () => {
  const unknown = generateKeyPair().did;
  const all = [alice, bob, carol, loner].map((u) => u.user.did!).concat([botX.did, agentY._id, pendingAgent._id, unknown]);
  const user = (u: TestUser) => [u.user.did!, { name: u.user.name, kind: 'user' }] as const;

  // A member of X sees X's people and active agents, and themselves.
  assert.equal(await names(alice, all), Object.fromEntries([user(alice), user(bob), [botX.did, { name: 'bot-x', kind: 'agent' }]]));
  // Bob shares X with alice and Y with carol.
  assert.equal(Object.keys(await names(bob, all)).sort(), [alice.user.did, bob.user.did, carol.user.did, botX.did, agentY._id].sort());
  assert.equal(await names(carol, all), Object.fromEntries([user(bob), user(carol), [agentY._id, { name: 'agent-y', kind: 'agent' }]]));
  assert.equal(await names(loner, all), Object.fromEntries([user(loner)]));
  // An agent's session: the people and agents of its workspaces, itself included.
  assert.equal(Object.keys(await names(botX, all)).sort(), [alice.user.did, bob.user.did, botX.did].sort());
  // A global admin sees everyone, pending agents too.
  const admin = await names(globalAdmin, all);
  assert.equal(Object.keys(admin).sort(), all.filter((d) => d !== unknown).sort());
  assert.equal(admin[pendingAgent._id], { name: 'pending-x', kind: 'agent' });
  // No oracle: a DID one may not see answers exactly as one that names no one.
  assert.equal(await names(alice, [carol.user.did!]), {});
  assert.equal(await names(alice, [unknown]), {});

  isError(await http(s.url, 'POST', '/api/lookup/names', { json: { dids: [alice.user.did] } }), 401);
  isError(await alice.api.post('/api/lookup/names', { dids: [] }), 400);
  isError(await alice.api.post('/api/lookup/names', { dids: Array.from({ length: 201 }, () => unknown) }), 400);
  isError(await alice.api.post('/api/lookup/names', {}), 400);
  isError(await alice.api.post('/api/lookup/names', { dids: [42] }), 400);
});

test.run();
