/**
 * Process entry for `steward serve`: configuration, logger, server, signals, and the net under
 * unhandled promise rejections. A bad configuration or a refused start exits with code 1 and a
 * message naming the problem.
 */
import { ConfigError, loadConfig, type Config } from './config.js';
import { createLogger, type Logger } from './log.js';
import { startSteward, StartupError } from './app/start.js';
import type { Steward } from './app/handle.js';
import { announceOwnerClaim } from './services/claims.js';

export { startSteward } from './app/start.js';
export type { Steward } from './app/handle.js';
export { loadConfig, type Config } from './config.js';

export async function serve(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`steward: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const log: Logger = createLogger(config.logLevel);
  installRejectionNet(log);
  let steward: Steward;
  try {
    steward = await startSteward(config, log);
  } catch (err) {
    if (err instanceof StartupError) {
      log.fatal({ reason: err.message }, 'refusing to start');
      process.stderr.write(`steward: ${err.message}\n`);
    } else {
      log.fatal({ err }, 'start failed');
      process.stderr.write(`steward: start failed: ${(err as Error).message}\n`);
    }
    // Let pino flush before exiting.
    setTimeout(() => process.exit(1), 50);
    return;
  }
  // Signal handlers first: whoever waits for the 'listening' line may signal at once.
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      log.error({ timeoutMs: config.shutdownTimeoutMs }, 'shutdown took too long; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    force.unref();
    steward.close().then(
      () => {
        log.info('shutdown complete');
        setTimeout(() => process.exit(0), 10);
      },
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  // An unclaimed owner gets a fresh claim on the console after every start (docs/identity.md);
  // it is printed before the 'listening' line, so whoever waits for that line has it too.
  await announceOwnerClaim(steward.ctx).catch((err: unknown) => log.error({ err }, 'printing the owner claim failed'));
  log.info({ port: steward.port, host: config.host, publicUrl: config.publicUrl }, `Steward listening on http://${config.host}:${steward.port}`);
}

/**
 * Logs a promise rejection nobody handled, with where it came from, and keeps the process
 * serving. Every fire-and-forget path has a handler of its own (a missing one is a defect); by
 * default Node would exit on the first one missed, dropping every socket, request and write in
 * flight for one failed store call. Returns a function that removes the net.
 */
export function installRejectionNet(log: Logger): () => void {
  const onRejection = (reason: unknown): void => {
    log.error({ err: reason, origin: rejectionOrigin(reason) }, 'unhandled promise rejection (a defect); the server keeps running');
  };
  process.on('unhandledRejection', onRejection);
  return () => {
    process.off('unhandledRejection', onRejection);
  };
}

/** The first frame of the rejection's stack in Steward's own code (else the first frame at all). */
export function rejectionOrigin(reason: unknown): string | undefined {
  const stack = reason instanceof Error ? reason.stack : undefined;
  if (!stack) return undefined;
  const frames = stack
    .split('\n')
    .slice(1)
    .map((line) => line.trim().replace(/^at /, ''));
  return frames.find((f) => !f.includes('node_modules') && !f.startsWith('node:') && !f.includes('(node:')) ?? frames[0];
}
