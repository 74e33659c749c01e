/**
 * Every command the CLI and the demo agent print for a person to run, run as printed: started in
 * a checkout (`npm run steward -- …`, where `steward` is not on the PATH), each hint names that
 * form and bash runs it from the repository as it stands; started as `steward`, the hints say so.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { join } from 'node:path';
import { tempDir, type TestServer } from './helpers.js';
import type { TestUser } from './fixtures.js';
import { startWithOwner } from './people-helpers.js';
import { cliHome, type CliHome } from './cli-helpers.js';
import { inShell, ShellProcess } from './cli-process.js';

const test = suite('printed commands run as printed');
let s: TestServer;
let owner: TestUser;
let home: CliHome;
let env: Record<string, string>;

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  home = await cliHome(owner.keys);
  // A person's shell: their home, their PATH, nothing of the test run's npm.
  env = { HOME: home.home, XDG_CONFIG_HOME: home.xdg!, PATH: process.env.PATH! };
});

test.after(async () => {
  await s.stop(true);
});

/** The command a hint quotes: `… run 'npm run steward -- login <server URL>' first` → the quoted part. */
const quoted = (text: string, after: RegExp) => new RegExp(`${after.source}'([^']+)'`).exec(text)?.[1];

test('in a checkout: not logged in, login, an unknown agent: each hint names npm run steward -- and runs as printed', async () => {
  const before = await inShell('npm run --silent steward -- whoami', env);
  assert.is(before.code, 3, before.stderr);
  assert.ok(before.stderr.includes("not logged in: run 'npm run steward -- login <server URL>' first"), before.stderr);
  const login = await inShell(`npm run steward -- login ${s.url}`, env);
  assert.is(login.code, 0, login.stderr);

  const ghost = await inShell('npm run --silent steward -- agents get ghost', env);
  assert.is(ghost.code, 4, ghost.stderr);
  const look = quoted(ghost.stderr, /look with /);
  assert.is(look, 'npm run steward -- agents list -q ghost', ghost.stderr);
  const listed = await inShell(look!, env);
  assert.is(listed.code, 0, listed.stderr);

  // The same hint from the installed form names the installed command.
  const installed = await home.run('agents', 'get', 'ghost');
  assert.is(quoted(installed.stderr, /look with /), 'steward agents list -q ghost', installed.stderr);
});

test("in a checkout: the demo agent's approval line runs as printed, and each of its lines says when", async () => {
  assert.is((await inShell(`npm run steward -- login ${s.url}`, env)).code, 0);
  const keyFile = join(await tempDir(), 'demo.json');
  const agent = new ShellProcess(`npm run --silent steward -- agent --url ${s.url} --key ${keyFile} --name printed --capabilities api_call`, env);
  try {
    const approve = (await agent.seen(/approve it on the dashboard's Registrations page, or: (.+)$/m))[1]!;
    assert.match(approve, /^npm run steward -- registrations approve \S+ --capabilities api_call$/);
    for (const line of agent.all.trim().split('\n').filter((l) => !l.startsWith('  '))) assert.match(line, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ /, line);

    const pending = await inShell('npm run --silent steward -- registrations list', env);
    assert.ok(pending.stdout.includes('approve with: npm run steward -- registrations approve <id> --capabilities a,b'), pending.stdout);

    const approved = await inShell(approve, env);
    assert.is(approved.code, 0, approved.stderr);
    await agent.seen(/Z status ready$/m);
  } finally {
    await agent.stop();
  }
});

test('login at a wrong address says what to give instead: the base URL without /api, http:// for the plain port', async () => {
  const api = await home.run('login', `${s.url}/api`);
  assert.is(api.code, 4, api.stderr);
  assert.ok(api.stderr.includes(`no Steward login at ${s.url}/api/api/auth/challenge: give the server's base URL, ${s.url}, not ${s.url}/api`), api.stderr);
  const host = new URL(s.url).host;
  const tls = await home.run('login', `https://${host}`);
  assert.is(tls.code, 5, tls.stderr);
  assert.ok(tls.stderr.includes(`cannot reach https://${host}: the server did not answer TLS at ${host} (a plain-HTTP port? then the address is http://${host})`), tls.stderr);
});

test.run();
