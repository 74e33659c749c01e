/**
 * Device approval (docs/identity.md): a browser asks, the real `steward wallet approve` (a child
 * process) approves or refuses it, the browser polls for its session cookie. Every route for every
 * role; codes single use, expired and unknown answered alike, slow_down, the wrong-code limits, the
 * nonce used once, a store fault while the session is made, and no code ever stored or logged.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { signMessage, type Ed25519KeyPair } from '../src/domain/did.js';
import { deviceMessage, normalizeUserCode, USER_CODE_ALPHABET } from '../src/domain/device-codes.js';
import { hashToken } from '../src/services/sessions.js';
import { http, logLines, startServer, tempDir, type HttpResult, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { isError, makeAgent } from './people-helpers.js';
import { runCli, type CliResult } from './cli-process.js';
import { FaultInjector } from './fault-store.js';

const test = suite('device approval');

const BROWSER = 'Mozilla/5.0 (X11; Linux x86_64) TestBrowser/1.0';
const log = logLines();
const faults = new FaultInjector();
let s: TestServer;
let member: TestUser;
let admin: TestUser;
let other: TestUser;
let dir: string;
/** Every code the server handed out: none may be stored or logged. */
const issued: string[] = [];

test.before(async () => {
  s = await startServer({ LOG_LEVEL: 'trace' }, undefined, { logTo: log.sink, wrapStore: faults.wrap });
  member = await makeUser(s, { name: 'Mia Member' });
  admin = await makeUser(s, { name: 'Ada Admin', isAdmin: true, role: 'admin' });
  other = await makeUser(s, { name: 'Otto Other' });
  dir = await tempDir('steward-device-');
});

test.after(async () => {
  await s.stop(true);
});

interface Started {
  deviceCode: string;
  userCode: string;
  verificationUrl: string;
  verificationQr: string;
  expiresIn: number;
  interval: number;
}

/** POST /api/auth/device as a browser would. */
async function startDevice(server = s, opts: { token?: string } = {}): Promise<Started> {
  const r = await http(server.url, 'POST', '/api/auth/device', { json: {}, headers: { 'user-agent': BROWSER }, token: opts.token });
  assert.is(r.status, 200, r.text);
  issued.push(r.body.deviceCode, r.body.userCode);
  return r.body;
}

const poll = (deviceCode: string, server = s, headers: Record<string, string> = {}) =>
  http(server.url, 'POST', '/api/auth/device/token', { json: { deviceCode }, headers: { 'user-agent': BROWSER, ...headers } });

/** Lets the next poll of a request come after its interval, without waiting: the clock seam is the stored poll time. */
async function pollTimePassed(deviceCode: string, server = s): Promise<void> {
  await server.ctx.c.deviceRequests.updateOne({ _id: hashToken(deviceCode) }, { $set: { lastPolledAt: new Date(Date.now() - 3600_000).toISOString() } });
}

/** A wallet file holding `keys` (the user's own key), as `steward wallet create` writes one. */
async function walletOf(u: TestUser, name: string): Promise<string> {
  const file = join(dir, `${name}.json`);
  await writeFile(file, JSON.stringify({ version: 1, ...u.keys, createdAt: new Date().toISOString() }), { mode: 0o600 });
  return file;
}

const walletRuns: CliResult[] = [];
async function wallet(file: string, args: string[], input?: string): Promise<CliResult> {
  const r = await runCli(['wallet', ...args], { STEWARD_WALLET_FILE: file }, undefined, input === undefined ? {} : { input });
  walletRuns.push(r);
  return r;
}

const cookieOf = (r: HttpResult): string => {
  const set = ([] as string[]).concat(r.headers['set-cookie'] ?? []);
  const c = set.find((x) => x.startsWith('steward_session='));
  assert.ok(c, `a session cookie was set: ${JSON.stringify(set)}`);
  return c!;
};

/** The wire answer of a refused poll: 400 with the RFC 8628 code. */
function refused(r: HttpResult, code: string): void {
  isError(r, 400, code);
}

test('a browser gets a device code, a readable user code, the verification URL and its QR code; no session needed', async () => {
  for (const token of [undefined, member.token, admin.token]) {
    const d = await startDevice(s, { token });
    assert.match(d.userCode, new RegExp(`^[${USER_CODE_ALPHABET}]{4}-[${USER_CODE_ALPHABET}]{4}$`));
    assert.match(d.deviceCode, /^[A-Za-z0-9_-]{43}$/);
    assert.is(d.verificationUrl, `${s.ctx.config.publicUrl}/api/auth/device/${d.userCode}/approve`);
    assert.is(d.expiresIn, 600);
    assert.is(d.interval, 5);
    assert.ok(d.verificationQr.startsWith('data:image/svg+xml;base64,'));
    assert.match(Buffer.from(d.verificationQr.slice('data:image/svg+xml;base64,'.length), 'base64').toString(), /^<svg[^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    // Stored under their hashes only.
    const doc = await s.ctx.c.deviceRequests.findById(hashToken(d.deviceCode));
    assert.ok(doc, 'stored under the hash of the device code');
    assert.is(doc!.userCodeHash, hashToken(d.userCode));
    assert.is(doc!.userAgent, BROWSER);
    assert.is(doc!.address, '127.0.0.1');
    const text = JSON.stringify(doc);
    assert.not.ok(text.includes(d.deviceCode) || text.includes(d.userCode), 'no code in clear');
  }
  const codes = new Set(issued.filter((_, i) => i % 2 === 1));
  assert.is(codes.size, 3, 'each request has its own user code');
});

test('the approval endpoints are for people: 401 anonymous, 403 for an agent, 400 for what cannot be a user code', async () => {
  const d = await startDevice();
  const path = `/api/auth/device/${d.userCode}`;
  for (const [method, suffix, json] of [
    ['GET', '/approve', undefined],
    ['POST', '/approve', { signature: 'x' }],
    ['POST', '/deny', {}],
  ] as const) {
    isError(await http(s.url, method, path + suffix, { json }), 401, 'unauthorized');
    const agent = await makeAgent(s, `agent-${method}${suffix.replace('/', '-')}`);
    const agentToken = (await s.ctx.sessions.create('agent', agent._id)).token;
    isError(await http(s.url, method, path + suffix, { json, token: agentToken }), 403);
    isError(await http(s.url, method, `/api/auth/device/WDJB-MJH0${suffix}`, { json, token: member.token }), 400, 'validation_failed');
  }
  // Nothing was decided by any of that.
  refused(await poll(d.deviceCode), 'authorization_pending');
});

test('end to end: the wallet approves (code typed in lower case, without the dash); the browser polls once and is signed in by its cookie', async () => {
  const file = await walletOf(member, 'member');
  const d = await startDevice();
  const sessionsBefore = await s.ctx.c.sessions.count({ subject: member.user._id });
  const typed = d.userCode.toLowerCase().replace('-', '');
  const r = await wallet(file, ['approve', s.url, typed, '--yes']);
  assert.is(r.code, 0, r.stderr);
  // It showed what was approved: the browser, its address, when it asked.
  assert.ok(r.stdout.includes(BROWSER), r.stdout);
  assert.match(r.stdout, /Address: +127\.0\.0\.1/);
  assert.ok(r.stdout.includes(d.userCode), 'the code in its shown form');
  assert.match(r.stdout, /Asked at: +\d{4}-\d\d-\d\dT/);
  assert.match(r.stdout, /Approved/);
  // The session the wallet signed in with to approve was ended afterwards.
  assert.is(await s.ctx.c.sessions.count({ subject: member.user._id }), sessionsBefore, 'the wallet left no session behind');

  const ok = await poll(d.deviceCode);
  assert.is(ok.status, 200, ok.text);
  assert.equal(Object.keys(ok.body), ['user'], 'no token in the body');
  assert.is(ok.body.user.did, member.user.did);
  const cookie = cookieOf(ok);
  assert.match(cookie, /^steward_session=[A-Za-z0-9_-]{43}; /);
  assert.match(cookie, /HttpOnly/);
  assert.match(cookie, /SameSite=Lax/);
  assert.not.match(cookie, /Secure/, 'plain HTTP: not Secure');
  assert.not.ok(ok.text.includes(cookie.split(';')[0]!.split('=')[1]!), 'the token is only in the cookie');

  const jar = cookie.split(';')[0]!;
  const me = await http(s.url, 'GET', '/api/users/me', { headers: { cookie: jar } });
  assert.is(me.status, 200, me.text);
  assert.is(me.body.user.did, member.user.did);
  const mine = await http(s.url, 'GET', '/api/me/sessions', { headers: { cookie: jar } });
  const current = mine.body.sessions.find((x: any) => x.current);
  assert.equal({ method: current.method, userAgent: current.userAgent, address: current.address }, { method: 'device', userAgent: BROWSER, address: '127.0.0.1' });

  // Single use: the same device code again answers like an expired or unknown one.
  const again = await poll(d.deviceCode);
  const unknown = await poll('A'.repeat(43));
  refused(again, 'expired_token');
  assert.equal(again.body, unknown.body, 'a used code and an unknown one answer alike');
  // And the user code cannot be approved again.
  const twice = await wallet(file, ['approve', s.url, d.userCode, '--yes']);
  assert.is(twice.code, 1);
  assert.match(twice.stderr, /404 invalid_user_code/);

  const audit = await s.ctx.c.audit.find({ action: 'auth.device.approved', actor: member.user.did! });
  assert.is(audit.length, 1);
  assert.equal(audit[0]!.details, { userAgent: BROWSER, address: '127.0.0.1', requestedAt: audit[0]!.details.requestedAt });
  const logins = await s.ctx.c.audit.find({ action: 'auth.login', actor: member.user.did! });
  assert.ok(logins.some((a) => (a.details as any).method === 'device'), 'the session is audited as a login by device');
});

test('the wallet given the verification URL alone (what the QR code holds) approves too', async () => {
  const file = await walletOf(admin, 'admin');
  const d = await startDevice();
  const r = await wallet(file, ['approve', d.verificationUrl, '--yes']);
  assert.is(r.code, 0, r.stderr);
  const ok = await poll(d.deviceCode);
  assert.is(ok.status, 200, ok.text);
  assert.is(ok.body.user.did, admin.user.did);
});

test('denied: --deny refuses, the browser gets access_denied, the code cannot be approved afterwards', async () => {
  const file = await walletOf(other, 'other');
  const d = await startDevice();
  refused(await poll(d.deviceCode), 'authorization_pending');
  const r = await wallet(file, ['approve', s.url, d.userCode, '--deny']);
  assert.is(r.code, 0, r.stderr);
  assert.match(r.stdout, /Refused/);
  await pollTimePassed(d.deviceCode);
  refused(await poll(d.deviceCode), 'access_denied');
  const late = await wallet(file, ['approve', s.url, d.userCode, '--yes']);
  assert.is(late.code, 1);
  const audit = await s.ctx.c.audit.find({ action: 'auth.device.denied', actor: other.user.did! });
  assert.is(audit.length, 1);
  assert.is(audit[0]!.targetType, 'user');
});

test('asked on the terminal: y approves, n refuses, no answer sends nothing', async () => {
  const file = await walletOf(member, 'member-ask');
  const yes = await startDevice();
  const y = await wallet(file, ['approve', s.url, yes.userCode], 'y\n');
  assert.is(y.code, 0, y.stderr);
  assert.match(y.stderr, /Approve this sign-in\?/);
  assert.is((await poll(yes.deviceCode)).status, 200);

  const no = await startDevice();
  const n = await wallet(file, ['approve', s.url, no.userCode], 'n\n');
  assert.is(n.code, 0, n.stderr);
  refused(await poll(no.deviceCode), 'access_denied');

  const none = await startDevice();
  const silent = await wallet(file, ['approve', s.url, none.userCode], '');
  assert.is(silent.code, 1);
  assert.match(silent.stderr, /not approved/);
  refused(await poll(none.deviceCode), 'authorization_pending');
});

test('expired: a request past its time is refused to the browser and the wallet alike, as an unknown one', async () => {
  const file = await walletOf(member, 'member-expired');
  const d = await startDevice();
  // The clock seam: the stored expiry is moved to the past.
  await s.ctx.c.deviceRequests.updateOne({ _id: hashToken(d.deviceCode) }, { $set: { expiresAt: new Date(Date.now() - 1000).toISOString() } });
  const r = await poll(d.deviceCode);
  refused(r, 'expired_token');
  assert.equal(r.body, (await poll('B'.repeat(43))).body);
  const late = await wallet(file, ['approve', s.url, d.userCode, '--yes']);
  assert.is(late.code, 1);
  assert.match(late.stderr, /404 invalid_user_code/);
});

test('polling faster than the interval gets slow_down, and the interval grows by 5 s each time', async () => {
  const d = await startDevice();
  refused(await poll(d.deviceCode), 'authorization_pending');
  const first = await poll(d.deviceCode);
  refused(first, 'slow_down');
  assert.match(first.body.error.message, /wait 10 s/);
  const second = await poll(d.deviceCode);
  refused(second, 'slow_down');
  assert.match(second.body.error.message, /wait 15 s/);
  assert.is((await s.ctx.c.deviceRequests.findById(hashToken(d.deviceCode)))!.interval, 15);
  await pollTimePassed(d.deviceCode);
  refused(await poll(d.deviceCode), 'authorization_pending');
});

test('the approval signature: made with the signed-in person\'s key over steward-device:<code>:<nonce>; the nonce serves once, and only its asker', async () => {
  const d = await startDevice();
  const path = `/api/auth/device/${d.userCode}/approve`;
  // Posting without asking for a nonce first.
  isError(await member.api.post(path, { signature: 'AAAA' }), 409, 'no_nonce');
  const info = await member.api.get(path);
  assert.is(info.status, 200, info.text);
  assert.equal(Object.keys(info.body).sort(), ['address', 'expiresAt', 'nonce', 'requestedAt', 'userAgent']);
  assert.is(info.body.userAgent, BROWSER);
  // Another person cannot use the nonce handed to the member.
  isError(await other.api.post(path, { signature: signMessage(other.keys, deviceMessage(d.userCode, info.body.nonce)) }), 409, 'no_nonce');
  // Signed with another key than the member's: refused, and the nonce is used up.
  isError(await member.api.post(path, { signature: signMessage(other.keys, deviceMessage(d.userCode, info.body.nonce)) }), 400, 'invalid_signature');
  const right = signMessage(member.keys, deviceMessage(d.userCode, info.body.nonce));
  isError(await member.api.post(path, { signature: right }), 409, 'no_nonce');
  // A signature for another purpose (a login over the same nonce) is no approval.
  const again = await member.api.get(path);
  isError(await member.api.post(path, { signature: signMessage(member.keys, `steward-login:${again.body.nonce}`) }), 400, 'invalid_signature');
  refused(await poll(d.deviceCode), 'authorization_pending');
  // Right at last.
  const last = await member.api.get(path);
  const ok = await member.api.post(path, { signature: signMessage(member.keys, deviceMessage(d.userCode, last.body.nonce)) });
  assert.is(ok.status, 200, ok.text);
  isError(await member.api.post(path, { signature: signMessage(member.keys, deviceMessage(d.userCode, last.body.nonce)) }), 404, 'invalid_user_code');
  await pollTimePassed(d.deviceCode);
  const signedIn = await poll(d.deviceCode);
  assert.is(signedIn.body.user.did, member.user.did);
});

test('a session that cannot be stored when the browser polls is not lost: the next poll gets it', async () => {
  const d = await startDevice();
  const info = await admin.api.get(`/api/auth/device/${d.userCode}/approve`);
  assert.is((await admin.api.post(`/api/auth/device/${d.userCode}/approve`, { signature: signMessage(admin.keys, deviceMessage(d.userCode, info.body.nonce)) })).status, 200);
  faults.add({ collection: 'sessions', op: 'insertOne', mode: 'fail' });
  const failed = await poll(d.deviceCode);
  assert.is(failed.status, 503, failed.text);
  assert.equal(faults.injected.slice(-1), ['sessions.insertOne fail']);
  await pollTimePassed(d.deviceCode);
  const ok = await poll(d.deviceCode);
  assert.is(ok.status, 200, ok.text);
  assert.is(ok.body.user.did, admin.user.did);
});

test('a cross-origin page cannot collect the session cookie', async () => {
  const d = await startDevice();
  isError(await poll(d.deviceCode, s, { origin: 'https://evil.example' }), 403, 'cross_origin');
});

test('wrong user codes lock out the address and the person who gave them, never the owner (smart lockout)', async () => {
  const trips = logLines();
  const t = await startServer(
    { LOG_LEVEL: 'warn', RATE_LIMIT_USER_CODE_PER_ADDRESS: '3/10m', RATE_LIMIT_USER_CODE_PER_PERSON: '5/10m', RATE_LIMIT_USER_CODE_TOTAL: '8/10m' },
    undefined,
    { logTo: trips.sink },
  );
  try {
    const member = await makeUser(t, { name: 'Guesser' });
    const other = await makeUser(t, { name: 'Other guesser' });
    const owner = await makeUser(t, { name: 'Owner', isOwner: true, isAdmin: true, role: 'owner' });
    const d = await startDevice(t);
    const wrong = d.userCode.startsWith('B') ? 'CCCC-CCCC' : 'BBBB-BBBB';
    const get = (u: TestUser, code: string, localAddress: string) => http(t.url, 'GET', `/api/auth/device/${code}/approve`, { token: u.token, localAddress });
    // The member's wrong codes from one address spend that address's count...
    for (let i = 0; i < 3; i++) isError(await get(member, wrong, '127.0.0.1'), 404, 'invalid_user_code');
    const limited = await get(member, d.userCode, '127.0.0.1');
    isError(limited, 429, 'rate_limited');
    assert.ok(Number(limited.headers['retry-after']) >= 1, 'Retry-After');
    assert.match(limited.body.error.message, /from this address/);
    // ...then, from other addresses, the member's own count: refused from any address, a right code included.
    for (const address of ['127.0.0.2', '127.0.0.3']) isError(await get(member, wrong, address), 404, 'invalid_user_code');
    const spent = await get(member, d.userCode, '127.0.0.4');
    isError(spent, 429, 'rate_limited');
    assert.match(spent.body.error.message, /from you/);
    // Someone else's wrong codes spend the server-wide count (3 + 2 + 3 = 8)...
    for (let i = 0; i < 3; i++) isError(await get(other, wrong, '127.0.0.7'), 404, 'invalid_user_code');
    // ...and still the owner, from an address with no wrong code, gets through with the right code.
    const ownerInfo = await get(owner, d.userCode, '127.0.0.9');
    assert.is(ownerInfo.status, 200, ownerInfo.text);
    // Past the server-wide count, a person or address that gave a wrong code is refused: the owner's one wrong code, then the right one.
    isError(await get(owner, wrong, '127.0.0.9'), 404, 'invalid_user_code');
    const after = await get(owner, d.userCode, '127.0.0.9');
    isError(after, 429, 'rate_limited');
    assert.match(after.body.error.message, /on this server/);
    isError(await http(t.url, 'POST', `/api/auth/device/${d.userCode}/deny`, { json: {}, token: member.token, localAddress: '127.0.0.6' }), 429, 'rate_limited');
    // Each limit's trip is a warning naming the limit and the address, never a code.
    const warned = trips.lines.map((l) => JSON.parse(l)).filter((l) => l.level === 40 || l.level === 'warn');
    const limits = warned.map((l) => `${l.limit} ${l.address}`);
    assert.ok(limits.includes('RATE_LIMIT_USER_CODE_PER_ADDRESS 127.0.0.1'), limits.join('; '));
    assert.ok(limits.some((l) => l.startsWith('RATE_LIMIT_USER_CODE_TOTAL ')), limits.join('; '));
    for (const line of trips.lines) assert.not.ok(line.includes(d.userCode) || line.includes(wrong) || line.includes(member.token), line);
  } finally {
    await t.stop(true);
  }
});

test('one member guessing from ten addresses does not lock the owner out of approving', async () => {
  const t = await startServer({ RATE_LIMIT_USER_CODE_PER_ADDRESS: '20/10m', RATE_LIMIT_USER_CODE_TOTAL: '200/10m' });
  try {
    const member = await makeUser(t, { name: 'Stranger' });
    const owner = await makeUser(t, { name: 'Owner', isOwner: true, isAdmin: true, role: 'owner' });
    const d = await startDevice(t);
    const wrong = d.userCode.startsWith('B') ? 'CCCC-CCCC' : 'BBBB-BBBB';
    let refused = 0;
    for (let i = 0; i < 200; i++) {
      const r = await http(t.url, 'GET', `/api/auth/device/${wrong}/approve`, { token: member.token, localAddress: `127.0.1.${i % 10}` });
      if (r.status === 429) refused++;
    }
    assert.ok(refused > 0, 'the member was stopped');
    const r = await http(t.url, 'GET', `/api/auth/device/${d.userCode}/approve`, { token: owner.token, localAddress: '127.0.2.1' });
    assert.is(r.status, 200, r.text);
  } finally {
    await t.stop(true);
  }
});

test('no code is written in clear to the data files or the log, nor printed by the wallet but its own user code', async () => {
  assert.ok(issued.length >= 20, `codes were issued (${issued.length})`);
  const store = join(s.dataDir, 'store');
  const files = await readdir(store, { recursive: true });
  for (const f of files) {
    const text = await readFile(join(store, f), 'utf8').catch(() => '');
    for (const code of issued) assert.not.ok(text.includes(code) || text.includes(code.replace('-', '')), `${f} holds a code`);
  }
  assert.ok(log.lines.length > 5, `the log was written (${log.lines.length} lines)`);
  for (const line of log.lines) for (const code of issued) assert.not.ok(line.includes(code), `a log line holds a code: ${line}`);
  for (const r of walletRuns) for (const code of issued.filter((c) => c.length > 9)) assert.not.ok(r.stdout.includes(code) || r.stderr.includes(code), 'a device code printed');
  assert.ok(normalizeUserCode('wdjb mjht') === 'WDJB-MJHT' && normalizeUserCode('WDJB-MJHA') === null);
});

test.run();
