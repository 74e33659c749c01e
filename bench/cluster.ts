/**
 * `npm run bench -- cluster`: what cluster mode costs. Each path that crosses nodes is measured
 * in the same run against its single-node twin, and reported as a ratio:
 *
 * - intent round trip: POST /api/agents/{did}/intents until the agent's answer is back;
 * - policy re-issue: POST /api/policies for a workspace of N agents, until every agent holds its
 *   co-signed certificate (and DELETE, to undo it before the next round);
 * - mention delivery: POST of a channel message @mentioning an agent, until the agent's
 *   onChannelMessage runs;
 * - the dashboard's reads: GET /api/fleet/summary (in a cluster it gathers every node's socket
 *   counters) and the first page of GET /api/agents;
 * - feed fan-out: a message posted on one node, until the last live-feed subscriber has it.
 *
 * Three placements: one node as `npm start` runs it (the twin); two cluster nodes with the
 * request entering at the node that holds the agent's socket (A → A); and entering at the other
 * node (B → A, the cross-node path). Per-operation costs: CPU and store operations per handshake
 * and per reconnection, per re-certification and per heartbeat (one node and cluster), NATS
 * subscriptions and nats-server memory per held agent, and the bus hop alone (NATS request/reply
 * against the in-process bus).
 *
 * The two cluster nodes run in one process on one shared embedded store (bench/cluster-server.ts
 * says why: cluster mode needs MongoDB otherwise), on a real nats-server. The SDK agents of the
 * intent and mention paths run in this process; the N agents in load-generator processes.
 *
 * Options: --agents N (BENCH_AGENTS, default 500) agents held for re-certification, heartbeats
 * and handshakes; --samples K (BENCH_CLUSTER_SAMPLES, default 200) intents and mentions per
 * placement; --subscribers F (BENCH_FEED_SUBSCRIBERS, default 200) live-feed sockets, and
 * --messages M (BENCH_FEED_MESSAGES, default 20) messages fanned out to them; --rate R heartbeats
 * per second (BENCH_HB_RATE, default 2000) for --seconds D (BENCH_HB_SECONDS, default 10);
 * --hops H bus round trips (BENCH_BUS_HOPS, default 2000).
 */
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { StewardAgent } from '../src/agent/index.js';
import { generateKeyPair } from '../src/domain/did.js';
import { SERVER_ENV, SERVER_NODE_FLAGS } from '../src/cli/node-flags.js';
import { startProc, type Proc } from './proc.js';
import { flag, fmt, percentile, table } from './report.js';
import { CONCURRENCY, HB_SECONDS, LOADGENS, N, RATE, loadgenAddresses } from './options.js';

const SAMPLES = flag('samples', 'BENCH_CLUSTER_SAMPLES', 200);
const SUBSCRIBERS = flag('subscribers', 'BENCH_FEED_SUBSCRIBERS', 200);
const MESSAGES = flag('messages', 'BENCH_FEED_MESSAGES', 20);
const HOPS = flag('hops', 'BENCH_BUS_HOPS', 2000);
/**
 * The cluster nodes' settings beyond the defaults (1024 shards, 15 s leases): none. Shorter
 * leases would split the shards sooner, but on a loaded machine a node then misses its renewals
 * and drops its shards in the middle of a measurement. The bench waits for the split.
 */
const CLUSTER_ENV: Record<string, string> = {};

type Mode = 'single' | 'cluster';
/** Where a request enters: the one node, the node holding the agent (A), or the other (B). */
type Placement = 'one node' | 'A → A' | 'B → A';

interface Latencies {
  p50: number;
  p99: number;
}

interface Recert {
  status: number;
  sentTo: number;
  answerMs: number;
  lastReadyMs: number | null;
  cpuUsPerAgent: number;
}

interface ModeResult {
  mode: Mode;
  handshake: { ms: number; ready: number; cpuUs: number; storeOps: number; storeDocs: number; natsSubs: number; natsMemBytes: number; rssBytes: number };
  reconnect: { ms: number; ready: number; cpuUs: number; storeOps: number; storeDocs: number; topOps: string };
  intent: Map<Placement, Latencies>;
  mention: Map<Placement, Latencies>;
  /** The dashboard's reads with the N agents connected: the fleet summary, and the agents list's first page. */
  summary: Map<Placement, Latencies>;
  agentsPage: Map<Placement, Latencies>;
  recert: Map<Placement, Recert>;
  feed: Map<Placement, Latencies & { received: number; expected: number }>;
  heartbeat: { acked: number; perSecond: number; cpuUs: number; storeOpsPerAck: number; storeDocsPerAck: number; ack: Latencies };
  bus?: { nats: Latencies & { cpuUs: number }; local: Latencies & { cpuUs: number } };
  /** The idle server's own work, taken off each phase's costs. */
  idle: { cpuPct: number; opsPerSecond: number };
}

const now = () => performance.timeOrigin + performance.now();
const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
const lat = (xs: number[]): Latencies => ({ p50: percentile(sorted(xs), 50), p99: percentile(sorted(xs), 99) });
const cpuUs = (a: NodeJS.CpuUsage, b: NodeJS.CpuUsage) => b.user - a.user + b.system - a.system;

async function api(url: string, token: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function ok(r: Promise<{ status: number; body: any }>, what: string): Promise<any> {
  const res = await r;
  if (res.status >= 300) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** An SDK agent on `url`, approved by the owner and ready. */
async function sdkAgent(url: string, token: string, workspaceId: string, name: string, opts: Partial<ConstructorParameters<typeof StewardAgent>[0]>): Promise<StewardAgent> {
  const agent = new StewardAgent({ url, keys: generateKeyPair(), name, version: '1.0.0', capabilities: ['api_call'], workspace: workspaceId, reconnect: false, ...opts }).start();
  await agent.waitFor('pending', 30_000);
  await ok(api(url, token, 'POST', `/api/registrations/${agent.registrationId}/approve`, { capabilities: ['api_call'] }), 'approve');
  await agent.waitFor('ready', 30_000);
  return agent;
}

async function runMode(mode: Mode): Promise<ModeResult> {
  const server = startProc('./cluster-server.ts', [...SERVER_NODE_FLAGS, '--expose-gc'], SERVER_ENV);
  const loadgens: Proc[] = [];
  const feeds: Proc[] = [];
  const agents: StewardAgent[] = [];
  try {
    const { urls, token, workspaceId, shards, settleMs } = await server.call<{ urls: string[]; token: string; workspaceId: string; shards: number[]; settleMs: number }>({
      cmd: 'start',
      mode,
      env: mode === 'cluster' ? CLUSTER_ENV : {},
    });
    if (mode === 'cluster') console.log(`cluster: shards owned by A / B: ${shards.join(' / ')} (split after ${fmt(settleMs / 1000, 1)} s)`);
    const holder = urls[0]!;
    const entries: Array<[Placement, string]> = mode === 'single' ? [['one node', holder]] : [['A → A', holder], ['B → A', urls[1]!]];
    const seed = randomBytes(8).toString('hex');
    await server.call({ cmd: 'preregister', seed, count: N, workspaceId });

    // Handshakes: N agents connect to the holder.
    const per = Math.ceil(N / LOADGENS);
    for (let g = 0; g < LOADGENS; g++) {
      const from = g * per;
      const lg = startProc('./loadgen.ts');
      const localAddresses = loadgenAddresses(g);
      await lg.call({ cmd: 'init', url: holder, seed, from, count: Math.max(0, Math.min(per, N - from)), localAddresses });
      loadgens.push(lg);
    }
    const mark = async () => ({
      at: Date.now(),
      cpu: await server.call<NodeJS.CpuUsage>({ cmd: 'cpu' }),
      ops: await server.call<{ total: number; docs: number; byOp: Record<string, number> }>({ cmd: 'storeOps' }),
      nats: await server.call<{ subscriptions: number; mem: number }>({ cmd: 'nats' }),
    });
    type Mark = Awaited<ReturnType<typeof mark>>;
    // What the idle server does anyway (lease renewals, timers), per ms: taken off each phase.
    // The least of four one-second windows, so a burst of start-up work is not counted as idle.
    const idleMarks = [await mark()];
    for (let i = 0; i < 4; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      idleMarks.push(await mark());
    }
    const windows = idleMarks.slice(1).map((m, i) => ({ ms: m.at - idleMarks[i]!.at, cpu: cpuUs(idleMarks[i]!.cpu, m.cpu), ops: m.ops.total - idleMarks[i]!.ops.total, docs: m.ops.docs - idleMarks[i]!.ops.docs }));
    const idleCpuPerMs = Math.min(...windows.map((w) => w.cpu / w.ms));
    const idleOpsPerMs = Math.min(...windows.map((w) => w.ops / w.ms));
    const idleDocsPerMs = Math.min(...windows.map((w) => w.docs / w.ms));
    const cost = (a: Mark, b: Mark, per: number) => ({
      cpuUs: Math.max(0, cpuUs(a.cpu, b.cpu) - idleCpuPerMs * (b.at - a.at)) / per,
      ops: Math.max(0, b.ops.total - a.ops.total - idleOpsPerMs * (b.at - a.at)) / per,
      docs: Math.max(0, b.ops.docs - a.ops.docs - idleDocsPerMs * (b.at - a.at)) / per,
    });
    const mem0 = await server.call<{ rss: number }>({ cmd: 'memory' });
    const h0 = await mark();
    const connected = await Promise.all(loadgens.map((lg) => lg.call<{ ready: number }>({ cmd: 'connect', concurrency: CONCURRENCY })));
    // Delayed writes (actor snapshots, presence) land within a couple of seconds.
    await new Promise((r) => setTimeout(r, 2000));
    const h1 = await mark();
    const mem1 = await server.call<{ rss: number }>({ cmd: 'memory' });
    const handshake = {
      ms: h1.at - h0.at - 2000,
      ready: connected.reduce((a, r) => a + r.ready, 0),
      cpuUs: cost(h0, h1, N).cpuUs,
      storeOps: cost(h0, h1, N).ops,
      storeDocs: cost(h0, h1, N).docs,
      natsSubs: (h1.nats.subscriptions - h0.nats.subscriptions) / N,
      natsMemBytes: (h1.nats.mem - h0.nats.mem) / N,
      rssBytes: (mem1.rss - mem0.rss) / N,
    };

    // Reconnection of all at once (a reconnect storm): the handshake of agents already known.
    const r0 = await mark();
    const rec = await Promise.all(loadgens.map((lg) => lg.call<{ t0: number; ready: number; lastReadyAt: number }>({ cmd: 'reconnect', concurrency: CONCURRENCY })));
    await new Promise((r) => setTimeout(r, 2000));
    const r1 = await mark();
    const opsDelta = Object.entries(r1.ops.byOp)
      .map(([k, v]) => [k, (v - (r0.ops.byOp[k] ?? 0)) / N] as const)
      .filter(([, v]) => v >= 0.01)
      .sort((a, b) => b[1] - a[1]);
    const reconnect = {
      ms: Math.max(...rec.map((r) => r.lastReadyAt)) - Math.min(...rec.map((r) => r.t0)),
      ready: rec.reduce((a, r) => a + r.ready, 0),
      cpuUs: cost(r0, r1, N).cpuUs,
      storeOps: cost(r0, r1, N).ops,
      storeDocs: cost(r0, r1, N).docs,
      topOps: opsDelta.slice(0, 8).map(([k, v]) => `${k} ${fmt(v, 2)}`).join(', '),
    };

    // Intents: an SDK agent on the holder answers at once.
    const intentAgent = await sdkAgent(holder, token, workspaceId, 'bench-intent', { onIntent: () => ({ ok: true }) });
    agents.push(intentAgent);
    await server.call({ cmd: 'seenOnline', did: intentAgent.did });
    const intentDid = encodeURIComponent(intentAgent.did);
    const intentLat = new Map<Placement, number[]>(entries.map(([p]) => [p, []]));
    for (let i = 0; i < SAMPLES + 20; i++) {
      for (const [p, url] of entries) {
        const t = performance.now();
        await ok(api(url, token, 'POST', `/api/agents/${intentDid}/intents`, { action: 'api_call', params: { i } }), `intent via ${p}`);
        if (i >= 20) intentLat.get(p)!.push(performance.now() - t); // the first 20: warm-up
      }
    }

    // The dashboard's reads: in a cluster the summary gathers the other node's socket counters.
    const readLat = async (path: string) => {
      const out = new Map<Placement, number[]>(entries.map(([p]) => [p, []]));
      for (let i = 0; i < SAMPLES + 20; i++) {
        for (const [p, url] of entries) {
          const t = performance.now();
          await ok(api(url, token, 'GET', path), `${path} via ${p}`);
          if (i >= 20) out.get(p)!.push(performance.now() - t);
        }
      }
      return new Map([...out].map(([p, xs]) => [p, lat(xs)]));
    };
    const summary = await readLat('/api/fleet/summary');
    const agentsPage = await readLat('/api/agents?page=1&pageSize=20');

    // Mentions: an SDK agent on the holder, a member of a channel.
    let delivered: ((at: number) => void) | null = null;
    const mentionAgent = await sdkAgent(holder, token, workspaceId, 'bench-mention', { onChannelMessage: () => delivered?.(performance.now()) });
    agents.push(mentionAgent);
    await server.call({ cmd: 'seenOnline', did: mentionAgent.did });
    const channel = (await ok(api(holder, token, 'POST', '/api/channels', { name: 'Bench mentions', workspaceId }), 'channel')).channel;
    await ok(api(holder, token, 'POST', `/api/channels/${channel.id}/members`, { memberDid: mentionAgent.did, memberType: 'agent' }), 'member');
    const mentionLat = new Map<Placement, number[]>(entries.map(([p]) => [p, []]));
    for (let i = 0; i < SAMPLES + 20; i++) {
      for (const [p, url] of entries) {
        const got = new Promise<number>((resolve) => (delivered = resolve));
        const t = performance.now();
        await ok(api(url, token, 'POST', `/api/channels/${channel.id}/messages`, { content: `@bench-mention #${i}` }), `mention via ${p}`);
        const at = await Promise.race([got, new Promise<number>((_, reject) => setTimeout(() => reject(new Error(`mention #${i} via ${p} never arrived`)), 10_000))]);
        if (i >= 20) mentionLat.get(p)!.push(at - t);
      }
    }
    delivered = null;

    // Policy re-issue: a workspace policy created through each entry, then deleted again.
    const recert = new Map<Placement, Recert>();
    for (const [p, url] of entries) {
      const watch = (timeoutMs: number) => Promise.all(loadgens.map((lg) => lg.call<{ lastAt: number; missing: number }>({ cmd: 'watchPolicy', policyId: '!', timeoutMs })));
      const watching = watch(120_000);
      await new Promise((r) => setTimeout(r, 200)); // the watch is installed in every load generator
      const c0 = await mark();
      const t = Date.now();
      const res = await api(url, token, 'POST', '/api/policies', { workspaceId, capabilities: ['api_call'], resourceLimits: { maxTokensPerDay: 100000, maxRequestsPerHour: 1000 } });
      const answerMs = Date.now() - t;
      const watched = await watching;
      const c1 = await mark();
      const missing = watched.reduce((a, w) => a + w.missing, 0);
      recert.set(p, {
        status: res.status,
        sentTo: res.body?.sentTo?.length ?? 0,
        answerMs,
        lastReadyMs: missing === 0 ? Math.max(...watched.map((w) => w.lastAt)) - t : null,
        cpuUsPerAgent: cost(c0, c1, N).cpuUs,
      });
      // Undone through the same entry, and waited for, so the next round starts from the same state.
      const undo = watch(120_000);
      await new Promise((r) => setTimeout(r, 200));
      if (res.body?.policy?.id) await ok(api(url, token, 'DELETE', `/api/policies/${res.body.policy.id}`), 'delete policy');
      await undo;
    }

    // Feed fan-out: subscribers split evenly over the nodes; every message posted on the holder.
    const feedChannel = (await ok(api(holder, token, 'POST', '/api/channels', { name: 'Bench feed', workspaceId }), 'channel')).channel;
    const groups: Array<[Placement, string, number]> =
      mode === 'single' ? [['one node', holder, SUBSCRIBERS]] : [['A → A', holder, Math.ceil(SUBSCRIBERS / 2)], ['B → A', urls[1]!, Math.floor(SUBSCRIBERS / 2)]];
    for (const [, url, count] of groups) {
      const fc = startProc('./channels-feed-client.ts');
      await fc.call({ cmd: 'connect', url, token, channelId: feedChannel.id, count, concurrency: 100 });
      feeds.push(fc);
    }
    await new Promise((r) => setTimeout(r, 1000)); // the holder learns of the other node's interest
    const postedAt = new Map<string, number>();
    for (let i = 0; i < MESSAGES; i++) {
      const content = `fan-out #${i}`;
      postedAt.set(content, now());
      await ok(api(holder, token, 'POST', `/api/channels/${feedChannel.id}/messages`, { content }), 'feed post');
      await new Promise((r) => setTimeout(r, 300));
    }
    await new Promise((r) => setTimeout(r, 1000));
    const feed = new Map<Placement, Latencies & { received: number; expected: number }>();
    for (let g = 0; g < groups.length; g++) {
      const [p, , count] = groups[g]!;
      const { received } = await feeds[g]!.call<{ received: Record<string, number[]> }>({ cmd: 'collect' });
      const lastPerMessage = [...postedAt].map(([content, at]) => Math.max(...(received[content] ?? [NaN])) - at);
      feed.set(p, { ...lat(lastPerMessage), received: Object.values(received).reduce((a, l) => a + l.length, 0), expected: MESSAGES * count });
    }

    // Heartbeats: every agent on the holder, at RATE per second, after a 3 s warm-up.
    const intervalMs = Math.max(1, Math.round((N / RATE) * 1000));
    await Promise.all(loadgens.map((lg) => lg.call({ cmd: 'heartbeats', intervalMs })));
    await new Promise((r) => setTimeout(r, 3000));
    await Promise.all(loadgens.map((lg) => lg.call({ cmd: 'countHeartbeats' })));
    const b0 = await mark();
    await new Promise((r) => setTimeout(r, HB_SECONDS * 1000));
    const hb = await Promise.all(loadgens.map((lg) => lg.call<{ acked: number; latencies: number[] }>({ cmd: 'stopHeartbeats' })));
    const b1 = await mark();
    const acked = hb.reduce((a, r) => a + r.acked, 0);
    const heartbeat = {
      acked,
      perSecond: acked / HB_SECONDS,
      cpuUs: cost(b0, b1, Math.max(1, acked)).cpuUs,
      storeOpsPerAck: cost(b0, b1, Math.max(1, acked)).ops,
      storeDocsPerAck: cost(b0, b1, Math.max(1, acked)).docs,
      ack: lat(hb.flatMap((r) => r.latencies)),
    };

    const bus = mode === 'cluster' ? await server.call<ModeResult['bus']>({ cmd: 'busHop', count: HOPS, payloadBytes: 256 }) : undefined;
    return {
      mode,
      idle: { cpuPct: idleCpuPerMs / 10, opsPerSecond: idleOpsPerMs * 1000 },
      handshake,
      reconnect,
      intent: new Map([...intentLat].map(([p, xs]) => [p, lat(xs)])),
      mention: new Map([...mentionLat].map(([p, xs]) => [p, lat(xs)])),
      summary,
      agentsPage,
      recert,
      feed,
      heartbeat,
      bus,
    };
  } finally {
    for (const a of agents) await a.stop().catch(() => undefined);
    await Promise.all([...loadgens, ...feeds].map((p) => p.call({ cmd: 'close' }).catch(() => undefined)));
    await server.call({ cmd: 'stop' }).catch(() => undefined);
  }
}

const ms = (l: Latencies | undefined) => (l ? `${fmt(l.p50, 2)} / ${fmt(l.p99, 2)} ms` : 'n/a');
const ratio = (a: number | undefined, b: number | undefined) => (a !== undefined && b !== undefined && b > 0 ? `×${fmt(a / b, 2)}` : 'n/a');
const us = (x: number) => `${fmt(x, 0)} µs`;

export async function benchCluster(): Promise<void> {
  console.log(
    `\ncluster: N=${N} agents on node A (or on the one node), ${SAMPLES} intents and mentions per placement, ${SUBSCRIBERS} feed subscribers × ${MESSAGES} messages, ` +
      `heartbeats at ${RATE}/s for ${HB_SECONDS} s. Cluster settings: the defaults${Object.entries(CLUSTER_ENV).map(([k, v]) => ` ${k}=${v}`).join('')}. The two cluster nodes share one process and one embedded store (the test seam sharedStore; cluster mode ` +
      `otherwise needs MongoDB) and talk through a real nats-server; the one node is a separate run of the same process without cluster mode.`,
  );
  const single = await runMode('single');
  const cluster = await runMode('cluster');
  const one = 'one node';
  const a = 'A → A';
  const b = 'B → A';

  const pathRow = (name: string, get: (r: ModeResult, p: Placement) => Latencies | undefined): Array<[string, string]> => [
    [`${name}, p50 / p99: one node`, ms(get(single, one))],
    [`  cluster, entering at the agent's node (A → A)`, ms(get(cluster, a))],
    [`  cluster, entering at the other node (B → A)`, ms(get(cluster, b))],
    [`  ratio B → A ÷ one node (p50; p99)`, `${ratio(get(cluster, b)?.p50, get(single, one)?.p50)}; ${ratio(get(cluster, b)?.p99, get(single, one)?.p99)}`],
  ];
  const rc = (r: Recert | undefined) =>
    r ? `${r.status}, sentTo ${r.sentTo}; answered ${r.answerMs} ms; all ${N} re-certified ${r.lastReadyMs === null ? 'never (some missing)' : `${r.lastReadyMs} ms`}` : 'n/a';
  const feedRow = (r: (Latencies & { received: number; expected: number }) | undefined) => (r ? `${ms(r)} (${r.received} of ${r.expected} delivered)` : 'n/a');
  table(`cluster: each cross-node path against its single-node twin (agent on node A; request entering at A or at B)`, [
    ...pathRow('intent round trip (POST until the answer)', (r, p) => r.intent.get(p)),
    ...pathRow('mention delivery (POST until onChannelMessage)', (r, p) => r.mention.get(p)),
    ...pathRow(`GET /api/fleet/summary with ${N} agents connected`, (r, p) => r.summary.get(p)),
    ...pathRow(`GET /api/agents, first page of 20 of ${N}`, (r, p) => r.agentsPage.get(p)),
    [`policy re-issue to ${N} agents: one node`, rc(single.recert.get(one))],
    ['  cluster, POST at A', rc(cluster.recert.get(a))],
    ['  cluster, POST at B', rc(cluster.recert.get(b))],
    [
      '  ratio POST at B ÷ one node (answer; all re-certified)',
      `${ratio(cluster.recert.get(b)?.answerMs, single.recert.get(one)?.answerMs)}; ${ratio(cluster.recert.get(b)?.lastReadyMs ?? undefined, single.recert.get(one)?.lastReadyMs ?? undefined)}`,
    ],
    [`feed fan-out, last subscriber per message, p50 / p99: one node, ${SUBSCRIBERS} subscribers`, feedRow(single.feed.get(one))],
    [`  cluster, posted on A: the ${Math.ceil(SUBSCRIBERS / 2)} subscribers on A`, feedRow(cluster.feed.get(a))],
    [`  cluster, posted on A: the ${Math.floor(SUBSCRIBERS / 2)} subscribers on B`, feedRow(cluster.feed.get(b))],
    ['  ratio subscribers on B ÷ one node (p50; p99)', `${ratio(cluster.feed.get(b)?.p50, single.feed.get(one)?.p50)}; ${ratio(cluster.feed.get(b)?.p99, single.feed.get(one)?.p99)}`],
  ]);

  const both = (label: string, f: (r: ModeResult) => string): Array<[string, string]> => [[`${label}: one node / cluster`, `${f(single)} / ${f(cluster)}`]];
  table('cluster: per-operation costs (server process CPU; both cluster nodes share the process)', [
    ...both('the idle server (taken off every figure below): CPU / store calls per second', (r) => `${fmt(r.idle.cpuPct, 2)} % / ${fmt(r.idle.opsPerSecond, 1)}`),
    ...both(`first handshake of ${N} agents, wall time (all ready)`, (r) => `${r.handshake.ms} ms (${r.handshake.ready})`),
    ...both('  CPU per handshake', (r) => us(r.handshake.cpuUs)),
    ...both('  store calls per handshake (documents, a batch counted per document)', (r) => `${fmt(r.handshake.storeOps, 2)} (${fmt(r.handshake.storeDocs, 2)})`),
    ...both('  RSS per held agent after a full collection (indicative at this size)', (r) => `${fmt(r.handshake.rssBytes / 1024, 2)} KiB`),
    ['  NATS subscriptions per held agent (cluster)', fmt(cluster.handshake.natsSubs, 2)],
    ['  nats-server memory per held agent (cluster; its own accounting, indicative)', `${fmt(cluster.handshake.natsMemBytes, 0)} B`],
    ...both(`reconnection of all ${N} at once, wall time (all ready)`, (r) => `${r.reconnect.ms} ms (${r.reconnect.ready})`),
    ...both('  CPU per reconnection', (r) => us(r.reconnect.cpuUs)),
    ...both('  store calls per reconnection (documents, a batch counted per document)', (r) => `${fmt(r.reconnect.storeOps, 2)} (${fmt(r.reconnect.storeDocs, 2)})`),
    ['  the most frequent calls, per reconnection (one node)', single.reconnect.topOps || 'none'],
    ['  the most frequent calls, per reconnection (cluster)', cluster.reconnect.topOps || 'none'],
    ...both(`re-certification CPU per agent (policy POST at the agents' node)`, (r) => us((r.recert.get(r.mode === 'single' ? one : a)?.cpuUsPerAgent) ?? NaN)),
    ['  the same, POST at the other node (cluster)', us(cluster.recert.get(b)?.cpuUsPerAgent ?? NaN)],
    ...both(`heartbeats acknowledged per second (target ${RATE})`, (r) => fmt(r.heartbeat.perSecond, 0)),
    ...both('  CPU per heartbeat', (r) => us(r.heartbeat.cpuUs)),
    ...both('  store calls per heartbeat (documents)', (r) => `${fmt(r.heartbeat.storeOpsPerAck, 3)} (${fmt(r.heartbeat.storeDocsPerAck, 3)})`),
    ...both('  ack latency p50 / p99', (r) => ms(r.heartbeat.ack)),
    ['bus hop alone, request/reply with 256 B, p50 / p99: NATS (two connections through nats-server)', cluster.bus ? `${ms(cluster.bus.nats)}, ${us(cluster.bus.nats.cpuUs)} CPU (both ends, one process)` : 'n/a'],
    ['  in-process bus (one node)', cluster.bus ? `${ms(cluster.bus.local)}, ${us(cluster.bus.local.cpuUs)} CPU` : 'n/a'],
  ]);
}
