/**
 * Starting `steward serve` as a real process: one process per data directory and per port, file
 * modes of the data directory, and starts refused with a message that says what is wrong and
 * what to do, without changing anything on disk.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { http, tempDir, waitFor } from './helpers.js';

const test = suite('startup');
const cli = new URL('../src/cli/index.ts', import.meta.url).pathname;

interface Serve {
  child: ChildProcess;
  out(): string;
  /** Resolves with the port once it listens, or with the exit code if it exits first. */
  outcome: Promise<{ port: number } | { code: number | null }>;
  exited: Promise<number | null>;
}

/** Every child started, so that none outlives a failed test. */
const children = new Set<ChildProcess>();
test.after.each(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  children.clear();
});

function serve(env: Record<string, string>): Serve {
  const child = spawn(process.execPath, ['--import', 'tsx', cli, 'serve'], {
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let out = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const outcome = new Promise<{ port: number } | { code: number | null }>((resolve) => {
    const onData = (d: Buffer) => {
      out += d;
      const m = /"port":(\d+)[^\n]*Steward listening/.exec(out);
      if (m) resolve({ port: Number(m[1]) });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then((code) => resolve({ code }));
  });
  return { child, out: () => out, outcome, exited };
}

async function listening(s: Serve): Promise<number> {
  const o = await s.outcome;
  if (!('port' in o)) throw new Error(`the server exited (${o.code}) instead of listening:\n${s.out()}`);
  return o.port;
}

async function refused(s: Serve): Promise<string> {
  const o = await s.outcome;
  if ('port' in o) {
    s.child.kill('SIGKILL');
    throw new Error(`the server started on port ${o.port} instead of refusing:\n${s.out()}`);
  }
  assert.is(o.code, 1, 'exit code 1');
  return s.out();
}

async function stopGracefully(s: Serve): Promise<void> {
  s.child.kill('SIGTERM');
  await s.exited;
}

/**
 * Every path under `dir` with its mode and contents (a directory's: its listing). `skipData`
 * leaves out the datafiles' contents, which a server running beside may write.
 */
async function snapshot(dir: string, skipData = false): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string) => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      const mode = ((await stat(p)).mode & 0o777).toString(8);
      if (e.isDirectory()) {
        out[p] = `dir ${mode}`;
        await walk(p);
      } else out[p] = `${mode} ${skipData && e.name.endsWith('.db') ? '' : await readFile(p, 'base64')}`;
    }
  };
  out[dir] = `dir ${((await stat(dir)).mode & 0o777).toString(8)}`;
  await walk(dir);
  return out;
}

test('a second process on the same DATA_DIR is refused, naming DATA_DIR and the holder; after kill -9 of the first, a new one starts', async () => {
  const dataDir = await tempDir();
  const first = serve({ DATA_DIR: dataDir });
  const port = await listening(first);
  assert.is((await http(`http://127.0.0.1:${port}`, 'GET', '/healthz')).status, 200);

  const before = await snapshot(dataDir, true);
  const second = serve({ DATA_DIR: dataDir });
  const out = await refused(second);
  assert.match(out, `DATA_DIR ${dataDir}`);
  assert.match(out, `pid ${first.child.pid}`);
  assert.match(out, 'is in use by another Steward process');
  assert.equal(await snapshot(dataDir, true), before, 'the refused start changed nothing on disk (the first one\'s lock included)');

  first.child.kill('SIGKILL');
  await first.exited;
  // The lock file of the killed process is still there: it is stale, and does not block.
  assert.ok((await readdir(join(dataDir, 'store'))).includes('steward.lock'));
  const third = serve({ DATA_DIR: dataDir });
  const port3 = await listening(third);
  assert.is((await http(`http://127.0.0.1:${port3}`, 'GET', '/readyz')).status, 200);
  await stopGracefully(third);
  assert.not.ok((await readdir(join(dataDir, 'store'))).includes('steward.lock'), 'a clean stop removes the lock');
  await rm(dataDir, { recursive: true, force: true });
});

test('a second process on the same port is refused with a message naming the port, and creates nothing', async () => {
  const dataDir = await tempDir();
  const first = serve({ DATA_DIR: dataDir });
  const port = await listening(first);
  const otherDir = join(await tempDir(), 'data');
  const second = serve({ DATA_DIR: otherDir, PORT: String(port) });
  const out = await refused(second);
  assert.match(out, `port ${port} on 127.0.0.1 is in use by another process`);
  assert.is(await stat(otherDir).then(() => 'exists', () => 'absent'), 'absent', 'no DATA_DIR was created');
  // The first server still answers every request (uWS would otherwise share the port).
  for (let i = 0; i < 10; i++) assert.is((await http(`http://127.0.0.1:${port}`, 'GET', '/healthz')).status, 200);
  await stopGracefully(first);
  await rm(dataDir, { recursive: true, force: true });
});

test('a port held by a process that is not Steward is refused too', async () => {
  const holder = createServer();
  await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
  const port = (holder.address() as { port: number }).port;
  const dataDir = join(await tempDir(), 'data');
  const out = await refused(serve({ DATA_DIR: dataDir, PORT: String(port) }));
  assert.match(out, `port ${port} on 127.0.0.1 is in use by another process`);
  holder.close();
});

test('the data directory is 0700 and its files 0600; an older one is tightened at start, with a log line', async () => {
  const dataDir = join(await tempDir(), 'data');
  let s = serve({ DATA_DIR: dataDir });
  await listening(s);
  await stopGracefully(s);
  const modes = await snapshot(dataDir);
  const files = Object.entries(modes).filter(([, v]) => !v.startsWith('dir'));
  assert.ok(files.some(([p]) => p.endsWith('secret.key')) && files.some(([p]) => p.endsWith('users.db')));
  for (const [p, v] of Object.entries(modes)) assert.is(v.split(' ')[v.startsWith('dir') ? 1 : 0], v.startsWith('dir') ? '700' : '600', p);

  // As an older version left them: world-readable.
  await chmod(dataDir, 0o755);
  await chmod(join(dataDir, 'store'), 0o755);
  await chmod(join(dataDir, 'secret.key'), 0o644);
  await chmod(join(dataDir, 'store', 'users.db'), 0o644);
  s = serve({ DATA_DIR: dataDir });
  await listening(s);
  // One log line lists what was tightened (a datafile may have been rewritten at load, 0600 already).
  const line = s.out().split('\n').find((l) => l.includes('permissions tightened on'));
  assert.ok(line, s.out());
  for (const path of [dataDir, join(dataDir, 'store'), join(dataDir, 'secret.key')]) assert.match(line!, JSON.stringify(path), path);
  await stopGracefully(s);
  for (const [p, v] of Object.entries(await snapshot(dataDir))) assert.is(v.split(' ')[v.startsWith('dir') ? 1 : 0], v.startsWith('dir') ? '700' : '600', p);
  await rm(dataDir, { recursive: true, force: true });
});

test('DATA_DIR that is a file: a clear message, not EEXIST', async () => {
  const file = join(await tempDir(), 'not-a-dir');
  await writeFile(file, 'x');
  const out = await refused(serve({ DATA_DIR: file }));
  assert.match(out, `DATA_DIR ${file} is not a directory`);
  assert.not.match(out, 'EEXIST');
  assert.is(await readFile(file, 'utf8'), 'x');
});

test('secret.key missing while the store holds data: refused, and no new key is written', async () => {
  const dataDir = join(await tempDir(), 'data');
  const s = serve({ DATA_DIR: dataDir });
  await listening(s);
  await stopGracefully(s);
  const key = await readFile(join(dataDir, 'secret.key'), 'utf8');
  await rm(join(dataDir, 'secret.key'));
  const before = await snapshot(dataDir);
  const out = await refused(serve({ DATA_DIR: dataDir }));
  assert.match(out, `${join(dataDir, 'secret.key')} is missing, but the store`);
  assert.match(out, 'Restore secret.key from a backup');
  assert.not.match(out, 'is not the key');
  assert.equal(await snapshot(dataDir), before, 'nothing written, no secret.key created');

  // Another key in its place: the message says that this key is not the one, and where it came from.
  await writeFile(join(dataDir, 'secret.key'), `${Buffer.alloc(32, 7).toString('base64url')}\n`, { mode: 0o600 });
  const wrong = await refused(serve({ DATA_DIR: dataDir }));
  assert.match(wrong, `${join(dataDir, 'secret.key')} is not the key the store's data was sealed with`);
  const wrongEnv = await refused(serve({ DATA_DIR: dataDir, STEWARD_SECRET_KEY: Buffer.alloc(32, 9).toString('hex') }));
  assert.match(wrongEnv, "STEWARD_SECRET_KEY is not the key the store's data was sealed with");

  // The right key back: it starts.
  await writeFile(join(dataDir, 'secret.key'), key);
  const again = serve({ DATA_DIR: dataDir });
  await listening(again);
  await stopGracefully(again);
  await rm(dataDir, { recursive: true, force: true });
});

test('a lock left by a process on another host is not broken: the message says which file to delete', async () => {
  const dataDir = join(await tempDir(), 'data');
  await mkdir(join(dataDir, 'store'), { recursive: true });
  const lock = join(dataDir, 'store', 'steward.lock');
  await writeFile(lock, JSON.stringify({ pid: 4242, host: 'elsewhere.example', startedAt: '2026-01-01T00:00:00.000Z', procStart: null }));
  const out = await refused(serve({ DATA_DIR: dataDir }));
  assert.match(out, 'locked by a Steward process on another host (pid 4242 on host elsewhere.example');
  assert.match(out, `delete ${lock}`);
  await rm(lock);
  const s = serve({ DATA_DIR: dataDir });
  await listening(s);
  await stopGracefully(s);
  await rm(dataDir, { recursive: true, force: true });
});

test.run();
