/**
 * The Steward under test, in its own process (started by bench/run.ts with --expose-gc), driven
 * over IPC: start, pre-register agents directly through the store (fast), report memory, online
 * count and token counters, stop.
 */
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { startSteward, type Steward } from '../src/server.js';
import { generateKeyPair } from '../src/domain/did.js';
import { fleetOf } from '../src/app/handle.js';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { writeHeapSnapshot } from 'node:v8';
import type { MetricValueWithName } from 'prom-client';
import { profileCommand } from './profiler.js';
import { ownerAndWorkspace, preregister } from './fleet-setup.js';
import { readRunQueueWaitMs } from './machine.js';
import { percentile } from './report.js';
import { serveCommands } from './proc.js';
import { memory } from './memory.js';

const loopDelay = monitorEventLoopDelay({ resolution: 5 });
loopDelay.enable();

type Msg =
  | { cmd: 'start'; env: Record<string, string> }
  | { cmd: 'preregister'; seed: string; count: number; workspaceId: string }
  | { cmd: 'memory' }
  | { cmd: 'online' }
  | { cmd: 'counters' }
  | { cmd: 'recordAcks' }
  | { cmd: 'profile'; file?: string }
  | { cmd: 'heapsnapshot'; file: string }
  | { cmd: 'cpu' }
  | { cmd: 'settle' }
  | { cmd: 'down' }
  | { cmd: 'up' }
  | { cmd: 'stop' };

/** The full collection --expose-gc provides. */
const gc = (globalThis as { gc?: () => void }).gc;

let steward: Steward | undefined;
let dataDir = '';
/** The configuration of the first start, for `up` (same port, same data directory). */
let startedWith: Record<string, string> = {};
/**
 * Each heartbeat's time from arrival to its ack being sent (ms), the values of the server's own
 * histogram, kept once `recordAcks` asks (benchmark (d) only: (a) measures memory) and handed
 * out and cleared by `counters`.
 */
let ackMs: number[] | null = null;



/** The server's own heartbeat-ack histogram: cumulative counts per upper bound (seconds). */
async function ackBuckets(): Promise<Array<[number, number]>> {
  const metric = steward!.ctx.metrics.registry.getSingleMetric('steward_heartbeat_ack_seconds');
  if (!metric) return [];
  // A histogram's values name their series (…_bucket, …_sum, …_count).
  const values = (await metric.get()).values as Array<MetricValueWithName<string>>;
  return values
    .filter((v) => v.metricName === 'steward_heartbeat_ack_seconds_bucket')
    .map((v) => [v.labels.le === '+Inf' ? Infinity : Number(v.labels.le), v.value] as [number, number]);
}

/** Bytes of the embedded store's files (its datafiles, and a compaction's copy while one is written). */
async function storeBytes(): Promise<number> {
  const dir = join(dataDir, 'store');
  let total = 0;
  for (const name of await readdir(dir)) total += (await stat(join(dir, name)).catch(() => ({ size: 0 }))).size;
  return total;
}

serveCommands<Msg>(
  async (raw) => {
    switch (raw.cmd) {
      case 'start': {
        dataDir = await mkdtemp(join(tmpdir(), 'steward-bench-'));
        const owner = generateKeyPair();
        startedWith = { PORT: '0', HOST: '0.0.0.0', DATA_DIR: dataDir, LOG_LEVEL: 'warn', STEWARD_OWNER_DID: owner.did, ...raw.env };
        const config = loadConfig(startedWith);
        steward = await startSteward(config, createLogger(config.logLevel));
        startedWith.PORT = String(steward.port);
        const metrics = steward.ctx.metrics;
        const observe = metrics.observeHeartbeatAck.bind(metrics);
        metrics.observeHeartbeatAck = (seconds) => {
          ackMs?.push(seconds * 1000);
          observe(seconds);
        };
        const { token, workspaceId } = await ownerAndWorkspace(steward);
        return { port: steward.port, token, workspaceId, memory: memory() };
      }
      case 'preregister': {
        const started = Date.now();
        await preregister(steward!, raw.seed, raw.count, raw.workspaceId);
        return { ms: Date.now() - started, memory: memory() };
      }
      case 'memory':
        return { memory: memory(), sockets: steward!.ctx.sockets.counts(), actors: steward!.ctx.actors.counts(), storeBytes: await storeBytes() };
      case 'heapsnapshot':
        // BENCH_PROFILE_DIR set: what the heap holds, object by object (after a full collection).
        gc?.();
        writeHeapSnapshot(raw.file);
        return {};
      case 'cpu':
        return { ...process.cpuUsage(), runQueueWaitMs: readRunQueueWaitMs() };
      case 'settle':
        // Writes the setup phase left pending (actor snapshots held back while the loop was busy),
        // and collects the setup phase's garbage, so the measured phase pays only for its own work.
        await steward!.ctx.actors.flush();
        gc?.();
        return {};
      case 'down':
        // A restart's first half: the server stops as on SIGTERM (agents get 1001), its data kept.
        await steward!.close();
        return { at: Date.now() };
      case 'up': {
        const config = loadConfig(startedWith);
        steward = await startSteward(config, createLogger(config.logLevel));
        return { at: Date.now() };
      }
      case 'online':
        return { online: fleetOf(steward!.ctx).gateway.onlineCount() };
      case 'counters': {
        const f = fleetOf(steward!.ctx);
        const loop = { p99: loopDelay.percentile(99) / 1e6, max: loopDelay.max / 1e6 };
        loopDelay.reset();
        const acks = (ackMs ?? []).sort((a, b) => a - b);
        if (ackMs) ackMs = [];
        const ackExact = { n: acks.length, p50: percentile(acks, 50), p99: percentile(acks, 99), max: percentile(acks, 100) };
        return { tokens: f.tokens.stats, actorWrites: steward!.ctx.actors.stats.writes, actorBatches: steward!.ctx.actors.stats.writeBatches, loop, ackBuckets: await ackBuckets(), ackExact };
      }
      case 'recordAcks':
        ackMs = [];
        return {};
      case 'profile':
        // BENCH_PROFILE_DIR set: a CPU profile of the measured phase (start, then stop with a file name).
        await profileCommand(raw.file);
        return {};
    }
  },
  async () => {
    await steward?.close();
    await rm(dataDir, { recursive: true, force: true });
  },
);
