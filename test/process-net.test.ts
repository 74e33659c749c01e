/**
 * The net under unhandled promise rejections that `steward serve` installs (src/main.ts): the
 * rejection is logged with where it came from, and the process keeps running (Node's default is
 * to exit with code 1).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';

const fixture = fileURLToPath(new URL('./runner-fixtures/rejection-net.fixture.ts', import.meta.url));

test('an unhandled rejection is logged with its origin, and the process lives on', async () => {
  // Its own process, without the test runner's preload (which would count the rejection as a failure here).
  const { code, out } = await new Promise<{ code: number | null; out: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', fixture], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (c) => resolve({ code: c, out }));
  });
  assert.is(code, 0, out);
  const lines = out.trim().split('\n');
  assert.is(lines.at(-1), 'still serving', out);
  const logged = JSON.parse(lines.find((l) => l.startsWith('{'))!) as { level: number; msg: string; origin: string; err: { type: string; message: string } };
  assert.is(logged.level, 50);
  assert.is(logged.msg, 'unhandled promise rejection (a defect); the server keeps running');
  assert.equal([logged.err.type, logged.err.message], ['StoreUnavailableError', 'injected: the store went away']);
  assert.match(logged.origin, /^flushInTheBackground \(.*rejection-net\.fixture\.ts:\d+:\d+\)$/);
});

test.run();
