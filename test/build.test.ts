/**
 * `npm run build` (which `npm start` runs first) compiles only what changed since the last
 * build: a second build with nothing changed writes nothing, and a changed source is compiled
 * again (the dashboard likewise: rebuilt only when web/ changed; the agent SDK's package,
 * packages/agent/, when one of its sources did). Run on a copy of the sources, so that the working
 * tree's dist/ is left alone.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { execFileSync } from 'node:child_process';
import { cp, readFile, readdir, stat, symlink, appendFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from './helpers.js';

const test = suite('npm run build: incremental');
const root = new URL('..', import.meta.url).pathname;

/** Path -> modification time (ns) of every file under dir. */
async function mtimes(dir: string): Promise<Map<string, bigint>> {
  const out = new Map<string, bigint>();
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const p = join(entry.parentPath, entry.name);
    out.set(p, (await stat(p, { bigint: true })).mtimeNs);
  }
  return out;
}

const build = (cwd: string) => execFileSync('npm', ['run', '--silent', 'build'], { cwd, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } });

test('npm start builds first; a second build with nothing changed writes nothing; a changed file is compiled again', async () => {
  const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  // The configuration is checked before the build (a bad setting fails at once), then the build.
  assert.is(pkg.scripts.prestart, 'node --import tsx scripts/check-config.ts && npm run build');

  const dir = await tempDir('steward-build-');
  for (const p of ['src', 'schemas', 'web', 'scripts', 'package.json', 'package-lock.json', 'tsconfig.json']) await cp(join(root, p), join(dir, p), { recursive: true });
  // The SDK's package without what a build of the working tree left in it.
  await cp(join(root, 'packages'), join(dir, 'packages'), { recursive: true, filter: (p) => !/packages\/agent\/(dist|schemas)$/.test(p) });
  const sdk = join(dir, 'packages/agent');
  await symlink(join(root, 'node_modules'), join(dir, 'node_modules'));

  build(dir);
  const first = await mtimes(join(dir, 'dist'));
  assert.ok(first.has(join(dir, 'dist/src/cli/index.js')), 'the first build compiled src/');
  assert.ok(first.has(join(dir, 'dist/web/index.html')), 'the first build built the dashboard');
  const sdkFirst = await mtimes(sdk);
  for (const f of ['dist/agent/index.js', 'dist/agent/index.d.ts', 'schemas/certificate.schema.json']) assert.ok(sdkFirst.has(join(sdk, f)), `the first build built the SDK's ${f}`);

  build(dir);
  const second = await mtimes(join(dir, 'dist'));
  const rewritten = [...second].filter(([p, t]) => first.get(p) !== t).map(([p]) => p);
  assert.equal(rewritten, [], 'nothing was written by a build with nothing to do');
  const sdkRewritten = [...(await mtimes(sdk))].filter(([p, t]) => sdkFirst.get(p) !== t).map(([p]) => p);
  assert.equal(sdkRewritten, [], 'nothing of the SDK was written by a build with nothing to do');

  await appendFile(join(dir, 'src/cli/node-flags.ts'), '\nexport const BUILD_PROBE = 41 + 1;\n');
  build(dir);
  assert.match(await readFile(join(dir, 'dist/src/cli/node-flags.js'), 'utf8'), /BUILD_PROBE = 41 \+ 1/);

  // A changed source of the SDK, not the first file of its list, is compiled into its package.
  await appendFile(join(dir, 'src/agent/gates.ts'), '\nexport const SDK_PROBE = 6 * 7;\n');
  build(dir);
  assert.match(await readFile(join(sdk, 'dist/agent/gates.js'), 'utf8'), /SDK_PROBE = 6 \* 7/);
  assert.match(await readFile(join(sdk, 'dist/agent/gates.d.ts'), 'utf8'), /SDK_PROBE: number/);

  // A changed dashboard source builds the dashboard again.
  await appendFile(join(dir, 'web/index.html'), '\n<!-- build probe -->\n');
  build(dir);
  assert.match(await readFile(join(dir, 'dist/web/index.html'), 'utf8'), /build probe/);
});

test.run();
