import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { client, http, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { enc, isError, makeAgent, makeWorkspace, startWithOwner } from './people-helpers.js';
import { addAgentToWorkspace } from '../src/services/workspaces.js';

const test = suite('skills');
let s: TestServer;
let owner: TestUser;

test.before(async () => {
  ({ s, owner } = await startWithOwner());
});

test.after(async () => {
  await s.stop(true);
});

const RAW_KEYS = ['config', 'content', 'created_at', 'description', 'id', 'is_required', 'name', 'version', 'workspace_id'];
const LIST_KEYS = [...RAW_KEYS, 'agent_count', 'override_count', 'workspace_name'].sort();
const VIEW_KEYS = ['config', 'createdAt', 'description', 'id', 'isRequired', 'name', 'version', 'workspaceId'];
const UPDATE_KEYS = [...VIEW_KEYS, 'content'].sort();
const OVERRIDE_KEYS = ['agentDid', 'config', 'createdAt', 'effective', 'enabled', 'skillId', 'updatedAt', 'updatedBy', 'workspaceId'];

const createSkill = async (body: Record<string, unknown>) => {
  const r = await owner.api.post('/api/skills', body);
  assert.is(r.status, 201, r.text);
  return r.body;
};

const skillCount = () => s.ctx.c.skills.count({});

// --- create: POST /api/skills ---------------------------------------------------------------------

test('create: 201 raw row, field by field; is_required 0/1, config JSON text; audited', async () => {
  const w = await makeWorkspace(owner, 'Create Space');
  const config = { style: 'strict', 'dotted.key': { $nested: [1, 2] } };
  const row = await createSkill({
    workspaceId: w.id,
    name: '  Code Review  ',
    description: 'Reviews pull requests',
    version: '1.2.0',
    isRequired: true,
    config,
    content: '# Review\n\nBe kind.',
  });
  assert.equal(Object.keys(row).sort(), RAW_KEYS);
  assert.type(row.id, 'string');
  assert.is(row.workspace_id, w.id);
  assert.is(row.name, 'Code Review');
  assert.is(row.description, 'Reviews pull requests');
  assert.is(row.version, '1.2.0');
  assert.is(row.is_required, 1);
  assert.type(row.config, 'string');
  assert.equal(JSON.parse(row.config), config);
  assert.is(row.content, '# Review\n\nBe kind.');
  assert.ok(!Number.isNaN(Date.parse(row.created_at)));
  assert.ok(await s.ctx.c.audit.findOne({ action: 'skill.create', target: row.id }));

  const minimal = await createSkill({ workspaceId: w.slug, name: 'Minimal' });
  assert.equal(Object.keys(minimal).sort(), RAW_KEYS);
  assert.is(minimal.workspace_id, w.id, 'workspace given by slug is stored by id');
  assert.is(minimal.description, null);
  assert.is(minimal.version, null);
  assert.is(minimal.is_required, 0);
  assert.is(minimal.config, '{}');
  assert.is(minimal.content, '');
});

test('create: 400 when workspaceId is missing or the name is missing or blank; nothing stored', async () => {
  const w = await makeWorkspace(owner, 'Bad Input Space');
  const before = await skillCount();
  isError(await owner.api.post('/api/skills', { name: 'No Workspace' }), 400, 'validation_failed');
  isError(await owner.api.post('/api/skills', { workspaceId: '', name: 'Empty Workspace' }), 400, 'validation_failed');
  isError(await owner.api.post('/api/skills', { workspaceId: w.id }), 400, 'validation_failed');
  isError(await owner.api.post('/api/skills', { workspaceId: w.id, name: '' }), 400, 'validation_failed');
  const blank = await owner.api.post('/api/skills', { workspaceId: w.id, name: '   ' });
  isError(blank, 400, 'validation_failed');
  assert.match(blank.body.error.message, /name/);
  isError(await owner.api.post('/api/skills', { workspaceId: w.id, name: 'x', config: [1, 2] }), 400, 'validation_failed');
  isError(await owner.api.post('/api/skills', { workspaceId: w.id, name: 'x', config: 'text' }), 400, 'validation_failed');
  isError(await owner.api.post('/api/skills', { workspaceId: w.id, name: 'x', isRequired: 'yes' }), 400, 'validation_failed');
  isError(await owner.api.post('/api/skills', { workspaceId: w.id, name: 'x', extra: 1 }), 400, 'validation_failed');
  isError(await http(s.url, 'POST', '/api/skills', { token: owner.token, raw: '{not json', headers: { 'content-type': 'application/json' } }), 400, 'invalid_json');
  assert.is(await skillCount(), before);
});

test('create: 404 for an unknown workspace; 409 for a name taken in the workspace (trimmed, any case)', async () => {
  const before = await skillCount();
  isError(await owner.api.post('/api/skills', { workspaceId: 'no-such-workspace', name: 'Lost' }), 404, 'not_found');
  const a = await makeWorkspace(owner, 'Dup A');
  const b = await makeWorkspace(owner, 'Dup B');
  await createSkill({ workspaceId: a.id, name: 'Summarise' });
  isError(await owner.api.post('/api/skills', { workspaceId: a.id, name: 'Summarise' }), 409, 'skill_name_taken');
  isError(await owner.api.post('/api/skills', { workspaceId: a.id, name: ' summarise ' }), 409, 'skill_name_taken');
  await createSkill({ workspaceId: b.id, name: 'Summarise' });
  assert.is(await skillCount(), before + 2);
});

test('create and list-all: global admin only (403 others, 401 anonymous)', async () => {
  const w = await makeWorkspace(owner, 'Auth Space');
  const wsOwner = await makeUser(s, { role: 'admin', workspaces: { [w.id]: 'owner' } });
  isError(await wsOwner.api.post('/api/skills', { workspaceId: w.id, name: 'Mine' }), 403, 'forbidden');
  isError(await wsOwner.api.get('/api/skills'), 403, 'forbidden');
  isError(await http(s.url, 'POST', '/api/skills', { json: { workspaceId: w.id, name: 'Anon' } }), 401, 'unauthorized');
  isError(await http(s.url, 'GET', '/api/skills'), 401, 'unauthorized');
  const globalAdmin = await makeUser(s, { isAdmin: true });
  assert.is((await globalAdmin.api.post('/api/skills', { workspaceId: w.id, name: 'By Global Admin' })).status, 201);
  assert.is((await globalAdmin.api.get('/api/skills')).status, 200);
});

// --- list-all: GET /api/skills --------------------------------------------------------------------

test('list-all: raw rows with workspace_name, agent_count (agents enrolled) and override_count', async () => {
  const w = await makeWorkspace(owner, 'Counting Space');
  const other = await makeWorkspace(owner, 'Counting Other');
  const a1 = await makeAgent(s, 'count-1');
  const a2 = await makeAgent(s, 'count-2');
  const a3 = await makeAgent(s, 'count-3');
  for (const a of [a1, a2, a3]) await addAgentToWorkspace(s.ctx.c, a._id, w.id, false);
  await addAgentToWorkspace(s.ctx.c, a3._id, other.id, false);
  const k1 = await createSkill({ workspaceId: w.id, name: 'Counted', config: { n: 1 }, content: 'body' });
  const k2 = await createSkill({ workspaceId: w.id, name: 'Uncounted' });
  const k3 = await createSkill({ workspaceId: other.id, name: 'Elsewhere', isRequired: true });
  const put = (skillId: string, did: string, body: unknown) => owner.api.put(`/api/workspaces/${w.id}/skills/${skillId}/overrides/${enc(did)}`, body);
  assert.is((await put(k1.id, a1._id, { enabled: false })).status, 201);
  assert.is((await put(k1.id, a2._id, { config: { n: 2 } })).status, 201);

  const r = await owner.api.get('/api/skills');
  assert.is(r.status, 200);
  assert.ok(Array.isArray(r.body));
  for (const row of r.body) assert.equal(Object.keys(row).sort(), LIST_KEYS);
  const row = (id: string) => r.body.find((x: any) => x.id === id);
  assert.equal(row(k1.id), { ...k1, workspace_name: 'Counting Space', agent_count: 3, override_count: 2 });
  assert.equal(row(k2.id), { ...k2, workspace_name: 'Counting Space', agent_count: 3, override_count: 0 });
  assert.equal(row(k3.id), { ...k3, workspace_name: 'Counting Other', agent_count: 1, override_count: 0 });
  assert.is(row(k3.id).is_required, 1);

  // An agent that leaves the workspace no longer counts, nor does its override.
  await s.ctx.c.workspaceAgents.deleteOne({ workspaceId: w.id, agentDid: a2._id });
  const again = (await owner.api.get('/api/skills')).body.find((x: any) => x.id === k1.id);
  assert.is(again.agent_count, 2);
  assert.is(again.override_count, 1);
});

// --- get: GET /api/workspaces/{id}/skills/{skillId} -----------------------------------------------

test('get: 200 {skill} in camelCase without content, field by field; by id or slug; any member', async () => {
  const w = await makeWorkspace(owner, 'Get Space');
  const row = await createSkill({ workspaceId: w.id, name: 'Readable', description: null, version: '0.1.0', isRequired: true, config: { a: [1] }, content: 'secret sauce' });
  const member = await makeUser(s, { workspaces: { [w.id]: 'member' } });
  for (const ref of [w.id, w.slug]) {
    const r = await member.api.get(`/api/workspaces/${ref}/skills/${row.id}`);
    assert.is(r.status, 200, r.text);
    assert.equal(Object.keys(r.body), ['skill']);
    assert.equal(Object.keys(r.body.skill).sort(), VIEW_KEYS);
    assert.equal(r.body.skill, {
      id: row.id,
      workspaceId: w.id,
      name: 'Readable',
      description: null,
      version: '0.1.0',
      isRequired: true,
      config: { a: [1] },
      createdAt: row.created_at,
    });
    assert.not.ok(r.text.includes('secret sauce'), 'no content in the get answer');
  }
  // A global admin who is no member may read too.
  assert.is((await owner.api.get(`/api/workspaces/${w.id}/skills/${row.id}`)).status, 200);
});

test('get: 403 for a non-member, and for an unknown workspace (but 404 for a global admin); 404 when missing or in another workspace; 401 anonymous', async () => {
  const a = await makeWorkspace(owner, 'Get A');
  const b = await makeWorkspace(owner, 'Get B');
  const inA = await createSkill({ workspaceId: a.id, name: 'In A' });
  const inB = await createSkill({ workspaceId: b.id, name: 'In B' });
  const memberOfA = await makeUser(s, { workspaces: { [a.id]: 'admin' } });
  const outsider = await makeUser(s);
  isError(await outsider.api.get(`/api/workspaces/${a.id}/skills/${inA.id}`), 403, 'forbidden');
  isError(await memberOfA.api.get(`/api/workspaces/${a.id}/skills/nope`), 404, 'not_found');
  isError(await memberOfA.api.get(`/api/workspaces/${a.id}/skills/${inB.id}`), 404, 'not_found');
  isError(await owner.api.get(`/api/workspaces/${a.id}/skills/${inB.id}`), 404, 'not_found');
  isError(await memberOfA.api.get(`/api/workspaces/no-such/skills/${inA.id}`), 403, 'forbidden');
  isError(await owner.api.get(`/api/workspaces/no-such/skills/${inA.id}`), 404, 'not_found');
  isError(await http(s.url, 'GET', `/api/workspaces/${a.id}/skills/${inA.id}`), 401, 'unauthorized');
});

test('get: an agent of the workspace may read with its session; an agent of another may not', async () => {
  const w = await makeWorkspace(owner, 'Agent Read');
  const row = await createSkill({ workspaceId: w.id, name: 'For Agents' });
  const inside = await makeAgent(s, 'reader-in');
  const outside = await makeAgent(s, 'reader-out');
  await addAgentToWorkspace(s.ctx.c, inside._id, w.id, false);
  const tokIn = (await s.ctx.sessions.create('agent', inside._id)).token;
  const tokOut = (await s.ctx.sessions.create('agent', outside._id)).token;
  assert.is((await client(s.url, tokIn).get(`/api/workspaces/${w.id}/skills/${row.id}`)).status, 200);
  isError(await client(s.url, tokOut).get(`/api/workspaces/${w.id}/skills/${row.id}`), 403, 'forbidden');
  // Agents never change skills.
  isError(await client(s.url, tokIn).patch(`/api/workspaces/${w.id}/skills/${row.id}`, { description: 'x' }), 403, 'forbidden');
});

test("workspace list: a member sees the workspace's skills in camelCase without content, by name", async () => {
  const w = await makeWorkspace(owner, 'Listing Space');
  await createSkill({ workspaceId: w.id, name: 'beta', content: 'B' });
  await createSkill({ workspaceId: w.id, name: 'Alpha', content: 'A' });
  const member = await makeUser(s, { workspaces: { [w.id]: 'member' } });
  const r = await member.api.get(`/api/workspaces/${w.slug}/skills`);
  assert.is(r.status, 200, r.text);
  assert.equal(r.body.skills.map((x: any) => x.name), ['Alpha', 'beta']);
  for (const x of r.body.skills) assert.equal(Object.keys(x).sort(), VIEW_KEYS);
  isError(await (await makeUser(s)).api.get(`/api/workspaces/${w.slug}/skills`), 403, 'forbidden');
});

// --- update: PATCH ----------------------------------------------------------------------------------

test('patch: workspace admin; 200 camelCase with content; nulls clear; config replaced whole; content null removes it', async () => {
  const w = await makeWorkspace(owner, 'Patch Space');
  const row = await createSkill({ workspaceId: w.id, name: 'Editable', description: 'd', version: '1.0.0', config: { keep: 1, drop: 2 }, content: 'old' });
  const admin = await makeUser(s, { workspaces: { [w.id]: 'admin' } });
  const url = `/api/workspaces/${w.id}/skills/${row.id}`;

  const r = await admin.api.patch(url, { description: null, version: null, isRequired: true, config: { only: true }, content: 'new' });
  assert.is(r.status, 200, r.text);
  assert.equal(Object.keys(r.body).sort(), UPDATE_KEYS);
  assert.equal(r.body, {
    id: row.id,
    workspaceId: w.id,
    name: 'Editable',
    description: null,
    version: null,
    isRequired: true,
    config: { only: true },
    content: 'new',
    createdAt: row.created_at,
  });

  const removed = await admin.api.patch(url, { content: null });
  assert.is(removed.status, 200);
  assert.is(removed.body.content, '');
  assert.equal(removed.body.config, { only: true }, 'fields left out keep their value');

  const partial = await admin.api.patch(url, { description: 'again', version: '2.0.0', isRequired: false });
  assert.is(partial.body.description, 'again');
  assert.is(partial.body.version, '2.0.0');
  assert.is(partial.body.isRequired, false);

  const raw = (await owner.api.get('/api/skills')).body.find((x: any) => x.id === row.id);
  assert.is(raw.is_required, 0);
  assert.is(raw.config, JSON.stringify({ only: true }));
  assert.is(raw.content, '');
  assert.ok(await s.ctx.c.audit.findOne({ action: 'skill.update', target: row.id }));

  // The workspace owner and a global admin who is no member may edit too.
  const wsOwner = await makeUser(s, { workspaces: { [w.id]: 'owner' } });
  assert.is((await wsOwner.api.patch(url, { version: '3.0.0' })).status, 200);
  assert.is((await owner.api.patch(url, { version: '4.0.0' })).status, 200);
});

test('patch: 403 below workspace admin and for non-members; 404 missing; 400 bad fields; nothing changes', async () => {
  const w = await makeWorkspace(owner, 'Patch Guard');
  const other = await makeWorkspace(owner, 'Patch Other');
  const row = await createSkill({ workspaceId: w.id, name: 'Guarded', description: 'same' });
  const otherRow = await createSkill({ workspaceId: other.id, name: 'Other' });
  const url = `/api/workspaces/${w.id}/skills/${row.id}`;
  for (const role of ['member', 'operator', 'manager'] as const) {
    const u = await makeUser(s, { workspaces: { [w.id]: role } });
    isError(await u.api.patch(url, { description: role }), 403, 'forbidden');
  }
  isError(await (await makeUser(s)).api.patch(url, { description: 'outsider' }), 403, 'forbidden');
  const admin = await makeUser(s, { workspaces: { [w.id]: 'admin' } });
  isError(await admin.api.patch(`/api/workspaces/${w.id}/skills/missing`, { description: 'x' }), 404, 'not_found');
  isError(await admin.api.patch(`/api/workspaces/${w.id}/skills/${otherRow.id}`, { description: 'x' }), 404, 'not_found');
  isError(await admin.api.patch(url, { name: 'Renamed' }), 400, 'validation_failed');
  isError(await admin.api.patch(url, { config: null }), 400, 'validation_failed');
  isError(await admin.api.patch(url, { config: [] }), 400, 'validation_failed');
  isError(await admin.api.patch(url, { isRequired: null }), 400, 'validation_failed');
  isError(await admin.api.patch(url, { version: '  ' }), 400, 'validation_failed');
  isError(await http(s.url, 'PATCH', url, { json: { description: 'anon' } }), 401, 'unauthorized');
  const now = (await owner.api.get(`/api/workspaces/${w.id}/skills/${row.id}`)).body.skill;
  assert.is(now.description, 'same');
  assert.is(now.name, 'Guarded');
});

// --- delete ----------------------------------------------------------------------------------------

test('delete: 403 below workspace admin; 404 missing; 200 {ok: true}; the skill and its overrides are gone', async () => {
  const w = await makeWorkspace(owner, 'Delete Space');
  const row = await createSkill({ workspaceId: w.id, name: 'Doomed' });
  const agent = await makeAgent(s, 'delete-agent');
  await addAgentToWorkspace(s.ctx.c, agent._id, w.id, false);
  assert.is((await owner.api.put(`/api/workspaces/${w.id}/skills/${row.id}/overrides/${enc(agent._id)}`, { enabled: false })).status, 201);
  const url = `/api/workspaces/${w.id}/skills/${row.id}`;
  for (const role of ['member', 'manager'] as const) {
    const u = await makeUser(s, { workspaces: { [w.id]: role } });
    isError(await u.api.del(url), 403, 'forbidden');
  }
  isError(await (await makeUser(s)).api.del(url), 403, 'forbidden');
  const admin = await makeUser(s, { workspaces: { [w.id]: 'admin' } });
  isError(await admin.api.del(`/api/workspaces/${w.id}/skills/missing`), 404, 'not_found');
  const r = await admin.api.del(url);
  assert.is(r.status, 200);
  assert.equal(r.body, { ok: true });
  isError(await admin.api.get(url), 404, 'not_found');
  isError(await admin.api.del(url), 404, 'not_found');
  assert.is(await s.ctx.c.skillOverrides.count({ skillId: row.id }), 0);
  assert.ok(await s.ctx.c.audit.findOne({ action: 'skill.delete', target: row.id }));
});

// --- overrides -------------------------------------------------------------------------------------

test('overrides: opt out, replace config, read, list, delete; the effective set follows', async () => {
  const w = await makeWorkspace(owner, 'Override Space');
  const k = await createSkill({ workspaceId: w.id, name: 'Optional', config: { level: 1 }, content: 'opt' });
  const agent = await makeAgent(s, 'override-agent');
  const other = await makeAgent(s, 'override-other');
  await addAgentToWorkspace(s.ctx.c, agent._id, w.id, false);
  await addAgentToWorkspace(s.ctx.c, other._id, w.id, false);
  const admin = await makeUser(s, { workspaces: { [w.id]: 'admin' } });
  const member = await makeUser(s, { workspaces: { [w.id]: 'member' } });
  const url = `/api/workspaces/${w.id}/skills/${k.id}/overrides/${enc(agent._id)}`;
  const effective = async (did: string) => (await member.api.get(`/api/workspaces/${w.id}/agents/${enc(did)}/skills`)).body.skills;

  assert.equal((await effective(agent._id)).map((x: any) => [x.name, x.config]), [['Optional', { level: 1 }]]);

  const out = await admin.api.put(url, { enabled: false });
  assert.is(out.status, 201, out.text);
  assert.equal(Object.keys(out.body.override).sort(), OVERRIDE_KEYS);
  assert.is(out.body.override.enabled, false);
  assert.is(out.body.override.config, null);
  assert.is(out.body.override.effective, true);
  assert.is(out.body.override.agentDid, agent._id);
  assert.is(out.body.override.updatedBy, admin.user.did);
  assert.equal(await effective(agent._id), []);
  assert.is((await effective(other._id)).length, 1, 'other agents keep the skill');

  const cfg = await admin.api.put(url, { config: { level: 9, extra: 'x' } });
  assert.is(cfg.status, 200, 'replacing an override answers 200');
  assert.is(cfg.body.override.enabled, true);
  assert.equal(cfg.body.override.config, { level: 9, extra: 'x' });
  const eff = await effective(agent._id);
  assert.equal(eff, [
    { id: k.id, workspaceId: w.id, name: 'Optional', description: null, version: null, isRequired: false, config: { level: 9, extra: 'x' }, content: 'opt' },
  ]);
  assert.equal((await effective(other._id))[0].config, { level: 1 });

  const one = await member.api.get(url);
  assert.is(one.status, 200);
  assert.equal(one.body.override, cfg.body.override);
  const list = await member.api.get(`/api/workspaces/${w.id}/skills/${k.id}/overrides`);
  assert.equal(list.body.overrides.map((o: any) => o.agentDid), [agent._id]);

  isError(await member.api.put(url, { enabled: false }), 403, 'forbidden');
  isError(await member.api.del(url), 403, 'forbidden');
  const del = await admin.api.del(url);
  assert.is(del.status, 200);
  assert.equal(del.body, { ok: true });
  isError(await member.api.get(url), 404, 'not_found');
  isError(await admin.api.del(url), 404, 'not_found');
  assert.equal((await effective(agent._id))[0].config, { level: 1 });
  assert.ok(await s.ctx.c.audit.findOne({ action: 'skill.override.set', target: k.id }));
  assert.ok(await s.ctx.c.audit.findOne({ action: 'skill.override.delete', target: k.id }));
});

test('overrides: a required skill cannot be opted out of (409 skill_required), but its config can be replaced', async () => {
  const w = await makeWorkspace(owner, 'Required Space');
  const k = await createSkill({ workspaceId: w.id, name: 'Mandatory', isRequired: true, config: { a: 1 } });
  const agent = await makeAgent(s, 'required-agent');
  await addAgentToWorkspace(s.ctx.c, agent._id, w.id, false);
  const url = `/api/workspaces/${w.id}/skills/${k.id}/overrides/${enc(agent._id)}`;
  const refused = await owner.api.put(url, { enabled: false });
  isError(refused, 409, 'skill_required');
  assert.match(refused.body.error.message, /required/);
  assert.is(await s.ctx.c.skillOverrides.count({ skillId: k.id }), 0);
  const cfg = await owner.api.put(url, { config: { a: 2 } });
  assert.is(cfg.status, 201);
  const eff = (await owner.api.get(`/api/workspaces/${w.id}/agents/${enc(agent._id)}/skills`)).body.skills;
  assert.equal(eff.map((x: any) => [x.name, x.isRequired, x.config]), [['Mandatory', true, { a: 2 }]]);
});

test('overrides: a skill made required ignores existing opt-outs (kept, effective false) until it is optional again', async () => {
  const w = await makeWorkspace(owner, 'Becomes Required');
  const k = await createSkill({ workspaceId: w.id, name: 'Soon Required' });
  const agent = await makeAgent(s, 'soon-agent');
  await addAgentToWorkspace(s.ctx.c, agent._id, w.id, false);
  const url = `/api/workspaces/${w.id}/skills/${k.id}/overrides/${enc(agent._id)}`;
  const eff = async () => (await owner.api.get(`/api/workspaces/${w.id}/agents/${enc(agent._id)}/skills`)).body.skills.length;
  assert.is((await owner.api.put(url, { enabled: false })).status, 201);
  assert.is(await eff(), 0);
  assert.is((await owner.api.patch(`/api/workspaces/${w.id}/skills/${k.id}`, { isRequired: true })).status, 200);
  assert.is(await eff(), 1);
  assert.is((await owner.api.get(url)).body.override.effective, false);
  assert.is((await owner.api.patch(`/api/workspaces/${w.id}/skills/${k.id}`, { isRequired: false })).status, 200);
  assert.is(await eff(), 0);
  assert.is((await owner.api.get(url)).body.override.effective, true);
});

test('overrides: 400 for an empty override or bad fields; 404 for an agent outside the workspace or a missing skill', async () => {
  const w = await makeWorkspace(owner, 'Override Guard');
  const k = await createSkill({ workspaceId: w.id, name: 'Guarded Override' });
  const inside = await makeAgent(s, 'guard-in');
  const outside = await makeAgent(s, 'guard-out');
  await addAgentToWorkspace(s.ctx.c, inside._id, w.id, false);
  const base = `/api/workspaces/${w.id}/skills/${k.id}/overrides`;
  isError(await owner.api.put(`${base}/${enc(inside._id)}`, {}), 400, 'empty_override');
  isError(await owner.api.put(`${base}/${enc(inside._id)}`, { enabled: true, config: null }), 400, 'empty_override');
  isError(await owner.api.put(`${base}/${enc(inside._id)}`, { enabled: 'no' }), 400, 'validation_failed');
  isError(await owner.api.put(`${base}/${enc(inside._id)}`, { config: [1] }), 400, 'validation_failed');
  isError(await owner.api.put(`${base}/${enc(outside._id)}`, { enabled: false }), 404, 'agent_not_in_workspace');
  isError(await owner.api.put(`/api/workspaces/${w.id}/skills/missing/overrides/${enc(inside._id)}`, { enabled: false }), 404, 'not_found');
  isError(await owner.api.get(`${base}/${enc(inside._id)}`), 404, 'not_found');
  isError(await (await makeUser(s)).api.get(`${base}`), 403, 'forbidden');
  assert.is(await s.ctx.c.skillOverrides.count({ skillId: k.id }), 0);
});

test("overrides go with the agent (forgetAgent) and with the agent's membership (agentMembershipChanged)", async () => {
  const w = await makeWorkspace(owner, 'Forget Space');
  const k = await createSkill({ workspaceId: w.id, name: 'Remembered' });
  const agent = await makeAgent(s, 'forget-agent');
  await addAgentToWorkspace(s.ctx.c, agent._id, w.id, false);
  const url = `/api/workspaces/${w.id}/skills/${k.id}/overrides/${enc(agent._id)}`;
  assert.is((await owner.api.put(url, { enabled: false })).status, 201);
  assert.is(await s.ctx.skills.forgetAgent(agent._id), 1);
  assert.is(await s.ctx.c.skillOverrides.count({ agentDid: agent._id }), 0);

  assert.is((await owner.api.put(url, { enabled: false })).status, 201);
  await s.ctx.skills.agentMembershipChanged(w.id, agent._id);
  assert.is(await s.ctx.c.skillOverrides.count({ agentDid: agent._id }), 1, 'still a member: kept');
  await s.ctx.c.workspaceAgents.deleteOne({ workspaceId: w.id, agentDid: agent._id });
  isError(await owner.api.get(url), 404, 'agent_not_in_workspace');
  await s.ctx.skills.agentMembershipChanged(w.id, agent._id);
  assert.is(await s.ctx.c.skillOverrides.count({ agentDid: agent._id }), 0, 'no longer a member: removed');
});

// --- workspace deletion ----------------------------------------------------------------------------

test("deleting a workspace deletes its skills and their overrides; other workspaces' skills stay", async () => {
  const w = await makeWorkspace(owner, 'Short Lived');
  const keep = await makeWorkspace(owner, 'Long Lived');
  const k = await createSkill({ workspaceId: w.id, name: 'Ephemeral' });
  const kept = await createSkill({ workspaceId: keep.id, name: 'Lasting' });
  const agent = await makeAgent(s, 'short-agent');
  await addAgentToWorkspace(s.ctx.c, agent._id, w.id, false);
  assert.is((await owner.api.put(`/api/workspaces/${w.id}/skills/${k.id}/overrides/${enc(agent._id)}`, { enabled: false })).status, 201);
  assert.is((await owner.api.del(`/api/workspaces/${w.id}`)).status, 200);
  assert.is(await s.ctx.c.skills.count({ workspace_id: w.id }), 0);
  assert.is(await s.ctx.c.skillOverrides.count({ workspaceId: w.id }), 0);
  assert.ok(await s.ctx.c.skills.findById(kept.id));
  assert.not.ok((await owner.api.get('/api/skills')).body.some((x: any) => x.id === k.id));
});

test('the route table documents every skills route with its auth level', async () => {
  const r = await owner.api.get('/api/openapi.json');
  assert.is(r.status, 200);
  const paths = r.body.paths;
  assert.is(paths['/api/skills'].get['x-auth'], 'globalAdmin');
  assert.is(paths['/api/skills'].post['x-auth'], 'globalAdmin');
  assert.ok(paths['/api/skills/library/content'].get);
  assert.ok(paths['/api/skills/library/install'].post);
  const one = Object.keys(paths).find((p) => p.startsWith('/api/workspaces/') && p.endsWith('/overrides/{agentDid}'));
  assert.ok(one, 'override route present');
  assert.ok(paths[one!].put && paths[one!].delete && paths[one!].get);
});

test.run();
