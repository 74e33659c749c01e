import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readFile } from 'node:fs/promises';
import { didKeyFromPublicKey, generateKeyPair, signMessage } from '../src/domain/did.js';
import { loginMessage } from '../src/domain/claims.js';
import { hashToken } from '../src/services/sessions.js';
import { http, startServer, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { addWhoami, auditText, login } from './identity-helpers.js';

const test = suite('auth: DID login and sessions');
let s: TestServer;
let alice: TestUser;

test.before(async () => {
  s = await startServer();
  addWhoami(s);
  alice = await makeUser(s, { name: 'Alice', email: 'alice@example.test' });
});

test.after(async () => {
  await s.stop(true);
});

const cookieOf = (r: { headers: Record<string, unknown> }): string => {
  const set = r.headers['set-cookie'] as string[] | undefined;
  assert.ok(set && set.length === 1, 'one Set-Cookie header');
  return set![0]!;
};

async function challenge(did: string) {
  const r = await http(s.url, 'POST', '/api/auth/challenge', { json: { did } });
  assert.is(r.status, 200);
  return r.body as { challengeId: string; nonce: string };
}

test('login: challenge, signature, token and user, session cookie', async () => {
  const ch = await challenge(alice.keys.did);
  assert.equal(Object.keys(ch).sort(), ['challengeId', 'nonce']);
  const signature = signMessage(alice.keys, `steward-login:${ch.nonce}`);
  const r = await http(s.url, 'POST', '/api/auth/login', { json: { challengeId: ch.challengeId, did: alice.keys.did, signature } });
  assert.is(r.status, 200);
  assert.type(r.body.token, 'string');
  assert.equal(r.body.user, {
    id: alice.user._id,
    did: alice.keys.did,
    name: 'Alice',
    email: 'alice@example.test',
    isOwner: false,
    isAdmin: false,
    role: 'member',
    registeredAt: alice.user.registeredAt,
  });
  const cookie = cookieOf(r);
  const parts = cookie.split('; ');
  assert.is(parts[0], `steward_session=${r.body.token}`);
  for (const p of ['HttpOnly', 'SameSite=Lax', 'Path=/', `Max-Age=${168 * 3600}`]) assert.ok(parts.includes(p), `cookie has ${p}: ${cookie}`);
  assert.not.ok(parts.includes('Secure'), 'not Secure on an http PUBLIC_URL');

  // The token works as a bearer token and as the cookie.
  const bearer = await http(s.url, 'GET', '/test/whoami', { token: r.body.token });
  assert.is(bearer.status, 200);
  assert.equal(bearer.body, { did: alice.keys.did, via: 'bearer' });
  const viaCookie = await http(s.url, 'GET', '/test/whoami', { headers: { cookie: `steward_session=${r.body.token}` } });
  assert.is(viaCookie.status, 200);
  assert.equal(viaCookie.body, { did: alice.keys.did, via: 'cookie' });
});

test('the worked example of docs/identity.md signs as documented', async () => {
  const doc = await readFile(new URL('../docs/identity.md', import.meta.url), 'utf8');
  const field = (name: string) => new RegExp(`^${name}\\s+(\\S+)$`, 'm').exec(doc)![1]!;
  const seed = Buffer.from(field('private seed \\(hex\\)'), 'hex');
  const keys = { did: field('did'), publicKey: field('public key \\(b64url\\)'), privateKey: seed.toString('base64url') };
  assert.is(keys.did, didKeyFromPublicKey(Buffer.from(keys.publicKey, 'base64url')));
  assert.is(field('signed message'), loginMessage(field('nonce')));
  assert.is(signMessage(keys, field('signed message')), field('signature'));
});

test('only the token hash is stored', async () => {
  const r = await login(s.url, alice.keys);
  const sessions = JSON.stringify(await s.ctx.c.sessions.find({}));
  assert.not.ok(sessions.includes(r.body.token));
});

test('a refused login says what is wrong and what to do', async () => {
  const refused = async (challengeId: string, did: string, signature: string, code: string, message: string) => {
    const r = await http(s.url, 'POST', '/api/auth/login', { json: { challengeId, did, signature } });
    assert.is(r.status, 401, `refused: ${r.text}`);
    assert.not.ok(r.headers['set-cookie'], 'no cookie on a refusal');
    assert.is(r.body.error.code, code, r.text);
    assert.match(r.body.error.message, message);
    return r.text;
  };

  // Wrong signature (signed by another key), or for another purpose.
  let ch = await challenge(alice.keys.did);
  const wrongKnown = await refused(ch.challengeId, alice.keys.did, signMessage(generateKeyPair(), loginMessage(ch.nonce)), 'invalid_signature', 'does not verify');
  ch = await challenge(alice.keys.did);
  await refused(ch.challengeId, alice.keys.did, signMessage(alice.keys, `steward-claim:${ch.nonce}`), 'invalid_signature', 'ask for a new challenge');

  // Unknown DID, correctly signed with its own key: it is told it has no account, and how to get one.
  const stranger = generateKeyPair();
  ch = await challenge(stranger.did);
  await refused(ch.challengeId, stranger.did, signMessage(stranger, loginMessage(ch.nonce)), 'no_account', `no account holds ${stranger.did}`);
  // Without its key, nobody learns whether a DID has an account: a wrong signature answers alike.
  ch = await challenge(stranger.did);
  const wrongUnknown = await refused(ch.challengeId, stranger.did, signMessage(generateKeyPair(), loginMessage(ch.nonce)), 'invalid_signature', 'does not verify');
  assert.is(wrongUnknown, wrongKnown, 'a DID with an account and one without answer a wrong signature identically');
  ch = await challenge('did:web:nobody.example.test');
  assert.is(await refused(ch.challengeId, 'did:web:nobody.example.test', signMessage(stranger, loginMessage(ch.nonce)), 'invalid_signature', 'does not verify'), wrongKnown);

  // Reused challenge: the first use succeeds, the second is refused.
  ch = await challenge(alice.keys.did);
  const sig = signMessage(alice.keys, loginMessage(ch.nonce));
  const first = await http(s.url, 'POST', '/api/auth/login', { json: { challengeId: ch.challengeId, did: alice.keys.did, signature: sig } });
  assert.is(first.status, 200);
  await refused(ch.challengeId, alice.keys.did, sig, 'invalid_challenge', 'unknown, used or expired');

  // A challenge burnt by a wrong attempt cannot be retried with the right signature.
  ch = await challenge(alice.keys.did);
  await refused(ch.challengeId, alice.keys.did, signMessage(generateKeyPair(), loginMessage(ch.nonce)), 'invalid_signature', 'this challenge is used up');
  await refused(ch.challengeId, alice.keys.did, signMessage(alice.keys, loginMessage(ch.nonce)), 'invalid_challenge', 'ask for a new challenge');

  // Expired challenge (moved into the past in the store).
  ch = await challenge(alice.keys.did);
  await s.ctx.c.challenges.updateOne({ _id: ch.challengeId }, { $set: { expiresAt: new Date(Date.now() - 1000).toISOString() } });
  await refused(ch.challengeId, alice.keys.did, signMessage(alice.keys, loginMessage(ch.nonce)), 'invalid_challenge', 'lasts 5 minutes');

  // Unclaimed user: the key they hold is not theirs on the server yet.
  const unclaimed = await makeUser(s, { unclaimed: true });
  ch = await challenge(unclaimed.keys.did);
  await refused(ch.challengeId, unclaimed.keys.did, signMessage(unclaimed.keys, loginMessage(ch.nonce)), 'no_account', 'Claim one first');

  // A challenge issued for another DID, answered by Bob with his own key.
  const bob = await makeUser(s, { name: 'Bob' });
  ch = await challenge(alice.keys.did);
  await refused(ch.challengeId, bob.keys.did, signMessage(bob.keys, loginMessage(ch.nonce)), 'challenge_mismatch', `ask for a challenge for ${bob.keys.did}`);

  // Unknown challenge id.
  await refused('no-such-challenge', alice.keys.did, signMessage(alice.keys, loginMessage('x')), 'invalid_challenge', 'POST /api/auth/challenge');
});

test('a request without a valid session says why: missing, malformed, unknown, expired', async () => {
  const whoami = (headers: Record<string, string>) => http(s.url, 'GET', '/test/whoami', { headers });
  const expect = async (r: Promise<{ status: number; body: any }>, code: string, message: string) => {
    const got = await r;
    assert.is(got.status, 401);
    assert.is(got.body.error.code, code);
    assert.match(got.body.error.message, message);
  };
  await expect(whoami({}), 'unauthorized', 'send `Authorization: Bearer <token>`');
  await expect(whoami({ authorization: 'Token abc' }), 'malformed_token', 'must be `Bearer <token>`');
  await expect(whoami({ authorization: 'Bearer not-a-token' }), 'malformed_token', 'not a session token');
  await expect(whoami({ cookie: 'steward_session=short' }), 'malformed_token', 'not a session token');
  const unknown = 'A'.repeat(43);
  await expect(whoami({ authorization: `Bearer ${unknown}` }), 'invalid_session', 'log in again');
  const { body } = await login(s.url, alice.keys);
  await http(s.url, 'POST', '/api/auth/logout', { json: {}, token: body.token });
  await expect(whoami({ authorization: `Bearer ${body.token}` }), 'invalid_session', 'ended (logout');
  const live = (await login(s.url, alice.keys)).body.token as string;
  const past = new Date(Date.now() - 1000).toISOString();
  await s.ctx.c.sessions.updateOne({ tokenHash: hashToken(live) }, { $set: { expiresAt: past } });
  await expect(whoami({ authorization: `Bearer ${live}` }), 'session_expired', `your session expired at ${past}; log in again`);
  await expect(whoami({ cookie: `steward_session=${live}` }), 'session_expired', 'log in again');
  // A public route does not care about a stale token.
  assert.is((await http(s.url, 'GET', '/healthz', { token: live })).status, 200);
});

test('challenge answers look the same for known and unknown DIDs', async () => {
  const known = await challenge(alice.keys.did);
  const unknown = await challenge(generateKeyPair().did);
  assert.equal(Object.keys(known).sort(), Object.keys(unknown).sort());
  assert.is(known.nonce.length, unknown.nonce.length);
  assert.is(known.challengeId.length, unknown.challengeId.length);
  const bad = await http(s.url, 'POST', '/api/auth/challenge', { json: { did: 'not-a-did' } });
  assert.is(bad.status, 400);
});

test('a challenge serves one login even when two race for it', async () => {
  const ch = await challenge(alice.keys.did);
  const signature = signMessage(alice.keys, loginMessage(ch.nonce));
  const json = { challengeId: ch.challengeId, did: alice.keys.did, signature };
  const results = await Promise.all(Array.from({ length: 6 }, () => http(s.url, 'POST', '/api/auth/login', { json })));
  assert.equal(results.map((r) => r.status).sort(), [200, 401, 401, 401, 401, 401]);
});

test('cookie requests from another origin, or with no Origin at all, are refused; same origin and bearer pass', async () => {
  const { body } = await login(s.url, alice.keys);
  const cookie = `steward_session=${body.token}`;
  const foreign = await http(s.url, 'POST', '/test/touch', { json: {}, headers: { cookie, origin: 'https://evil.example' } });
  assert.is(foreign.status, 403);
  assert.is(foreign.body.error.code, 'cross_origin');
  const same = await http(s.url, 'POST', '/test/touch', { json: {}, headers: { cookie, origin: s.ctx.config.publicUrl } });
  assert.is(same.status, 200);
  // Browsers send Origin with every unsafe request: one without it is refused like a foreign one.
  const unsafe: Array<[string, string]> = [
    ['POST', '/api/channels'],
    ['PUT', '/api/admin/models/any'],
    ['PATCH', `/api/users/${encodeURIComponent(alice.keys.did)}`],
    ['DELETE', '/api/me/sessions/any'],
  ];
  for (const [method, path] of unsafe) {
    const noOrigin = await http(s.url, method, path, { json: { name: 'forged' }, headers: { cookie, 'sec-fetch-site': 'cross-site' } });
    assert.is(noOrigin.status, 403, `${method} ${noOrigin.text}`);
    assert.is(noOrigin.body.error.code, 'cross_origin');
    assert.match(noOrigin.body.error.message, /Origin/);
  }
  assert.not.ok((await s.ctx.c.channels.findOne({ name: 'forged' })), 'nothing was created');
  assert.is((await http(s.url, 'GET', '/test/whoami', { headers: { cookie } })).status, 200, 'a safe method needs no Origin');
  assert.is((await http(s.url, 'POST', '/test/touch', { json: {}, token: body.token })).status, 200, 'a bearer token needs no Origin');
  const bearer = await http(s.url, 'POST', '/test/touch', { json: {}, token: body.token, headers: { origin: 'https://evil.example' } });
  assert.is(bearer.status, 200);
  // A cookie logout from another origin is refused too.
  const logout = await http(s.url, 'POST', '/api/auth/logout', { json: {}, headers: { cookie, origin: 'https://evil.example' } });
  assert.is(logout.status, 403);
  assert.is((await http(s.url, 'GET', '/test/whoami', { token: body.token })).status, 200, 'session still alive');
});

test('a login from a page on another origin is refused', async () => {
  const r = await login(s.url, alice.keys, { origin: 'https://evil.example' });
  assert.is(r.status, 403);
  assert.not.ok(r.headers['set-cookie']);
  const ok = await login(s.url, alice.keys, { origin: s.ctx.config.publicUrl });
  assert.is(ok.status, 200);
});

test('logout ends the session (bearer) and clears the cookie', async () => {
  const { body } = await login(s.url, alice.keys);
  const out = await http(s.url, 'POST', '/api/auth/logout', { json: {}, token: body.token });
  assert.is(out.status, 200);
  assert.equal(out.body, { ok: true });
  const cleared = cookieOf(out).split('; ');
  assert.is(cleared[0], 'steward_session=');
  assert.ok(cleared.includes('Max-Age=0'));
  assert.is((await http(s.url, 'GET', '/test/whoami', { token: body.token })).status, 401);
  assert.is((await http(s.url, 'POST', '/api/auth/logout', { json: {}, token: body.token })).status, 401, 'logout needs a session');
});

test('logout with the cookie (same origin) ends that session only', async () => {
  const one = (await login(s.url, alice.keys)).body.token as string;
  const two = (await login(s.url, alice.keys)).body.token as string;
  const out = await http(s.url, 'POST', '/api/auth/logout', { json: {}, headers: { cookie: `steward_session=${one}`, origin: s.ctx.config.publicUrl } });
  assert.is(out.status, 200);
  assert.is((await http(s.url, 'GET', '/test/whoami', { headers: { cookie: `steward_session=${one}` } })).status, 401);
  assert.is((await http(s.url, 'GET', '/test/whoami', { token: two })).status, 200);
});

test('login and logout are audited without tokens', async () => {
  const { body } = await login(s.url, alice.keys);
  await http(s.url, 'POST', '/api/auth/logout', { json: {}, token: body.token });
  const entries = await s.ctx.c.audit.find({ action: { $in: ['auth.login', 'auth.logout'] }, target: alice.user._id });
  assert.ok(entries.some((e) => e.action === 'auth.login' && e.actor === alice.keys.did));
  assert.ok(entries.some((e) => e.action === 'auth.logout' && e.actor === alice.keys.did));
  assert.not.ok((await auditText(s)).includes(body.token));
});

test('expired sessions and challenges are swept', async () => {
  const { body } = await login(s.url, alice.keys);
  await s.ctx.c.sessions.updateMany({}, { $set: { expiresAt: new Date(Date.now() - 1000).toISOString() } });
  assert.is((await http(s.url, 'GET', '/test/whoami', { token: body.token })).status, 401, 'expired session refused');
  const { LoginService } = await import('../src/services/login.js');
  await new LoginService(s.ctx).sweep();
  assert.is(await s.ctx.c.sessions.count({}), 0);
  assert.is(await s.ctx.c.challenges.count({ expiresAt: { $lte: new Date().toISOString() } }), 0);
});

test('cookies are Secure when PUBLIC_URL is https', async () => {
  const secure = await startServer({ PUBLIC_URL: 'https://steward.example.org' });
  try {
    const carol = await makeUser(secure, { name: 'Carol' });
    const r = await login(secure.url, carol.keys);
    assert.is(r.status, 200);
    assert.ok(cookieOf(r).split('; ').includes('Secure'));
  } finally {
    await secure.stop(true);
  }
});

test.run();
