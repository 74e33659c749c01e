/**
 * For test/process-net.test.ts: a process with the net `steward serve` installs, in which a store
 * call nobody handles fails. It must log the rejection with its origin and keep running.
 */
import { installRejectionNet } from '../../src/main.js';
import { createLogger } from '../../src/log.js';
import { StoreUnavailableError } from '../../src/store/types.js';

installRejectionNet(createLogger('error'));

function flushInTheBackground(): void {
  void Promise.reject(new StoreUnavailableError('injected: the store went away'));
}

flushInTheBackground();
setTimeout(() => process.stdout.write('still serving\n'), 50);
