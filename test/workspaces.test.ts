import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { client, http, type TestServer } from './helpers.js';
import { generateKeyPair } from '../src/domain/did.js';
import { makeUser, type TestUser } from './fixtures.js';
import { enc, isError, makeAgent, makeWorkspace, startWithOwner } from './people-helpers.js';
import {
  addAgentToWorkspace,
  agentWorkspaceIds,
  memberRole,
  primaryWorkspaceOf,
  resolveWorkspace,
  userWorkspaceIds,
  visibleWorkspaceIds,
} from '../src/services/workspaces.js';
import { slugify } from '../src/domain/slugs.js';
import type { WorkspaceDoc } from '../src/store/collections.js';

const test = suite('workspaces');
let s: TestServer;
let owner: TestUser;

test.before(async () => {
  ({ s, owner } = await startWithOwner());
});

test.after(async () => {
  await s.stop(true);
});

const WS_KEYS = ['color', 'createdAt', 'description', 'id', 'isDefault', 'name', 'slug', 'updatedAt'];

// --- create ----------------------------------------------------------------------------------------

test('create: 201 {workspace}; slug derived from the name; a default colour; audited', async () => {
  const r = await owner.api.post('/api/workspaces', { name: '  Ops Team!! 2 ', description: 'night shift' });
  assert.is(r.status, 201, r.text);
  assert.equal(Object.keys(r.body), ['workspace']);
  const w = r.body.workspace;
  assert.equal(Object.keys(w).sort(), WS_KEYS);
  assert.is(w.name, 'Ops Team!! 2');
  assert.is(w.slug, 'ops-team-2');
  assert.is(w.description, 'night shift');
  assert.is(w.isDefault, false);
  assert.match(w.color, /^#[0-9a-f]{6}$/);
  assert.ok(await s.ctx.c.audit.findOne({ action: 'workspace.create', target: w.id }));
  assert.is((await owner.api.post('/api/workspaces', { name: 'Équipe Données' })).body.workspace.slug, 'equipe-donnees');
});

test('create: given slug and colour (normalised to lower case); description defaults to empty', async () => {
  const r = await owner.api.post('/api/workspaces', { name: 'Red', slug: 'red-team', color: '#FF0000' });
  assert.is(r.status, 201);
  assert.is(r.body.workspace.slug, 'red-team');
  assert.is(r.body.workspace.color, '#ff0000');
  const short = await owner.api.post('/api/workspaces', { name: 'Short Colour', color: '#0Af' });
  assert.is(short.status, 201, short.text);
  assert.is(short.body.workspace.color, '#00aaff', 'a short hex colour is stored in its long form');
  assert.is(r.body.workspace.description, '');
});

test('create: 409 for a taken slug, given or derived', async () => {
  isError(await owner.api.post('/api/workspaces', { name: 'Other', slug: 'red-team' }), 409, 'slug_taken');
  isError(await owner.api.post('/api/workspaces', { name: 'Red Team' }), 409, 'slug_taken');
  isError(await owner.api.post('/api/workspaces', { name: 'Default' }), 409, 'slug_taken');
});

test('create: 400 for a bad slug, colour or name, or a name that gives no slug; 403 for non global admins', async () => {
  isError(await owner.api.post('/api/workspaces', { name: 'x', slug: 'Bad Slug' }), 400, 'validation_failed');
  isError(await owner.api.post('/api/workspaces', { name: 'x', slug: 'a--b' }), 400, 'validation_failed');
  isError(await owner.api.post('/api/workspaces', { name: 'x', color: 'red' }), 400, 'validation_failed');
  isError(await owner.api.post('/api/workspaces', { name: 'x', color: '#12345' }), 400, 'validation_failed');
  isError(await owner.api.post('/api/workspaces', { name: 'x', color: '#abcd' }), 400, 'validation_failed');
  isError(await owner.api.post('/api/workspaces', { name: 'x', color: '#ggg' }), 400, 'validation_failed');
  isError(await owner.api.post('/api/workspaces', { name: '' }), 400, 'validation_failed');
  isError(await owner.api.post('/api/workspaces', { name: '!!!' }), 400, 'slug_required');
  const wsAdmin = await makeUser(s, { role: 'admin', workspaces: { [s.ctx.defaultWorkspace._id]: 'owner' } });
  isError(await wsAdmin.api.post('/api/workspaces', { name: 'Mine' }), 403, 'forbidden');
  isError(await http(s.url, 'POST', '/api/workspaces', { json: { name: 'Anon' } }), 401, 'unauthorized');
});

test('slugify: lower case, runs of other characters become one hyphen', () => {
  assert.is(slugify('Hello   World'), 'hello-world');
  assert.is(slugify('--a__b..c--'), 'a-b-c');
  assert.is(slugify('Ünïcödé'), 'unicode');
  assert.is(slugify('日本'), '');
});

// --- read and visibility (§5.7) --------------------------------------------------------------------

test('get: by id or by slug; 404 for an unknown one', async () => {
  const w = await makeWorkspace(owner, 'Addressable');
  const byId = await owner.api.get(`/api/workspaces/${w.id}`);
  assert.is(byId.status, 200);
  assert.equal(Object.keys(byId.body), ['workspace']);
  assert.equal(Object.keys(byId.body.workspace).sort(), WS_KEYS);
  const bySlug = await owner.api.get('/api/workspaces/addressable');
  assert.equal(bySlug.body, byId.body);
  isError(await owner.api.get('/api/workspaces/no-such-workspace'), 404, 'not_found');
});

test('visibility: global admin all, workspace admin and member their own, outsider none, anonymous 401', async () => {
  const a = await makeWorkspace(owner, 'Vis A');
  const b = await makeWorkspace(owner, 'Vis B');
  const globalAdmin = await makeUser(s, { isAdmin: true });
  const wsAdmin = await makeUser(s, { workspaces: { [a.id]: 'admin' } });
  const member = await makeUser(s, { workspaces: { [b.id]: 'member' } });
  const both = await makeUser(s, { workspaces: { [a.id]: 'operator', [b.id]: 'owner' } });
  const outsider = await makeUser(s);

  const slugs = async (u: TestUser) => {
    const r = await u.api.get('/api/workspaces');
    assert.is(r.status, 200);
    return r.body.workspaces.map((w: any) => w.slug);
  };
  const all = (await s.ctx.c.workspaces.find({})).map((w) => w.slug).sort();
  assert.equal([...(await slugs(globalAdmin))].sort(), all);
  assert.equal(await slugs(wsAdmin), ['vis-a']);
  assert.equal(await slugs(member), ['vis-b']);
  assert.equal(await slugs(both), ['vis-a', 'vis-b']);
  assert.equal(await slugs(outsider), []);
  isError(await http(s.url, 'GET', '/api/workspaces'), 401, 'unauthorized');

  assert.is((await wsAdmin.api.get('/api/workspaces/vis-a')).status, 200);
  isError(await wsAdmin.api.get('/api/workspaces/vis-b'), 404, 'not_found');
  isError(await member.api.get('/api/workspaces/vis-a'), 404, 'not_found');
  isError(await outsider.api.get(`/api/workspaces/${a.id}`), 404, 'not_found');
  assert.is((await globalAdmin.api.get('/api/workspaces/vis-b')).status, 200);

  assert.equal(await visibleWorkspaceIds(s.ctx.c, null), []);
  assert.is(await visibleWorkspaceIds(s.ctx.c, { kind: 'user', userId: globalAdmin.user._id, did: globalAdmin.user.did!, name: '', isOwner: false, isAdmin: true, role: 'member', sessionId: '', via: 'bearer' }), 'all');
});

// --- update ----------------------------------------------------------------------------------------

test('patch: workspace admin or global admin; 403 below admin, 404 when not visible, 409 slug taken', async () => {
  const w = await makeWorkspace(owner, 'Editable');
  const wsAdmin = await makeUser(s, { workspaces: { [w.id]: 'admin' } });
  const manager = await makeUser(s, { workspaces: { [w.id]: 'manager' } });
  const outsider = await makeUser(s);
  const r = await wsAdmin.api.patch('/api/workspaces/editable', { name: 'Edited', slug: 'edited', description: 'd', color: '#00AA00' });
  assert.is(r.status, 200, r.text);
  assert.is(r.body.workspace.name, 'Edited');
  assert.is(r.body.workspace.slug, 'edited');
  assert.is(r.body.workspace.color, '#00aa00');
  assert.is(r.body.workspace.description, 'd');
  assert.ok(r.body.workspace.updatedAt >= r.body.workspace.createdAt);
  isError(await manager.api.patch(`/api/workspaces/${w.id}`, { name: 'No' }), 403, 'forbidden');
  isError(await outsider.api.patch(`/api/workspaces/${w.id}`, { name: 'No' }), 404, 'not_found');
  isError(await wsAdmin.api.patch(`/api/workspaces/${w.id}`, { slug: 'default' }), 409, 'slug_taken');
  isError(await wsAdmin.api.patch(`/api/workspaces/${w.id}`, { color: 'green' }), 400, 'validation_failed');
  assert.is((await owner.api.patch(`/api/workspaces/${w.id}`, { name: 'By GA' })).body.workspace.name, 'By GA');
  assert.ok(await s.ctx.c.audit.findOne({ action: 'workspace.update', target: w.id }));
});

test('default workspace: renamed and recoloured, never deleted (400, even for a global admin)', async () => {
  const id = s.ctx.defaultWorkspace._id;
  const r = await owner.api.patch(`/api/workspaces/${id}`, { name: 'Home', color: '#123456' });
  assert.is(r.status, 200);
  assert.is(r.body.workspace.isDefault, true);
  const del = await owner.api.del(`/api/workspaces/${id}`);
  isError(del, 400, 'default_workspace');
  assert.match(del.body.error.message, /default workspace cannot be deleted/);
  assert.ok(await s.ctx.c.workspaces.findById(id));
  await owner.api.patch(`/api/workspaces/${id}`, { name: 'Default' });
});

// --- delete ----------------------------------------------------------------------------------------

test('delete: workspace owner or global admin; memberships go, primaries move, homeless agents go home; hooks run', async () => {
  const c = s.ctx.c;
  const doomed = await makeWorkspace(owner, 'Doomed');
  const other = await makeWorkspace(owner, 'Survivor');
  const wsOwner = await makeUser(s, { workspaces: { [doomed.id]: 'owner', [other.id]: 'member' } });
  const wsAdmin = await makeUser(s, { workspaces: { [doomed.id]: 'admin' } });
  const agentElsewhere = await makeAgent(s, 'roamer');
  const agentOnlyHere = await makeAgent(s, 'homebody');
  await addAgentToWorkspace(c, agentElsewhere._id, doomed.id, true);
  await addAgentToWorkspace(c, agentElsewhere._id, other.id, false);
  await addAgentToWorkspace(c, agentOnlyHere._id, doomed.id, true);
  const seen: WorkspaceDoc[] = [];
  s.ctx.workspaceService.onWorkspaceDeleted((ws) => {
    seen.push(ws);
  });
  s.ctx.workspaceService.onWorkspaceDeleted(() => {
    throw new Error('a failing hook does not undo the deletion');
  });

  isError(await wsAdmin.api.del(`/api/workspaces/${doomed.id}`), 403, 'forbidden');
  const r = await wsOwner.api.del('/api/workspaces/doomed');
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { ok: true });

  assert.is(await c.workspaces.findById(doomed.id), null);
  assert.is(await c.workspaceMembers.count({ workspaceId: doomed.id }), 0);
  assert.is(await c.workspaceAgents.count({ workspaceId: doomed.id }), 0);
  // wsOwner's primary membership was the deleted one: Survivor takes over.
  assert.equal(
    (await c.workspaceMembers.find({ userId: wsOwner.user._id })).map((m) => [m.workspaceId, m.isPrimary]),
    [[other.id, true]],
  );
  assert.is((await primaryWorkspaceOf(c, agentElsewhere._id))!._id, other.id);
  assert.is((await primaryWorkspaceOf(c, agentOnlyHere._id))!._id, s.ctx.defaultWorkspace._id);
  assert.equal(seen.map((w) => w._id), [doomed.id]);
  isError(await wsOwner.api.get(`/api/workspaces/${doomed.id}`), 404, 'not_found');
  assert.ok(await c.audit.findOne({ action: 'workspace.delete', target: doomed.id }));

  const gaTarget = await makeWorkspace(owner, 'Gone By GA');
  assert.is((await owner.api.del(`/api/workspaces/${gaTarget.id}`)).status, 200);
});

// --- members ---------------------------------------------------------------------------------------

test('members: add (201), list, change role, remove; first membership primary; 409 twice; 404 unknown user', async () => {
  const w = await makeWorkspace(owner, 'Crew');
  const admin = await makeUser(s, { workspaces: { [w.id]: 'admin' } });
  const newbie = await makeUser(s, { name: 'Newbie' });
  const r = await admin.api.post(`/api/workspaces/${w.id}/members`, { userDid: newbie.user.did, role: 'operator' });
  assert.is(r.status, 201, r.text);
  assert.equal(r.body.member, {
    userId: newbie.user._id,
    did: newbie.user.did,
    name: 'Newbie',
    email: newbie.user.email,
    role: 'operator',
    isPrimary: true,
    joinedAt: r.body.member.joinedAt,
  });
  assert.equal(await memberRole(s.ctx.c, newbie.user._id, w.id), 'operator');
  assert.equal(await userWorkspaceIds(s.ctx.c, newbie.user._id), [w.id]);

  isError(await admin.api.post('/api/workspaces/crew/members', { userDid: newbie.user.did, role: 'member' }), 409, 'already_member');
  isError(await admin.api.post('/api/workspaces/crew/members', { userDid: 'did:key:z6MkNobody', role: 'member' }), 404, 'not_found');
  isError(await admin.api.post('/api/workspaces/crew/members', { userDid: newbie.user.did, role: 'chief' }), 400, 'validation_failed');

  const list = await newbie.api.get('/api/workspaces/crew/members');
  assert.is(list.status, 200);
  assert.equal(list.body.members.map((m: any) => [m.userId, m.role]), [
    [admin.user._id, 'admin'],
    [newbie.user._id, 'operator'],
  ]);

  const p = await admin.api.patch(`/api/workspaces/crew/members/${enc(newbie.user.did!)}`, { role: 'manager' });
  assert.is(p.status, 200, p.text);
  assert.is(p.body.member.role, 'manager');
  isError(await admin.api.patch(`/api/workspaces/crew/members/${enc(owner.user.did!)}`, { role: 'member' }), 404, 'not_found');

  const second = await makeWorkspace(owner, 'Crew Two');
  const add2 = await owner.api.post(`/api/workspaces/${second.id}/members`, { userDid: newbie.user.did, role: 'member' });
  assert.is(add2.body.member.isPrimary, false);

  const d = await admin.api.del(`/api/workspaces/crew/members/${enc(newbie.user.did!)}`);
  assert.is(d.status, 200);
  assert.equal(d.body, { ok: true });
  // The primary membership went: the remaining one is primary now.
  assert.equal((await s.ctx.c.workspaceMembers.find({ userId: newbie.user._id })).map((m) => [m.workspaceId, m.isPrimary]), [[second.id, true]]);
  isError(await admin.api.del(`/api/workspaces/crew/members/${enc(newbie.user.did!)}`), 404, 'not_found');
  for (const action of ['workspace.member.add', 'workspace.member.update', 'workspace.member.remove']) {
    assert.ok(await s.ctx.c.audit.findOne({ action, target: w.id }), action);
  }
});

test('members: an unclaimed user is addressed by id; the owner role only from an owner; owners only changed by owners', async () => {
  const w = await makeWorkspace(owner, 'Owned');
  const wsOwner = await makeUser(s, { workspaces: { [w.id]: 'owner' } });
  const admin = await makeUser(s, { workspaces: { [w.id]: 'admin' } });
  const pending = await makeUser(s, { unclaimed: true });
  const r = await admin.api.post('/api/workspaces/owned/members', { userDid: pending.user._id, role: 'member' });
  assert.is(r.status, 201);
  assert.is(r.body.member.did, null);
  isError(await admin.api.patch(`/api/workspaces/owned/members/${pending.user._id}`, { role: 'owner' }), 403, 'forbidden');
  isError(await admin.api.patch(`/api/workspaces/owned/members/${enc(wsOwner.user.did!)}`, { role: 'member' }), 403, 'forbidden');
  isError(await admin.api.del(`/api/workspaces/owned/members/${enc(wsOwner.user.did!)}`), 403, 'forbidden');
  assert.is((await wsOwner.api.patch(`/api/workspaces/owned/members/${pending.user._id}`, { role: 'owner' })).body.member.role, 'owner');
  const extra = await makeUser(s);
  isError(await admin.api.post('/api/workspaces/owned/members', { userDid: extra.user.did, role: 'owner' }), 403, 'forbidden');
  assert.is((await wsOwner.api.post('/api/workspaces/owned/members', { userDid: extra.user.did, role: 'owner' })).status, 201);
});

test('members: a member may leave on their own; may not remove others', async () => {
  const w = await makeWorkspace(owner, 'Leavers');
  const a = await makeUser(s, { workspaces: { [w.id]: 'member' } });
  const b = await makeUser(s, { workspaces: { [w.id]: 'member' } });
  isError(await a.api.del(`/api/workspaces/leavers/members/${enc(b.user.did!)}`), 403, 'forbidden');
  assert.is((await a.api.del(`/api/workspaces/leavers/members/${enc(a.user.did!)}`)).status, 200);
  isError(await a.api.get('/api/workspaces/leavers'), 404, 'not_found');
});

// --- agents ----------------------------------------------------------------------------------------

test('agents: add (201); the first workspace is primary; more workspaces; isPrimary moves it; list with names', async () => {
  const c = s.ctx.c;
  const one = await makeWorkspace(owner, 'Fleet One');
  const two = await makeWorkspace(owner, 'Fleet Two');
  const admin = await makeUser(s, { workspaces: { [one.id]: 'admin', [two.id]: 'admin' } });
  const agent = await makeAgent(s, 'scout');

  // In no workspace yet, only a global admin sees it (a workspace admin gets 404, as for an unknown one).
  isError(await admin.api.post(`/api/workspaces/${one.id}/agents`, { agentDid: agent._id }), 404, 'not_found');
  const r1 = await owner.api.post(`/api/workspaces/${one.id}/agents`, { agentDid: agent._id });
  assert.is(r1.status, 201, r1.text);
  assert.equal(r1.body.agent, { id: agent._id, name: 'scout', isPrimary: true, joinedAt: r1.body.agent.joinedAt });
  const r2 = await admin.api.post('/api/workspaces/fleet-two/agents', { agentDid: agent._id });
  assert.is(r2.status, 201);
  assert.is(r2.body.agent.isPrimary, false);
  assert.equal((await agentWorkspaceIds(c, agent._id)).sort(), [one.id, two.id].sort());
  assert.is((await primaryWorkspaceOf(c, agent._id))!._id, one.id);

  isError(await admin.api.post('/api/workspaces/fleet-two/agents', { agentDid: agent._id }), 409, 'already_member');
  const moved = await admin.api.post('/api/workspaces/fleet-two/agents', { agentDid: agent._id, isPrimary: true });
  assert.is(moved.status, 200, moved.text);
  assert.is(moved.body.agent.isPrimary, true);
  assert.is((await primaryWorkspaceOf(c, agent._id))!._id, two.id);
  assert.is(await c.workspaceAgents.count({ agentDid: agent._id, isPrimary: true }), 1);

  const list = await admin.api.get('/api/workspaces/fleet-one/agents');
  assert.is(list.status, 200);
  assert.equal(list.body.agents, [{ id: agent._id, name: 'scout', isPrimary: false, joinedAt: r1.body.agent.joinedAt }]);
  isError(await admin.api.post('/api/workspaces/fleet-one/agents', { agentDid: 'did:key:z6MkNoAgent' }), 404, 'not_found');
  assert.ok(await c.audit.findOne({ action: 'workspace.agent.add', target: one.id }));
  assert.ok(await c.audit.findOne({ action: 'workspace.agent.primary', target: two.id }));
});

test('agents: remove; the primary one only naming another primary (400 without); never the last (400)', async () => {
  const c = s.ctx.c;
  const a = await makeWorkspace(owner, 'Agents A');
  const b = await makeWorkspace(owner, 'Agents B');
  const agent = await makeAgent(s, 'mover');
  await addAgentToWorkspace(c, agent._id, a.id, false);
  await addAgentToWorkspace(c, agent._id, b.id, false);
  assert.is((await primaryWorkspaceOf(c, agent._id))!._id, a.id);

  isError(await owner.api.del(`/api/workspaces/agents-a/agents/${enc(agent._id)}`), 400, 'primary_required');
  isError(await owner.api.del(`/api/workspaces/agents-a/agents/${enc(agent._id)}?primary=default`), 400, 'invalid_primary');
  const r = await owner.api.del(`/api/workspaces/agents-a/agents/${enc(agent._id)}?primary=agents-b`);
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { ok: true });
  assert.equal(await agentWorkspaceIds(c, agent._id), [b.id]);
  assert.is((await primaryWorkspaceOf(c, agent._id))!._id, b.id);
  isError(await owner.api.del(`/api/workspaces/agents-b/agents/${enc(agent._id)}`), 400, 'last_workspace');
  isError(await owner.api.del(`/api/workspaces/agents-a/agents/${enc(agent._id)}`), 404, 'not_found');

  await addAgentToWorkspace(c, agent._id, a.id, false);
  assert.is((await owner.api.del(`/api/workspaces/agents-a/agents/${enc(agent._id)}`)).status, 200);
  assert.ok(await c.audit.findOne({ action: 'workspace.agent.remove', target: a.id }));
});

test('agents: an agent managed in another workspace needs an admin of that one too', async () => {
  const c = s.ctx.c;
  const home = await makeWorkspace(owner, 'Agent Home');
  const away = await makeWorkspace(owner, 'Agent Away');
  const awayAdmin = await makeUser(s, { workspaces: { [away.id]: 'admin', [home.id]: 'operator' } });
  const agent = await makeAgent(s, 'kept');
  await addAgentToWorkspace(c, agent._id, home.id, true);
  const r = await awayAdmin.api.post(`/api/workspaces/${away.id}/agents`, { agentDid: agent._id });
  isError(r, 403, 'forbidden');
  assert.match(r.body.error.message, /agent-home/);
  await c.workspaceMembers.updateOne({ userId: awayAdmin.user._id, workspaceId: home.id }, { $set: { role: 'admin' } });
  assert.is((await awayAdmin.api.post(`/api/workspaces/${away.id}/agents`, { agentDid: agent._id })).status, 201);
});

test('agents: a registration awaiting approval, or rejected, cannot be added to a workspace (404), so no workspace admin manages it', async () => {
  const c = s.ctx.c;
  const ws = await makeWorkspace(owner, 'Agent Claimers');
  const wsAdmin = await makeUser(s, { workspaces: { [ws.id]: 'admin' } });
  const keys = generateKeyPair();
  const reg = await http(s.url, 'POST', '/api/agents/register', {
    json: { name: 'newcomer', version: '1.0.0', capabilities: ['file_access'], publicKey: keys.publicKey },
  });
  assert.is(reg.status, 201, reg.text);
  const did = reg.body.agentId as string;
  const add = await wsAdmin.api.post(`/api/workspaces/${ws.id}/agents`, { agentDid: did });
  isError(add, 404, 'not_found');
  assert.match(add.body.error.message, /no approved agent/);
  assert.is(await c.workspaceAgents.count({ agentDid: did }), 0);
  isError(await wsAdmin.api.del(`/api/agents/${enc(did)}`), 404, 'not_found'); // in no workspace of theirs: as if unknown
  const regs = (await owner.api.get('/api/registrations')).body.registrations as Array<{ id: string; name: string }>;
  const regId = regs.find((x) => x.name === 'newcomer')!.id;
  const rejected = await owner.api.post(`/api/registrations/${enc(regId)}/reject`, { reason: 'unknown' });
  assert.is(rejected.status, 200, rejected.text);
  isError(await wsAdmin.api.post(`/api/workspaces/${ws.id}/agents`, { agentDid: did }), 404, 'not_found');
  isError(await owner.api.post(`/api/workspaces/${ws.id}/agents`, { agentDid: did }), 404, 'not_found');
  assert.is(await c.workspaceAgents.count({ agentDid: did }), 0);
  assert.is((await c.agents.findById(did))?.status, 'rejected');
});

test('addAgentToWorkspace is idempotent and keeps one primary', async () => {
  const c = s.ctx.c;
  const x = await makeWorkspace(owner, 'Idem X');
  const y = await makeWorkspace(owner, 'Idem Y');
  const agent = await makeAgent(s, 'idem');
  await addAgentToWorkspace(c, agent._id, x.id, false);
  await addAgentToWorkspace(c, agent._id, x.id, false);
  await addAgentToWorkspace(c, agent._id, y.id, true);
  await addAgentToWorkspace(c, agent._id, y.id, true);
  assert.is(await c.workspaceAgents.count({ agentDid: agent._id }), 2);
  assert.equal((await c.workspaceAgents.find({ agentDid: agent._id, isPrimary: true })).map((m) => m.workspaceId), [y.id]);
  assert.is((await resolveWorkspace(c, 'IDEM-X'))!._id, x.id);
  assert.is((await resolveWorkspace(c, y.id))!.slug, 'idem-y');
  assert.is(await resolveWorkspace(c, 'nope'), null);
});

test('an agent session sees the workspaces it belongs to (also in me/workspaces), and changes nothing', async () => {
  const c = s.ctx.c;
  const mine = await makeWorkspace(owner, 'Agent Seen');
  await makeWorkspace(owner, 'Agent Unseen');
  const agent = await makeAgent(s, 'looker');
  await addAgentToWorkspace(c, agent._id, mine.id, true);
  const { token } = await s.ctx.sessions.create('agent', agent._id);
  const api = client(s.url, token);
  assert.equal((await api.get('/api/workspaces')).body.workspaces.map((w: any) => w.slug), ['agent-seen']);
  assert.is((await api.get('/api/workspaces/agent-seen')).status, 200);
  isError(await api.get('/api/workspaces/agent-unseen'), 404, 'not_found');
  assert.equal((await api.get('/api/workspaces/agent-seen/agents')).body.agents.map((a: any) => a.id), [agent._id]);
  isError(await api.patch('/api/workspaces/agent-seen', { name: 'Mine now' }), 403, 'forbidden');
  // §4.6 GET /api/me/workspaces is "Required": an agent's session is one (§5.1).
  const me = await api.get('/api/me/workspaces');
  assert.is(me.status, 200, me.text);
  assert.equal(me.body, { workspaces: [{ id: mine.id, name: 'Agent Seen', slug: 'agent-seen', isPrimary: true, isAdmin: false }] });
});

// --- GET /api/me/workspaces ------------------------------------------------------------------------

test('me/workspaces: {id, name, slug, isPrimary, isAdmin}; isAdmin for admin and owner roles and global admins', async () => {
  const p = await makeWorkspace(owner, 'Me Primary');
  const q = await makeWorkspace(owner, 'Me Owned');
  const r = await makeWorkspace(owner, 'Me Operated');
  const u = await makeUser(s, { workspaces: { [p.id]: 'admin', [q.id]: 'owner', [r.id]: 'operator' } });
  const res = await u.api.get('/api/me/workspaces');
  assert.is(res.status, 200);
  assert.equal(res.body, {
    workspaces: [
      { id: p.id, name: 'Me Primary', slug: 'me-primary', isPrimary: true, isAdmin: true },
      { id: r.id, name: 'Me Operated', slug: 'me-operated', isPrimary: false, isAdmin: false },
      { id: q.id, name: 'Me Owned', slug: 'me-owned', isPrimary: false, isAdmin: true },
    ],
  });
  const ga = await makeUser(s, { isAdmin: true, workspaces: { [r.id]: 'member' } });
  const gaRes = await ga.api.get('/api/me/workspaces');
  assert.is(gaRes.body.workspaces.length, await s.ctx.c.workspaces.count({}));
  assert.ok(gaRes.body.workspaces.every((w: any) => w.isAdmin === true));
  assert.equal(gaRes.body.workspaces[0], { id: r.id, name: 'Me Operated', slug: 'me-operated', isPrimary: true, isAdmin: true });
  isError(await http(s.url, 'GET', '/api/me/workspaces'), 401, 'unauthorized');
});

test.run();
