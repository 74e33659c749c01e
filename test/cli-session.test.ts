/**
 * The admin CLI's session and conventions, run as a real `steward` process against a real server:
 * login through the wallet key (the session file, its mode, never the token on screen), logout,
 * whoami, --help on every command, usage errors, and each exit code with its error in words.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readFile, stat, writeFile, mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import { createServer as createHttpServer } from 'node:http';
import { join } from 'node:path';
import { Command } from 'commander';
import { generateKeyPair } from '../src/domain/did.js';
import { buildProgram, Context } from '../src/cli/admin/index.js';
import { ADMIN_COMMANDS } from '../src/cli/admin/names.js';
import { http, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { startWithOwner } from './people-helpers.js';
import { cliHome, fails, ok, runSteward, type CliHome } from './cli-helpers.js';

const test = suite('steward CLI: login, logout, conventions');
let s: TestServer;
let owner: TestUser;
let member: TestUser;
const homes: CliHome[] = [];

const home = async (...a: Parameters<typeof cliHome>) => {
  const h = await cliHome(...a);
  homes.push(h);
  return h;
};
const sessionOf = async (h: CliHome) => JSON.parse(await readFile(join(h.xdg ?? join(h.home, '.config'), 'steward', 'session.json'), 'utf8'));

/** A port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  member = await makeUser(s, { name: 'Mia Member' });
});

test.after(async () => {
  // Whatever any command printed, it never was a session token.
  const tokens: string[] = [];
  for (const h of homes) {
    try {
      tokens.push((await sessionOf(h)).token);
    } catch {
      // logged out
    }
  }
  tokens.push(...issued);
  assert.ok(tokens.length > 5);
  for (const h of homes) for (const o of h.outputs) for (const t of tokens) assert.not.ok(o.stdout.includes(t) || o.stderr.includes(t), 'a session token was printed');
  await s.stop(true);
});

/** Every session token the suite saw issued. */
const issued: string[] = [];
const remember = (token: string) => issued.push(token);

test('login: the wallet key logs in, the session is saved 0600 under XDG_CONFIG_HOME, the token is not printed and works', async () => {
  const h = await home(owner.keys);
  const r = await h.run('login', s.url);
  assert.is(r.code, 0, r.stderr);
  const file = join(h.xdg!, 'steward', 'session.json');
  assert.is(r.stdout, `Logged in to ${s.url} as ${owner.user.name} (${owner.keys.did}), a global admin.\nSession saved in ${file}.\n`);
  assert.is((await stat(file)).mode & 0o777, 0o600);
  assert.is((await stat(join(h.xdg!, 'steward'))).mode & 0o777, 0o700);
  const saved = await sessionOf(h);
  remember(saved.token);
  assert.is(saved.server, s.url);
  assert.is(saved.did, owner.keys.did);
  assert.not.ok(r.stdout.includes(saved.token) || r.stderr.includes(saved.token));
  // The saved token is a live session of the owner.
  const me = await http(s.url, 'GET', '/api/users/me', { token: saved.token });
  assert.is(me.status, 200);
  assert.is(me.body.user.did, owner.keys.did);

  // whoami: the API's answer as JSON, and a table of it for people.
  const who = ok(await h.run('whoami', '--json'));
  assert.equal(who, (await http(s.url, 'GET', '/api/users/me', { token: saved.token })).body);
  const text = await h.run('whoami');
  assert.is(text.code, 0);
  assert.match(text.stdout, new RegExp(`^Server +${s.url}\\nName +${owner.user.name}\\nDID +${owner.keys.did}\\n`));
  assert.match(text.stdout, /\nGlobal admin +yes\n/);
});

test('login with --json prints the user, not the token; without XDG_CONFIG_HOME the session goes to ~/.config/steward', async () => {
  const h = await home(owner.keys, { xdg: false });
  const out = ok(await h.run('login', `${s.url}/`, '--json'));
  assert.is(out.server, s.url, 'the trailing slash dropped');
  assert.is(out.user.did, owner.keys.did);
  assert.is(out.token, undefined);
  const file = join(h.home, '.config', 'steward', 'session.json');
  assert.is((await stat(file)).mode & 0o777, 0o600);
  remember((await sessionOf(h)).token);
});

test('logging in again ends the earlier session on the server', async () => {
  const h = await home(owner.keys);
  assert.is((await h.run('login', s.url)).code, 0);
  const first = (await sessionOf(h)).token;
  remember(first);
  assert.is((await h.run('login', s.url)).code, 0);
  const second = (await sessionOf(h)).token;
  remember(second);
  assert.is.not(second, first);
  assert.is((await http(s.url, 'GET', '/api/users/me', { token: first })).status, 401, 'the earlier session is over');
  assert.is((await http(s.url, 'GET', '/api/users/me', { token: second })).status, 200);
});

test('login refusals: a key without an account (1), no wallet (1), not a URL (2), nothing listening (5)', async () => {
  const stranger = await home(generateKeyPair());
  fails(await stranger.run('login', s.url), 1, `${s.url} refused the login of did:key:`);
  const none = await home();
  fails(await none.run('login', s.url), 1, /no wallet at .*wallet\.json; create one with 'steward wallet create'/);
  const h = await home(owner.keys);
  fails(await h.run('login', 'localhost:8080'), 2, 'not a server URL: localhost:8080');
  const port = await closedPort();
  fails(await h.run('login', `http://127.0.0.1:${port}`), 5, `cannot reach http://127.0.0.1:${port}: connection refused`);
  for (const x of [stranger, none, h]) {
    assert.not.ok(await stat(join(x.xdg!, 'steward', 'session.json')).catch(() => null), 'no session saved');
  }
});

test('not logged in: exit 3 and what to do', async () => {
  const h = await home(owner.keys);
  for (const args of [['agents', 'list'], ['whoami'], ['audit'], ['logout']]) {
    const r = await h.run(...args);
    fails(r, 3, 'not logged in');
  }
  fails(await h.run('agents', 'list'), 3, "run 'steward login <server URL>' first");
});

test('a session that has expired or was ended elsewhere: exit 3 naming the server to log in to again', async () => {
  const h = await home(owner.keys);
  assert.is((await h.run('login', s.url)).code, 0);
  const { token } = await sessionOf(h);
  remember(token);
  await s.ctx.sessions.end(token);
  fails(await h.run('agents', 'list'), 3, `not logged in to ${s.url}: the session has expired or was ended; log in again with 'steward login ${s.url}'`);
});

test('errors from the server in words with exit 1 (403 here); unreachable server exit 5', async () => {
  const h = await home(member.keys);
  assert.is((await h.run('login', s.url)).code, 0);
  remember((await sessionOf(h)).token);
  const api = await http(s.url, 'GET', '/api/registrations', { token: (await sessionOf(h)).token });
  assert.is(api.status, 403);
  fails(await h.run('registrations', 'list'), 1, `${api.body.error.message} (403 ${api.body.error.code})`);

  // A saved session whose server has gone away.
  const port = await closedPort();
  const gone = await home(owner.keys);
  await mkdir(join(gone.xdg!, 'steward'), { recursive: true });
  await writeFile(join(gone.xdg!, 'steward', 'session.json'), JSON.stringify({ server: `http://127.0.0.1:${port}`, token: 'x'.repeat(43), did: owner.keys.did, name: 'x' }));
  fails(await gone.run('agents', 'list'), 5, `cannot reach http://127.0.0.1:${port}: connection refused (is Steward running there?)`);
  // logout keeps it, so that it can be tried again; --force removes it here anyway.
  fails(await gone.run('logout'), 5, "run 'steward logout' again, or 'steward logout --force'");
  assert.ok(await stat(join(gone.xdg!, 'steward', 'session.json')));
  const forced = await gone.run('logout', '--force');
  assert.is(forced.code, 0, forced.stderr);
  assert.match(forced.stderr, /cannot reach .*the session may still be valid on the server/);
  assert.is(forced.stdout, `Logged out of http://127.0.0.1:${port} here only.\n`);
  assert.not.ok(await stat(join(gone.xdg!, 'steward', 'session.json')).catch(() => null));
});

test('something else answers: a connection closed mid-request (exit 5), an error page or a page that is not JSON (exit 1), in words', async () => {
  const h = await home(owner.keys);
  // A server that takes the request and closes the connection without an answer.
  const dropper = createServer((sock) => sock.once('data', () => sock.destroy()));
  await new Promise<void>((r) => dropper.listen(0, '127.0.0.1', r));
  const dropUrl = `http://127.0.0.1:${(dropper.address() as { port: number }).port}`;
  const dropped = await h.run('login', dropUrl);
  dropper.close();
  fails(dropped, 5, `cannot reach ${dropUrl}: the connection was closed before an answer came`);

  // A proxy whose upstream is down, then a web server that is not Steward.
  let status = 502;
  const other = createHttpServer((_req, res) => {
    res.writeHead(status, { 'content-type': 'text/html' });
    res.end('<html><body>Bad Gateway</body></html>');
  });
  await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
  const otherUrl = `http://127.0.0.1:${(other.address() as { port: number }).port}`;
  const errorPage = await h.run('login', otherUrl);
  status = 200;
  const notJson = await h.run('login', otherUrl);
  other.close();
  fails(errorPage, 1, `${otherUrl} answered 502 Bad Gateway without Steward's error body (is this a Steward server?)`);
  fails(notJson, 1, `${otherUrl} answered POST /api/auth/challenge with 200 but no JSON (is this a Steward server?)`);
  assert.not.ok(await stat(join(h.xdg!, 'steward', 'session.json')).catch(() => null), 'no session saved');
});

test('logout ends the session on the server and removes the file', async () => {
  const h = await home(owner.keys);
  assert.is((await h.run('login', s.url)).code, 0);
  const { token } = await sessionOf(h);
  remember(token);
  const r = await h.run('logout');
  assert.is(r.code, 0, r.stderr);
  assert.is(r.stdout, `Logged out of ${s.url}.\n`);
  assert.is((await http(s.url, 'GET', '/api/users/me', { token })).status, 401);
  assert.not.ok(await stat(join(h.xdg!, 'steward', 'session.json')).catch(() => null));
  fails(await h.run('logout'), 3, 'not logged in');

  // Ended elsewhere first: logout still forgets it here, and says so.
  assert.is((await h.run('login', s.url)).code, 0);
  const again = (await sessionOf(h)).token;
  remember(again);
  await s.ctx.sessions.end(again);
  const late = await h.run('logout', '--json');
  assert.is(late.code, 0, late.stderr);
  assert.not.ok(await stat(join(h.xdg!, 'steward', 'session.json')).catch(() => null));
});

/** Every command path of the admin program: ['agents'], ['agents', 'list'], ... */
function commandPaths(): string[][] {
  const out: string[][] = [];
  const walk = (cmd: Command, path: string[]) => {
    for (const sub of cmd.commands) {
      const p = [...path, sub.name()];
      out.push(p);
      walk(sub, p);
    }
  };
  walk(buildProgram(new Context({}, { out: () => {}, err: () => {} })), []);
  return out;
}

test('--help on every command and subcommand: exit 0, its usage on stdout; the dispatcher routes every group', async () => {
  const paths = commandPaths();
  assert.equal(new Set(paths.filter((p) => p.length === 1).map((p) => p[0])), ADMIN_COMMANDS);
  assert.ok(paths.length >= 20, `${paths.length} commands`);
  const h = await home();
  const results = await Promise.all(paths.map((p) => h.run(...p, '--help')));
  paths.forEach((p, i) => {
    const r = results[i]!;
    assert.is(r.code, 0, `${p.join(' ')} --help: ${r.stderr}`);
    assert.ok(r.stdout.startsWith(`Usage: steward ${p.join(' ')} `), `${p.join(' ')} --help:\n${r.stdout}`);
    assert.match(r.stdout, /-h, --help/);
  });
  const top = await runSteward(['help'], {});
  assert.is(top.code, 0);
  for (const c of ADMIN_COMMANDS) assert.match(top.stdout, new RegExp(`\\n  ${c} `), `steward help names ${c}`);
  assert.match(top.stdout, /Exit codes: 0 ok, 1 failed/);
  const group = await runSteward(['help', 'policies'], {});
  assert.is(group.code, 0);
  assert.ok(group.stdout.startsWith('Usage: steward policies '));
});

test('usage errors exit 2 and say what is wrong', async () => {
  const h = await home(owner.keys);
  const cases: Array<[string[], RegExp]> = [
    [['agents'], /Usage: steward agents/],
    [['agents', 'lst'], /unknown command 'lst'/],
    [['agents', 'list', '--page', 'x'], /--page <n>' argument 'x' is invalid. expected a whole number from 1/],
    [['agents', 'list', '--page-size', '101'], /expected a whole number from 1 to 100/],
    [['agents', 'list', '--sort-by', 'age'], /Allowed choices are name, registeredAt, lastSeen/],
    [['agents', 'list', '--bogus'], /unknown option '--bogus'/],
    [['agents', 'get'], /missing required argument 'agent'/],
    [['registrations', 'approve', 'r1'], /required option '-c, --capabilities <list>' not specified/],
    [['registrations', 'approve', 'r1', '--capabilities', 'api_call,teleport'], /unknown capability teleport/],
    [['intents', 'send', 'did:key:z6Mkx', 'api_call', '--params', '{nope'], /not JSON/],
    [['intents', 'send', 'did:key:z6Mkx', 'api_call', '--params', '[1]'], /expected a JSON object/],
    [['workflows', 'cancel', 'wf'], /missing required argument 'run'/],
    [['agents', 'list', 'extra'], /too many arguments/],
  ];
  for (const [args, message] of cases) {
    const r = await h.run(...args);
    assert.is(r.code, 2, `${args.join(' ')}: exit ${r.code} ${r.stderr}`);
    assert.match(r.stderr, message, `${args.join(' ')}: ${r.stderr}`);
    assert.is(r.stdout, '', `${args.join(' ')} printed nothing on stdout`);
  }
  // Checked before the session is even looked for.
  fails(await h.run('agents', 'list', '--online', '--offline'), 2, 'give --online or --offline, not both');
  fails(await h.run('policies', 'create', '--capabilities', 'api_call'), 2, 'give --agent or --workspace');
});

test.run();
