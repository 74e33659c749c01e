import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { http, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { enc, isError, makeAgent, makeWorkspace, startWithOwner } from './people-helpers.js';

const test = suite('audit');
let s: TestServer;
let owner: TestUser;
let ga: TestUser;
let ws: { id: string; slug: string };
let someone: TestUser;

const ENTRY_KEYS = ['action', 'actor', 'actorType', 'at', 'details', 'id', 'target', 'targetType'];

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  ga = await makeUser(s, { isAdmin: true, name: 'Auditor' });
  someone = await makeUser(s, { name: 'Someone' });
  // A little history, made through the endpoints that write it.
  ws = await makeWorkspace(owner, 'Audited');
  await owner.api.patch(`/api/workspaces/${ws.id}`, { description: 'watched' });
  await owner.api.post(`/api/workspaces/${ws.id}/members`, { userDid: someone.user.did, role: 'operator' });
  await ga.api.patch(`/api/workspaces/${ws.id}/members/${enc(someone.user.did!)}`, { role: 'manager' });
  const agent = await makeAgent(s, 'audited-agent');
  await ga.api.post(`/api/workspaces/${ws.id}/agents`, { agentDid: agent._id });
  const g = await ga.api.post('/api/grants', { userDid: someone.user.did, agentDid: null, capabilities: ['api_call'] });
  await ga.api.del(`/api/users/${enc(someone.user.did!)}/grants/${g.body.grant.id}`);
  await owner.api.patch(`/api/users/${enc(someone.user.did!)}`, { description: 'audited' });
  await ga.api.del(`/api/workspaces/${ws.id}/members/${enc(someone.user.did!)}`);
});

test.after(async () => {
  await s.stop(true);
});

const actions = (r: { body: { entries: Array<{ action: string }> } }) => r.body.entries.map((e) => e.action);

test('global admins only: a member 403, the admin role without the flag 403, anonymous 401', async () => {
  isError(await someone.api.get('/api/audit'), 403, 'forbidden');
  const roleAdmin = await makeUser(s, { role: 'admin' });
  isError(await roleAdmin.api.get('/api/audit'), 403, 'forbidden');
  isError(await http(s.url, 'GET', '/api/audit'), 401, 'unauthorized');
});

test('entries: envelope and entry shape, newest first, every change recorded', async () => {
  const r = await ga.api.get('/api/audit');
  assert.is(r.status, 200, r.text);
  assert.equal(Object.keys(r.body).sort(), ['entries', 'page', 'pageSize', 'total', 'totalPages']);
  assert.is(r.body.page, 1);
  assert.is(r.body.pageSize, 50);
  assert.is(r.body.total, r.body.entries.length);
  for (const e of r.body.entries) assert.equal(Object.keys(e).sort(), ENTRY_KEYS);
  const at = r.body.entries.map((e: any) => e.at);
  assert.equal(at, [...at].sort().reverse());
  for (const action of [
    'workspace.create',
    'workspace.update',
    'workspace.member.add',
    'workspace.member.update',
    'workspace.member.remove',
    'workspace.agent.add',
    'grant.create',
    'grant.revoke',
    'user.update',
  ]) {
    assert.ok(actions(r).includes(action), action);
  }
  const create = r.body.entries.find((e: any) => e.action === 'workspace.create');
  assert.equal(
    { actor: create.actor, actorType: create.actorType, targetType: create.targetType, target: create.target, details: create.details },
    { actor: owner.user.did, actorType: 'user', targetType: 'workspace', target: ws.id, details: { name: 'Audited', slug: 'audited' } },
  );
});

test('filters: actor, action exact and prefix*, targetType, target', async () => {
  const byGa = await ga.api.get(`/api/audit?actor=${enc(ga.user.did!)}`);
  assert.ok(byGa.body.total >= 5);
  assert.ok(byGa.body.entries.every((e: any) => e.actor === ga.user.did));

  const exact = await ga.api.get('/api/audit?action=workspace.member.add');
  assert.equal(actions(exact), ['workspace.member.add']);
  // Without the star a prefix is no match.
  assert.equal(actions(await ga.api.get('/api/audit?action=workspace.member')), []);
  const prefix = await ga.api.get('/api/audit?action=workspace.member.*');
  assert.equal([...actions(prefix)].sort(), ['workspace.member.add', 'workspace.member.remove', 'workspace.member.update']);
  const grants = await ga.api.get('/api/audit?action=grant.*');
  assert.equal([...actions(grants)].sort(), ['grant.create', 'grant.revoke']);
  // The dot is literal: "grant.*" does not match "grantXcreate".
  assert.equal(actions(await ga.api.get('/api/audit?action=gran.*')), []);

  const t = await ga.api.get(`/api/audit?targetType=user&target=${someone.user._id}`);
  assert.equal(actions(t), ['user.update']);
  const target = await ga.api.get(`/api/audit?target=${ws.id}`);
  assert.ok(target.body.total >= 6);
  assert.ok(target.body.entries.every((e: any) => e.target === ws.id));
  assert.equal(actions(await ga.api.get(`/api/audit?target=${ws.id}&action=workspace.update`)), ['workspace.update']);
});

test('filters: since (inclusive) and until (exclusive)', async () => {
  const all = (await ga.api.get('/api/audit?pageSize=200')).body.entries as Array<{ at: string; id: string }>;
  const pivot = all[Math.floor(all.length / 2)]!.at;
  const since = await ga.api.get(`/api/audit?pageSize=200&since=${enc(pivot)}`);
  const until = await ga.api.get(`/api/audit?pageSize=200&until=${enc(pivot)}`);
  assert.is(since.body.total, all.filter((e) => e.at >= pivot).length);
  assert.is(until.body.total, all.filter((e) => e.at < pivot).length);
  assert.is(since.body.total + until.body.total, all.length);
  assert.is((await ga.api.get(`/api/audit?since=${enc('2999-01-01T00:00:00Z')}`)).body.total, 0);
  assert.is((await ga.api.get(`/api/audit?until=${enc('2000-01-01T00:00:00+01:00')}`)).body.total, 0);
  isError(await ga.api.get('/api/audit?since=yesterday'), 400, 'validation_failed');
});

test('paging: pageSize default 50, max 200 (400 beyond), pages partition the log', async () => {
  const total = (await ga.api.get('/api/audit')).body.total as number;
  const p1 = await ga.api.get('/api/audit?pageSize=4');
  assert.is(p1.body.totalPages, Math.ceil(total / 4));
  const pages: string[] = [];
  for (let page = 1; page <= p1.body.totalPages; page++) {
    const r = await ga.api.get(`/api/audit?pageSize=4&page=${page}`);
    assert.is(r.body.page, page);
    pages.push(...r.body.entries.map((e: any) => e.id));
  }
  assert.is(pages.length, total);
  assert.is(new Set(pages).size, total);
  assert.is((await ga.api.get('/api/audit?pageSize=200')).status, 200);
  isError(await ga.api.get('/api/audit?pageSize=201'), 400, 'validation_failed');
  isError(await ga.api.get('/api/audit?page=0'), 400, 'validation_failed');
});

test.run();
