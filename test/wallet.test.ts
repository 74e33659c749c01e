import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { walletQrText, parseClaimTarget } from '../src/domain/claims.js';
import { hashToken } from '../src/services/sessions.js';
import { http, startServer, tempDir, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { addWhoami, startSmtp } from './identity-helpers.js';
import { runCli, type CliResult } from './cli-process.js';

const test = suite('steward wallet');
let s: TestServer;
let smtp: Awaited<ReturnType<typeof startSmtp>>;
let owner: TestUser;
let admin: TestUser;
let dir: string;
const outputs: CliResult[] = [];
const privateKeys: string[] = [];

test.before(async () => {
  smtp = await startSmtp();
  s = await startServer({ SMTP_URL: `smtp://127.0.0.1:${smtp.port}` });
  addWhoami(s);
  owner = await makeUser(s, { isOwner: true, role: 'owner' });
  admin = await makeUser(s, { isAdmin: true });
  dir = await tempDir('steward-wallet-');
});

test.after(async () => {
  await s.stop(true);
  await smtp.close();
  // Whatever a command printed, it never was a private key.
  for (const o of outputs) for (const k of privateKeys) assert.not.ok(o.stdout.includes(k) || o.stderr.includes(k), 'private key printed');
});

async function wallet(file: string, ...args: string[]): Promise<CliResult> {
  const r = await runCli(['wallet', ...args], { STEWARD_WALLET_FILE: file });
  outputs.push(r);
  return r;
}

async function newWallet(name: string): Promise<{ file: string; did: string }> {
  const file = join(dir, `${name}.json`);
  const r = await wallet(file, 'create');
  assert.is(r.code, 0, r.stderr);
  const doc = JSON.parse(await readFile(file, 'utf8'));
  privateKeys.push(doc.privateKey);
  return { file, did: r.stdout.trim() };
}

const listen = async (token: string) => (await http(s.url, 'GET', `/api/user/listen/${token}`)).body.status;

test('create writes a 0600 key file, prints only the did:key, refuses to overwrite', async () => {
  const file = join(dir, 'nested', 'deeper', 'w.json');
  const r = await wallet(file, 'create');
  assert.is(r.code, 0, r.stderr);
  assert.match(r.stdout, /^did:key:z6Mk[1-9A-HJ-NP-Za-km-z]+\n$/);
  const st = await stat(file);
  assert.is(st.mode & 0o777, 0o600);
  const doc = JSON.parse(await readFile(file, 'utf8'));
  privateKeys.push(doc.privateKey);
  assert.is(doc.did, r.stdout.trim());

  const again = await wallet(file, 'create');
  assert.is(again.code, 1);
  assert.match(again.stderr, /already exists; use --force/);
  assert.is(JSON.parse(await readFile(file, 'utf8')).did, doc.did, 'unchanged');

  const did = await wallet(file, 'did');
  assert.equal([did.code, did.stdout], [0, `${doc.did}\n`]);

  const forced = await wallet(file, 'create', '--force');
  assert.is(forced.code, 0);
  assert.is.not(forced.stdout.trim(), doc.did);
  assert.is((await stat(file)).mode & 0o777, 0o600);
  privateKeys.push(JSON.parse(await readFile(file, 'utf8')).privateKey);
});

test('--file wins over STEWARD_WALLET_FILE; a missing or damaged wallet is a clear failure', async () => {
  const other = join(dir, 'other.json');
  const r = await wallet(join(dir, 'unused.json'), 'create', '--file', other);
  assert.is(r.code, 0);
  privateKeys.push(JSON.parse(await readFile(other, 'utf8')).privateKey);
  const did = await wallet(join(dir, 'unused.json'), 'did', `--file=${other}`);
  assert.is(did.stdout, r.stdout);
  const missing = await wallet(join(dir, 'unused.json'), 'did');
  assert.is(missing.code, 1);
  assert.match(missing.stderr, /no wallet at .*unused\.json; create one with 'steward wallet create'/);
  const damaged = join(dir, 'damaged.json');
  await writeFile(damaged, '{"did": "did:key:z6Mkx", "publicKey": "AAAA", "privateKey": "BBBB"}');
  const bad = await wallet(damaged, 'did');
  assert.is(bad.code, 1);
  assert.match(bad.stderr, /damaged/);
  const unknown = await wallet(other, 'fly');
  assert.is(unknown.code, 1);
  assert.match(unknown.stderr, /unknown wallet command 'fly'/);
});

test('invitation -> from-email -> claim -> login, all through the wallet command', async () => {
  const inv = await owner.api.post('/api/users/invite/email', { email: 'quinn@example.test', name: 'Quinn', role: 'operator' });
  assert.is(inv.status, 200);
  // The invitee has only the mail: take the link from it.
  const mail = smtp.mails.find((m) => m.to.includes('quinn@example.test'));
  assert.ok(mail, 'invitation mailed');
  const link = /(http:\/\/\S+\/api\/invitations\/[0-9a-f-]{36})/.exec(mail!.text)?.[1];
  assert.is(link, `${s.ctx.config.publicUrl}/api/invitations/${inv.body.token}`);

  const w = await newWallet('quinn');
  const claimed = await wallet(w.file, 'claim', link!);
  assert.is(claimed.code, 0, claimed.stderr);
  assert.is(claimed.stdout, `claimed ${w.did} on ${s.ctx.config.publicUrl}\n`);
  const user = await s.ctx.c.users.findById(inv.body.userId);
  assert.is(user!.did, w.did);
  const session = await s.ctx.c.claimSessions.findOne({ invitationToken: hashToken(inv.body.token) });
  assert.is(session!.kind, 'invitation');
  assert.is(session!.status, 2);
  assert.is((await http(s.url, 'GET', `/api/invitations/${inv.body.token}`)).status, 404);

  const li = await runCli(['login', s.url, '--print-token'], { STEWARD_WALLET_FILE: w.file, XDG_CONFIG_HOME: await tempDir() });
  assert.is(li.code, 0, li.stderr);
  assert.match(li.stdout, /^[A-Za-z0-9_-]{43}\n$/, 'only the token on stdout');
  const token = li.stdout.trim();
  const who = await http(s.url, 'GET', '/test/whoami', { token });
  assert.equal([who.status, who.body.did], [200, w.did]);
});

test('claim from a wallet QR text checks the server DID', async () => {
  const u = await makeUser(s, { unclaimed: true });
  const sq = await admin.api.post('/api/server/directory/send-qr', { userId: u.user._id, sendByEmail: false });
  const cs = `${s.ctx.config.publicUrl}/api/user/claim/${sq.body.token}`;
  const w = await newWallet('rita');

  const forged = walletQrText(s.ctx.config.walletUrl, cs, 'did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp');
  const refused = await wallet(w.file, 'claim', forged);
  assert.is(refused.code, 1);
  assert.match(refused.stderr, /refusing to claim: the server says its DID is did:key:\S+, but the QR names did:key:z6MkiTBz/);
  assert.is(refused.stdout, '');
  assert.is(await listen(sq.body.token), -1, 'nothing was posted');

  const qr = walletQrText(s.ctx.config.walletUrl, cs, sq.body.serverDid);
  const ok = await wallet(w.file, 'claim', qr);
  assert.is(ok.code, 0, ok.stderr);
  assert.is(await listen(sq.body.token), 2);
  assert.is((await s.ctx.c.users.findById(u.user._id))!.did, w.did);
});

test('claim from the QR image URL and from an open invite link with --name', async () => {
  const u = await makeUser(s, { unclaimed: true });
  const sq = await admin.api.post('/api/server/directory/send-qr', { userId: u.user._id, sendByEmail: false });
  const w = await newWallet('sam');
  const r = await wallet(w.file, 'claim', sq.body.qrUrl);
  assert.is(r.code, 0, r.stderr);
  assert.is((await s.ctx.c.users.findById(u.user._id))!.did, w.did);

  const link = await owner.api.get('/api/users/invite');
  const w2 = await newWallet('tess');
  const r2 = await wallet(w2.file, 'claim', link.body.connectionString, '--name', 'Tess');
  assert.is(r2.code, 0, r2.stderr);
  const created = await s.ctx.c.users.findOne({ did: w2.did });
  assert.is(created!.name, 'Tess');
});

test('failures exit 1 with the reason on stderr and nothing on stdout', async () => {
  const w = await newWallet('uma');
  // One command signs the command line in: `wallet login` names it, in the form it was started with.
  const login = await wallet(w.file, 'login', s.url);
  assert.is(login.code, 1);
  assert.is(login.stdout, '');
  assert.ok(login.stderr.includes(`run 'steward login ${s.url}' (the session is saved for every command), or 'steward login ${s.url} --print-token'`), login.stderr);
  const fromNpm = await runCli(['wallet', 'login', s.url], { STEWARD_WALLET_FILE: w.file, npm_lifecycle_event: 'steward' });
  assert.ok(fromNpm.stderr.includes(`run 'npm run steward -- login ${s.url}'`), fromNpm.stderr);

  const done = await wallet(w.file, 'claim', `${s.ctx.config.publicUrl}/api/user/claim/no-such-token`);
  assert.is(done.code, 1);
  assert.match(done.stderr, /404/);
  assert.not.ok(done.stderr.includes('no-such-token'), 'the token is not echoed');

  const garbage = await wallet(w.file, 'claim', 'hello');
  assert.is(garbage.code, 1);
  assert.match(garbage.stderr, /expected a connection string/);

});

test('a user code with letters outside the alphabet is refused, naming them and the alphabet', async () => {
  const w = await newWallet('ulla');
  const r = await wallet(w.file, 'approve', s.url, 'ABCD-EFGH');
  assert.is(r.code, 1);
  assert.ok(
    r.stderr.includes("'ABCD-EFGH' is not a user code: A, E are not in the alphabet: user codes are 8 letters from BCDFGHJKLMNPQRSTVWXZ (consonants; no vowels and no Y)"),
    r.stderr,
  );
  const short = await wallet(w.file, 'approve', s.url, 'BCD-FGH');
  assert.ok(short.stderr.includes("'BCD-FGH' is not a user code: it has 6 letters: user codes are 8 letters from BCDFGHJKLMNPQRSTVWXZ"), short.stderr);
});

test('parseClaimTarget reads all forms', () => {
  const cs = 'https://steward.example.org/base/api/user/claim/AbC_d-1';
  assert.equal(parseClaimTarget(cs), { kind: 'claim', base: 'https://steward.example.org/base', token: 'AbC_d-1', claimUrl: cs });
  assert.equal(parseClaimTarget(`  ${cs}/qr.svg `), { kind: 'claim', base: 'https://steward.example.org/base', token: 'AbC_d-1', claimUrl: cs });
  const qr = walletQrText('https://wallet.example', cs, 'did:key:z6MkServer');
  assert.equal(parseClaimTarget(qr), {
    kind: 'claim',
    base: 'https://steward.example.org/base',
    token: 'AbC_d-1',
    claimUrl: cs,
    serverDid: 'did:key:z6MkServer',
  });
  assert.equal(parseClaimTarget('http://h:8080/api/invitations/6f0c2a43-39b4-4b55-9f3a-9f5a7b7f0d00'), {
    kind: 'invitation',
    base: 'http://h:8080',
    token: '6f0c2a43-39b4-4b55-9f3a-9f5a7b7f0d00',
  });
  assert.throws(() => parseClaimTarget('https://wallet.example/#https://x/api/user/claim/t&protocol=ftp&service=auth&did=d'), /not a Steward claim/);
  assert.throws(() => parseClaimTarget('https://x.example/other/path'), /not a claim URL/);
  assert.throws(() => parseClaimTarget('ftp://x/api/user/claim/t'), /http\(s\)/);
});

test.run();
