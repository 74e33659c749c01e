import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { http, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import {
  addMember,
  CHANNEL_KEYS,
  enc,
  isError,
  makeAgent,
  makeChannel,
  makeWorkspace,
  post,
  sessionAgent,
  startWithOwner,
} from './channels-helpers.js';

const test = suite('channels');
let s: TestServer;
let owner: TestUser; // installation owner, a global admin
let ws: { id: string; slug: string };
let other: { id: string; slug: string };
let admin: TestUser; // global admin, no workspace
let creator: TestUser; // workspace member who creates the channels
let moderator: TestUser;
let member: TestUser;
let wsMember: TestUser; // in the workspace, in no channel
let outsider: TestUser; // in another workspace only

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  ws = await makeWorkspace(owner, 'Chat Team');
  other = await makeWorkspace(owner, 'Other Team');
  admin = await makeUser(s, { isAdmin: true, name: 'admin' });
  creator = await makeUser(s, { workspaces: { [ws.id]: 'member' }, name: 'creator' });
  moderator = await makeUser(s, { workspaces: { [ws.id]: 'member' }, name: 'moderator' });
  member = await makeUser(s, { workspaces: { [ws.id]: 'member' }, name: 'member' });
  wsMember = await makeUser(s, { workspaces: { [ws.id]: 'operator' }, name: 'wsmember' });
  outsider = await makeUser(s, { workspaces: { [other.id]: 'owner' }, name: 'outsider' });
});

test.after(async () => {
  await s.stop(true);
});

/** A channel of `ws` created by `creator`, with a moderator and a member. */
async function staffed(body: Record<string, unknown>): Promise<any> {
  const ch = await makeChannel(creator, { workspaceId: ws.id, ...body });
  await addMember(creator, ch.id, moderator.user.did!, 'user', 'moderator');
  await addMember(creator, ch.id, member.user.did!);
  return ch;
}

// --- create ------------------------------------------------------------------------------------

test('create: 201 {channel}; slug from the name; isPublic defaults to true; the creator is the owner; audited', async () => {
  const r = await creator.api.post('/api/channels', { name: 'Ops Team Chat', workspaceId: ws.id, description: 'night shift' });
  assert.is(r.status, 201, r.text);
  assert.equal(Object.keys(r.body), ['channel']);
  const ch = r.body.channel;
  assert.equal(Object.keys(ch).sort(), CHANNEL_KEYS);
  assert.is(ch.slug, 'ops-team-chat');
  assert.is(ch.workspaceId, ws.id);
  assert.is(ch.isPublic, true);
  assert.is(ch.isArchived, false);
  assert.is(ch.description, 'night shift');
  assert.is(ch.topic, '');
  assert.is(ch.creatorDid, creator.user.did);
  const d = await creator.api.get(`/api/channels/${ch.id}`);
  assert.equal(
    d.body.members.map((m: any) => [m.memberDid, m.memberType, m.role]),
    [[creator.user.did, 'user', 'owner']],
  );
  assert.ok(await s.ctx.c.audit.findOne({ action: 'channel.create', target: ch.id }));
});

test('create: the workspace may be given by slug; a given slug is kept', async () => {
  const ch = await makeChannel(creator, { name: 'Whatever', workspaceId: ws.slug, slug: 'custom-slug', isPublic: false });
  assert.is(ch.workspaceId, ws.id);
  assert.is(ch.slug, 'custom-slug');
  assert.is(ch.isPublic, false);
});

test('create: 409 for a slug taken in the workspace (given or derived); the same slug in another workspace is fine', async () => {
  await makeChannel(creator, { name: 'Dup Name', workspaceId: ws.id });
  isError(await creator.api.post('/api/channels', { name: 'Dup Name', workspaceId: ws.id }), 409, 'slug_taken');
  isError(await creator.api.post('/api/channels', { name: 'x', slug: 'dup-name', workspaceId: ws.id }), 409, 'slug_taken');
  const elsewhere = await makeChannel(outsider, { name: 'Dup Name', workspaceId: other.id });
  assert.is(elsewhere.slug, 'dup-name');
});

test('create: a global channel (no workspaceId) only by a global admin; its slug is unique among global channels', async () => {
  isError(await creator.api.post('/api/channels', { name: 'Everyone' }), 403, 'forbidden');
  isError(await creator.api.post('/api/channels', { name: 'Everyone', workspaceId: null }), 403, 'forbidden');
  const g = await makeChannel(admin, { name: 'Everyone' });
  assert.is(g.workspaceId, null);
  isError(await owner.api.post('/api/channels', { name: 'Everyone' }), 409, 'slug_taken');
  const inWs = await makeChannel(creator, { name: 'Everyone', workspaceId: ws.id });
  assert.is(inWs.slug, 'everyone');
});

test('create: a generated slug is the trimmed name in lower case with each whitespace character a hyphen; nothing else changes', async () => {
  const made = async (name: string) => (await makeChannel(creator, { name, workspaceId: ws.id })).slug;
  assert.is(await made('C++ Devs'), 'c++-devs');
  assert.is(await made('日本語'), '日本語');
  assert.is(await made('Ops Team'), 'ops-team');
  assert.is(await made('  Café Crème  '), 'café-crème');
  assert.is(await made('Q&A\tDesk  Two'), 'q&a-desk--two');
  assert.is(await made('!!!'), '!!!');
  const named = await makeChannel(creator, { name: '  Padded Name ', workspaceId: ws.id });
  assert.is(named.name, 'Padded Name');
  assert.is(named.slug, 'padded-name');
  isError(await creator.api.post('/api/channels', { name: 'c++ DEVS', workspaceId: ws.id }), 409, 'slug_taken');
  isError(await creator.api.post('/api/channels', { name: '日本語', workspaceId: ws.id }), 409, 'slug_taken');
});

test('create: a given slug is taken as sent when it is 1–100 characters without whitespace; otherwise 400 validation_failed', async () => {
  const given = async (slug: string) => (await makeChannel(creator, { name: 'Given', slug, workspaceId: ws.id })).slug;
  assert.is(await given('Release/2.0_Notes'), 'Release/2.0_Notes');
  assert.is(await given('été'), 'été');
  assert.is(await given('x'.repeat(100)), 'x'.repeat(100));
  for (const bad of ['', 'Bad Slug', 'tab\there', 'line\nbreak', ' lead', 'x'.repeat(101)]) {
    const r = await creator.api.post('/api/channels', { name: 'Refused', slug: bad, workspaceId: ws.id });
    isError(r, 400, 'validation_failed');
    assert.match(r.body.error.message, /slug/);
  }
  isError(await creator.api.post('/api/channels', { name: 'Other', slug: 'été', workspaceId: ws.id }), 409, 'slug_taken');
});

test('create: 400 for a missing or blank name, an unknown field; 404 for a workspace the caller is not in; 401 anonymous; an agent outside the workspace 404', async () => {
  isError(await creator.api.post('/api/channels', { workspaceId: ws.id }), 400, 'validation_failed');
  isError(await creator.api.post('/api/channels', { name: '   ', workspaceId: ws.id }), 400, 'validation_failed');
  isError(await creator.api.post('/api/channels', { name: 'x', workspaceId: ws.id, color: 'red' }), 400, 'validation_failed');
  isError(await outsider.api.post('/api/channels', { name: 'Sneaky', workspaceId: ws.id }), 404, 'not_found');
  isError(await creator.api.post('/api/channels', { name: 'x', workspaceId: 'no-such-workspace' }), 404, 'not_found');
  isError(await http(s.url, 'POST', '/api/channels', { json: { name: 'Anon', workspaceId: ws.id } }), 401, 'unauthorized');
  const agent = await sessionAgent(s, 'creator-bot');
  isError(await agent.api.post('/api/channels', { name: 'Bot channel', workspaceId: ws.id }), 404, 'not_found');
  isError(await agent.api.post('/api/channels', { name: 'Bot channel' }), 403, 'forbidden');
});

// --- list -------------------------------------------------------------------------------------------

test('list: workspace required; public channels and the private ones one belongs to, plus global ones; counts', async () => {
  const w = await makeWorkspace(owner, 'Listing');
  const a = await makeUser(s, { workspaces: { [w.id]: 'member' } });
  const b = await makeUser(s, { workspaces: { [w.id]: 'member' } });
  const pub = await makeChannel(a, { name: 'Alpha Public', workspaceId: w.id });
  const priv = await makeChannel(a, { name: 'Beta Private', workspaceId: w.id, isPublic: false });
  const archived = await makeChannel(a, { name: 'Gamma Old', workspaceId: w.id });
  await post(a, pub.id, 'one');
  await post(a, pub.id, 'two');
  await addMember(a, pub.id, b.user.did!);
  assert.is((await a.api.del(`/api/channels/${archived.id}`)).status, 200);
  const g = await makeChannel(admin, { name: 'Zeta Global' });
  const gPriv = await makeChannel(admin, { name: 'Zeta Hidden', isPublic: false });

  isError(await a.api.get('/api/channels'), 400, 'validation_failed');
  const ids = async (u: TestUser, qs = '') => {
    const r = await u.api.get(`/api/channels?workspace=${w.slug}${qs}`);
    assert.is(r.status, 200, r.text);
    return r.body.channels.map((c: any) => c.id);
  };
  const listA = await a.api.get(`/api/channels?workspace=${w.id}`);
  const alpha = listA.body.channels.find((c: any) => c.id === pub.id);
  assert.equal(Object.keys(alpha).sort(), [...CHANNEL_KEYS, 'memberCount', 'messageCount'].sort());
  assert.is(alpha.memberCount, 2);
  assert.is(alpha.messageCount, 2);
  const globals = (await s.ctx.c.channels.find({ workspaceId: null, isPublic: true, isArchived: false })).map((c) => c._id);
  const seen = await ids(a);
  assert.equal([...seen].sort(), [pub.id, priv.id, ...globals].sort());
  assert.ok(seen.includes(g.id) && !seen.includes(gPriv.id));
  const names = listA.body.channels.map((c: any) => c.name.toLowerCase());
  assert.equal(names, [...names].sort((x: string, y: string) => x.localeCompare(y)), 'sorted by name');
  assert.ok(!(await ids(b)).includes(priv.id), 'a private channel is hidden from non-members');
  assert.ok((await ids(b)).includes(pub.id));
  assert.ok(!(await ids(a)).includes(archived.id), 'archived channels are left out');
  assert.ok((await ids(a, '&includeArchived=true')).includes(archived.id));
  assert.equal(await ids(a, '&includeGlobal=false'), [pub.id, priv.id]);
  const forAdmin = await ids(admin, '&includeGlobal=false');
  assert.equal(forAdmin.sort(), [pub.id, priv.id].sort(), 'a global admin sees private channels too');
  assert.ok((await ids(admin)).includes(gPriv.id));
  isError(await outsider.api.get(`/api/channels?workspace=${w.id}`), 404, 'not_found');
  isError(await a.api.get('/api/channels?workspace=nope'), 404, 'not_found');
  isError(await a.api.get(`/api/channels?workspace=${w.id}&includeArchived=maybe`), 400, 'validation_failed');
});

// --- read rules (§5.8) --------------------------------------------------------------------------------

test('get: {channel, members (without channelId), stats}', async () => {
  const ch = await staffed({ name: 'Detail' });
  await post(member, ch.id, 'hi');
  const r = await member.api.get(`/api/channels/${ch.id}`);
  assert.is(r.status, 200, r.text);
  assert.equal(Object.keys(r.body).sort(), ['channel', 'members', 'stats']);
  assert.equal(Object.keys(r.body.channel).sort(), CHANNEL_KEYS);
  assert.equal(r.body.stats, { messageCount: 1, memberCount: 3 });
  for (const m of r.body.members) assert.equal(Object.keys(m).sort(), ['id', 'invitedBy', 'joinedAt', 'memberDid', 'memberType', 'role']);
  const mod = r.body.members.find((m: any) => m.memberDid === moderator.user.did);
  assert.is(mod.role, 'moderator');
  assert.is(mod.invitedBy, creator.user.did);
});

test('read rules: a public channel is readable by every workspace member; posting needs membership (403)', async () => {
  const ch = await staffed({ name: 'Open Room' });
  await post(member, ch.id, 'visible to the workspace');
  assert.is((await wsMember.api.get(`/api/channels/${ch.id}`)).status, 200);
  const msgs = await wsMember.api.get(`/api/channels/${ch.id}/messages`);
  assert.is(msgs.status, 200);
  assert.is(msgs.body.messages[0].content, 'visible to the workspace');
  isError(await wsMember.api.post(`/api/channels/${ch.id}/messages`, { content: 'let me in' }), 403, 'not_a_member');
  isError(await admin.api.post(`/api/channels/${ch.id}/messages`, { content: 'admin, not a member' }), 403, 'not_a_member');
  // Not in the workspace: the channel does not exist for them.
  isError(await outsider.api.get(`/api/channels/${ch.id}`), 404, 'not_found');
  isError(await outsider.api.get(`/api/channels/${ch.id}/messages`), 404, 'not_found');
});

test('read rules: a private channel is 404 — exactly like an unknown one — to non-members, even workspace members', async () => {
  const ch = await staffed({ name: 'Secret Room', isPublic: false });
  const unknown = await wsMember.api.get('/api/channels/no-such-channel');
  for (const path of [`/api/channels/${ch.id}`, `/api/channels/${ch.id}/messages`, `/api/channels/${ch.id}/bridges`]) {
    const r = await wsMember.api.get(path);
    isError(r, 404, 'not_found');
    assert.is(r.body.error.message.replace(ch.id, 'X'), unknown.body.error.message.replace('no-such-channel', 'X'));
  }
  isError(await wsMember.api.post(`/api/channels/${ch.id}/messages`, { content: 'x' }), 404, 'not_found');
  isError(await wsMember.api.post(`/api/channels/${ch.id}/members`, { memberDid: wsMember.user.did, memberType: 'user' }), 404, 'not_found');
  isError(await wsMember.api.patch(`/api/channels/${ch.id}`, { name: 'x' }), 404, 'not_found');
  isError(await wsMember.api.del(`/api/channels/${ch.id}`), 404, 'not_found');
  assert.is((await member.api.get(`/api/channels/${ch.id}`)).status, 200);
  assert.is((await admin.api.get(`/api/channels/${ch.id}`)).status, 200, 'a global admin reads every channel');
});

test('read rules: a public global channel is reachable by every authenticated user and agent; a private one by members', async () => {
  const g = await makeChannel(admin, { name: 'Town Square' });
  await addMember(admin, g.id, outsider.user.did!);
  assert.is((await creator.api.get(`/api/channels/${g.id}`)).status, 200);
  assert.is((await outsider.api.get(`/api/channels/${g.id}/messages`)).status, 200);
  const bot = await sessionAgent(s, 'square-bot');
  assert.is((await bot.api.get(`/api/channels/${g.id}`)).status, 200);
  isError(await http(s.url, 'GET', `/api/channels/${g.id}`), 401, 'unauthorized');
  await post(outsider, g.id, 'hello from another workspace');
  const hidden = await makeChannel(admin, { name: 'Back Room', isPublic: false });
  isError(await outsider.api.get(`/api/channels/${hidden.id}`), 404, 'not_found');
});

test('read rules: agents read public channels of their workspaces', async () => {
  const ch = await staffed({ name: 'Agents Welcome' });
  const bot = await sessionAgent(s, 'ws-bot');
  isError(await bot.api.get(`/api/channels/${ch.id}`), 404, 'not_found');
  await s.ctx.c.workspaceAgents.insertOne({ _id: `wa-${bot.did}`, workspaceId: ws.id, agentDid: bot.did, isPrimary: true, joinedAt: new Date().toISOString() });
  assert.is((await bot.api.get(`/api/channels/${ch.id}`)).status, 200);
  isError(await bot.api.post(`/api/channels/${ch.id}/messages`, { content: 'hi' }), 403, 'not_a_member');
});

// --- change and archive ------------------------------------------------------------------------------

test('PATCH: owner or global admin change name, description, topic; others 403; the slug stays; audited', async () => {
  const ch = await staffed({ name: 'Patchable' });
  const r = await creator.api.patch(`/api/channels/${ch.id}`, { name: 'Patched', description: 'd', topic: 'today: deploys' });
  assert.is(r.status, 200, r.text);
  assert.equal(Object.keys(r.body), ['channel']);
  assert.is(r.body.channel.name, 'Patched');
  assert.is(r.body.channel.slug, 'patchable');
  assert.is(r.body.channel.topic, 'today: deploys');
  assert.ok(r.body.channel.updatedAt >= ch.updatedAt);
  assert.is((await admin.api.patch(`/api/channels/${ch.id}`, { topic: 'admin was here' })).body.channel.topic, 'admin was here');
  isError(await moderator.api.patch(`/api/channels/${ch.id}`, { topic: 'x' }), 403, 'forbidden');
  isError(await member.api.patch(`/api/channels/${ch.id}`, { topic: 'x' }), 403, 'forbidden');
  isError(await wsMember.api.patch(`/api/channels/${ch.id}`, { topic: 'x' }), 403, 'forbidden');
  isError(await creator.api.patch(`/api/channels/${ch.id}`, { slug: 'new-slug' }), 400, 'validation_failed');
  isError(await creator.api.patch(`/api/channels/${ch.id}`, { name: '' }), 400, 'validation_failed');
  isError(await creator.api.patch(`/api/channels/${ch.id}`, { isArchived: 'yes' }), 400, 'validation_failed');
  assert.is((await member.api.get(`/api/channels/${ch.id}`)).body.channel.topic, 'admin was here');
  assert.ok(await s.ctx.c.audit.findOne({ action: 'channel.update', target: ch.id }));
});

test('archive: DELETE archives ({success: true}); history readable, posting, reacting and editing refused; PATCH isArchived false reopens', async () => {
  const ch = await staffed({ name: 'Archivable' });
  const m = await post(member, ch.id, 'before the archive');
  isError(await member.api.del(`/api/channels/${ch.id}`), 403, 'forbidden');
  isError(await moderator.api.del(`/api/channels/${ch.id}`), 403, 'forbidden');
  const d = await creator.api.del(`/api/channels/${ch.id}`);
  assert.is(d.status, 200);
  assert.equal(d.body, { success: true });
  const got = await member.api.get(`/api/channels/${ch.id}`);
  assert.is(got.body.channel.isArchived, true);
  assert.is((await member.api.get(`/api/channels/${ch.id}/messages`)).body.messages[0].content, 'before the archive');
  isError(await member.api.post(`/api/channels/${ch.id}/messages`, { content: 'after' }), 403, 'channel_archived');
  isError(await member.api.post(`/api/channels/${ch.id}/messages/${m.id}/reactions`, { emoji: '👍' }), 403, 'channel_archived');
  isError(await member.api.patch(`/api/channels/${ch.id}/messages/${m.id}`, { content: 'edited' }), 403, 'channel_archived');
  assert.is((await creator.api.del(`/api/channels/${ch.id}`)).status, 200, 'archiving twice is fine');
  assert.ok(await s.ctx.c.audit.findOne({ action: 'channel.archive', target: ch.id }));
  const reopened = await admin.api.patch(`/api/channels/${ch.id}`, { isArchived: false });
  assert.is(reopened.body.channel.isArchived, false);
  await post(member, ch.id, 'after reopening');
  assert.is((await creator.api.patch(`/api/channels/${ch.id}`, { isArchived: true })).body.channel.isArchived, true);
  isError(await member.api.post(`/api/channels/${ch.id}/messages`, { content: 'again' }), 403, 'channel_archived');
});

// --- members (§2.8, §5.8) -----------------------------------------------------------------------------

test('members add: 201 {member}; owner, moderator or global admin; roles owner and moderator only by an owner; 409 when already in', async () => {
  const ch = await staffed({ name: 'Membership' });
  const u1 = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  const u2 = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  const u3 = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  const u4 = await makeUser(s);
  const r = await moderator.api.post(`/api/channels/${ch.id}/members`, { memberDid: u1.user.did, memberType: 'user' });
  assert.is(r.status, 201, r.text);
  assert.equal(Object.keys(r.body), ['member']);
  assert.equal(Object.keys(r.body.member).sort(), ['channelId', 'id', 'invitedBy', 'joinedAt', 'memberDid', 'memberType', 'role']);
  assert.is(r.body.member.role, 'member');
  assert.is(r.body.member.channelId, ch.id);
  assert.is(r.body.member.invitedBy, moderator.user.did);
  isError(await moderator.api.post(`/api/channels/${ch.id}/members`, { memberDid: u2.user.did, memberType: 'user', role: 'moderator' }), 403, 'forbidden');
  isError(await moderator.api.post(`/api/channels/${ch.id}/members`, { memberDid: u2.user.did, memberType: 'user', role: 'owner' }), 403, 'forbidden');
  isError(await member.api.post(`/api/channels/${ch.id}/members`, { memberDid: u2.user.did, memberType: 'user' }), 403, 'forbidden');
  isError(await wsMember.api.post(`/api/channels/${ch.id}/members`, { memberDid: u2.user.did, memberType: 'user' }), 403, 'forbidden');
  assert.is((await creator.api.post(`/api/channels/${ch.id}/members`, { memberDid: u2.user.did, memberType: 'user', role: 'moderator' })).status, 201);
  assert.is((await admin.api.post(`/api/channels/${ch.id}/members`, { memberDid: u3.user.did, memberType: 'user', role: 'owner' })).status, 201);
  assert.is((await creator.api.post(`/api/channels/${ch.id}/members`, { memberDid: u4.user.did, memberType: 'user' })).status, 201, 'someone from outside the workspace may be invited');
  isError(await creator.api.post(`/api/channels/${ch.id}/members`, { memberDid: u1.user.did, memberType: 'user' }), 409, 'already_member');
  assert.is((await u3.api.get(`/api/channels/${ch.id}`)).body.members.find((m: any) => m.memberDid === u3.user.did).role, 'owner');
  assert.ok(await s.ctx.c.audit.findOne({ action: 'channel.member.add', target: ch.id }));
});

test('members add: agents by DID; 400 for an unknown DID, a wrong memberType, a bad role or DID', async () => {
  const ch = await staffed({ name: 'Bots Allowed' });
  const agent = await makeAgent(s, 'helper', undefined, ws.id);
  const r = await creator.api.post(`/api/channels/${ch.id}/members`, { memberDid: agent._id, memberType: 'agent' });
  assert.is(r.status, 201, r.text);
  assert.is(r.body.member.memberType, 'agent');
  isError(await creator.api.post(`/api/channels/${ch.id}/members`, { memberDid: 'did:key:z6MkNobody', memberType: 'user' }), 400, 'unknown_member');
  const agent2 = await makeAgent(s, 'helper2', undefined, ws.id);
  isError(await creator.api.post(`/api/channels/${ch.id}/members`, { memberDid: agent2._id, memberType: 'user' }), 400, 'unknown_member');
  isError(await creator.api.post(`/api/channels/${ch.id}/members`, { memberDid: member.user.did, memberType: 'agent' }), 400, 'unknown_member');
  isError(await creator.api.post(`/api/channels/${ch.id}/members`, { memberDid: agent2._id, memberType: 'robot' }), 400, 'validation_failed');
  isError(await creator.api.post(`/api/channels/${ch.id}/members`, { memberDid: agent2._id, memberType: 'agent', role: 'king' }), 400, 'validation_failed');
  isError(await creator.api.post(`/api/channels/${ch.id}/members`, { memberDid: 'not-a-did', memberType: 'agent' }), 400, 'validation_failed');
  isError(await creator.api.post(`/api/channels/${ch.id}/members`, { memberType: 'agent' }), 400, 'validation_failed');
});

test('members remove: the DID is percent-encoded; owner anyone, moderator members, anyone themselves; 404 when not a member', async () => {
  const ch = await staffed({ name: 'Leaving' });
  const u1 = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  const u2 = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  await addMember(creator, ch.id, u1.user.did!);
  await addMember(creator, ch.id, u2.user.did!);
  const path = (u: TestUser) => `/api/channels/${ch.id}/members/${enc(u.user.did!)}`;
  isError(await member.api.del(path(u1)), 403, 'forbidden');
  isError(await moderator.api.del(path(creator)), 403, 'forbidden');
  const r = await moderator.api.del(path(u1));
  assert.is(r.status, 200, r.text);
  assert.equal(r.body, { success: true });
  assert.is((await u2.api.del(path(u2))).status, 200, 'a member leaves on their own');
  isError(await u2.api.post(`/api/channels/${ch.id}/messages`, { content: 'still here?' }), 403, 'not_a_member');
  isError(await u2.api.get(`/api/channels/${ch.id}/members`), 405);
  isError(await creator.api.del(path(u2)), 404, 'not_found');
  assert.is((await creator.api.del(path(moderator))).status, 200, 'an owner removes a moderator');
  const members = (await creator.api.get(`/api/channels/${ch.id}`)).body.members.map((m: any) => m.memberDid);
  assert.equal(members.sort(), [creator.user.did, member.user.did].sort());
  isError(await member.api.post(`/api/channels/${ch.id}/members`, { memberDid: u1.user.did, memberType: 'user' }), 403, 'forbidden');
  assert.ok(await s.ctx.c.audit.findOne({ action: 'channel.member.remove', target: ch.id }));
});

test('members remove: a member removed from a private channel no longer sees it', async () => {
  const ch = await staffed({ name: 'Private Leaving', isPublic: false });
  assert.is((await member.api.get(`/api/channels/${ch.id}`)).status, 200);
  await creator.api.del(`/api/channels/${ch.id}/members/${enc(member.user.did!)}`);
  isError(await member.api.get(`/api/channels/${ch.id}`), 404, 'not_found');
});

// --- clean-up --------------------------------------------------------------------------------------------

test("deleting a workspace removes its channels; deleting a user removes their memberships", async () => {
  const w = await makeWorkspace(owner, 'Doomed');
  const u = await makeUser(s, { workspaces: { [w.id]: 'member' } });
  const ch = await makeChannel(u, { name: 'Doomed Channel', workspaceId: w.id });
  await post(u, ch.id, 'last words');
  const g = await makeChannel(admin, { name: 'Survivor' });
  await addMember(admin, g.id, u.user.did!);
  assert.is((await owner.api.del(`/api/workspaces/${w.id}`)).status, 200);
  isError(await admin.api.get(`/api/channels/${ch.id}`), 404, 'not_found');
  assert.is(await s.ctx.c.channelMessages.count({ channelId: ch.id }), 0);
  assert.is(await s.ctx.c.channelMembers.count({ channelId: ch.id }), 0);
  assert.is((await owner.api.del(`/api/users/${enc(u.user.did!)}`)).status, 200);
  assert.is(await s.ctx.c.channelMembers.count({ channelId: g.id, memberDid: u.user.did! }), 0);
});

test.run();
