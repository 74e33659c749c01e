/**
 * Rate limits on the public and authentication endpoints and on agent hellos: floods answered 429
 * with Retry-After in the error shape, limits per source address and per the DID, token or
 * bridge a request names, X-Forwarded-For believed from trusted proxies only, hellos over the
 * limit closed with 4429, and a fleet's reconnect burst let through at the defaults.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { generateKeyPair, signMessage } from '../src/domain/did.js';
import { CLOSE } from '../src/domain/agent-protocol.js';
import { http, logLines, type HttpResult, type TestServer } from './helpers.js';
import { loginMessage } from '../src/domain/claims.js';
import type { TestUser } from './fixtures.js';
import { isError, makeChannel, makeWorkspace, startWithOwner } from './channels-helpers.js';
import { RawAgent, stopAll } from './fleet-helpers.js';

const test = suite('rate limits');

/** Limits small enough to reach in a test; each group's other limit is out of the way. */
const SMALL = {
  RATE_LIMIT_LOGIN_PER_ADDRESS: '5/1m',
  RATE_LIMIT_LOGIN_PER_DID: '0',
  RATE_LIMIT_CLAIM_PER_ADDRESS: '0',
  RATE_LIMIT_CLAIM_PER_TOKEN: '3/1m',
  RATE_LIMIT_WEBHOOK_PER_ADDRESS: '0',
  RATE_LIMIT_WEBHOOK_PER_BRIDGE: '3/1m',
  RATE_LIMIT_AGENT_PER_ADDRESS: '3/1m',
};

const servers: TestServer[] = [];
async function start(env: Record<string, string>): Promise<{ s: TestServer; owner: TestUser }> {
  const started = await startWithOwner(env);
  servers.push(started.s);
  return started;
}

test.after(async () => {
  await Promise.all(servers.map((s) => s.stop(true)));
});

const challenge = (s: TestServer, did: string, headers: Record<string, string> = {}) =>
  http(s.url, 'POST', '/api/auth/challenge', { json: { did }, headers });

/** A 429 in the error shape with a Retry-After of at most `windowSeconds`. */
function isRateLimited(r: HttpResult, windowSeconds: number): void {
  isError(r, 429, 'rate_limited');
  assert.equal(Object.keys(r.body), ['error']);
  const after = Number(r.headers['retry-after']);
  assert.ok(Number.isInteger(after) && after >= 1 && after <= windowSeconds, `Retry-After ${r.headers['retry-after']}`);
}

test('a flood of login challenges from one address is answered 429 with Retry-After; nothing is stored for it', async () => {
  const { s } = await start(SMALL);
  for (let i = 0; i < 5; i++) assert.is((await challenge(s, generateKeyPair().did)).status, 200);
  const before = await s.ctx.c.challenges.count({});
  for (let i = 0; i < 20; i++) isRateLimited(await challenge(s, generateKeyPair().did), 60);
  assert.match((await challenge(s, generateKeyPair().did)).body.error.message, /from this address/);
  assert.is(await s.ctx.c.challenges.count({}), before, 'refused challenges are not stored');
  // Logins count in the same limit: a wrong signature is refused before it is checked.
  const r = await http(s.url, 'POST', '/api/auth/login', { json: { challengeId: 'x', did: generateKeyPair().did, signature: 'AAAA' } });
  isRateLimited(r, 60);
});

test('X-Forwarded-For is believed only from trusted proxies', async () => {
  const untrusted = (await start(SMALL)).s;
  for (let i = 0; i < 5; i++) assert.is((await challenge(untrusted, generateKeyPair().did, { 'x-forwarded-for': `198.51.100.${i}` })).status, 200);
  // A client cannot escape its limit by naming another address.
  isRateLimited(await challenge(untrusted, generateKeyPair().did, { 'x-forwarded-for': '198.51.100.77' }), 60);

  const proxied = (await start({ ...SMALL, TRUSTED_PROXIES: '10.0.0.0/8, 127.0.0.1' })).s;
  const from = (client: string) => ({ 'x-forwarded-for': `${client}, 10.1.2.3` });
  for (let i = 0; i < 5; i++) assert.is((await challenge(proxied, generateKeyPair().did, from('203.0.113.1'))).status, 200);
  isRateLimited(await challenge(proxied, generateKeyPair().did, from('203.0.113.1')), 60);
  // Another client behind the same proxy has a limit of its own.
  assert.is((await challenge(proxied, generateKeyPair().did, from('203.0.113.2'))).status, 200);
  // An IPv6 client counts by its /64.
  for (let i = 1; i <= 5; i++) assert.is((await challenge(proxied, generateKeyPair().did, from(`2001:db8:1:2::${i}`))).status, 200);
  isRateLimited(await challenge(proxied, generateKeyPair().did, from('2001:db8:1:2:ffff::1')), 60);
  assert.is((await challenge(proxied, generateKeyPair().did, from('2001:db8:1:3::1'))).status, 200);
});

test('failed logins lock out the address that failed; past a DID\'s count only addresses that failed for it: the owner still logs in', async () => {
  const trips = logLines();
  const { s, owner } = await startWithOwner(
    { ...SMALL, LOG_LEVEL: 'warn', RATE_LIMIT_LOGIN_PER_ADDRESS: '0', RATE_LIMIT_LOGIN_PER_DID: '4/1m', RATE_LIMIT_LOGIN_FAILURES_PER_ADDRESS: '6/1m' },
    { logTo: trips.sink },
  );
  servers.push(s);
  const did = owner.keys.did;
  const ask = (localAddress: string, forDid = did) => http(s.url, 'POST', '/api/auth/challenge', { json: { did: forDid }, localAddress });
  const answer = async (localAddress: string, signature: ((nonce: string) => string) | null, forDid = did) => {
    const ch = await ask(localAddress, forDid);
    assert.is(ch.status, 200, ch.text);
    const json = { challengeId: ch.body.challengeId, did: forDid, signature: signature ? signature(ch.body.nonce) : 'A'.repeat(86) };
    return http(s.url, 'POST', '/api/auth/login', { json, localAddress });
  };
  const signed = (nonce: string) => signMessage(owner.keys, loginMessage(nonce));
  // Challenges only asked for never count, however many, from however many addresses.
  for (let i = 0; i < 60; i++) assert.is((await ask(`127.0.3.${i % 3}`)).status, 200);
  assert.is((await answer('127.0.3.1', signed)).status, 200, 'the owner logs in after a flood of challenges');
  // Wrong signatures for the owner's DID spend its count...
  for (let i = 0; i < 4; i++) isError(await answer('127.0.4.1', null), 401, 'invalid_signature');
  // ...so the address that failed is refused for it, a right signature included,
  const refused = await answer('127.0.4.1', signed);
  isRateLimited(refused, 60);
  assert.match(refused.body.error.message, /for this DID/);
  // while the owner, from an address with no failures, logs in.
  assert.is((await answer('127.0.4.9', signed)).status, 200, 'a right answer from a clean address gets through');
  // An address that fails too often is refused whatever DID it names.
  for (let i = 0; i < 6; i++) isError(await answer('127.0.4.5', null, generateKeyPair().did), 401, 'invalid_signature');
  const spent = await answer('127.0.4.5', null, generateKeyPair().did);
  isRateLimited(spent, 60);
  assert.match(spent.body.error.message, /from this address/);
  // Each trip is one warning naming the limit and the address, and no secret.
  const warned = trips.lines.map((l) => JSON.parse(l)).filter((l) => l.level === 40);
  const limits = warned.map((l) => `${l.limit} ${l.address}`);
  assert.ok(limits.includes('RATE_LIMIT_LOGIN_PER_DID 127.0.4.1'), limits.join('; '));
  assert.ok(limits.includes('RATE_LIMIT_LOGIN_FAILURES_PER_ADDRESS 127.0.4.5'), limits.join('; '));
  assert.is(warned.filter((l) => l.limit === 'RATE_LIMIT_LOGIN_PER_DID').length, 1, 'logged once per trip, not per refusal');
  for (const line of trips.lines) assert.not.ok(/"(token|signature|nonce)"/.test(line), line);
});

test('claim and invitation look-ups are limited per token', async () => {
  const { s } = await start(SMALL);
  for (let i = 0; i < 3; i++) isError(await http(s.url, 'GET', '/api/invitations/guess-1'), 404);
  isRateLimited(await http(s.url, 'GET', '/api/invitations/guess-1'), 60);
  // The same token on the other routes that name it.
  isRateLimited(await http(s.url, 'POST', '/api/invitations/guess-1/delete'), 60);
  isRateLimited(await http(s.url, 'POST', '/api/users/invite/from-email', { json: { token: 'guess-1' } }), 60);
  // Each other token has its own count; claims too.
  isError(await http(s.url, 'GET', '/api/invitations/guess-2'), 404);
  for (let i = 0; i < 3; i++) isError(await http(s.url, 'GET', '/api/user/claim/guess-3'), 404);
  const r = await http(s.url, 'GET', '/api/user/listen/guess-3');
  isRateLimited(r, 60);
  assert.match(r.body.error.message, /for this token/);
});

test('claim and invitation look-ups are limited per address', async () => {
  const { s } = await start({ ...SMALL, RATE_LIMIT_CLAIM_PER_ADDRESS: '4/1m', RATE_LIMIT_CLAIM_PER_TOKEN: '0' });
  for (let i = 0; i < 4; i++) isError(await http(s.url, 'GET', `/api/user/claim/t${i}`), 404);
  isRateLimited(await http(s.url, 'GET', '/api/invitations/another'), 60);
});

test('badly signed webhook deliveries are limited per bridge; another bridge is not held up', async () => {
  const { s, owner } = await start(SMALL);
  const ws = await makeWorkspace(owner, 'Hooks');
  const bridgeOf = async (name: string) => {
    const ch = await makeChannel(owner, { name, workspaceId: ws.id });
    const r = await owner.api.post(`/api/channels/${ch.id}/bridges`, {
      externalService: 'webhook',
      externalChannelId: `ext-${name}`,
      externalChannelName: name,
      externalWorkspaceId: 'platform',
      config: { secret: 'whsec-0123456789abcdef0123456789abcdef' },
    });
    assert.is(r.status, 201, r.text);
    return r.body.bridge.id as string;
  };
  const [a, b] = [await bridgeOf('one'), await bridgeOf('two')];
  const deliver = (id: string) =>
    http(s.url, 'POST', `/api/bridges/webhook/${id}/incoming`, {
      raw: JSON.stringify({ message: 'hi' }),
      headers: { 'content-type': 'application/json', 'x-signature': `sha256=${'0'.repeat(64)}` },
    });
  for (let i = 0; i < 3; i++) isError(await deliver(a), 401, 'invalid_signature');
  const r = await deliver(a);
  isRateLimited(r, 60);
  assert.match(r.body.error.message, /for this bridge/);
  isError(await deliver(b), 401, 'invalid_signature');
});

test('webhook deliveries are limited per address', async () => {
  const { s } = await start({ ...SMALL, RATE_LIMIT_WEBHOOK_PER_ADDRESS: '2/1m', RATE_LIMIT_WEBHOOK_PER_BRIDGE: '0' });
  const teams = () => http(s.url, 'POST', '/api/bridges/teams/incoming', { raw: '{}', headers: { 'content-type': 'application/json' } });
  for (let i = 0; i < 2; i++) isError(await teams(), 400);
  isRateLimited(await teams(), 60);
  isRateLimited(await http(s.url, 'POST', '/api/bridges/webhook/any/incoming', { raw: '{}', headers: { 'content-type': 'application/json' } }), 60);
});

test('a burst allowance lets more through once the steady count is spent', async () => {
  const { s } = await start({ ...SMALL, RATE_LIMIT_LOGIN_PER_ADDRESS: '2/1m+3/1h' });
  for (let i = 0; i < 5; i++) assert.is((await challenge(s, generateKeyPair().did)).status, 200, `request ${i + 1}`);
  isRateLimited(await challenge(s, generateKeyPair().did), 60);
});

test('hellos over the per-address limit are closed with 4429 after a rate_limited error; registrations count too', async () => {
  const { s } = await start(SMALL);
  const agents = [new RawAgent(s.url), new RawAgent(s.url)];
  for (const a of agents) {
    await a.open();
    a.hello();
    await a.next('challenge');
  }
  const reg = await http(s.url, 'POST', '/api/agents/register', { json: { name: 'r', version: '1.0.0', capabilities: ['file_access'], publicKey: generateKeyPair().publicKey } });
  assert.is(reg.status, 201, reg.text);
  isRateLimited(await http(s.url, 'POST', '/api/agents/register', { json: { name: 'r', version: '1.0.0', capabilities: ['file_access'], publicKey: generateKeyPair().publicKey } }), 60);

  const refused = new RawAgent(s.url);
  await refused.open();
  refused.hello();
  const error = await refused.next('error');
  assert.is(error.code, 'rate_limited');
  assert.match(error.message, /retry in \d+ s/);
  const closed = await refused.waitClosed();
  assert.is(closed.code, CLOSE.tryLater);
  assert.is(CLOSE.tryLater, 4429);
  assert.is(refused.frames.length, 0, 'no challenge was sent');
  await stopAll(...agents);
});

test('hellos behind a trusted proxy count per forwarded address', async () => {
  const { s } = await start({ ...SMALL, RATE_LIMIT_AGENT_PER_ADDRESS: '1/1m', TRUSTED_PROXIES: '127.0.0.1' });
  /** The type of the first frame answering a hello from `client`, or `close <code>` if the socket closes first. */
  const helloFrom = async (client: string) => {
    const raw = new RawAgent(s.url, generateKeyPair(), { 'x-forwarded-for': client });
    await raw.open();
    raw.hello({ name: 'p', version: '1' });
    const type = await raw.next(() => true).then(
      (f) => f.type as string,
      (err: Error) => (raw.closed ? `close ${raw.closed.code}` : Promise.reject(err)),
    );
    raw.close();
    return type;
  };
  assert.is(await helloFrom('203.0.113.10'), 'challenge');
  assert.is(await helloFrom('203.0.113.10'), 'error');
  assert.is(await helloFrom('203.0.113.11'), 'challenge');
});

test('at the defaults, a fleet behind one address connecting at once is not refused', async () => {
  const { s } = await start({});
  const fleet = Array.from({ length: 300 }, () => new RawAgent(s.url));
  await Promise.all(fleet.map((a) => a.open()));
  for (const a of fleet) a.hello();
  const first = await Promise.all(fleet.map((a) => Promise.race([a.next('challenge'), a.next('error')])));
  assert.equal(
    first.filter((f) => f.type !== 'challenge'),
    [],
    'every agent got its challenge',
  );
  await stopAll(...fleet);
  // A person's logins and a wallet polling a claim every second are far from the limits too.
  const me = generateKeyPair();
  for (let i = 0; i < 10; i++) assert.is((await challenge(s, me.did)).status, 200);
  for (let i = 0; i < 60; i++) isError(await http(s.url, 'GET', '/api/user/listen/some-token'), 404);
});

test('a limit set to 0 is off', async () => {
  const { s } = await start({ ...SMALL, RATE_LIMIT_LOGIN_PER_ADDRESS: '0' });
  for (let i = 0; i < 30; i++) assert.is((await challenge(s, generateKeyPair().did)).status, 200);
});

test.run();
