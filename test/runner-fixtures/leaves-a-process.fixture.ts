/** A runner fixture: starts a process it never stops and notes its pid in RUNNER_TRACE (runner.test.ts checks it is gone). */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { test } from 'uvu';

test('starts a process and leaves it running', () => {
  const child = spawn('sleep', ['600'], { stdio: 'ignore' });
  child.unref();
  writeFileSync(process.env.RUNNER_TRACE!, String(child.pid));
});

test.run();
