/**
 * `npm run cluster -- --nodes N [--port P] [--data DIR]`: cluster mode on one machine, every part
 * its own process (local-cluster.ts). Prints one JSON line per node once all are ready, then
 * `{"ready":true}`; a node that ends later (killed from outside) is reported, not restarted. Stops
 * everything on SIGINT or SIGTERM. For trying cluster mode, not for production (docs/cluster.md).
 */
import { resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { startLocalCluster, type LocalCluster } from './local-cluster.js';

const whole = (min: number, max: number) => (v: string): number => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(`a whole number from ${min} to ${max}`);
  return n;
};

const opts = new Command('cluster')
  .description('Cluster mode on one machine: nats-server, the MongoDB stand-in (unless MONGODB_URI is set) and N Steward nodes, each its own process. Not for production.')
  .requiredOption('--nodes <n>', 'how many Steward nodes', whole(1, 64))
  .option('--port <port>', 'the first node\'s port; the others follow (0: free ports)', whole(0, 65535), 8080)
  .option('--data <dir>', 'where data and logs go (default: a temporary directory, removed on exit)')
  .parse()
  .opts<{ nodes: number; port: number; data?: string }>();

const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);
const say = (line: string) => process.stderr.write(`cluster: ${line}\n`);

let cluster: LocalCluster | undefined;
let stopping = false;
const stop = (signal: string) => {
  if (stopping) return;
  stopping = true;
  say(`${signal}: stopping the nodes, the store and NATS`);
  (cluster ? cluster.stop() : Promise.resolve()).then(
    () => process.exit(0),
    (err: unknown) => {
      say(`stopping failed: ${(err as Error).message}`);
      process.exit(1);
    },
  );
};
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));

try {
  cluster = await startLocalCluster({ nodes: opts.nodes, port: opts.port, ...(opts.data ? { dataDir: resolve(opts.data) } : {}), say });
} catch (err) {
  say(`cannot start: ${(err as Error).message}`);
  process.exit(1);
}
if (stopping) await new Promise(() => undefined); // a signal came during the start: stop() exits
cluster.onNodeExit((node, how) => {
  out({ node: node.nodeId, exited: how });
  say(`${node.nodeId} ended (code ${how.code}, signal ${how.signal}); it is not restarted`);
});
for (const n of cluster.nodes) out({ node: n.nodeId, url: n.url, pid: n.pid });
say(`logs: ${cluster.nodes.map((n) => n.logFile).join(', ')}`);
out({ ready: true });
