/**
 * Several Steward nodes in one test process, in cluster mode on a real nats-server and one shared
 * store (the embedded store opened once, or MongoStore on the MongoDB stand-in or on MONGODB_URI's
 * server: see cluster-stores.ts), the way a broker's tests run several nodes against one real broker. Each
 * node has its own data directory, port, fault injector (to cut it off the store) and log;
 * leases are short (settings of the node's config) so takeovers happen within the test.
 */
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { loadConfig, type ClusterConfig } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { startSteward, type Steward } from '../src/server.js';
import { generateKeyPair, type Ed25519KeyPair } from '../src/domain/did.js';
import type { Store } from '../src/store/types.js';
import { FaultInjector } from './fault-store.js';
import { client, tempDir, logLines, type TestServer } from './helpers.js';
import { startNatsServer, type NatsServer } from './nats-server.js';
import { storeTargets, type StoreTarget } from './cluster-stores.js';
import type { TestUser } from './fixtures.js';

export interface ClusterNodeServer extends TestServer {
  nodeId: string;
  faults: FaultInjector;
  /** Every log line of this node (JSON text). */
  logs: string[];
}

export interface TestCluster {
  nats: NatsServer;
  store: Store;
  target: string;
  nodes: ClusterNodeServer[];
  /** The claimed owner (a global admin), with a session that every node accepts. */
  owner: TestUser;
  /** The owner's API on a given node. */
  as(node: ClusterNodeServer, who?: TestUser): ReturnType<typeof client>;
  /** Starts one more node (id `n<k>` unless given), with cluster settings of its own if given (e.g. `natsServers` through a proxy). */
  add(nodeId?: string, env?: Record<string, string>, cluster?: Partial<ClusterConfig>): Promise<ClusterNodeServer>;
  /** Stops every node, the NATS server, and removes the store. */
  stop(): Promise<void>;
}

export interface ClusterOptions {
  nodes?: number;
  /** Cluster settings overriding the test defaults (16 shards, 3 s lease, 500 ms margin, standby after 3 s off the bus, change log read every 500 ms). */
  cluster?: Partial<ClusterConfig>;
  /** Extra environment of every node. */
  env?: Record<string, string>;
  target?: StoreTarget;
}

/** The store targets the cluster suites run on (see cluster-stores.ts); startCluster takes the last by default. */
export const clusterTargets = storeTargets;

export async function startCluster(opts: ClusterOptions = {}): Promise<TestCluster> {
  const target = opts.target ?? storeTargets().at(-1)!;
  const { store, cleanup } = await target.open();
  const nats = await startNatsServer();
  const secretKey = randomBytes(32).toString('hex');
  const ownerKeys: Ed25519KeyPair = generateKeyPair();
  const nodes: ClusterNodeServer[] = [];
  let count = 0;

  const start = async (nodeId: string, env: Record<string, string> = {}, cluster: Partial<ClusterConfig> = {}): Promise<ClusterNodeServer> => {
    const dir = await tempDir('steward-node-');
    const fullEnv: Record<string, string> = {
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: dir,
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
      STEWARD_SECRET_KEY: secretKey,
      STEWARD_OWNER_DID: ownerKeys.did,
      AGENT_OFFLINE_GRACE_MS: '0',
      ...opts.env,
      ...env,
    };
    const config = loadConfig(fullEnv);
    config.cluster = {
      natsServers: [nats.url],
      nodeId,
      name: 'test',
      shards: 16,
      leaseMs: 3000,
      leaseMarginMs: 500,
      requestTimeoutMs: 5000,
      busLossReleaseMs: 3000,
      changePollMs: 500,
      ...opts.cluster,
      ...cluster,
    };
    const faults = new FaultInjector();
    const { lines, sink } = logLines();
    const log = createLogger(config.logLevel, sink);
    const steward: Steward = await startSteward(config, log, { sharedStore: store, wrapStore: faults.wrap });
    let stopped = false;
    const node: ClusterNodeServer = {
      ...steward,
      nodeId,
      faults,
      logs: lines,
      dataDir: dir,
      env: fullEnv,
      async stop(remove = true) {
        if (!stopped) {
          stopped = true;
          await steward.close();
        }
        if (remove) await rm(dir, { recursive: true, force: true });
      },
      restart: () => {
        throw new Error('restart a cluster node with add()');
      },
    };
    nodes.push(node);
    return node;
  };

  for (let i = 0; i < (opts.nodes ?? 2); i++) await start(`n${++count}`);
  const first = nodes[0]!;
  const ownerDoc = (await first.ctx.c.users.findOne({ isOwner: true }))!;
  const token = (await first.ctx.sessions.create('user', ownerDoc._id)).token;
  const owner: TestUser = { user: ownerDoc, keys: ownerKeys, token, api: client(first.url, token) };

  return {
    nats,
    store,
    target: target.name,
    nodes,
    owner,
    as: (node, who = owner) => client(node.url, who.token),
    add: (nodeId, env, cluster) => start(nodeId ?? `n${++count}`, env, cluster),
    async stop() {
      for (const n of nodes) await n.stop(true).catch(() => undefined);
      await nats.stop();
      await cleanup();
    },
  };
}
