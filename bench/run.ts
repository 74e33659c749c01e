/**
 * Fleet benchmarks (not part of npm test). Each starts a fresh Steward in its own process and
 * drives it with load-generator processes (bench/loadgen.ts), then prints a table.
 *
 *   npm run bench                                   every benchmark at the small default size
 *   npm run bench -- memory --agents 18000          (a) N agents held, server memory per agent
 *   npm run bench -- recert --agents 10000          (b) a workspace policy re-certifying N agents
 *   npm run bench -- reconnect --agents 10000       (c) N agents reconnecting at once, then after a
 *                                                   restart of Steward (--down S seconds away)
 *   npm run bench -- heartbeat --agents 10000 --rate 20000   (d) heartbeat acks/s and latency
 *   npm run bench -- feed --agents 10000            (e) a live-feed subscriber of presence and actors during (b)
 *   npm run bench -- dashboard --agents 10000        (f) the dashboard's reads with N agents connected
 *   npm run bench -- compare <git ref> [bench…]     this tree against another commit, alternating
 *                                                   runs, ratio new / old (bench/compare.ts)
 *   npm run bench -- cluster --agents 2000          cluster mode: each cross-node path against its
 *                                                   single-node twin, and per-operation costs
 *                                                   (bench/cluster.ts, its options there)
 *
 * Options (or environment): --agents N (BENCH_AGENTS, default 500), --loadgens K (BENCH_LOADGENS,
 * default 2), --hold S seconds agents are held heartbeating every 30 s in (a) (BENCH_HOLD_SECONDS,
 * default 150: the steady state; V8 returns what the connection storm left committed only in a
 * memory-reducing collection, which it starts by itself about 100 s after its last full one),
 * --rate R heartbeats per second in (d) (BENCH_HB_RATE, default 2000), --seconds D duration of (d)
 * (BENCH_HB_SECONDS, default 10), counted after --warmup W seconds at the same rate (BENCH_HB_WARMUP_SECONDS,
 * default 3; its figures are printed apart), --concurrency C handshakes in flight per load generator
 * (BENCH_CONCURRENCY, default 250), --requests Q sequential requests per endpoint in (e)
 * (BENCH_REQUESTS, default 500, after 50 not counted), --actor-idle S the server's AGENT_ACTOR_IDLE_SECONDS in (a)
 * (BENCH_ACTOR_IDLE_SECONDS, default 0: agent actors stay in memory, as the target assumes; a value
 * longer than the hold makes (a) wait until they have left memory for one more reading).
 *
 * Diagnostics: BENCH_PROFILE_DIR=/tmp/x writes CPU profiles of the server during the connection
 * phase and the measured phase (that one also of each load generator), each with an allocation
 * profile beside it (.heapprofile), and in (a) heap snapshots of the server once the agents are
 * connected and after the hold (.heapsnapshot, for Chrome DevTools' Memory tab);
 * BENCH_SERVER_ENV='{"NAME":"value"}' adds server configuration;
 * BENCH_SERVER_NODE_OPTIONS='--trace-gc' adds Node options to the server process,
 * BENCH_LOADGEN_NODE_OPTIONS to each load generator.
 */
import { flag, floorRow, fmt as formatNumber, percentile, table, which } from './report.js';
import { startProc, type Proc } from './proc.js';
import { CONCURRENCY, HB_SECONDS, LOADGENS, N, RATE, loadgenAddresses } from './options.js';
import { cpuTimesRow, machineRows, readCpuTimes, readMachine, type CpuTimes } from './machine.js';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import WebSocket from 'ws';
import { SERVER_ENV, SERVER_NODE_FLAGS } from '../src/cli/node-flags.js';
import { benchCluster } from './cluster.js';
import { httpLoad, type HttpLoad } from './http-load.js';
import { benchCompare } from './compare.js';
import { mkdirSync } from 'node:fs';

// The profiles' directory is made here, so that BENCH_PROFILE_DIR may name one that does not exist yet.
if (process.env.BENCH_PROFILE_DIR) mkdirSync(process.env.BENCH_PROFILE_DIR, { recursive: true });


const HOLD_S = flag('hold', 'BENCH_HOLD_SECONDS', 150);
/** Seconds of heartbeats at the full rate before (d) counts (BENCH_HB_WARMUP_SECONDS). */
const WARMUP_S = flag('warmup', 'BENCH_HB_WARMUP_SECONDS', 3);
const ACTOR_IDLE_S = flag('actor-idle', 'BENCH_ACTOR_IDLE_SECONDS', 0);
const REQUESTS = flag('requests', 'BENCH_REQUESTS', 500);
/** Seconds Steward stays down in (c)'s restart (BENCH_DOWN_SECONDS): long enough for the agents' back-off to reach its cap. */
const DOWN_S = flag('down', 'BENCH_DOWN_SECONDS', 45);



const MB = 1024 * 1024;
const fmt = (n: number, d = 1) => formatNumber(n, d);



interface Setup {
  server: Proc;
  loadgens: Proc[];
  url: string;
  token: string;
  workspaceId: string;
  mem0: any;
  memRegistered: any;
  connectMs: number;
  /** The server's CPU per agent (µs, all threads) during the first connection of all agents: a first handshake each. */
  connectCpuUs: number;
}

/**
 * A server with N agents and load generators connected: Steward with the agents pre-registered in
 * one workspace, or the floor (bench/floor-server.ts), which the same load generators drive alike.
 */
async function setup(n: number, env: Record<string, string> = {}, target: 'steward' | 'floor' = 'steward'): Promise<Setup> {
  // The Node options and environment production runs with (src/cli/node-flags.ts), then the benchmark's own options.
  const server = startProc(
    target === 'floor' ? './floor-server.ts' : './server.ts',
    [...SERVER_NODE_FLAGS, '--expose-gc', ...(process.env.BENCH_SERVER_NODE_OPTIONS?.split(' ').filter(Boolean) ?? [])],
    SERVER_ENV,
  );
  // BENCH_SERVER_ENV='{"NAME":"value"}' adds configuration to the server under test.
  const extra = process.env.BENCH_SERVER_ENV ? (JSON.parse(process.env.BENCH_SERVER_ENV) as Record<string, string>) : {};
  const started = await server.call<{ port: number; token: string; workspaceId: string; memory: any }>({ cmd: 'start', env: { ...extra, ...env } });
  const url = `http://127.0.0.1:${started.port}`;
  const seed = randomBytes(8).toString('hex');
  const reg =
    target === 'floor'
      ? { memory: started.memory }
      : await server.call<{ ms: number; memory: any }>({ cmd: 'preregister', seed, count: n, workspaceId: started.workspaceId });
  const loadgens: Proc[] = [];
  const per = Math.ceil(n / LOADGENS);
  for (let g = 0; g < LOADGENS; g++) {
    const from = g * per;
    const count = Math.max(0, Math.min(per, n - from));
    const lg = startProc('./loadgen.ts', process.env.BENCH_LOADGEN_NODE_OPTIONS?.split(' ').filter(Boolean) ?? []);
    const localAddresses = loadgenAddresses(g);
    await lg.call({ cmd: 'init', url, seed, from, count, localAddresses });
    loadgens.push(lg);
  }
  const t0 = Date.now();
  const pdir = process.env.BENCH_PROFILE_DIR;
  if (pdir) await server.call({ cmd: 'profile' });
  const cpu0 = await server.call<NodeJS.CpuUsage>({ cmd: 'cpu' });
  const results = await Promise.all(loadgens.map((lg) => lg.call<{ ready: number; errors: number }>({ cmd: 'connect', concurrency: CONCURRENCY })));
  const connectMs = Date.now() - t0;
  const cpu1 = await server.call<NodeJS.CpuUsage>({ cmd: 'cpu' });
  const connectCpuUs = (cpu1.user - cpu0.user + cpu1.system - cpu0.system) / Math.max(1, n);
  if (pdir) await server.call({ cmd: 'profile', file: `${pdir}/${target === 'floor' ? 'floor-' : ''}connect-${n}.cpuprofile` });
  if (target === 'steward') await server.call({ cmd: 'settle' });
  const ready = results.reduce((a, r) => a + r.ready, 0);
  if (ready !== n) console.warn(`warning: ${ready} of ${n} agents ready after the first connection (${results.map((r) => r.errors).join('+')} socket errors)`);
  return { server, loadgens, url, token: started.token, workspaceId: started.workspaceId, mem0: started.memory, memRegistered: reg.memory, connectMs, connectCpuUs };
}

async function teardown(s: Setup): Promise<void> {
  await Promise.all(s.loadgens.map((lg) => lg.call({ cmd: 'close' }).catch(() => undefined)));
  await s.server.call({ cmd: 'stop' }).catch(() => undefined);
}

/** Runs fn with CPU profiles of the server and the load generators when BENCH_PROFILE_DIR is set. */
async function profiled<T>(s: Setup, name: string, fn: () => Promise<T>): Promise<T> {
  const dir = process.env.BENCH_PROFILE_DIR;
  if (!dir) return fn();
  await Promise.all([s.server, ...s.loadgens].map((p) => p.call({ cmd: 'profile' })));
  try {
    return await fn();
  } finally {
    await s.server.call({ cmd: 'profile', file: `${dir}/${name}-${N}.cpuprofile` });
    await Promise.all(s.loadgens.map((lg, i) => lg.call({ cmd: 'profile', file: `${dir}/${name}-${N}-loadgen${i}.cpuprofile` })));
  }
}

interface CpuMark {
  server: NodeJS.CpuUsage & { runQueueWaitMs: number | null };
  loadgens: NodeJS.CpuUsage[];
  machine: CpuTimes | null;
  at: number;
}

/** CPU time used so far by the server and by the load generators (user + system). */
async function cpuMark(s: Setup): Promise<CpuMark> {
  const [server, ...loadgens] = await Promise.all([s.server.call<CpuMark['server']>({ cmd: 'cpu' }), ...s.loadgens.map((lg) => lg.call<NodeJS.CpuUsage>({ cmd: 'cpu' }))]);
  return { server: server!, loadgens, machine: readCpuTimes(), at: performance.now() };
}

/** Table rows: CPU seconds the server and the load generators used between two marks. */
function cpuRows(a: CpuMark, b: CpuMark): Array<[string, string]> {
  const sec = (x: NodeJS.CpuUsage, y: NodeJS.CpuUsage) => (y.user - x.user + y.system - x.system) / 1e6;
  const lg = b.loadgens.reduce((acc, u, i) => acc + sec(a.loadgens[i]!, u), 0);
  const wait = a.server.runQueueWaitMs !== null && b.server.runQueueWaitMs !== null ? b.server.runQueueWaitMs - a.server.runQueueWaitMs : null;
  return [
    ['server CPU time (user + system), all threads', `${fmt(sec(a.server, b.server), 2)} s`],
    ['load generators CPU time (user + system)', `${fmt(lg, 2)} s`],
    [
      "server event-loop thread runnable but waiting for a core (share of the phase's time)",
      wait === null ? 'n/a' : `${fmt(wait / 1000, 2)} s (${fmt((100 * wait) / (b.at - a.at), 0)} %)`,
    ],
    cpuTimesRow(a.machine, b.machine),
  ];
}

/** The server's CPU time (user + system, all threads) between two marks, in µs per one of `ops`. */
function cpuPerOp(a: CpuMark, b: CpuMark, ops: number): number {
  return (b.server.user - a.server.user + b.server.system - a.server.system) / ops;
}

async function online(s: Setup): Promise<number> {
  return (await s.server.call<{ online: number }>({ cmd: 'online' })).online;
}

// ---------------------------------------------------------------------------------------------

/** New, old and large-object spaces of a memory reading: committed (used) MiB. */
function spaceRow(spaces: Record<string, { size: number; used: number }>): string {
  const one = (name: string) => `${fmt((spaces[name]?.size ?? 0) / MB)} (${fmt((spaces[name]?.used ?? 0) / MB)})`;
  return ['new_space', 'old_space', 'large_object_space'].map(one).join(' / ') + ' MiB';
}

async function benchMemory(): Promise<void> {
  // Agent actors stay in memory (ACTOR_IDLE_S 0), or leave it after ACTOR_IDLE_S s without a
  // lifecycle event (AGENT_ACTOR_IDLE_SECONDS); with a value longer than the hold, the hold's
  // reading has them in memory and a last reading waits until they left.
  const s = await setup(N, { AGENT_ACTOR_IDLE_SECONDS: String(ACTOR_IDLE_S) });
  type Reading = { memory: any; actors: Record<string, number>; storeBytes: number };
  const read = () => s.server.call<Reading>({ cmd: 'memory' });
  const live = await read();
  const pdir = process.env.BENCH_PROFILE_DIR;
  if (pdir) await s.server.call({ cmd: 'heapsnapshot', file: `${pdir}/memory-${N}-live.heapsnapshot` });
  await Promise.all(s.loadgens.map((lg) => lg.call({ cmd: 'heartbeats', intervalMs: 30_000 })));
  const c0 = await cpuMark(s);
  await profiled(s, 'hold', () => new Promise((r) => setTimeout(r, HOLD_S * 1000)));
  const c1 = await cpuMark(s);
  const held = await read();
  if (pdir) await s.server.call({ cmd: 'heapsnapshot', file: `${pdir}/memory-${N}-held.heapsnapshot` });
  // Until the actors have left memory (idle time after their last event, plus the idle check).
  const deadline = Date.now() + (ACTOR_IDLE_S + 30) * 1000;
  let passivated = held;
  while (ACTOR_IDLE_S > 0 && (passivated.actors.agent ?? 0) > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 5000));
    passivated = await read();
  }
  const hb = await Promise.all(s.loadgens.map((lg) => lg.call<{ sent: number; acked: number }>({ cmd: 'stopHeartbeats' })));
  const on = await online(s);
  await teardown(s);
  const floor = await floorMemory();
  const perAgent = (bytes: number) => `${fmt(bytes / N / 1024, 2)} KiB`;
  const rows = (label: string, r: Reading): Array<[string, string]> => [
    [`${label}, ${r.actors.agent ?? 0} agent actors in memory: RSS / heap used`, `${fmt(r.memory.rssAsIs / MB)} / ${fmt(r.memory.heapUsed / MB)} MiB`],
    ['  per agent (minus the empty server): RSS / heap used', `**${perAgent(r.memory.rssAsIs - s.mem0.rssAsIs)}** / ${perAgent(r.memory.heapUsed - s.mem0.heapUsed)}`],
    ['  RSS after a forced full collection, per agent', perAgent(r.memory.rss - s.mem0.rss)],
    ['  V8 spaces, committed (used): new / old / large objects', spaceRow(r.memory.spaces)],
  ];
  table(`(a) ${N} agents held, heartbeating every 30 s`, [
    ['agents online (server)', String(on)],
    ['first connection of all agents', `${fmt(s.connectMs / 1000, 1)} s`],
    ['heartbeats sent / acknowledged', `${hb.reduce((a, r) => a + r.sent, 0)} / ${hb.reduce((a, r) => a + r.acked, 0)}`],
    ['server RSS: empty / agents registered', `${fmt(s.mem0.rssAsIs / MB)} / ${fmt(s.memRegistered.rssAsIs / MB)} MiB`],
    ...rows('right after the connection storm', live),
    ...rows(`after a ${HOLD_S} s hold`, held),
    ...cpuRows(c0, c1).map(([k, v]) => [`  during the hold: ${k}`, v] as [string, string]),
    ['  the store\'s files on disk: right after the connection storm / after the hold', `${fmt(live.storeBytes / MB)} / ${fmt(held.storeBytes / MB)} MiB`],
    ...(ACTOR_IDLE_S > 0 ? rows('once idle actors left memory', passivated) : []),
    ['  V8 heap committed (heapTotal) / external / array buffers, at the end', `${fmt(passivated.memory.heapTotal / MB)} / ${fmt(passivated.memory.external / MB)} / ${fmt(passivated.memory.arrayBuffers / MB)} MiB`],
    [`the floor (${floor.online} bare uWS sockets) after the same hold: RSS / heap used per socket`, `${perAgent(floor.rss)} / ${perAgent(floor.heap)}`],
    ['RSS per agent after the hold: Steward / floor (ratio)', `${perAgent(held.memory.rssAsIs - s.mem0.rssAsIs)} / ${perAgent(floor.rss)} (**×${fmt((held.memory.rssAsIs - s.mem0.rssAsIs) / floor.rss, 2)}**)`],
    floorRow('held agent and second of the hold', cpuPerOp(c0, c1, N * HOLD_S), floor.cpuUs / (N * HOLD_S)),
  ]);
}

/** The floor of (a): N bare uWS sockets through the same handshake, held as long with the same heartbeats. */
async function floorMemory(): Promise<{ online: number; rss: number; heap: number; cpuUs: number }> {
  const f = await setup(N, {}, 'floor');
  await Promise.all(f.loadgens.map((lg) => lg.call({ cmd: 'heartbeats', intervalMs: 30_000 })));
  const c0 = await cpuMark(f);
  await profiled(f, 'floor-hold', () => new Promise((r) => setTimeout(r, HOLD_S * 1000)));
  const c1 = await cpuMark(f);
  const held = await f.server.call<{ memory: any; online: number }>({ cmd: 'memory' });
  await Promise.all(f.loadgens.map((lg) => lg.call({ cmd: 'stopHeartbeats' })));
  await teardown(f);
  return { online: held.online, rss: held.memory.rssAsIs - f.mem0.rssAsIs, heap: held.memory.heapUsed - f.mem0.heapUsed, cpuUs: cpuPerOp(c0, c1, 1) };
}

async function benchRecert(): Promise<void> {
  const s = await setup(N);
  const watching = Promise.all(s.loadgens.map((lg) => lg.call<{ lastAt: number; missing: number }>({ cmd: 'watchPolicy', policyId: '*', timeoutMs: 120_000 })));
  await new Promise((r) => setTimeout(r, 200)); // the watch is installed in every load generator
  const { res, body, t0, tAnswer, watched, cpu0, cpu1, counters0, counters1 } = await profiled(s, 'recert', async () => {
    const counters0 = await s.server.call<Counters>({ cmd: 'counters' });
    const cpu0 = await cpuMark(s);
    const t0 = Date.now();
    const res = await fetch(`${s.url}/api/policies`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${s.token}` },
      body: JSON.stringify({ workspaceId: s.workspaceId, capabilities: ['api_call'], resourceLimits: { maxTokensPerDay: 100000, maxRequestsPerHour: 1000 } }),
    });
    const tAnswer = Date.now();
    const body = (await res.json()) as { sentTo?: string[] };
    const watched = await watching;
    const cpu1 = await cpuMark(s);
    const counters1 = await s.server.call<Counters>({ cmd: 'counters' });
    return { res, body, t0, tAnswer, watched, cpu0, cpu1, counters0, counters1 };
  });
  const last = Math.max(...watched.map((w) => w.lastAt));
  const missing = watched.reduce((a, w) => a + w.missing, 0);
  await teardown(s);
  table(`(b) a workspace policy re-certifying ${N} connected agents`, [
    ['POST /api/policies status', String(res.status)],
    ['sentTo', String(body.sentTo?.length ?? 0)],
    ['POST answered after', `${tAnswer - t0} ms`],
    ['last agent holds its co-signed certificate (ready) after', missing === 0 ? `${last - t0} ms` : `${missing} agents never did`],
    actorWritesRow(counters0, counters1),
    ...cpuRows(cpu0, cpu1),
    ...floorRecertRows(await floorRecert(), cpuPerOp(cpu0, cpu1, N), last - t0),
  ]);
}

/** µs per Ed25519 sign and verify on one core, with the implementation Steward uses (timed in the floor's process). */
type CryptoCost = { signUs: number; verifyUs: number; implementation: string };

/** The floor of (b): every held socket offered a new certificate (one sign), its co-signature verified, `ready` sent. */
async function floorRecert(): Promise<{ lastMs: number; cpuUs: number; crypto: CryptoCost; sentTo: number }> {
  const f = await setup(N, {}, 'floor');
  const crypto = await f.server.call<CryptoCost>({ cmd: 'crypto' });
  const watching = Promise.all(f.loadgens.map((lg) => lg.call<{ lastAt: number; missing: number }>({ cmd: 'watchPolicy', policyId: '*', timeoutMs: 120_000 })));
  await new Promise((r) => setTimeout(r, 200));
  const { c0, c1, t0, watched, sentTo } = await profiled(f, 'floor-recert', async () => {
    const c0 = await cpuMark(f);
    const t0 = Date.now();
    const { sentTo } = await f.server.call<{ sentTo: number }>({ cmd: 'recert' });
    const watched = await watching;
    return { c0, c1: await cpuMark(f), t0, watched, sentTo };
  });
  await teardown(f);
  return { lastMs: Math.max(...watched.map((w) => w.lastAt)) - t0, cpuUs: cpuPerOp(c0, c1, N), crypto, sentTo };
}

function floorRecertRows(floor: Awaited<ReturnType<typeof floorRecert>>, stewardUs: number, stewardMs: number): Array<[string, string]> {
  const cryptoUs = floor.crypto.signUs + floor.crypto.verifyUs;
  return [
    ['the floor: re-certified / last ready after', `${floor.sentTo} / ${floor.lastMs} ms (Steward ${stewardMs} ms, ×${fmt(stewardMs / floor.lastMs, 2)})`],
    floorRow('re-certified agent', stewardUs, floor.cpuUs),
    cryptoRow('one sign and one verify', cryptoUs, stewardUs, floor.crypto),
  ];
}

/** The crypto alone of an operation (µs at the cost measured in this run) and Steward's CPU against it. */
function cryptoRow(what: string, cryptoUs: number, stewardUs: number, c: CryptoCost): [string, string] {
  return [
    `its crypto alone (${what}; ${c.implementation} sign ${fmt(c.signUs, 0)} / verify ${fmt(c.verifyUs, 0)} µs): µs, Steward's CPU ÷ it`,
    `${fmt(cryptoUs, 1)} µs, ×${fmt(stewardUs / cryptoUs, 2)}`,
  ];
}

async function benchReconnect(): Promise<void> {
  // A port below the ephemeral range, as a server's is: the agents' own sockets (their ephemeral
  // ports) would otherwise hold the server's port while it is down and refuse its restart.
  const s = await setup(N, { PORT: String(await portBelowEphemeralRange()) });
  const counters0 = await s.server.call<Counters>({ cmd: 'counters' });
  const cpu0 = await cpuMark(s);
  const results = await profiled(s, 'reconnect', () =>
    Promise.all(s.loadgens.map((lg) => lg.call<{ t0: number; ready: number; lastReadyAt: number; errors: number }>({ cmd: 'reconnect', concurrency: CONCURRENCY }))),
  );
  const t0 = Math.min(...results.map((r) => r.t0));
  const last = Math.max(...results.map((r) => r.lastReadyAt));
  const ready = results.reduce((a, r) => a + r.ready, 0);
  const cpu1 = await cpuMark(s);
  const counters1 = await s.server.call<Counters>({ cmd: 'counters' });
  const on = await online(s);
  // Steward's restart (its own table) before the floor, so that the floor runs alone.
  await benchRestart(s);
  await teardown(s);
  const floor = await floorReconnect();
  table(`(c) ${N} agents reconnecting at once`, [
    ['agents ready again', `${ready} of ${N}`],
    ['online on the server afterwards', String(on)],
    ['socket errors', String(results.reduce((a, r) => a + r.errors, 0))],
    ['handshakes in flight per load generator', String(CONCURRENCY)],
    ['all online after', `${last - t0} ms`],
    actorWritesRow(counters0, counters1),
    ...cpuRows(cpu0, cpu1),
    ['the floor: ready again / all online after', `${floor.ready} / ${floor.lastMs} ms (Steward ×${fmt((last - t0) / floor.lastMs, 2)})`],
    floorRow('reconnection', cpuPerOp(cpu0, cpu1, N), floor.cpuUs),
    cryptoRow('one verify', floor.crypto.verifyUs, cpuPerOp(cpu0, cpu1, N), floor.crypto),
    ['first connection of all agents (a first handshake each): Steward / floor', `${fmt(s.connectMs / 1000, 2)} / ${fmt(floor.connectMs / 1000, 2)} s`],
    floorRow('first handshake', s.connectCpuUs, floor.connectCpuUs),
    cryptoRow('two verifies and a sign', 2 * floor.crypto.verifyUs + floor.crypto.signUs, s.connectCpuUs, floor.crypto),
  ]);
}

/** The floor of (c): the same load generators drop every socket and reconnect to bare uWS (one verify each). */
async function floorReconnect(): Promise<{ ready: number; lastMs: number; cpuUs: number; crypto: CryptoCost; connectMs: number; connectCpuUs: number }> {
  const f = await setup(N, {}, 'floor');
  const crypto = await f.server.call<CryptoCost>({ cmd: 'crypto' });
  const c0 = await cpuMark(f);
  const results = await profiled(f, 'floor-reconnect', () =>
    Promise.all(f.loadgens.map((lg) => lg.call<{ t0: number; ready: number; lastReadyAt: number }>({ cmd: 'reconnect', concurrency: CONCURRENCY }))),
  );
  const c1 = await cpuMark(f);
  await teardown(f);
  const t0 = Math.min(...results.map((r) => r.t0));
  const { connectMs, connectCpuUs } = f;
  return { ready: results.reduce((a, r) => a + r.ready, 0), lastMs: Math.max(...results.map((r) => r.lastReadyAt)) - t0, cpuUs: cpuPerOp(c0, c1, N), crypto, connectMs, connectCpuUs };
}

/**
 * (c), second half: Steward stops (agents get 1001) and stays down DOWN_S seconds while every
 * agent retries on the agents' back-off (RECONNECT_* in src/domain/agent-protocol.ts); then it
 * starts again on the same port and data. Measured: from its return to every agent ready.
 */
async function benchRestart(s: Setup): Promise<void> {
  await Promise.all(s.loadgens.map((lg) => lg.call({ cmd: 'backoff' })));
  await s.server.call({ cmd: 'down' });
  await new Promise((r) => setTimeout(r, DOWN_S * 1000));
  const up = await s.server.call<{ at: number }>({ cmd: 'up' });
  const results = await Promise.all(
    s.loadgens.map((lg) => lg.call<{ lastReadyAt: number; missing: number; errors: number }>({ cmd: 'waitReady', since: up.at, timeoutMs: 120_000 })),
  );
  const missing = results.reduce((a, r) => a + r.missing, 0);
  const last = Math.max(...results.map((r) => r.lastReadyAt));
  table(`(c) ${N} agents after Steward was down ${DOWN_S} s, reconnecting with the agents' back-off (0.5 s doubling to 8 s, equal jitter)`, [
    ['agents ready again', `${N - missing} of ${N}`],
    ['online on the server afterwards', String(await online(s))],
    ["all online after the server's return", missing === 0 ? `${last - up.at} ms` : `${missing} agents not within 120 s`],
  ]);
}

/** A free TCP port between 20000 and 29999 (Linux's ephemeral ports start at 32768). */
async function portBelowEphemeralRange(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    const free = await new Promise<boolean>((resolve) => {
      const probe = createServer().once('error', () => resolve(false));
      probe.listen(port, '0.0.0.0', () => probe.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

interface Counters {
  tokens: { heartbeats: number; ledgerWrites: number };
  actorWrites: number;
  actorBatches: number;
  loop: { p99: number; max: number };
  /** Cumulative counts of steward_heartbeat_ack_seconds per upper bound. */
  ackBuckets: Array<[number, number]>;
  /** The same observations, exact (ms), since the last reading: only once `recordAcks` was sent. */
  ackExact: { n: number; p50: number; p99: number; max: number };
}

/** Actor snapshot writes between two readings, and the store calls that carried them. */
function actorWritesRow(before: Counters, after: Counters): [string, string] {
  return ['actor snapshot writes (store calls)', `${after.actorWrites - before.actorWrites} (${after.actorBatches - before.actorBatches})`];
}

/** The histogram bucket holding the p-th percentile of the observations between two readings. */
function bucketPercentile(before: Array<[number, number]>, after: Array<[number, number]>, p: number): string {
  const counts = after.map(([le, n], i) => [le, n - (before[i]?.[1] ?? 0)] as const);
  const total = counts[counts.length - 1]?.[1] ?? 0;
  if (total === 0) return 'n/a';
  const rank = Math.ceil((p / 100) * total);
  const i = counts.findIndex(([, n]) => n >= rank);
  const upper = counts[i]![0];
  const lower = i > 0 ? counts[i - 1]![0] : 0;
  return upper === Infinity ? `> ${lower * 1000} ms` : `${lower * 1000}–${upper * 1000} ms`;
}

async function benchHeartbeat(): Promise<void> {
  const s = await setup(N);
  const intervalMs = Math.max(1, Math.round((N / RATE) * 1000));
  // A warm-up at the full rate, not counted: the server's first seconds at this rate (its code
  // compiled for it, the setup's collection and writes settling) are not its steady state.
  await Promise.all(s.loadgens.map((lg) => lg.call({ cmd: 'heartbeats', intervalMs })));
  await new Promise((r) => setTimeout(r, WARMUP_S * 1000));
  await s.server.call({ cmd: 'recordAcks' });
  const before = await s.server.call<Counters>({ cmd: 'counters' });
  const cpu0 = await cpuMark(s);
  let warmup: Array<{ sent: number; acked: number; latencies: number[] }> = [];
  const hb = await profiled(s, 'heartbeat', async () => {
    warmup = await Promise.all(s.loadgens.map((lg) => lg.call<{ sent: number; acked: number; latencies: number[] }>({ cmd: 'countHeartbeats' })));
    await new Promise((r) => setTimeout(r, HB_SECONDS * 1000));
    return Promise.all(s.loadgens.map((lg) => lg.call<{ sent: number; acked: number; latencies: number[]; loop: { p99: number; max: number } }>({ cmd: 'stopHeartbeats' })));
  });
  const cpu1 = await cpuMark(s);
  await new Promise((r) => setTimeout(r, 500));
  const after = await s.server.call<Counters>({ cmd: 'counters' });
  const all = hb.flatMap((r) => r.latencies).sort((a, b) => a - b);
  const sent = hb.reduce((a, r) => a + r.sent, 0);
  const acked = hb.reduce((a, r) => a + r.acked, 0);
  const warm = warmup.flatMap((r) => r.latencies).sort((a, b) => a - b);
  await teardown(s);
  const floor = await floorHeartbeat(intervalMs);
  table(`(d) heartbeats: ${N} agents, one every ${intervalMs} ms each (target ${RATE}/s), ${HB_SECONDS} s after a ${WARMUP_S} s warm-up`, [
    [`warm-up (first ${WARMUP_S} s, not counted below): acknowledged, p50 / p99 / max`, `${warmup.reduce((a, r) => a + r.acked, 0)}, ${fmt(percentile(warm, 50), 2)} / ${fmt(percentile(warm, 99), 2)} / ${fmt(warm[warm.length - 1] ?? NaN, 2)} ms`],
    ['heartbeats sent', String(sent)],
    ['acknowledged', String(acked)],
    ['acknowledgements per second', fmt(acked / HB_SECONDS, 0)],
    ['ack latency p50', `${fmt(percentile(all, 50), 2)} ms`],
    ['ack latency p99', `${fmt(percentile(all, 99), 2)} ms`],
    ['ack latency max', `${fmt(all[all.length - 1] ?? NaN, 2)} ms`],
    [
      'server side, arrival to ack sent: p50 / p99 / max (the histogram\'s buckets for p50 / p99)',
      `${fmt(after.ackExact.p50, 2)} / ${fmt(after.ackExact.p99, 2)} / ${fmt(after.ackExact.max, 2)} ms (${bucketPercentile(before.ackBuckets, after.ackBuckets, 50)} / ${bucketPercentile(before.ackBuckets, after.ackBuckets, 99)})`,
    ],
    ['ledger writes (store round trips) for them', String(after.tokens.ledgerWrites - before.tokens.ledgerWrites)],
    ['server event-loop delay p99 / max', `${fmt(after.loop.p99, 1)} / ${fmt(after.loop.max, 1)} ms`],
    ['load generators\' event-loop delay p99 / max (each)', hb.map((r) => `${fmt(r.loop.p99, 1)} / ${fmt(r.loop.max, 1)}`).join(', ') + ' ms'],
    ...cpuRows(cpu0, cpu1),
    ['the floor (bare uWS, JSON.parse, the same ack): acknowledged, p50 / p99 / max', `${floor.acked}, ${fmt(percentile(floor.latencies, 50), 2)} / ${fmt(percentile(floor.latencies, 99), 2)} / ${fmt(floor.latencies[floor.latencies.length - 1] ?? NaN, 2)} ms`],
    floorRow('heartbeat acknowledged', cpuPerOp(cpu0, cpu1, acked), floor.cpuUs),
  ]);
}

/** The floor of (d): the same heartbeats, warm-up and count against bare uWS. */
async function floorHeartbeat(intervalMs: number): Promise<{ acked: number; latencies: number[]; cpuUs: number }> {
  const f = await setup(N, {}, 'floor');
  await Promise.all(f.loadgens.map((lg) => lg.call({ cmd: 'heartbeats', intervalMs })));
  await new Promise((r) => setTimeout(r, WARMUP_S * 1000));
  const c0 = await cpuMark(f);
  const hb = await profiled(f, 'floor-heartbeat', async () => {
    await Promise.all(f.loadgens.map((lg) => lg.call({ cmd: 'countHeartbeats' })));
    await new Promise((r) => setTimeout(r, HB_SECONDS * 1000));
    return Promise.all(f.loadgens.map((lg) => lg.call<{ acked: number; latencies: number[] }>({ cmd: 'stopHeartbeats' })));
  });
  const c1 = await cpuMark(f);
  await teardown(f);
  const acked = hb.reduce((a, r) => a + r.acked, 0);
  return { acked, latencies: hb.flatMap((r) => r.latencies).sort((a, b) => a - b), cpuUs: cpuPerOp(c0, c1, acked) };
}

/** What a live-feed subscriber received since `reset`: WebSocket messages, the frames they carried, the frames folded away. */
interface FeedTally {
  messages: number;
  frames: number;
  folded: number;
  truncated: number;
  lastAt: number;
}

/** A /ws/feed subscriber (the owner's session) of `topics`, counting what it receives. */
async function feedSubscriber(url: string, token: string, topics: string[]): Promise<{ tally: FeedTally; reset(): void; quiet(ms: number): Promise<void>; close(): void }> {
  const ws = new WebSocket(url.replace(/^http/, 'ws') + '/ws/feed', { perMessageDeflate: false });
  let tally: FeedTally = { messages: 0, frames: 0, folded: 0, truncated: 0, lastAt: 0 };
  let waiting = new Set(topics);
  let subscribed: () => void = () => {};
  const ready = new Promise<void>((resolve) => (subscribed = resolve));
  ws.on('message', (data) => {
    const f = JSON.parse(data.toString()) as { type: string; topic?: string; frames?: unknown[]; folded?: number; truncated?: boolean };
    if (f.type === 'welcome') for (const topic of topics) ws.send(JSON.stringify({ type: 'subscribe', topic }));
    else if (f.type === 'subscribed') {
      waiting.delete(f.topic!);
      if (waiting.size === 0) subscribed();
    } else if (f.type === 'error') console.error('feed error', f);
    else {
      tally.messages++;
      tally.frames += f.type === 'batch' ? f.frames!.length : 1;
      tally.folded += f.folded ?? 0;
      if (f.truncated) tally.truncated++;
      tally.lastAt = Date.now();
    }
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  ws.send(JSON.stringify({ type: 'auth', token }));
  await ready;
  waiting = new Set();
  return {
    get tally() {
      return tally;
    },
    reset() {
      tally = { messages: 0, frames: 0, folded: 0, truncated: 0, lastAt: 0 };
    },
    /** Resolves once nothing has arrived for `ms`. */
    async quiet(ms: number) {
      for (;;) {
        const before = tally.messages;
        await new Promise((r) => setTimeout(r, ms));
        if (tally.messages === before) return;
      }
    },
    close: () => ws.close(),
  };
}

/** Most frames the subscriber of (e) may receive for a whole re-certification. */
const FEED_FRAMES_TARGET = 50;

async function benchFeed(): Promise<void> {
  const s = await setup(N);
  const sub = await feedSubscriber(s.url, s.token, ['presence', 'actors']);
  const watching = Promise.all(s.loadgens.map((lg) => lg.call<{ lastAt: number; missing: number }>({ cmd: 'watchPolicy', policyId: '*', timeoutMs: 120_000 })));
  await new Promise((r) => setTimeout(r, 200)); // the watch is installed in every load generator
  // What the setup's connections sent the subscriber is over: count from here.
  await sub.quiet(3000);
  sub.reset();
  const t0 = Date.now();
  const res = await fetch(`${s.url}/api/policies`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${s.token}` },
    body: JSON.stringify({ workspaceId: s.workspaceId, capabilities: ['api_call'], resourceLimits: { maxTokensPerDay: 100000 } }),
  });
  const body = (await res.json()) as { sentTo?: string[] };
  const watched = await watching;
  // Longer than the longest batch window (8 x FEED_BATCH_WINDOW_MS): the last batch has arrived.
  await sub.quiet(3000);
  const t = sub.tally;
  const last = Math.max(...watched.map((w) => w.lastAt));
  table(`(e) a live-feed subscriber of presence and actors while a workspace policy re-certifies ${N} connected agents`, [
    ['POST /api/policies status / sentTo', `${res.status} / ${body.sentTo?.length ?? 0}`],
    ['last agent holds its co-signed certificate after', `${last - t0} ms`],
    ['frames received (WebSocket messages)', `**${t.messages}** (target ≤ ${FEED_FRAMES_TARGET}: ${t.messages <= FEED_FRAMES_TARGET ? 'met' : 'not met'})`],
    ['events carried in them / folded (frames + folded = events)', `${t.frames} / ${t.folded} (${t.frames + t.folded})`],
    ['batches that dropped frames beyond FEED_BATCH_MAX_FRAMES (truncated)', String(t.truncated)],
    ['last frame after', t.messages > 0 ? `${t.lastAt - t0} ms` : 'none'],
  ]);
  sub.close();
  await teardown(s);
}


/** Times `count` sequential GETs of `path` (ms each), after a warm-up of 50 not counted. */
async function timeGets(s: Setup, path: string, count: number): Promise<{ ms: number[]; status: number }> {
  const get = async () => {
    const t = performance.now();
    const res = await fetch(`${s.url}${path}`, { headers: { authorization: `Bearer ${s.token}` } });
    await res.arrayBuffer();
    return { ms: performance.now() - t, status: res.status };
  };
  for (let i = 0; i < 50; i++) await get();
  const ms: number[] = [];
  let status = 0;
  for (let i = 0; i < count; i++) {
    const r = await get();
    ms.push(r.ms);
    status = r.status;
  }
  return { ms: ms.sort((a, b) => a - b), status };
}

async function benchDashboard(): Promise<void> {
  const s = await setup(N);
  const on = await online(s);
  const rows: Array<[string, string]> = [['agents online (server)', String(on)]];
  const cpu0 = await cpuMark(s);
  for (const [label, path] of [
    ['GET /api/fleet/summary (global admin)', '/api/fleet/summary'],
    ['GET /api/agents, first page of 20 (global admin)', '/api/agents?page=1&pageSize=20'],
    ['the same, most recently seen first', '/api/agents?page=1&pageSize=20&sortBy=lastSeen&sortDir=desc'],
    ['the same, page 250 of 500 by name', '/api/agents?page=250&pageSize=20'],
  ] as const) {
    const { ms, status } = await timeGets(s, path, REQUESTS);
    rows.push([`${label}: status, p50 / p99 / max`, `${status}, ${fmt(percentile(ms, 50), 2)} / **${fmt(percentile(ms, 99), 2)}** / ${fmt(ms[ms.length - 1] ?? NaN, 2)} ms`]);
  }
  const cpu1 = await cpuMark(s);
  const summary = (await (await fetch(`${s.url}/api/fleet/summary`, { headers: { authorization: `Bearer ${s.token}` } })).json()) as { agents: { total: number; online: number } };
  rows.push(['the summary says: agents total / online', `${summary.agents.total} / ${summary.agents.online}`]);
  // Throughput against the floor: the same request from HTTP_CONNECTIONS connections, then bare uWS answering its exact body.
  const auth = { authorization: `Bearer ${s.token}` };
  const body = await (await fetch(`${s.url}${PAGE}`, { headers: auth })).text();
  const c2 = await cpuMark(s);
  const steward = await profiled(s, 'agents-page', () => httpLoad(s.url, PAGE, auth, HTTP_SECONDS, HTTP_CONNECTIONS));
  const c3 = await cpuMark(s);
  await teardown(s);
  const f = await setup(0, {}, 'floor');
  await f.server.call({ cmd: 'json', body });
  const c4 = await cpuMark(f);
  const floor = await profiled(f, 'floor-agents-page', () => httpLoad(f.url, PAGE, auth, HTTP_SECONDS, HTTP_CONNECTIONS));
  const c5 = await cpuMark(f);
  await teardown(f);
  const load = (r: HttpLoad) => `${fmt(r.perSecond, 0)}/s, p50 ${fmt(r.p50, 2)} / p99 ${fmt(r.p99, 2)} ms${r.errors ? `, ${r.errors} not 200` : ''}`;
  table(`(f) the dashboard's reads with ${N} agents connected: ${REQUESTS} sequential requests each (after 50 not counted), target p99 < 20 ms`, [
    ...rows,
    ...cpuRows(cpu0, cpu1),
    [`first page of GET /api/agents from ${HTTP_CONNECTIONS} connections for ${HTTP_SECONDS} s (${body.length} bytes): Steward`, load(steward)],
    ['  the floor (bare uWS answering the same bytes)', load(floor)],
    ['  Steward ÷ floor, requests per second (goal ≥ 0.5)', `**${fmt(steward.perSecond / floor.perSecond, 2)}**`],
    floorRow('request', cpuPerOp(c2, c3, steward.requests), cpuPerOp(c4, c5, floor.requests)),
  ]);
}

/** The page (f)'s throughput phase asks for, and how: --http-seconds (BENCH_HTTP_SECONDS), --connections (BENCH_HTTP_CONNECTIONS). */
const PAGE = '/api/agents?page=1&pageSize=20';
const HTTP_SECONDS = flag('http-seconds', 'BENCH_HTTP_SECONDS', 10);
const HTTP_CONNECTIONS = flag('connections', 'BENCH_HTTP_CONNECTIONS', 50);


const benches: Record<string, () => Promise<void>> = {
  memory: benchMemory,
  recert: benchRecert,
  reconnect: benchReconnect,
  heartbeat: benchHeartbeat,
  feed: benchFeed,
  dashboard: benchDashboard,
  cluster: benchCluster,
};
if (which === 'compare') {
  await benchCompare(process.argv.slice(2));
  process.exit(0);
}
const selected = which === 'all' ? Object.keys(benches) : [which];
console.log(
  `Steward fleet benchmarks: ${selected.join(', ')}; N=${N}, ${LOADGENS} load generators, Node ${process.version}; ` +
    `the server runs as in production: ${[...Object.entries(SERVER_ENV).map(([k, v]) => `${k}=${v}`), 'node', ...SERVER_NODE_FLAGS].join(' ')}`,
);
for (const name of selected) {
  const fn = benches[name];
  if (!fn) {
    console.error(`unknown benchmark '${name}'; expected ${Object.keys(benches).join(', ')} or all`);
    process.exit(2);
  }
  table('the machine, right before', machineRows(await readMachine()));
  await fn();
}
process.exit(0);
