/**
 * Test runner: runs every test/**\/*.test.ts file in its own Node process (each suite starts its
 * own server and data directory), prints each file's uvu output, and ends with the files that
 * failed (when any) and one line `N passed, N failed`. Exit code 1 when anything failed. A full
 * run (no pattern) also type-checks src/, test/ and bench/ (tsconfig.check.json) and the dashboard
 * (web/tsconfig.json), counted as one more test; tsx runs the suites without checking types, so
 * that is what catches a test calling a helper wrongly. When browser suites (test/ui-*.test.ts) are
 * to run, the dashboard is built first (TEST_SKIP_WEB_BUILD=1 skips that, for a build already
 * made). Suites that take a store target run a second time on MongoStore through the MongoDB
 * stand-in (STEWARD_TEST_STORE=standin), unless MONGODB_URI is set. A file with the line
 * `// test-runner: alone` (a whole cluster of processes) runs first, with no other file beside it.
 * Each file runs in a process group of its own, killed when the file ends, so nothing it started
 * outlives it.
 * Every test process loads test/preload.ts: a promise rejection nothing handled fails its
 * file (counted as one failure each), even when its tests passed.
 *
 * Usage: npm test [-- pattern ...]   (patterns filter the files' paths from the checkout, test/...,
 * by substring, or name a file to run, of any name; TEST_TYPECHECK=0 skips the check; TEST_RUN_DIR
 * runs the suites of another directory)
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { availableParallelism } from 'node:os';
import { createRequire } from 'node:module';

const root = process.env.TEST_RUN_DIR ?? new URL('.', import.meta.url).pathname;
const patterns = process.argv.slice(2);

function walk(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walk(p));
    else if (name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

const named = patterns.filter((p) => p.endsWith('.ts') && existsSync(p) && statSync(p).isFile()).map((p) => resolve(p));
// Matched on the path from the checkout (test/...): the checkout's own path must not match every file.
const matched = walk(root).filter((f) => patterns.length === 0 || patterns.some((p) => relative(join(root, '..'), f).includes(p)));
const files = [...new Set([...matched, ...named])];
const preload = new URL('./preload.ts', import.meta.url).pathname;
/** What test/preload.ts writes before each unhandled rejection. */
const UNHANDLED_REJECTION_MARK = '[unhandled rejection]';
/** The queue entry that stands for the type-check. */
const TYPECHECK = 'type-check (tsc -p tsconfig.check.json, tsc -p web/tsconfig.json)';
/**
 * Suites that take a store target (they import one of these helpers) run a second time on
 * MongoStore through the MongoDB stand-in (tools/mongo-standin), queued as `<file>${STANDIN_PASS}`;
 * not when MONGODB_URI names a real server, which those suites then use instead.
 */
const STORE_TARGET_HELPERS = /from '(\.\.?\/)+(store-backend|cluster-nodes|cluster-stores)\.js'/;
const STANDIN_PASS = ' [mongodb stand-in]';
const standinPass = (files: string[]): string[] =>
  process.env.MONGODB_URI ? [] : files.filter((f) => STORE_TARGET_HELPERS.test(readFileSync(f, 'utf8'))).map((f) => `${f}${STANDIN_PASS}`);
const typecheck = patterns.length === 0 && process.env.TEST_TYPECHECK !== '0';
const parallel = Math.max(1, Math.min(Number(process.env.TEST_PARALLEL ?? availableParallelism()), 4));
const perFileTimeoutMs = Number(process.env.TEST_FILE_TIMEOUT_MS ?? 300_000);

interface Result {
  file: string;
  passed: number;
  failed: number;
  output: string;
  ms: number;
}

/** The process groups of the test files running now. */
const running = new Set<number>();
function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // the group is gone already
  }
}
// Stopped (Ctrl-C, or a CI time limit), the runner takes every file's processes with it.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    for (const pid of running) killGroup(pid);
    process.exit(130);
  });
}

function runFile(entry: string): Promise<Result> {
  const started = Date.now();
  const onStandin = entry.endsWith(STANDIN_PASS);
  const file = onStandin ? entry.slice(0, -STANDIN_PASS.length) : entry;
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  // The dashboard has its own tsconfig (DOM, JSX): both projects are checked, one after the other.
  const args =
    file === TYPECHECK
      ? ['-e', `const { execFileSync: x } = require('node:child_process'); for (const p of ${JSON.stringify([join(root, '..', 'tsconfig.check.json'), join(root, '..', 'web', 'tsconfig.json')])}) x(process.execPath, [${JSON.stringify(tsc)}, '-p', p], { stdio: 'inherit' });`]
      : ['--import', 'tsx', '--import', preload, file];
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, {
      env: { ...process.env, FORCE_COLOR: '0', LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent', ...(onStandin ? { STEWARD_TEST_STORE: 'standin' } : {}) },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, so that what the file started (servers, nodes, agents) ends with it.
      detached: true,
    });
    running.add(child.pid!);
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => {
      output += `\n[runner] ${relative(root, file)} exceeded ${perFileTimeoutMs} ms and was killed\n`;
      killGroup(child.pid!);
    }, perFileTimeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      // Whatever the file left running (a process a failed test did not stop) goes too.
      killGroup(child.pid!);
      running.delete(child.pid!);
      if (file === TYPECHECK) {
        resolve({ file: entry, passed: code === 0 ? 1 : 0, failed: code === 0 ? 0 : 1, output, ms: Date.now() - started });
        return;
      }
      const clean = output.replace(/\x1b\[[0-9;]*m/g, '');
      const total = Number(/Total:\s+(\d+)/.exec(clean)?.[1] ?? NaN);
      const passed = Number(/Passed:\s+(\d+)/.exec(clean)?.[1] ?? NaN);
      const skipped = Number(/Skipped:\s+(\d+)/.exec(clean)?.[1] ?? 0);
      let failed = Number.isFinite(total) && Number.isFinite(passed) ? total - passed - skipped : 1;
      const okPassed = Number.isFinite(passed) ? passed : 0;
      const rejections = clean.split(UNHANDLED_REJECTION_MARK).length - 1;
      if (rejections > 0) {
        failed += rejections;
        output += `\n[runner] ${relative(root, file)}: ${rejections} unhandled promise rejection(s), each counted as a failure\n`;
      }
      if (code !== 0 && failed === 0) failed = 1; // crashed after its tests, or exited non-zero
      resolve({ file: entry, passed: okPassed, failed, output, ms: Date.now() - started });
    });
  });
}

// The browser suites (test/ui-*.test.ts) drive the built dashboard: build it once, first.
if (files.some((f) => /[\\/]ui-[^\\/]*\.test\.ts$/.test(f)) && process.env.TEST_SKIP_WEB_BUILD !== '1') {
  const built = spawnSync(process.execPath, [join(root, '..', 'scripts', 'build-web.mjs')], { stdio: 'inherit' });
  if (built.status !== 0) {
    console.log('\nthe dashboard did not build (npm run build:web)\n0 passed, 1 failed');
    process.exit(1);
  }
}

const results: Result[] = [];
const all = typecheck ? [TYPECHECK, ...files, ...standinPass(files)] : [...files, ...standinPass(files)];
// A file that runs several processes of its own against each other's clocks and leases (a whole
// cluster) says so with this line; it runs first, with nothing beside it, since the other files'
// load on a small machine would starve its processes past their leases.
const ALONE_MARK = '// test-runner: alone';
const runsAlone = (entry: string) => entry !== TYPECHECK && !entry.endsWith(STANDIN_PASS) && readFileSync(entry, 'utf8').includes(ALONE_MARK);
const alone = all.filter(runsAlone);
const queue = all.filter((e) => !runsAlone(e));
async function worker(from: string[]): Promise<void> {
  for (let f = from.shift(); f; f = from.shift()) {
    const r = await runFile(f);
    results.push(r);
    const name = r.file === TYPECHECK ? r.file : relative(root, r.file);
    process.stdout.write(`\n=== ${name} (${r.ms} ms): ${r.passed} passed, ${r.failed} failed\n`);
    if (r.failed > 0 || process.env.TEST_VERBOSE) process.stdout.write(r.output);
  }
}
await worker(alone);
await Promise.all(Array.from({ length: parallel }, () => worker(queue)));

const passed = results.reduce((a, r) => a + r.passed, 0);
const failed = results.reduce((a, r) => a + r.failed, 0);
if (files.length === 0) console.log('no test files matched');
// The files that failed, once more at the end, so a long run's outcome reads in a few lines.
const failedFiles = results.filter((r) => r.failed > 0).map((r) => (r.file === TYPECHECK ? r.file : relative(root, r.file))).sort();
if (failedFiles.length > 0) console.log(`\nfailed (${failedFiles.length} ${failedFiles.length === 1 ? 'file' : 'files'}):\n${failedFiles.map((f) => `  ${f}`).join('\n')}`);
console.log(`\n${passed} passed, ${failed} failed`);
process.exit(failed > 0 || files.length === 0 ? 1 : 0);
