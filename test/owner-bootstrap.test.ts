import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { generateKeyPair } from '../src/domain/did.js';
import { http, tempDir } from './helpers.js';
import { login } from './identity-helpers.js';
import { cliPath, inShell, runCli, ShellProcess, StewardProcess } from './cli-process.js';
import { openEmbeddedStore } from '../src/store/embedded/index.js';
import { collections, ensureIndexes } from '../src/store/collections.js';
import { ensureDefaultWorkspace, ensureOwner } from '../src/services/bootstrap.js';

const test = suite('owner bootstrap on the console');

/** `steward serve` on a data directory; resolves once the 'listening' line is out (the claim is printed before it). */
const serve = (dataDir: string, env: Record<string, string> = {}) => StewardProcess.serve({ DATA_DIR: dataDir, ...env });

const connectionStringIn = (out: string) => /Connection string \(claim URL\): (http:\/\/\S+\/api\/user\/claim\/([A-Za-z0-9_-]+))/.exec(out);

test('without STEWARD_OWNER_DID: the console shows a claim; a restart shows a fresh one; the wallet claims it', async () => {
  const dataDir = await tempDir();
  let srv = await serve(dataDir);
  const first = connectionStringIn(srv.all);
  assert.ok(first, `connection string printed:\n${srv.all}`);
  const out1 = srv.all;
  assert.ok(out1.includes(`#${first![1]}&protocol=p2p&service=auth&did=did:key:z6Mk`), 'the wallet link');
  assert.ok(out1.includes(`wallet claim '${first![1]}'`), 'the wallet command');
  assert.not.ok(out1.includes('▄') || out1.includes('█') || out1.includes('\x1b['), 'no QR code (nor its escapes) when standard error is not a terminal');
  assert.ok(out1.includes(`steward login ${srv.url.replace('127.0.0.1', 'localhost')}`), 'one command signs the CLI in');
  assert.equal((await http(srv.url, 'GET', `/api/user/listen/${first![2]}`)).body.status, -1);
  assert.is(await srv.stop(), 0);

  srv = await serve(dataDir);
  const second = connectionStringIn(srv.all);
  assert.ok(second, 'printed again after a restart');
  assert.is.not(second![2], first![2]);
  assert.is((await http(srv.url, 'GET', `/api/user/listen/${first![2]}`)).body.status, -2, 'the earlier claim stops');
  assert.is((await http(srv.url, 'GET', `/api/user/claim/${first![2]}`)).status, 404);

  const walletFile = join(dataDir, 'owner-wallet.json');
  const env = { STEWARD_WALLET_FILE: walletFile };
  const created = await runCli(['wallet', 'create'], env);
  assert.is(created.code, 0, created.stderr);
  // The printed connection string names PUBLIC_URL (localhost); the wallet uses it as printed.
  const claimed = await runCli(['wallet', 'claim', second![1]!], env);
  assert.is(claimed.code, 0, claimed.stderr);
  const token = await runCli(['login', srv.url, '--print-token'], env);
  assert.is(token.code, 0, token.stderr);
  const logout = await http(srv.url, 'POST', '/api/auth/logout', { json: {}, token: token.stdout.trim() });
  assert.is(logout.status, 200);

  const keys = JSON.parse(await readFile(walletFile, 'utf8'));
  const li = await login(srv.url, keys);
  assert.is(li.status, 200);
  assert.is(li.body.user.isOwner, true);
  assert.is(li.body.user.isAdmin, true);
  assert.is(li.body.user.role, 'owner');
  assert.is(await srv.stop(), 0);

  // Claimed: nothing more is printed.
  srv = await serve(dataDir);
  assert.not.ok(connectionStringIn(srv.all));
  assert.not.ok(srv.all.includes('no claimed owner'));
  assert.is(await srv.stop(), 0);
});

test('on a terminal the console prints the claim QR code as well (script(1) gives the server a pseudo-terminal)', async () => {
  const env = { PATH: process.env.PATH!, HOME: await tempDir(), PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', DATA_DIR: await tempDir() };
  const srv = new ShellProcess(`script -qec '${process.execPath} --import tsx ${cliPath} serve' /dev/null`, env);
  try {
    await srv.seen(/Steward listening/);
    assert.ok(connectionStringIn(srv.all), 'the link, always');
    assert.ok(srv.all.includes('▄') || srv.all.includes('█'), `a terminal QR code:\n${srv.all}`);
  } finally {
    await srv.stop();
  }
});

test('started by npm start in a checkout, the console prints npm run steward -- …, and each printed command runs as printed there', async () => {
  const dataDir = await tempDir();
  const home = await tempDir();
  const srv = await serve(dataDir, { npm_lifecycle_event: 'start' });
  try {
    const printed = srv.err.split('\n').map((l) => l.trim()).filter((l) => l.startsWith('npm run steward -- '));
    assert.equal(printed.map((l) => l.split(' ').slice(4, 5)[0]), ['wallet', 'wallet', 'login'], srv.err);
    // A person's shell in the checkout: the commands go to bash exactly as printed.
    const env = { HOME: home, XDG_CONFIG_HOME: join(home, '.config'), PATH: process.env.PATH! };
    for (const line of printed) {
      const r = await inShell(line, env);
      assert.is(r.code, 0, `${line}\n${r.stdout}${r.stderr}`);
    }
    const who = await inShell('npm run --silent steward -- whoami', env);
    assert.match(who.stdout, /Global admin\s+yes/);
    // The JSON log names the same form, before the claim and after it.
    const logged = srv.out.split('\n').filter(Boolean).map((l) => JSON.parse(l).msg as string);
    assert.ok(logged.includes("the owner account is not claimed yet: the claim link is on standard error (npm run steward -- wallet claim <link>, or the dashboard's sign-in page)"), srv.out);
    const claimed = logged.find((m) => m.startsWith('the owner account was claimed by'));
    assert.match(claimed ?? '', new RegExp(`: sign in with that key \\(npm run steward -- login ${srv.url.replace('127.0.0.1', 'localhost')}, or the dashboard\\)$`), srv.out);
  } finally {
    assert.is(await srv.stop(), 0);
  }
});

test('with STEWARD_OWNER_DID: the owner is claimed, no claim is printed, the owner logs in', async () => {
  const dataDir = await tempDir();
  const keys = generateKeyPair();
  const srv = await serve(dataDir, { STEWARD_OWNER_DID: keys.did });
  try {
    assert.not.ok(connectionStringIn(srv.all));
    const li = await login(srv.url, keys);
    assert.is(li.status, 200);
    assert.is(li.body.user.did, keys.did);
    assert.is(li.body.user.isOwner, true);
  } finally {
    assert.is(await srv.stop(), 0);
  }
});

test.run();

const race = suite('owner bootstrap: nodes starting together');

race('with STEWARD_OWNER_DID, nodes creating the owner at once on an empty store: one owner, no failed start', async () => {
  const dir = await tempDir();
  const store = await openEmbeddedStore({ dataDir: dir });
  try {
    const c = collections(store);
    await ensureIndexes(c, store.kind);
    const ws = await ensureDefaultWorkspace(c);
    const { did } = generateKeyPair();
    const results = await Promise.all([ensureOwner(c, ws, did), ensureOwner(c, ws, did), ensureOwner(c, ws, did)]);
    assert.is(results.filter((r) => r !== null).length, 1, 'one node created it');
    assert.is(await c.users.count({ isOwner: true }), 1);
    assert.is((await c.userDids.findById(did))?.userId, results.find((r) => r !== null)!._id);
  } finally {
    await store.close();
  }
});

race.run();
