/**
 * A person's own sessions (docs/identity.md, "Your sessions"): the list — id, times, user agent,
 * address, how it was made, which is the current one, never a token — and ending one server-side;
 * another person's session is not found; logout ends the session and clears the cookie.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { http, startServer, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { isError, makeAgent } from './people-helpers.js';
import { login } from './identity-helpers.js';

const test = suite('my sessions');
let s: TestServer;
let member: TestUser;
let admin: TestUser;
let other: TestUser;

test.before(async () => {
  s = await startServer();
  member = await makeUser(s, { name: 'Mia' });
  admin = await makeUser(s, { name: 'Ada', isAdmin: true, role: 'admin' });
  other = await makeUser(s, { name: 'Otto' });
});

test.after(async () => {
  await s.stop(true);
});

/** Logs `u` in over HTTP with a User-Agent; the new session's token. */
async function loginAs(u: TestUser, userAgent: string): Promise<string> {
  const r = await login(s.url, u.keys, { 'user-agent': userAgent });
  assert.is(r.status, 200, r.text);
  return r.body.token;
}

const list = (token: string) => http(s.url, 'GET', '/api/me/sessions', { token });

test('anonymous: 401; an agent: 403', async () => {
  isError(await http(s.url, 'GET', '/api/me/sessions'), 401, 'unauthorized');
  isError(await http(s.url, 'DELETE', '/api/me/sessions/whatever'), 401, 'unauthorized');
  const agent = await makeAgent(s, 'session-agent');
  const token = (await s.ctx.sessions.create('agent', agent._id)).token;
  isError(await http(s.url, 'GET', '/api/me/sessions', { token }), 403);
  isError(await http(s.url, 'DELETE', '/api/me/sessions/whatever', { token }), 403);
});

test('the list: own sessions only, with how and where each was made, the current one marked, no token', async () => {
  const laptop = await loginAs(member, 'Laptop/1.0');
  const phone = await loginAs(member, 'Phone/2.0');
  await loginAs(other, 'Other/1.0');
  const r = await list(laptop);
  assert.is(r.status, 200, r.text);
  const sessions = r.body.sessions as any[];
  // The two logins and the fixture's session (made before user agents were recorded): all the member's.
  assert.is(sessions.length, 3);
  const ids = new Set((await s.ctx.c.sessions.find({ subject: member.user._id })).map((x) => x._id));
  for (const x of sessions) assert.ok(ids.has(x.id), 'only the member\'s sessions');
  assert.equal(Object.keys(sessions[0]).sort(), ['address', 'createdAt', 'current', 'expiresAt', 'id', 'lastUsedAt', 'method', 'userAgent']);
  const byAgent = new Map(sessions.map((x) => [x.userAgent, x]));
  assert.equal(
    { method: byAgent.get('Laptop/1.0').method, address: byAgent.get('Laptop/1.0').address, current: byAgent.get('Laptop/1.0').current },
    { method: 'login', address: '127.0.0.1', current: true },
  );
  assert.is(byAgent.get('Phone/2.0').current, false);
  const old = byAgent.get(null);
  assert.equal({ method: old.method, address: old.address, current: old.current }, { method: null, address: null, current: false });
  for (const token of [laptop, phone, member.token]) assert.not.ok(r.text.includes(token), 'no token in the list');
  assert.ok(sessions[0].createdAt >= sessions[1].createdAt && sessions[1].createdAt >= sessions[2].createdAt, 'newest first');
  // From the phone, the phone is current.
  const fromPhone = await list(phone);
  assert.is(fromPhone.body.sessions.find((x: any) => x.current).userAgent, 'Phone/2.0');
});

test('ending one of one\'s sessions ends it server-side (audited); another person\'s session id is not found', async () => {
  const keep = await loginAs(member, 'Keep/1.0');
  const drop = await loginAs(member, 'Drop/1.0');
  const dropId = (await list(drop)).body.sessions.find((x: any) => x.current).id;
  const otherToken = await loginAs(other, 'Other/2.0');
  const otherId = (await list(otherToken)).body.sessions.find((x: any) => x.current).id;

  // Another person, an admin, or the member: none may end someone else's session.
  for (const who of [member.token, admin.token]) isError(await http(s.url, 'DELETE', `/api/me/sessions/${otherId}`, { token: who }), 404, 'not_found');
  isError(await http(s.url, 'DELETE', `/api/me/sessions/${dropId}`, { token: otherToken }), 404, 'not_found');
  assert.is((await list(otherToken)).status, 200, 'the other person\'s session still works');
  assert.is((await list(drop)).status, 200, 'so does the member\'s');

  const ended = await http(s.url, 'DELETE', `/api/me/sessions/${dropId}`, { token: keep });
  assert.is(ended.status, 200, ended.text);
  assert.equal(ended.body, { ok: true });
  isError(await list(drop), 401, 'invalid_session');
  assert.not.ok((await list(keep)).body.sessions.some((x: any) => x.id === dropId), 'gone from the list');
  isError(await http(s.url, 'DELETE', `/api/me/sessions/${dropId}`, { token: keep }), 404, 'not_found');
  const audit = await s.ctx.c.audit.find({ action: 'auth.session.ended', target: dropId });
  assert.is(audit.length, 1);
  assert.is(audit[0]!.actor, member.user.did);
});

test('logout ends the session server-side and clears the cookie; the person\'s other sessions stay', async () => {
  const stays = await loginAs(member, 'Stays/1.0');
  const goes = await loginAs(member, 'Goes/1.0');
  const goesId = (await list(goes)).body.sessions.find((x: any) => x.current).id;
  const out = await http(s.url, 'POST', '/api/auth/logout', { json: {}, headers: { cookie: `steward_session=${goes}`, origin: s.ctx.config.publicUrl } });
  assert.is(out.status, 200, out.text);
  const cleared = ([] as string[]).concat(out.headers['set-cookie'] ?? []).find((c) => c.startsWith('steward_session='));
  assert.match(cleared ?? '', /^steward_session=; .*Max-Age=0/);
  assert.match(cleared ?? '', /HttpOnly/);
  assert.is(await s.ctx.c.sessions.count({ _id: goesId }), 0, 'removed from the store');
  isError(await http(s.url, 'GET', '/api/me/sessions', { headers: { cookie: `steward_session=${goes}` } }), 401, 'invalid_session');
  const left = await list(stays);
  assert.is(left.status, 200);
  assert.not.ok(left.body.sessions.some((x: any) => x.id === goesId));
});

test.run();
