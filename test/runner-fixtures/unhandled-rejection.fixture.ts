/**
 * For test/runner.test.ts: a suite whose tests pass while a store failure is left unhandled, under
 * the same net `steward serve` installs (which logs it and keeps the process alive). The runner
 * must fail this file.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { installRejectionNet } from '../../src/main.js';
import { createLogger } from '../../src/log.js';
import { StoreUnavailableError } from '../../src/store/types.js';

installRejectionNet(createLogger('silent'));

test('a fire-and-forget store call fails and nobody handles it', async () => {
  void Promise.reject(new StoreUnavailableError('injected: the store went away'));
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.ok(true);
});

test('the suite goes on after it', () => {
  assert.is(1 + 1, 2);
});

test.run();
