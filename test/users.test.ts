import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { TestServer } from './helpers.js';
import { http } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { enc, isError, makeAgent, makeWorkspace, startWithOwner } from './people-helpers.js';

const test = suite('users');
let s: TestServer;
let owner: TestUser;
let admin: TestUser;
let member: TestUser;
let ops: { id: string; slug: string; name: string };
let lab: { id: string; slug: string; name: string };

// The directory this suite lists (besides the owner and the two callers above).
let alice: TestUser; // claimed, operator in ops (primary) and member of lab, one grant
let bob: TestUser; // claimed, global admin
let carol: TestUser; // unclaimed, member of lab
let dots: TestUser; // name with regex metacharacters

const USER_KEYS = [
  'claimedAt',
  'description',
  'did',
  'directoryId',
  'email',
  'grants',
  'id',
  'isAdmin',
  'isOwner',
  'name',
  'registeredAt',
  'reportsTo',
  'role',
  'workspaces',
];

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  ops = await makeWorkspace(owner, 'Operations');
  lab = await makeWorkspace(owner, 'Lab');
  admin = await makeUser(s, { name: 'Zed Admin', email: 'zed@corp.test', role: 'admin' });
  member = await makeUser(s, { name: 'Mia Member', email: 'mia@corp.test', workspaces: { [ops.id]: 'member' } });
  alice = await makeUser(s, { name: 'alice Liddell', email: 'Alice@Wonder.test', role: 'manager', workspaces: { [ops.id]: 'operator', [lab.id]: 'member' } });
  bob = await makeUser(s, { name: 'Bob Builder', email: 'bob@build.test', isAdmin: true });
  carol = await makeUser(s, { name: 'Carol Unclaimed', email: 'carol@corp.test', unclaimed: true, workspaces: { [lab.id]: 'member' } });
  dots = await makeUser(s, { name: 'a.c (x)', email: 'dots@corp.test' });
  // Distinct registration instants so sorting by registeredAt is well defined.
  const ordered = [owner, admin, member, alice, bob, carol, dots];
  for (const [i, u] of ordered.entries()) {
    const at = new Date(Date.UTC(2030, 0, 1 + i)).toISOString();
    await s.ctx.c.users.updateOne({ _id: u.user._id }, { $set: { registeredAt: at } });
    u.user.registeredAt = at;
  }
  const agent = await makeAgent(s, 'helper');
  const g = await owner.api.post('/api/grants', { userDid: alice.user.did, agentDid: agent._id, capabilities: ['file_access'], expiresAt: null });
  assert.is(g.status, 201, g.text);
});

test.after(async () => {
  await s.stop(true);
});

const names = (r: { body: { users: Array<{ name: string }> } }) => r.body.users.map((u) => u.name);

// --- GET /api/users/me ---------------------------------------------------------------------------

test('me: the caller, their workspaces with role, their grants', async () => {
  const r = await alice.api.get('/api/users/me');
  assert.is(r.status, 200);
  assert.equal(Object.keys(r.body).sort(), ['grants', 'user', 'workspaces']);
  assert.equal(r.body.user, {
    id: alice.user._id,
    did: alice.user.did,
    name: 'alice Liddell',
    email: 'Alice@Wonder.test',
    isAdmin: false,
    registeredAt: alice.user.registeredAt,
  });
  assert.equal(r.body.workspaces, [
    { id: ops.id, name: 'Operations', slug: 'operations', color: r.body.workspaces[0].color, role: 'operator' },
    { id: lab.id, name: 'Lab', slug: 'lab', color: r.body.workspaces[1].color, role: 'member' },
  ]);
  assert.match(r.body.workspaces[0].color, /^#[0-9a-f]{6}$/);
  assert.is(r.body.grants.length, 1);
  assert.equal(Object.keys(r.body.grants[0]).sort(), ['agentDid', 'capabilities', 'createdAt', 'expiresAt', 'id']);
});

test('me: needs a session (401), and "me" is not taken for a DID', async () => {
  isError(await http(s.url, 'GET', '/api/users/me'), 401, 'unauthorized');
  const r = await member.api.get('/api/users/me');
  assert.is(r.status, 200);
  assert.is(r.body.user.id, member.user._id);
});

// --- GET /api/users --------------------------------------------------------------------------------

test('list: admins only (member 403, anonymous 401); the owner and admin role count as admin', async () => {
  isError(await member.api.get('/api/users'), 403, 'forbidden');
  isError(await http(s.url, 'GET', '/api/users'), 401, 'unauthorized');
  assert.is((await admin.api.get('/api/users')).status, 200);
  assert.is((await bob.api.get('/api/users')).status, 200);
  assert.is((await owner.api.get('/api/users')).status, 200);
});

test('list: envelope, defaults (page 1, pageSize 20, by name ascending)', async () => {
  const r = await admin.api.get('/api/users');
  assert.is(r.status, 200);
  assert.equal(Object.keys(r.body).sort(), ['page', 'pageSize', 'total', 'totalPages', 'users']);
  assert.is(r.body.total, 7);
  assert.is(r.body.page, 1);
  assert.is(r.body.pageSize, 20);
  assert.is(r.body.totalPages, 1);
  // Case-insensitive name order: "alice" sits between "a.c" and "Bob".
  assert.equal(names(r), ['a.c (x)', 'alice Liddell', 'Bob Builder', 'Carol Unclaimed', 'Mia Member', 'Owner', 'Zed Admin']);
});

test('list: every field of the User shape, with workspaces and grants', async () => {
  const r = await admin.api.get('/api/users?q=alice');
  assert.is(r.body.users.length, 1);
  const u = r.body.users[0];
  assert.equal(Object.keys(u).sort(), USER_KEYS);
  assert.is(u.id, alice.user._id);
  assert.is(u.did, alice.user.did);
  assert.is(u.name, 'alice Liddell');
  assert.is(u.email, 'Alice@Wonder.test');
  assert.is(u.isOwner, false);
  assert.is(u.isAdmin, false);
  assert.is(u.role, 'manager');
  assert.is(u.registeredAt, alice.user.registeredAt);
  assert.is(u.directoryId, null);
  assert.is(u.claimedAt, alice.user.claimedAt);
  assert.is(u.reportsTo, null);
  assert.is(u.description, null);
  assert.equal(
    u.workspaces.map((w: any) => Object.keys(w).sort()),
    [
      ['color', 'id', 'isPrimary', 'name', 'slug'],
      ['color', 'id', 'isPrimary', 'name', 'slug'],
    ],
  );
  assert.equal(
    u.workspaces.map((w: any) => [w.id, w.slug, w.name, w.isPrimary]),
    [
      [ops.id, 'operations', 'Operations', true],
      [lab.id, 'lab', 'Lab', false],
    ],
  );
  assert.is(u.grants.length, 1);
  assert.equal(u.grants[0].capabilities, ['file_access']);
  assert.is(u.grants[0].expiresAt, null);

  const c = (await admin.api.get('/api/users?q=carol')).body.users[0];
  assert.is(c.did, null);
  assert.is(c.claimedAt, null);
  assert.equal(c.grants, []);
  assert.equal(c.workspaces.map((w: any) => [w.id, w.isPrimary]), [[lab.id, true]]);
});

test('list: q matches name, email or DID, case-insensitively, as a literal substring', async () => {
  assert.equal(names(await admin.api.get('/api/users?q=LIDDELL')), ['alice Liddell']);
  assert.equal(names(await admin.api.get('/api/users?q=wonder.TEST')), ['alice Liddell']);
  const didPart = bob.user.did!.slice(20, 34);
  assert.equal(names(await admin.api.get(`/api/users?q=${enc(didPart)}`)), ['Bob Builder']);
  // Regular-expression characters are taken literally: "a.c" does not match "abc", "(x)" is no group.
  assert.equal(names(await admin.api.get(`/api/users?q=${enc('a.c (x)')}`)), ['a.c (x)']);
  assert.equal(names(await admin.api.get(`/api/users?q=${enc('.*')}`)), []);
  assert.equal(names(await admin.api.get(`/api/users?q=${enc('[')}`)), []);
});

test('list: role, isAdmin and hasAccount filters', async () => {
  assert.equal(names(await admin.api.get('/api/users?role=manager')), ['alice Liddell']);
  assert.equal(names(await admin.api.get('/api/users?role=owner')), ['Owner']);
  assert.equal(names(await admin.api.get('/api/users?isAdmin=true')), ['Bob Builder', 'Owner']);
  assert.is((await admin.api.get('/api/users?isAdmin=false')).body.total, 5);
  assert.equal(names(await admin.api.get('/api/users?hasAccount=false')), ['Carol Unclaimed']);
  assert.is((await admin.api.get('/api/users?hasAccount=true')).body.total, 6);
  isError(await admin.api.get('/api/users?role=boss'), 400, 'validation_failed');
  isError(await admin.api.get('/api/users?isAdmin=maybe'), 400, 'validation_failed');
});

test('list: workspace filter by id or slug; an unknown workspace is 404', async () => {
  assert.equal(names(await admin.api.get(`/api/users?workspace=${lab.id}`)), ['alice Liddell', 'Carol Unclaimed']);
  assert.equal(names(await admin.api.get('/api/users?workspace=lab')), ['alice Liddell', 'Carol Unclaimed']);
  assert.equal(names(await admin.api.get('/api/users?workspace=operations&role=member')), ['Mia Member']);
  isError(await admin.api.get('/api/users?workspace=nowhere'), 404, 'not_found');
});

test('list: paging with totalPages; pageSize over 100 (or under 1) is 400; page past the end is empty', async () => {
  const p1 = await admin.api.get('/api/users?pageSize=3');
  assert.is(p1.body.pageSize, 3);
  assert.is(p1.body.total, 7);
  assert.is(p1.body.totalPages, 3);
  const p3 = await admin.api.get('/api/users?pageSize=3&page=3');
  assert.is(p3.body.page, 3);
  assert.equal(names(p3), ['Zed Admin']);
  const all = [...names(p1), ...names(await admin.api.get('/api/users?pageSize=3&page=2')), ...names(p3)];
  assert.equal(all, names(await admin.api.get('/api/users')));
  assert.equal(names(await admin.api.get('/api/users?pageSize=3&page=4')), []);
  assert.is((await admin.api.get('/api/users?pageSize=100')).status, 200);
  const big = await admin.api.get('/api/users?pageSize=101');
  isError(big, 400, 'validation_failed');
  assert.match(big.body.error.message, /pageSize/);
  isError(await admin.api.get('/api/users?pageSize=0'), 400, 'validation_failed');
  isError(await admin.api.get('/api/users?page=0'), 400, 'validation_failed');
});

test('list: sortBy name, email, registeredAt in both directions', async () => {
  assert.equal(names(await admin.api.get('/api/users?sortBy=name&sortDir=desc')), [
    'Zed Admin',
    'Owner',
    'Mia Member',
    'Carol Unclaimed',
    'Bob Builder',
    'alice Liddell',
    'a.c (x)',
  ]);
  const byEmail = await admin.api.get('/api/users?sortBy=email');
  // The owner has no email (''), which sorts first; case does not matter.
  assert.equal(
    byEmail.body.users.map((u: any) => u.email),
    ['', 'Alice@Wonder.test', 'bob@build.test', 'carol@corp.test', 'dots@corp.test', 'mia@corp.test', 'zed@corp.test'],
  );
  assert.equal(names(await admin.api.get('/api/users?sortBy=registeredAt')), [
    'Owner',
    'Zed Admin',
    'Mia Member',
    'alice Liddell',
    'Bob Builder',
    'Carol Unclaimed',
    'a.c (x)',
  ]);
  assert.equal(names(await admin.api.get('/api/users?sortBy=registeredAt&sortDir=desc&pageSize=2')), ['a.c (x)', 'Carol Unclaimed']);
  isError(await admin.api.get('/api/users?sortBy=did'), 400, 'validation_failed');
  isError(await admin.api.get('/api/users?sortDir=up'), 400, 'validation_failed');
});

// --- GET /api/users/{did} --------------------------------------------------------------------------

test('get by DID (percent-encoded) or id: the full profile with grants; 404 unknown; admins only', async () => {
  const r = await admin.api.get(`/api/users/${enc(alice.user.did!)}`);
  assert.is(r.status, 200);
  assert.equal(Object.keys(r.body), ['user']);
  assert.equal(Object.keys(r.body.user).sort(), USER_KEYS);
  assert.is(r.body.user.grants.length, 1);
  assert.is(r.body.user.workspaces.length, 2);
  assert.is((await admin.api.get(`/api/users/${alice.user._id}`)).body.user.did, alice.user.did);
  isError(await admin.api.get(`/api/users/${enc('did:key:z6MkNobodyHere')}`), 404, 'not_found');
  isError(await member.api.get(`/api/users/${enc(alice.user.did!)}`), 403, 'forbidden');
});

// --- PATCH /api/users/{did} ------------------------------------------------------------------------

test('patch: owner only; answers the updated user; audited', async () => {
  isError(await admin.api.patch(`/api/users/${enc(dots.user.did!)}`, { name: 'x' }), 403, 'forbidden');
  const r = await owner.api.patch(`/api/users/${enc(dots.user.did!)}`, {
    name: 'Dot Tie',
    email: 'dot@corp.test',
    role: 'operator',
    reportsTo: alice.user._id,
    description: 'keeps the dots',
  });
  assert.is(r.status, 200, r.text);
  assert.equal(Object.keys(r.body), ['user']);
  assert.equal(Object.keys(r.body.user).sort(), USER_KEYS);
  assert.is(r.body.user.name, 'Dot Tie');
  assert.is(r.body.user.email, 'dot@corp.test');
  assert.is(r.body.user.role, 'operator');
  assert.is(r.body.user.reportsTo, alice.user._id);
  assert.is(r.body.user.description, 'keeps the dots');
  const again = await admin.api.get(`/api/users/${enc(dots.user.did!)}`);
  assert.is(again.body.user.name, 'Dot Tie');
  // Fields left out stay; null clears.
  const r2 = await owner.api.patch(`/api/users/${enc(dots.user.did!)}`, { description: null });
  assert.is(r2.body.user.description, null);
  assert.is(r2.body.user.name, 'Dot Tie');
  const audit = await s.ctx.c.audit.find({ action: 'user.update', target: dots.user._id });
  assert.is(audit.length, 2);
  assert.is(audit[0]!.actor, owner.user.did);
  await owner.api.patch(`/api/users/${enc(dots.user.did!)}`, { name: 'a.c (x)', reportsTo: null, role: 'member', email: 'dots@corp.test' });
});

test('patch: reportsTo must name another existing user, without a cycle', async () => {
  const path = `/api/users/${enc(alice.user.did!)}`;
  isError(await owner.api.patch(path, { reportsTo: 'no-such-user' }), 400, 'invalid_reports_to');
  isError(await owner.api.patch(path, { reportsTo: alice.user._id }), 400, 'invalid_reports_to');
  assert.is((await owner.api.patch(path, { reportsTo: bob.user._id })).status, 200);
  // bob -> alice would close the loop alice -> bob.
  isError(await owner.api.patch(`/api/users/${enc(bob.user.did!)}`, { reportsTo: alice.user._id }), 400, 'invalid_reports_to');
  assert.is((await owner.api.patch(path, { reportsTo: null })).body.user.reportsTo, null);
});

test('patch: validation (email, role, unknown fields), email taken 409, owner role fixed, 404 unknown', async () => {
  const path = `/api/users/${enc(alice.user.did!)}`;
  isError(await owner.api.patch(path, { email: 'not-an-email' }), 400, 'validation_failed');
  isError(await owner.api.patch(path, { role: 'king' }), 400, 'validation_failed');
  isError(await owner.api.patch(path, { name: '  ' }), 400, 'validation_failed');
  isError(await owner.api.patch(path, { isAdmin: true }), 400, 'validation_failed');
  isError(await owner.api.patch(path, { email: 'BOB@build.test' }), 409, 'email_taken');
  isError(await owner.api.patch(`/api/users/${enc(owner.user.did!)}`, { role: 'member' }), 400, 'owner_role');
  isError(await owner.api.patch(`/api/users/${enc('did:key:z6MkNobody')}`, { name: 'x' }), 404, 'not_found');
});

// --- DELETE /api/users/{did} -----------------------------------------------------------------------

test('delete: owner only; never yourself (403), never the installation owner (403)', async () => {
  isError(await admin.api.del(`/api/users/${enc(member.user.did!)}`), 403, 'forbidden');
  isError(await owner.api.del(`/api/users/${enc(owner.user.did!)}`), 403, 'cannot_delete_self');
  const coOwner = await makeUser(s, { role: 'owner' });
  isError(await coOwner.api.del(`/api/users/${enc(owner.user.did!)}`), 403, 'cannot_delete_owner');
  assert.is((await owner.api.del(`/api/users/${enc(coOwner.user.did!)}`)).status, 200);
});

test('delete: removes the user, DID reservation, memberships, grants, sessions; clears reportsTo', async () => {
  const c = s.ctx.c;
  const victim = await makeUser(s, { name: 'Victim', workspaces: { [ops.id]: 'admin', [lab.id]: 'member' } });
  const report = await makeUser(s, { name: 'Report' });
  await owner.api.patch(`/api/users/${enc(report.user.did!)}`, { reportsTo: victim.user._id });
  const g = await owner.api.post(`/api/users/${enc(victim.user.did!)}/grants`, { agentDid: null, capabilities: ['api_call'] });
  assert.is(g.status, 201);
  assert.is((await victim.api.get('/api/users/me')).status, 200);

  const r = await owner.api.del(`/api/users/${enc(victim.user.did!)}`);
  assert.is(r.status, 200);
  assert.equal(r.body, { ok: true });

  assert.is(await c.users.findById(victim.user._id), null);
  assert.is(await c.userDids.findById(victim.user.did!), null);
  assert.is(await c.workspaceMembers.count({ userId: victim.user._id }), 0);
  assert.is(await c.grants.count({ userId: victim.user._id }), 0);
  assert.is(await c.sessions.count({ subject: victim.user._id }), 0);
  isError(await victim.api.get('/api/users/me'), 401, 'invalid_session');
  assert.is((await c.users.findById(report.user._id))!.reportsTo, null);
  isError(await admin.api.get(`/api/users/${enc(victim.user.did!)}`), 404, 'not_found');
  isError(await owner.api.del(`/api/users/${enc(victim.user.did!)}`), 404, 'not_found');
  const audit = await c.audit.findOne({ action: 'user.delete', target: victim.user._id });
  assert.ok(audit);
  assert.is(audit!.details.did, victim.user.did);
  await owner.api.del(`/api/users/${enc(report.user.did!)}`);
});

// --- unclaimed users -------------------------------------------------------------------------------

test('unclaimed: get with workspaces; 404 when missing or already claimed; admins only', async () => {
  const r = await admin.api.get(`/api/users/unclaimed/${carol.user._id}`);
  assert.is(r.status, 200);
  assert.equal(Object.keys(r.body.user).sort(), USER_KEYS);
  assert.is(r.body.user.did, null);
  assert.equal(r.body.user.workspaces, [{ id: lab.id, name: 'Lab', slug: 'lab', color: r.body.user.workspaces[0].color, isPrimary: true }]);
  isError(await admin.api.get(`/api/users/unclaimed/${alice.user._id}`), 404, 'not_found');
  isError(await admin.api.get('/api/users/unclaimed/nope'), 404, 'not_found');
  isError(await member.api.get(`/api/users/unclaimed/${carol.user._id}`), 403, 'forbidden');
});

test('unclaimed: patch takes reportsTo as given and answers the user; the owner role needs an owner', async () => {
  const path = `/api/users/unclaimed/${carol.user._id}`;
  const r = await admin.api.patch(path, { name: 'Carol Unclaimed', reportsTo: 'directory-manager-42', description: 'from sync', role: 'operator' });
  assert.is(r.status, 200, r.text);
  assert.is(r.body.user.reportsTo, 'directory-manager-42');
  assert.is(r.body.user.description, 'from sync');
  assert.is(r.body.user.role, 'operator');
  isError(await admin.api.patch(path, { role: 'owner' }), 403, 'forbidden');
  isError(await admin.api.patch(`/api/users/unclaimed/${alice.user._id}`, { name: 'x' }), 404, 'not_found');
  isError(await member.api.patch(path, { name: 'x' }), 403, 'forbidden');
  await admin.api.patch(path, { reportsTo: null, description: null, role: 'member' });
});

test('unclaimed: delete removes the record; a claimed user is 404 here', async () => {
  const temp = await makeUser(s, { name: 'Provisioned', unclaimed: true, workspaces: { [ops.id]: 'member' } });
  isError(await admin.api.del(`/api/users/unclaimed/${alice.user._id}`), 404, 'not_found');
  const r = await admin.api.del(`/api/users/unclaimed/${temp.user._id}`);
  assert.is(r.status, 200);
  assert.equal(r.body, { ok: true });
  assert.is(await s.ctx.c.users.findById(temp.user._id), null);
  assert.is(await s.ctx.c.workspaceMembers.count({ userId: temp.user._id }), 0);
  isError(await admin.api.get(`/api/users/unclaimed/${temp.user._id}`), 404, 'not_found');
  assert.ok(await s.ctx.c.audit.findOne({ action: 'user.delete', target: temp.user._id }));
});

test.run();
