/**
 * The test runner: a file in which a promise rejection goes unhandled fails, even when its tests
 * pass and the code under test has a net of its own that keeps the process alive; a suite that
 * takes a store target runs on each store; a file marked to run alone runs first, by itself.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { test } from 'uvu';
import * as assert from 'uvu/assert';

const root = fileURLToPath(new URL('..', import.meta.url));

function runRunner(file: string | string[], env: Record<string, string> = {}): Promise<{ code: number | null; out: string }> {
  const files = (Array.isArray(file) ? file : [file]).map((f) => join(root, 'test', 'runner-fixtures', f));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'test', 'run.ts'), ...files], {
      cwd: root,
      env: { ...process.env, TEST_TYPECHECK: '0', TEST_VERBOSE: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out }));
  });
}

const lastLine = (out: string) => out.trim().split('\n').pop();

test('a file whose tests pass but which leaves a rejection unhandled fails, with the rejection shown', async () => {
  const { code, out } = await runRunner('unhandled-rejection.fixture.ts');
  assert.is(code, 1, out);
  assert.is(lastLine(out), '2 passed, 1 failed', out);
  assert.match(out, '[unhandled rejection] StoreUnavailableError: injected: the store went away');
  assert.match(out, /unhandled-rejection\.fixture\.ts:\d+/, 'the stack names where it came from');
  assert.match(out, '1 unhandled promise rejection(s)');
});

test('a clean file passes', async () => {
  const { code, out } = await runRunner('clean.fixture.ts');
  assert.is(lastLine(out), '1 passed, 0 failed', out);
  assert.is(code, 0, out);
  assert.not.match(out, '[unhandled rejection]');
});

test('a suite that takes a store target runs twice: on the embedded store, then on the MongoDB stand-in', async () => {
  const { code, out } = await runRunner('store-target.fixture.ts');
  assert.is(lastLine(out), '2 passed, 0 failed', out);
  assert.is(code, 0, out);
  assert.match(out, 'store kind: embedded, backend: embedded');
  assert.match(out, 'store kind: standin, backend: mongodb');
  assert.match(out, /store-target\.fixture\.ts \[mongodb stand-in\] \(\d+ ms\): 1 passed, 0 failed/);
});

test('a file marked "test-runner: alone" runs first, with no other file beside it', async () => {
  const trace = join(await mkdtemp(join(tmpdir(), 'steward-runner-')), 'trace');
  await writeFile(trace, '');
  const { code, out } = await runRunner(['beside.fixture.ts', 'alone.fixture.ts'], { RUNNER_TRACE: trace, TEST_PARALLEL: '2' });
  assert.is(lastLine(out), '2 passed, 0 failed', out);
  assert.is(code, 0, out);
  assert.equal((await readFile(trace, 'utf8')).trim().split('\n'), ['alone start', 'alone end', 'beside start', 'beside end']);
});

test('a process a test file left running ends with the file', async () => {
  const trace = join(await mkdtemp(join(tmpdir(), 'steward-runner-')), 'pid');
  const { code, out } = await runRunner('leaves-a-process.fixture.ts', { RUNNER_TRACE: trace });
  assert.is(lastLine(out), '1 passed, 0 failed', out);
  assert.is(code, 0, out);
  const pid = Number(await readFile(trace, 'utf8'));
  assert.ok(pid > 0);
  // Gone, or a zombie waiting for a reaper (state Z): either way it no longer runs.
  const state = await readFile(`/proc/${pid}/stat`, 'utf8').then((t) => t.slice(t.lastIndexOf(')') + 2, t.lastIndexOf(')') + 3), () => 'gone');
  const alive = state !== 'gone' && state !== 'Z';
  assert.not.ok(alive, `process ${pid} still running`);
});

test.run();
