import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { generateKeyPair, signMessage } from '../src/domain/did.js';
import { claimMessage, walletQrText } from '../src/domain/claims.js';
import { hashToken } from '../src/services/sessions.js';
import { http, startServer, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { auditText, claimWith, login } from './identity-helpers.js';

const test = suite('claims: send-qr, claim, listen, QR, invite link');
const WALLET = 'https://wallet.example.test';
let s: TestServer;
let admin: TestUser;
let owner: TestUser;
const secrets: string[] = [];

test.before(async () => {
  s = await startServer({ CLAIM_TTL_MINUTES: '1', WALLET_URL: WALLET });
  admin = await makeUser(s, { name: 'Admin', isAdmin: true, role: 'admin' });
  owner = await makeUser(s, { name: 'Boss', isOwner: true, role: 'owner' });
});

test.after(async () => {
  await s.stop(true);
});

async function sendQr(userId: string) {
  const r = await admin.api.post('/api/server/directory/send-qr', { userId, sendByEmail: false });
  assert.is(r.status, 200, r.text);
  return r.body as { qrUrl: string; token: string; serverDid: string; emailSent: boolean };
}

const listen = async (token: string) => (await http(s.url, 'GET', `/api/user/listen/${token}`)).body;

test('send-qr opens a session for an unclaimed user', async () => {
  const u = await makeUser(s, { unclaimed: true });
  const r = await sendQr(u.user._id);
  assert.equal(Object.keys(r).sort(), ['emailSent', 'qrUrl', 'serverDid', 'token']);
  assert.is(r.serverDid, s.ctx.identity.did);
  assert.is(r.emailSent, false, 'no SMTP configured');
  assert.is(r.qrUrl, `${s.ctx.config.publicUrl}/api/user/claim/${r.token}/qr.svg`);
  const doc = await s.ctx.c.claimSessions.findById(hashToken(r.token));
  assert.is(doc?.kind, 'send-qr');
  assert.is(doc?.userId, u.user._id);
  const ttl = Date.parse(doc!.expiresAt) - Date.parse(doc!.createdAt);
  assert.is(ttl, 60_000, 'CLAIM_TTL_MINUTES=1');
  assert.is((await listen(r.token)).status, -1);
});

test('send-qr refuses unknown and claimed users (404) and non-admins', async () => {
  assert.is((await admin.api.post('/api/server/directory/send-qr', { userId: 'nobody', sendByEmail: false })).status, 404);
  const claimed = await makeUser(s);
  assert.is((await admin.api.post('/api/server/directory/send-qr', { userId: claimed.user._id, sendByEmail: false })).status, 404);
  const member = await makeUser(s);
  const u = await makeUser(s, { unclaimed: true });
  assert.is((await member.api.post('/api/server/directory/send-qr', { userId: u.user._id, sendByEmail: false })).status, 403);
  assert.is((await http(s.url, 'POST', '/api/server/directory/send-qr', { json: { userId: u.user._id, sendByEmail: false } })).status, 401);
});

test('send-qr for a user with the owner role needs an owner: an admin cannot open a claim and take the account', async () => {
  const futureOwner = await makeUser(s, { unclaimed: true, role: 'owner' });
  const roleAdmin = await makeUser(s, { role: 'admin' });
  for (const caller of [admin, roleAdmin]) {
    const r = await caller.api.post('/api/server/directory/send-qr', { userId: futureOwner.user._id, sendByEmail: false });
    assert.is(r.status, 403, r.text);
    assert.is((r.body as { error: { code: string } }).error.code, 'owner_only');
  }
  assert.is(await s.ctx.c.claimSessions.count({ userId: futureOwner.user._id }), 0, 'no claim session was opened');
  // An admin still opens claims for the roles up to their own.
  const futureAdmin = await makeUser(s, { unclaimed: true, role: 'admin' });
  assert.is((await roleAdmin.api.post('/api/server/directory/send-qr', { userId: futureAdmin.user._id, sendByEmail: false })).status, 200);
  const r = await owner.api.post('/api/server/directory/send-qr', { userId: futureOwner.user._id, sendByEmail: false });
  assert.is(r.status, 200, r.text);
  assert.is(await s.ctx.c.claimSessions.count({ userId: futureOwner.user._id }), 1);
});

test('a claim: GET the nonce, a wrong signature stays pending, the right one completes', async () => {
  const u = await makeUser(s, { unclaimed: true, name: 'Dana', email: 'dana@example.test' });
  const { token } = await sendQr(u.user._id);
  const info = await http(s.url, 'GET', `/api/user/claim/${token}`);
  assert.is(info.status, 200);
  assert.equal(Object.keys(info.body).sort(), ['expiresAt', 'nonce', 'serverDid']);
  assert.is(info.body.serverDid, s.ctx.identity.did);

  const keys = generateKeyPair();
  const wrong = await http(s.url, 'POST', `/api/user/claim/${token}`, {
    json: { did: keys.did, signature: signMessage(generateKeyPair(), claimMessage(token, info.body.nonce)) },
  });
  assert.is(wrong.status, 401);
  const otherPurpose = await http(s.url, 'POST', `/api/user/claim/${token}`, {
    json: { did: keys.did, signature: signMessage(keys, `steward-login:${info.body.nonce}`) },
  });
  assert.is(otherPurpose.status, 401);
  assert.is((await listen(token)).status, -1, 'still pending');
  assert.is((await http(s.url, 'GET', `/api/user/claim/${token}`)).status, 200);

  const ok = await http(s.url, 'POST', `/api/user/claim/${token}`, {
    json: { did: keys.did, signature: signMessage(keys, `steward-claim:${token}:${info.body.nonce}`) },
  });
  assert.is(ok.status, 200);
  assert.equal(ok.body, { ok: true, did: keys.did });
  const l = await listen(token);
  assert.is(l.status, 2);
  assert.is(l.did, keys.did);

  const user = await s.ctx.c.users.findById(u.user._id);
  assert.is(user!.did, keys.did);
  assert.is(user!.publicKey, keys.publicKey);
  assert.type(user!.claimedAt, 'string');
  assert.equal(await s.ctx.c.userDids.findById(keys.did), { _id: keys.did, userId: u.user._id, createdAt: user!.claimedAt });

  // The session is finished: no second claim, no QR; the user can log in, and the used link says so.
  const used = await http(s.url, 'GET', `/api/user/claim/${token}`);
  assert.is(used.status, 404);
  assert.equal(used.body.error, {
    code: 'not_found',
    message: `this claim link was already used: the account is claimed. Sign in with the key that claimed it instead (the dashboard's sign-in page, or 'steward login ${s.ctx.config.publicUrl}')`,
  });
  assert.match((await http(s.url, 'GET', '/api/user/claim/no-such-token')).body.error.message, /^no claim session for this token/);
  assert.is((await claimWith(s.url, token, generateKeyPair())).status, 404);
  assert.is((await http(s.url, 'GET', `/api/user/claim/${token}/qr.svg`)).status, 404);
  const li = await login(s.url, keys);
  assert.is(li.status, 200);
  assert.is(li.body.user.id, u.user._id);
});

test('a claim completes one user only; other pending sessions of that user fail', async () => {
  const u = await makeUser(s, { unclaimed: true });
  const a = await sendQr(u.user._id);
  const b = await sendQr(u.user._id);
  assert.is((await claimWith(s.url, a.token, generateKeyPair())).status, 200);
  assert.is((await listen(b.token)).status, -2);
  assert.is((await claimWith(s.url, b.token, generateKeyPair())).status, 404);
});

test('listen: -1 then -2 when the session expires', async () => {
  const u = await makeUser(s, { unclaimed: true });
  const { token } = await sendQr(u.user._id);
  assert.is((await listen(token)).status, -1);
  await s.ctx.c.claimSessions.updateOne({ _id: hashToken(token) }, { $set: { expiresAt: new Date(Date.now() - 1).toISOString() } });
  const l = await listen(token);
  assert.is(l.status, -2);
  assert.is(l.did, undefined);
  assert.is((await http(s.url, 'GET', `/api/user/claim/${token}`)).status, 404);
  assert.is((await http(s.url, 'GET', `/api/user/claim/${token}/qr.svg`)).status, 404);
  const keys = generateKeyPair();
  const late = await http(s.url, 'POST', `/api/user/claim/${token}`, { json: { did: keys.did, signature: 'x'.repeat(86) } });
  assert.is(late.status, 404);
  assert.is((await s.ctx.c.users.findById(u.user._id))!.did, null);
});

test('listen: unknown token is 404', async () => {
  assert.is((await http(s.url, 'GET', '/api/user/listen/no-such-token')).status, 404);
  assert.is((await http(s.url, 'GET', '/api/user/claim/no-such-token')).status, 404);
});

test('a DID held by another user: 409 and the session fails (-2)', async () => {
  const holder = await makeUser(s);
  const u = await makeUser(s, { unclaimed: true });
  const { token } = await sendQr(u.user._id);
  const r = await claimWith(s.url, token, holder.keys);
  assert.is(r.status, 409);
  assert.is((await listen(token)).status, -2);
  assert.is((await s.ctx.c.users.findById(u.user._id))!.did, null);
  assert.is((await s.ctx.c.userDids.findById(holder.keys.did))!.userId, holder.user._id);
  const doc = await s.ctx.c.claimSessions.findById(hashToken(token));
  assert.is(doc!.failure, 'did_taken');
});

test('a DID that is not did:key needs its public key', async () => {
  const u = await makeUser(s, { unclaimed: true });
  const { token } = await sendQr(u.user._id);
  const keys = generateKeyPair();
  const did = 'did:web:people.example.test:erin';
  const info = await http(s.url, 'GET', `/api/user/claim/${token}`);
  const signature = signMessage(keys, claimMessage(token, info.body.nonce));
  const missing = await http(s.url, 'POST', `/api/user/claim/${token}`, { json: { did, signature } });
  assert.is(missing.status, 400);
  assert.is((await listen(token)).status, -1);
  const mismatch = await http(s.url, 'POST', `/api/user/claim/${token}`, {
    json: { did: keys.did, publicKey: generateKeyPair().publicKey, signature },
  });
  assert.is(mismatch.status, 400, 'a did:key with another publicKey');
  const ok = await http(s.url, 'POST', `/api/user/claim/${token}`, { json: { did, publicKey: keys.publicKey, signature } });
  assert.is(ok.status, 200);
  assert.is((await s.ctx.c.users.findById(u.user._id))!.publicKey, keys.publicKey);
  // Login verifies with the stored key.
  const ch = await http(s.url, 'POST', '/api/auth/challenge', { json: { did } });
  const li = await http(s.url, 'POST', '/api/auth/login', {
    json: { challengeId: ch.body.challengeId, did, signature: signMessage(keys, `steward-login:${ch.body.nonce}`) },
  });
  assert.is(li.status, 200);
});

test('the QR encodes exactly {walletUrl}/#<connectionString>&protocol=p2p&service=auth&did=<serverDid>', async () => {
  const u = await makeUser(s, { unclaimed: true });
  const { token, qrUrl, serverDid } = await sendQr(u.user._id);
  const cs = `${s.ctx.config.publicUrl}/api/user/claim/${token}`;
  assert.is(walletQrText(WALLET, cs, serverDid), `${WALLET}/#${cs}&protocol=p2p&service=auth&did=${serverDid}`);
  assert.is(s.ctx.claims.qrText(token), `https://wallet.example.test/#${cs}&protocol=p2p&service=auth&did=${s.ctx.identity.did}`);
  const svg = await http(s.url, 'GET', new URL(qrUrl).pathname);
  assert.is(svg.status, 200);
  assert.match(String(svg.headers['content-type']), /^image\/svg\+xml/);
  assert.match(svg.text, /^<svg[^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  assert.match(svg.text, /<\/svg>\s*$/);
  assert.is((await http(s.url, 'GET', '/api/user/claim/nope/qr.svg')).status, 404);
});

test('GET /api/users/invite: an open link whose claim creates a new member', async () => {
  assert.is((await admin.api.get('/api/users/invite')).status, 403, 'owner only');
  const r = await owner.api.get('/api/users/invite');
  assert.is(r.status, 200);
  assert.equal(Object.keys(r.body).sort(), ['connectionString', 'key', 'serverDid', 'token']);
  assert.is(r.body.connectionString, `${s.ctx.config.publicUrl}/api/user/claim/${r.body.token}`);
  assert.is(r.body.serverDid, s.ctx.identity.did);
  const info = await http(s.url, 'GET', `/api/user/claim/${r.body.token}`);
  assert.is(r.body.key, info.body.nonce, 'key is the nonce to sign');
  assert.is((await listen(r.body.token)).status, -1);

  const keys = generateKeyPair();
  const before = await s.ctx.c.users.count({});
  const ok = await claimWith(s.url, r.body.token, keys, { name: 'Frank' });
  assert.is(ok.status, 200);
  assert.is(await s.ctx.c.users.count({}), before + 1);
  const user = await s.ctx.c.users.findOne({ did: keys.did });
  assert.is(user!.name, 'Frank');
  assert.is(user!.role, 'member');
  assert.is(user!.isAdmin, false);
  const member = await s.ctx.c.workspaceMembers.findOne({ userId: user!._id });
  assert.is(member!.workspaceId, s.ctx.defaultWorkspace._id);
  assert.is(member!.role, 'member');
  assert.is((await listen(r.body.token)).status, 2);
  assert.is((await login(s.url, keys)).status, 200);

  // Without a name: 'New user'. A DID already held: 409, no user created.
  const r2 = await owner.api.get('/api/users/invite');
  const k2 = generateKeyPair();
  assert.is((await claimWith(s.url, r2.body.token, k2)).status, 200);
  assert.is((await s.ctx.c.users.findOne({ did: k2.did }))!.name, 'New user');
  const r3 = await owner.api.get('/api/users/invite');
  const count = await s.ctx.c.users.count({});
  assert.is((await claimWith(s.url, r3.body.token, keys)).status, 409);
  assert.is(await s.ctx.c.users.count({}), count);
  assert.is((await listen(r3.body.token)).status, -2);
  secrets.push(r.body.key, r2.body.key);
});

test('claims are audited without tokens or nonces', async () => {
  const text = await auditText(s);
  for (const action of ['claim.created', 'claim.completed', 'claim.failed']) assert.ok(text.includes(`"${action}"`), action);
  const sessions = await s.ctx.c.claimSessions.find({});
  for (const cs of sessions) {
    assert.not.ok(text.includes(cs._id), 'no claim token in the audit log');
    assert.not.ok(text.includes(cs.nonce), 'no nonce in the audit log');
  }
  for (const x of secrets) assert.not.ok(text.includes(x));
});

test('no answer carries a secret: nonces only from GET claim (and as `key`), never keys', async () => {
  const u = await makeUser(s, { unclaimed: true });
  const texts: string[] = [];
  const sq = await admin.api.post('/api/server/directory/send-qr', { userId: u.user._id, sendByEmail: false });
  texts.push(sq.text);
  const session = (await s.ctx.c.claimSessions.findById(hashToken(sq.body.token)))!;
  const keys = generateKeyPair();
  texts.push((await http(s.url, 'GET', `/api/user/listen/${sq.body.token}`)).text);
  texts.push((await http(s.url, 'GET', `/api/user/claim/${sq.body.token}/qr.svg`)).text);
  texts.push((await claimWith(s.url, sq.body.token, keys)).text);
  texts.push((await http(s.url, 'GET', `/api/user/listen/${sq.body.token}`)).text);
  const li = await login(s.url, keys);
  texts.push(JSON.stringify(li.body.user));
  texts.push((await http(s.url, 'POST', '/api/auth/challenge', { json: { did: keys.did } })).text);
  texts.push((await http(s.url, 'GET', '/api/openapi.json')).text);

  const secretKey = (await readFile(join(s.dataDir, 'secret.key'), 'utf8')).trim();
  const serverPrivate = (s.ctx.identity as unknown as { keys: { privateKey: string } }).keys.privateKey;
  assert.ok(secretKey.length >= 32 && serverPrivate.length === 43);
  for (const t of texts) {
    assert.not.ok(t.includes(session.nonce), 'the claim nonce is only in GET /api/user/claim/{token}');
    assert.not.ok(t.includes(secretKey), 'STEWARD_SECRET_KEY');
    assert.not.ok(t.includes(serverPrivate), 'server private key');
    assert.not.ok(t.includes(keys.privateKey), 'the wallet private key');
    assert.not.ok(t.includes(li.body.token), 'the session token only in the login answer');
  }
  const stored = JSON.stringify(await s.ctx.c.users.findById(u.user._id));
  assert.not.ok(stored.includes(keys.privateKey));
});

test('the owner bootstrap: STEWARD_OWNER_DID makes a claimed owner who can log in', async () => {
  const keys = generateKeyPair();
  const t = await startServer({ STEWARD_OWNER_DID: keys.did });
  try {
    const o = await t.ctx.c.users.findOne({ isOwner: true });
    assert.is(o!.did, keys.did);
    assert.type(o!.claimedAt, 'string');
    const r = await login(t.url, keys);
    assert.is(r.status, 200);
    assert.is(r.body.user.isOwner, true);
    assert.is(r.body.user.role, 'owner');
    const { announceOwnerClaim } = await import('../src/services/claims.js');
    let printed = '';
    assert.is(await announceOwnerClaim(t.ctx, (x) => (printed += x)), null, 'nothing to claim');
    assert.is(printed, '');
  } finally {
    await t.stop(true);
  }
});

test.run();
