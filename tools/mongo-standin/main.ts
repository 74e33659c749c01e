/**
 * `npm run mongo:standin -- --port P [--data DIR]`: the MongoDB stand-in in the foreground, for
 * trying the MongoDB backend or cluster mode on one machine (docs/mongodb.md). Prints one line
 * `MONGODB_URI=…` once it accepts connections; stops on SIGINT or SIGTERM.
 */
import { resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { startMongoStandin } from './server.js';

const port = (v: string): number => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('a port is a whole number from 0 to 65535');
  return n;
};

const opts = new Command('mongo:standin')
  .description('A MongoDB wire-protocol stand-in over the embedded store engine, for tests and trying things on one machine; not for production.')
  .option('--port <port>', 'port on 127.0.0.1 (0: any free one)', port, 27017)
  .option('--data <dir>', 'keep the databases in this directory (default: a temporary one, removed on exit)')
  .option('--db <name>', 'database named in the printed MONGODB_URI', 'steward')
  .parse()
  .opts<{ port: number; data?: string; db: string }>();

try {
  const standin = await startMongoStandin({ port: opts.port, ...(opts.data ? { dataDir: resolve(opts.data) } : {}) });
  process.stdout.write(`MONGODB_URI=${standin.uri(opts.db)}\n`);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`mongo-standin: ${signal}, stopping\n`);
    standin.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`mongo-standin: ${(err as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
} catch (err) {
  process.stderr.write(`mongo-standin: cannot start: ${(err as Error).message}\n`);
  process.exit(1);
}
