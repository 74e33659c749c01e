/**
 * Which uWebSockets.js build the server runs on (src/http/uws.ts): the first of an ordered list
 * whose native binary really loads, skipping builds that are missing, have no binary for this
 * Node.js, or whose binary fails to load; and, when none loads, a refusal that names this
 * Node.js, this glibc and what to install.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, spawnSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pickUws, refusal, runtime, UWS_BUILDS, type UwsBuild, type us_listen_socket } from '../src/http/uws.js';
import { tempDir, waitFor } from './helpers.js';

const test = suite('uWebSockets.js builds');
const binaryName = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
const cli = new URL('../src/cli/index.ts', import.meta.url).pathname;

/** A package directory with a main file and, optionally, a file where this Node's binary would be. */
async function fakeBuild(name: string, binary?: Buffer): Promise<UwsBuild> {
  const dir = join(await tempDir('steward-uws-'), name);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', main: 'uws.js' }));
  await writeFile(join(dir, 'uws.js'), 'throw new Error("the entry must not be loaded before its binary");\n');
  if (binary) await writeFile(join(dir, binaryName), binary);
  return { module: dir, binaries: '.', nodeLines: [22, 24], glibc: '2.99' };
}

const realBuild = UWS_BUILDS.find((b) => b.module === '@trufflesuite/uws-js-unofficial')!;

test('the first build whose binary loads is used; missing, binary-less and broken builds before it are skipped with their reason', async () => {
  const broken = await fakeBuild('broken-uws', Buffer.from('not a shared object, whatever its name says'));
  const noBinary = await fakeBuild('abi-less-uws');
  const builds = [{ ...realBuild, module: 'steward-no-such-uws-build' }, noBinary, broken, realBuild, broken];
  const loaded = pickUws(builds, {});
  assert.is(loaded.native, true);
  assert.is(loaded.build, '@trufflesuite/uws-js-unofficial@20.30.0-unofficial.0');
  assert.ok(loaded.detail.endsWith(`/binaries/${binaryName}`), loaded.detail);
  assert.equal(
    loaded.skipped.map((s) => s.module),
    ['steward-no-such-uws-build', noBinary.module, broken.module],
    'the three before it, in order, and nothing after it',
  );
  assert.is(loaded.skipped[0]!.reason, 'not installed');
  assert.match(loaded.skipped[1]!.reason, `no binary for Node.js ${process.version} (ABI ${process.versions.modules})`);
  assert.match(loaded.skipped[2]!.reason, /invalid ELF header|file too short|not a valid|cannot open/i);

  // It is the real server library: an app that listens and answers.
  const app = loaded.uws.App();
  app.get('/*', (res) => void res.end('native'));
  const socket = await new Promise<us_listen_socket>((resolve, reject) => app.listen('127.0.0.1', 0, (s) => (s ? resolve(s) : reject(new Error('listen failed')))));
  const port = loaded.uws.us_socket_local_port(socket);
  assert.is(await (await fetch(`http://127.0.0.1:${port}/`, { headers: { connection: 'close' } })).text(), 'native');
  loaded.uws.us_listen_socket_close(socket);
});

test('the list as shipped: on this machine its first build loads natively', () => {
  const loaded = pickUws(UWS_BUILDS, {});
  assert.is(loaded.native, true, loaded.detail);
  assert.is(loaded.build, `@trufflesuite/uws-js-unofficial@20.30.0-unofficial.0`);
  assert.equal(loaded.skipped, []);
});

test('when none loads: the JavaScript imitation, and a refusal naming Node.js, glibc and what to install', async () => {
  const broken = await fakeBuild('broken-uws', Buffer.from('\x7fELF but not really'));
  const loaded = pickUws([{ ...broken, fallback: realBuild.fallback }, { ...realBuild, module: 'steward-no-such-uws-build', nodeLines: [20, 22, 24] }], {});
  assert.is(loaded.native, false);
  assert.type(loaded.uws.App, 'function', 'the JavaScript imitation');
  const text = refusal(loaded);
  const rt = runtime();
  assert.ok(rt.glibc, 'glibc version known on this machine');
  assert.ok(text.includes(`Node.js ${process.version}`), text);
  assert.ok(text.includes(`glibc ${rt.glibc}`), text);
  assert.ok(text.includes(`${broken.module}: `), text);
  assert.ok(text.includes('steward-no-such-uws-build: not installed'), text);
  assert.ok(text.includes(`Node.js 22 or 24 on Linux with glibc 2.99 or later (${broken.module})`), text);
  assert.ok(text.includes('Node.js 20, 22 or 24 on Linux with glibc 2.27 or later (steward-no-such-uws-build)'), text);
  // The message for the list as shipped.
  const shipped = refusal({ detail: '', skipped: [{ module: 'x', reason: 'y' }], tried: UWS_BUILDS });
  assert.match(shipped, /Install one of: Node\.js 20 on Linux with glibc 2\.27 or later \(@trufflesuite\/uws-js-unofficial\); or Node\.js 20, 22 or 24 on Linux with glibc 2\.38 or later \(@btc-vision\/uwebsockets\.js\)\./);
  assert.match(text, /STEWARD_ALLOW_UWS_FALLBACK=1/);
  assert.match(text, /refusing to start on the slow JavaScript fallback/);
});

test('UWS_USE_FALLBACK: the imitation without trying the binaries; steward serve refuses it with the runtime named', async () => {
  const loaded = pickUws(UWS_BUILDS, { UWS_USE_FALLBACK: '1' });
  assert.is(loaded.native, false);
  assert.is(loaded.detail, 'UWS_USE_FALLBACK is set');
  const r = spawnSync(process.execPath, ['--import', 'tsx', cli, 'serve'], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', DATA_DIR: await tempDir(), UWS_USE_FALLBACK: '1', LOG_LEVEL: 'silent' },
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.is(r.status, 1);
  assert.ok(r.stderr.includes(`Node.js ${process.version}`), r.stderr);
  assert.ok(r.stderr.includes(`glibc ${runtime().glibc}`), r.stderr);
  assert.match(r.stderr, /UWS_USE_FALLBACK is set: unset it to use a native build, or set STEWARD_ALLOW_UWS_FALLBACK=1 to start anyway/);
});

test('the log says which build serves', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', cli, 'serve'], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', DATA_DIR: await tempDir(), LOG_LEVEL: 'info', STEWARD_OWNER_DID: 'did:key:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const closed = new Promise((resolve) => child.on('close', resolve));
  try {
    await waitFor(() => out.includes('Steward listening'), 30_000);
  } finally {
    child.kill('SIGTERM');
    await closed;
  }
  const line = out.split('\n').map((l) => (l.startsWith('{') ? JSON.parse(l) : {})).find((l) => l.uws);
  assert.ok(line, out);
  assert.is(line.uws, 'native');
  assert.is(line.build, '@trufflesuite/uws-js-unofficial@20.30.0-unofficial.0');
  assert.is(line.msg, 'uWebSockets.js native binary loaded: @trufflesuite/uws-js-unofficial@20.30.0-unofficial.0');
});

test.run();
