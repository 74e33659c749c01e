import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { generateKeyPair } from '../src/domain/did.js';
import { http, tempDir } from './helpers.js';
import { login } from './identity-helpers.js';
import { runCli, StewardProcess } from './cli-process.js';
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
  assert.ok(out1.includes('▄') || out1.includes('█'), 'a terminal QR code');
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
  const token = await runCli(['wallet', 'login', srv.url], env);
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
