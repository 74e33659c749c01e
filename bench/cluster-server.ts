/**
 * The Stewards under test of `npm run bench -- cluster`, in their own process, driven over IPC:
 * either one node as `npm start` runs it (embedded store, in-process bus), or two nodes in
 * cluster mode on a real nats-server (test/nats-server.ts starts it on a free port).
 *
 * Cluster mode needs MongoDB, which this bench does not assume: the two nodes share one embedded
 * store opened once in this process, through the test seam `sharedStore` of startSteward (the
 * way test/cluster-nodes.ts runs several nodes). So both nodes share this process's event loop
 * and CPU; the bus hop between them is a real one through the NATS server. The store's
 * operations are counted (every collection call of both nodes) so a reconnect storm's MongoDB
 * load can be estimated from them.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { startSteward, type Steward } from '../src/server.js';
import { generateKeyPair } from '../src/domain/did.js';
import { fleetOf } from '../src/app/handle.js';
import { openEmbeddedStore } from '../src/store/embedded/index.js';
import type { Store } from '../src/store/types.js';
import { connectNatsBus } from '../src/cluster/bus-nats.js';
import { LocalBus, LocalHub } from '../src/cluster/bus-local.js';
import type { Bus } from '../src/cluster/bus.js';
import { freePort, startNatsServer, type NatsServer } from '../test/nats-server.js';
import { ownerAndWorkspace, preregister } from './fleet-setup.js';
import { percentile } from './report.js';
import { serveCommands } from './proc.js';

type Msg =
  | { cmd: 'start'; mode: 'single' | 'cluster'; env: Record<string, string> }
  | { cmd: 'preregister'; seed: string; count: number; workspaceId: string }
  | { cmd: 'cpu' }
  | { cmd: 'memory' }
  | { cmd: 'storeOps' }
  | { cmd: 'nats' }
  | { cmd: 'online' }
  | { cmd: 'seenOnline'; did: string }
  | { cmd: 'busHop'; count: number; payloadBytes: number }
  | { cmd: 'stop' };

const gc = (globalThis as { gc?: () => void }).gc;
const silentLog = { error: () => undefined, warn: () => undefined, info: () => undefined };

let nodes: Steward[] = [];
let nats: NatsServer | undefined;
let monitorPort = 0;
let shared: Store | undefined;
const dirs: string[] = [];
/** Calls of every collection method by both nodes, `collection.method` → count. */
const ops = new Map<string, number>();
/** The same, a batch (an array argument: bulkUpdate, insertMany) counted once per document in it, as MongoDB counts them. */
let docOps = 0;


/** The store with each collection method call counted (nothing else changes). */
function counted(store: Store): Store {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop !== 'collection') return Reflect.get(target, prop, receiver);
      return (name: string) => {
        const col = target.collection(name);
        return new Proxy(col as object, {
          get(c, method, r) {
            const v = Reflect.get(c, method, r);
            if (typeof v !== 'function') return v;
            const key = `${name}.${String(method)}`;
            return (...args: unknown[]) => {
              ops.set(key, (ops.get(key) ?? 0) + 1);
              docOps += Array.isArray(args[0]) ? args[0].length : 1;
              return (v as (...a: unknown[]) => unknown).apply(c, args);
            };
          },
        });
      };
    },
  }) as Store;
}

function memory() {
  gc?.();
  gc?.();
  const m = process.memoryUsage();
  return { rss: m.rss, heapUsed: m.heapUsed };
}

/** Request/reply round trips between two buses, one after another: latencies (ms) and CPU per round trip (µs). */
async function roundTrips(a: Bus, b: Bus, count: number, payloadBytes: number): Promise<{ p50: number; p99: number; cpuUs: number }> {
  const subject = 'steward.bench.hop';
  const off = b.subscribe(subject, (msg) => {
    msg.respond?.(msg.data);
  });
  await b.flush();
  const payload = { pad: 'x'.repeat(payloadBytes) };
  for (let i = 0; i < 50; i++) await a.request(subject, payload, { timeoutMs: 5000 }); // warm-up
  const lat: number[] = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < count; i++) {
    const t = performance.now();
    await a.request(subject, payload, { timeoutMs: 5000 });
    lat.push(performance.now() - t);
  }
  const cpu = process.cpuUsage(cpu0);
  off();
  lat.sort((x, y) => x - y);
  return { p50: percentile(lat, 50), p99: percentile(lat, 99), cpuUs: (cpu.user + cpu.system) / count };
}

serveCommands<Msg>(
  async (raw) => {
    switch (raw.cmd) {
      case 'start': {
        const owner = generateKeyPair();
        const base = { PORT: '0', HOST: '0.0.0.0', LOG_LEVEL: 'warn', STEWARD_OWNER_DID: owner.did, ...raw.env };
        if (raw.mode === 'single') {
          const dir = await mkdtemp(join(tmpdir(), 'steward-bench-'));
          dirs.push(dir);
          const config = loadConfig({ ...base, DATA_DIR: dir });
          nodes = [await startSteward(config, createLogger(config.logLevel), { wrapStore: counted })];
        } else {
          monitorPort = await freePort();
          nats = await startNatsServer(['-m', String(monitorPort)]);
          const storeDir = await mkdtemp(join(tmpdir(), 'steward-bench-store-'));
          dirs.push(storeDir);
          shared = await openEmbeddedStore({ dataDir: storeDir });
          const secret = Buffer.alloc(32, 7).toString('hex');
          nodes = [];
          for (const nodeId of ['a', 'b']) {
            const dir = await mkdtemp(join(tmpdir(), `steward-bench-${nodeId}-`));
            dirs.push(dir);
            // The settings' defaults, as a deployment has them (1024 shards, 15 s leases).
            const config = loadConfig({ ...base, DATA_DIR: dir, STEWARD_SECRET_KEY: secret, MONGODB_URI: 'mongodb://unused.invalid/steward', NATS_URL: nats.url, STEWARD_NODE_ID: nodeId, CLUSTER_NAME: 'bench' });
            config.mongodbUri = undefined; // the shared embedded store instead (see the top of this file)
            nodes.push(await startSteward(config, createLogger(config.logLevel), { sharedStore: shared, wrapStore: counted }));
          }
        }
        // Until the shards are split evenly (a joining node takes its share over several lease
        // rounds), so no shard moves during the measurements.
        const t0 = Date.now();
        const split = () => nodes.map((n) => n.ctx.cluster?.status().ownedShards ?? 0);
        while (raw.mode === 'cluster' && Date.now() - t0 < 300_000) {
          const owned = split();
          const total = nodes[0]!.ctx.cluster!.status().shards;
          if (owned.every((k) => k >= Math.floor(total / nodes.length))) break;
          await new Promise((r) => setTimeout(r, 250));
        }
        const { token, workspaceId } = await ownerAndWorkspace(nodes[0]!);
        return { urls: nodes.map((n) => `http://127.0.0.1:${n.port}`), token, workspaceId, shards: split(), settleMs: Date.now() - t0 };
      }
      case 'preregister':
        await preregister(nodes[0]!, raw.seed, raw.count, raw.workspaceId);
        return {};
      case 'cpu':
        return process.cpuUsage();
      case 'memory':
        return memory();
      case 'storeOps':
        return { total: [...ops.values()].reduce((a, n) => a + n, 0), docs: docOps, byOp: Object.fromEntries(ops) };
      case 'nats': {
        if (!nats) return { subscriptions: 0, mem: 0 };
        const varz = (await (await fetch(`http://127.0.0.1:${monitorPort}/varz`)).json()) as { subscriptions: number; mem: number; in_msgs: number; out_msgs: number };
        return { subscriptions: varz.subscriptions, mem: varz.mem, inMsgs: varz.in_msgs, outMsgs: varz.out_msgs };
      }
      case 'seenOnline': {
        // Until every node counts the agent online (another node learns it over the bus).
        const t0 = Date.now();
        while (!nodes.every((n) => n.ctx.agents.isOnline(raw.did))) {
          if (Date.now() - t0 > 30_000) throw new Error(`not every node sees ${raw.did} online`);
          await new Promise((r) => setTimeout(r, 20));
        }
        return {};
      }
      case 'online':
        return { online: nodes.map((n) => fleetOf(n.ctx).gateway.onlineCount()) };
      case 'busHop': {
        // The bus alone, without Steward around it: two NATS connections through the server, and
        // two in-process buses on one hub (what one node uses).
        const [na, nb] = await Promise.all([connectNatsBus({ servers: [nats!.url], log: silentLog }), connectNatsBus({ servers: [nats!.url], log: silentLog })]);
        const hub = new LocalHub();
        const la = new LocalBus({ log: silentLog, hub });
        const lb = new LocalBus({ log: silentLog, hub });
        const natsHop = await roundTrips(na, nb, raw.count, raw.payloadBytes);
        const localHop = await roundTrips(la, lb, raw.count, raw.payloadBytes);
        await Promise.all([na.close(), nb.close(), la.close(), lb.close()]);
        return { nats: natsHop, local: localHop };
      }
    }
  },
  async () => {
    for (const n of nodes) await n.close().catch(() => undefined);
    await shared?.close();
    await nats?.stop();
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  },
);
