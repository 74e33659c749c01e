import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { generateKeyPair } from '../src/domain/did.js';
import { hashToken } from '../src/services/sessions.js';
import { http, startServer, waitFor, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { auditText, claimWith, login, startSmtp } from './identity-helpers.js';

const test = suite('invitations and mail');
const SMTP_PASS = 's3cret-smtp-pass-Zq9';
let s: TestServer;
let smtp: Awaited<ReturnType<typeof startSmtp>>;
let owner: TestUser;
let admin: TestUser;
const responses: string[] = [];

const DAY = 24 * 3600_000;

test.before(async () => {
  smtp = await startSmtp({ user: 'steward', pass: SMTP_PASS });
  s = await startServer({
    SMTP_URL: `smtp://steward:${SMTP_PASS}@127.0.0.1:${smtp.port}`,
    MAIL_FROM: 'Steward Test <steward@example.test>',
    WALLET_URL: 'https://wallet.example.test',
  });
  owner = await makeUser(s, { name: 'Boss', isOwner: true, role: 'owner' });
  admin = await makeUser(s, { name: 'Admin', isAdmin: true, role: 'admin' });
});

test.after(async () => {
  await s.stop(true);
  await smtp.close();
});

async function invite(email: string, name = 'Invitee', role = 'operator') {
  const r = await owner.api.post('/api/users/invite/email', { email, name, role });
  responses.push(r.text);
  assert.is(r.status, 200, r.text);
  return r.body as { token: string; userId: string };
}

const mailTo = (addr: string) => waitFor(() => smtp.mails.filter((m) => m.to.includes(addr)).at(-1));

test('invite/email creates an unclaimed user and a UUID invitation, and mails it', async () => {
  const r = await invite('gina@example.test', 'Gina', 'operator');
  assert.equal(Object.keys(r).sort(), ['token', 'userId']);
  assert.match(r.token, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  const user = await s.ctx.c.users.findById(r.userId);
  assert.is(user!.did, null);
  assert.is(user!.name, 'Gina');
  assert.is(user!.email, 'gina@example.test');
  assert.is(user!.role, 'operator');
  assert.ok(await s.ctx.c.workspaceMembers.findOne({ userId: r.userId, workspaceId: s.ctx.defaultWorkspace._id }));

  const mail = await mailTo('gina@example.test');
  assert.equal(mail.to, ['gina@example.test']);
  assert.is(mail.from, 'steward@example.test');
  assert.is(mail.user, 'steward', 'authenticated with the SMTP_URL credentials');
  assert.match(mail.raw, /^Subject: Your invitation to Steward/m);
  assert.ok(mail.text.includes(`${s.ctx.config.publicUrl}/api/invitations/${r.token}`), 'invitation link');
  assert.ok(mail.text.includes('steward wallet claim'), 'how to claim');
  // One command signs the command line in, and the mail names it (and the form from a checkout).
  assert.ok(mail.text.split(/\r?\n/).includes(`  steward login ${s.ctx.config.publicUrl}`), mail.text);
  assert.not.ok(mail.text.includes('wallet login'), 'no command that only prints a token');
  assert.ok(mail.text.includes('npm run steward -- wallet create'), 'the form from a checkout');
  assert.ok(mail.text.includes('7 days'));

  const got = await http(s.url, 'GET', `/api/invitations/${r.token}`);
  responses.push(got.text);
  assert.is(got.status, 200);
  assert.equal(got.body, { email: 'gina@example.test', name: 'Gina', role: 'operator' });
});

test('invite/email is for the owner only', async () => {
  const json = { email: 'x@example.test', name: 'X', role: 'member' };
  assert.is((await admin.api.post('/api/users/invite/email', json)).status, 403);
  assert.is((await http(s.url, 'POST', '/api/users/invite/email', { json })).status, 401);
  assert.is((await owner.api.post('/api/users/invite/email', { ...json, role: 'king' })).status, 400);
  assert.is((await owner.api.post('/api/users/invite/email', { ...json, email: 'not-an-email' })).status, 400);
});

test('inviting the same email again replaces the token and reuses the user', async () => {
  const first = await invite('hal@example.test', 'Hal', 'member');
  const fromFirst = await http(s.url, 'POST', '/api/users/invite/from-email', { json: { token: first.token } });
  assert.is(fromFirst.status, 200);
  const second = await invite('HAL@example.test', 'Hal Jordan', 'manager');
  assert.is(second.userId, first.userId);
  assert.is.not(second.token, first.token);
  assert.is((await http(s.url, 'GET', `/api/invitations/${first.token}`)).status, 404, 'old token deleted');
  assert.is((await http(s.url, 'GET', `/api/invitations/${second.token}`)).status, 200);
  assert.is(await s.ctx.c.users.count({ emailLower: 'hal@example.test' }), 1);
  assert.is((await s.ctx.c.users.findById(first.userId))!.role, 'manager');
  assert.is(await s.ctx.c.invitations.count({ emailLower: 'hal@example.test' }), 1);
  const listen = await http(s.url, 'GET', `/api/user/listen/${fromFirst.body.inviteToken}`);
  assert.is(listen.body.status, -2, 'a claim opened through the replaced invitation stops');
});

test('an invitation of a claimed user is refused (409)', async () => {
  const claimed = await makeUser(s, { email: 'ivy@example.test' });
  const r = await owner.api.post('/api/users/invite/email', { email: 'ivy@example.test', name: 'Ivy', role: 'member' });
  assert.is(r.status, 409);
  assert.is(await s.ctx.c.invitations.count({ userId: claimed.user._id }), 0);
});

test('invitations expire at 7 days', async () => {
  const r = await invite('jay@example.test');
  await s.ctx.c.invitations.updateOne({ _id: hashToken(r.token) }, { $set: { createdAt: new Date(Date.now() - 7 * DAY + 60_000).toISOString() } });
  assert.is((await http(s.url, 'GET', `/api/invitations/${r.token}`)).status, 200, 'a minute short of 7 days');
  await s.ctx.c.invitations.updateOne({ _id: hashToken(r.token) }, { $set: { createdAt: new Date(Date.now() - 7 * DAY).toISOString() } });
  assert.is((await http(s.url, 'GET', `/api/invitations/${r.token}`)).status, 404);
  assert.is((await http(s.url, 'POST', '/api/users/invite/from-email', { json: { token: r.token } })).status, 404);
  assert.is((await http(s.url, 'GET', '/api/invitations/6f0c2a43-39b4-4b55-9f3a-9f5a7b7f0d00')).status, 404);
});

test('a claim opened from an invitation ends when the invitation does: one opened a minute before 7 days expires with it', async () => {
  const r = await invite('lee@example.test');
  await s.ctx.c.invitations.updateOne({ _id: hashToken(r.token) }, { $set: { createdAt: new Date(Date.now() - 7 * DAY + 60_000).toISOString() } });
  const opened = await http(s.url, 'POST', '/api/users/invite/from-email', { json: { token: r.token } });
  assert.is(opened.status, 200, opened.text);
  const session = await s.ctx.c.claimSessions.findById(hashToken(opened.body.inviteToken));
  const invitation = await s.ctx.c.invitations.findById(hashToken(r.token));
  const invitationEnds = Date.parse(invitation!.createdAt) + 7 * DAY;
  assert.is(Date.parse(session!.expiresAt), invitationEnds, 'not CLAIM_TTL_MINUTES after its opening, past the 7 days');
  // Once the invitation is 7 days old, the claim can no longer complete.
  await s.ctx.c.claimSessions.updateOne({ _id: session!._id }, { $set: { expiresAt: new Date(Date.now() - 1).toISOString() } });
  const late = await claimWith(s.url, opened.body.inviteToken, generateKeyPair());
  assert.is(late.status, 404);
  assert.is((await http(s.url, 'GET', `/api/user/listen/${opened.body.inviteToken}`)).body.status, -2);
});

test('from-email opens a claim session; the claim deletes the invitation', async () => {
  const inv = await invite('kim@example.test', 'Kim', 'manager');
  const r = await http(s.url, 'POST', '/api/users/invite/from-email', { json: { token: inv.token } });
  responses.push(r.text);
  assert.is(r.status, 200);
  assert.equal(Object.keys(r.body).sort(), ['connectionString', 'inviteToken', 'qrUrl', 'serverDid']);
  assert.is(r.body.connectionString, `${s.ctx.config.publicUrl}/api/user/claim/${r.body.inviteToken}`);
  assert.is(r.body.qrUrl, `${r.body.connectionString}/qr.svg`);
  assert.is(r.body.serverDid, s.ctx.identity.did);
  const session = await s.ctx.c.claimSessions.findById(hashToken(r.body.inviteToken));
  assert.is(session!.kind, 'invitation');
  assert.is(session!.invitationToken, hashToken(inv.token));
  assert.is((await http(s.url, 'GET', `/api/user/listen/${r.body.inviteToken}`)).body.status, -1);

  const keys = generateKeyPair();
  assert.is((await claimWith(s.url, r.body.inviteToken, keys)).status, 200);
  assert.is((await http(s.url, 'GET', `/api/user/listen/${r.body.inviteToken}`)).body.status, 2);
  assert.is((await http(s.url, 'GET', `/api/invitations/${inv.token}`)).status, 404, 'invitation deleted by the claim');
  const li = await login(s.url, keys);
  assert.is(li.status, 200);
  assert.is(li.body.user.id, inv.userId);
  assert.is(li.body.user.role, 'manager');
  // The automatic delete after registration still answers success.
  const del = await http(s.url, 'POST', `/api/invitations/${inv.token}/delete`);
  assert.equal([del.status, del.body], [200, { success: true }]);
  assert.is((await http(s.url, 'POST', '/api/users/invite/from-email', { json: { token: inv.token } })).status, 404);
});

test('delete: removes the invitation, stops its claims, is idempotent', async () => {
  const inv = await invite('lee@example.test');
  const fe = await http(s.url, 'POST', '/api/users/invite/from-email', { json: { token: inv.token } });
  const del = await http(s.url, 'POST', `/api/invitations/${inv.token}/delete`);
  assert.equal([del.status, del.body], [200, { success: true }]);
  assert.is((await http(s.url, 'GET', `/api/invitations/${inv.token}`)).status, 404);
  assert.is((await http(s.url, 'GET', `/api/user/listen/${fe.body.inviteToken}`)).body.status, -2);
  const again = await http(s.url, 'POST', `/api/invitations/${inv.token}/delete`);
  assert.equal([again.status, again.body], [200, { success: true }]);
  const unknown = await http(s.url, 'POST', '/api/invitations/never-issued/delete');
  assert.equal([unknown.status, unknown.body], [200, { success: true }]);
  assert.ok((await s.ctx.c.users.findById(inv.userId)), 'the unclaimed user stays (an admin may delete it)');
});

test('send-qr with sendByEmail mails the connection string, wallet link and QR image', async () => {
  const u = await makeUser(s, { unclaimed: true, name: 'Mo', email: 'mo@example.test' });
  const r = await admin.api.post('/api/server/directory/send-qr', { userId: u.user._id, sendByEmail: true });
  responses.push(r.text);
  assert.is(r.status, 200);
  assert.is(r.body.emailSent, true);
  const mail = await mailTo('mo@example.test');
  const cs = `${s.ctx.config.publicUrl}/api/user/claim/${r.body.token}`;
  assert.match(mail.raw, /^Subject: Claim your Steward account/m);
  assert.ok(mail.text.includes(cs), 'connection string');
  assert.ok(mail.text.includes(`https://wallet.example.test/#${cs}&protocol=p2p&service=auth&did=${s.ctx.identity.did}`), 'wallet link');
  assert.match(mail.raw, /Content-Type: image\/png; name=steward-claim-qr\.png/);
  assert.match(mail.raw, /Content-ID: <claim-qr@steward>/);
  assert.ok(mail.text.includes('cid:claim-qr@steward'), 'inline in the HTML part');

  // No address: nothing sent.
  const noMail = await makeUser(s, { unclaimed: true, email: '' });
  const r2 = await admin.api.post('/api/server/directory/send-qr', { userId: noMail.user._id, sendByEmail: true });
  assert.is(r2.body.emailSent, false);
  const r3 = await admin.api.post('/api/server/directory/send-qr', { userId: u.user._id, sendByEmail: false });
  assert.is(r3.body.emailSent, false);
});

test('an SMTP server that refuses or is absent: emailSent false, the request still succeeds', async () => {
  const broken = await startServer({ SMTP_URL: `smtp://steward:wrong-pass@127.0.0.1:${smtp.port}` });
  try {
    const a = await makeUser(broken, { isAdmin: true });
    const o = await makeUser(broken, { isOwner: true, role: 'owner' });
    const u = await makeUser(broken, { unclaimed: true, email: 'nina@example.test' });
    const r = await a.api.post('/api/server/directory/send-qr', { userId: u.user._id, sendByEmail: true });
    assert.is(r.status, 200);
    assert.is(r.body.emailSent, false);
    const inv = await o.api.post('/api/users/invite/email', { email: 'oz@example.test', name: 'Oz', role: 'member' });
    assert.is(inv.status, 200);
    assert.not.ok(smtp.mails.some((m) => m.to.includes('nina@example.test') || m.to.includes('oz@example.test')));
    const audit = await broken.ctx.c.audit.findOne({ action: 'claim.created', target: u.user._id });
    assert.is(audit!.details.emailSent, false);
  } finally {
    await broken.stop(true);
  }
});

test('invitations are audited; no response or audit entry carries a secret', async () => {
  const text = await auditText(s);
  assert.ok(text.includes('"user.invite"'));
  assert.ok(text.includes('"invitation.delete"'));
  for (const body of [...responses, text]) assert.not.ok(body.includes(SMTP_PASS), 'SMTP password');
  const invs = await s.ctx.c.invitations.find({});
  for (const inv of invs) assert.not.ok(text.includes(inv._id), 'no invitation token in the audit log');
  for (const cs of await s.ctx.c.claimSessions.find({})) assert.not.ok(text.includes(cs._id) || text.includes(cs.nonce));
  const openapi = await http(s.url, 'GET', '/api/openapi.json');
  assert.is(openapi.status, 200);
  for (const path of ['/api/auth/login', '/api/user/claim/{token}', '/api/users/invite/email', '/api/invitations/{token}/delete']) {
    assert.ok(JSON.parse(openapi.text).paths[path], `OpenAPI lists ${path}`);
  }
  assert.not.ok(openapi.text.includes(SMTP_PASS));
});

test.run();
