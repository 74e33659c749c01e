/**
 * Channel benchmarks (not part of npm test). Each starts a fresh Steward in its own process
 * (bench/channels-server.ts) and prints a table of what it measured.
 *
 *   npm run bench:channels                 both
 *   npm run bench:channels -- mentions     (a) @mention -> agent latency while messages are posted at a fixed rate
 *   npm run bench:channels -- feed         (b) one message fanned out to many live-feed subscribers
 *
 * (a) Every message posted mentions one agent, a real SDK agent (StewardAgent) connected over
 *     /ws/agent in its own process (bench/channels-agent.ts). Latency is from just before the HTTP
 *     request is written to when the agent's onChannelMessage handler runs (so it includes HTTP,
 *     auth, the channel actor and its store write, the push, and three event loops). Options: --rate R messages per second
 *     (BENCH_MSG_RATE, default 1000), --seconds D measured (BENCH_MSG_SECONDS, default 10),
 *     --posters P people posting (default 10). Two warm-up seconds at the same rate are not counted.
 * (b) S sockets (--subscribers, BENCH_FEED_SUBSCRIBERS, default 5000) in two subscriber processes
 *     (bench/channels-feed-client.ts) subscribe to one channel; M messages (--messages, default 20)
 *     are posted 300 ms apart; for each, the time from the post until the last subscriber has it.
 *     The subscribers are people of the channel, at most 40 sockets each (FEED_SOCKETS_PER_PERSON).
 *     BENCH_PROFILE_DIR=<dir>: CPU profiles of the posting phase, fanout-S.cpuprofile (Steward)
 *     and floor-fanout-S.cpuprofile.
 *
 * Clocks: `performance.timeOrigin + performance.now()` in every process (the wall clock at
 * sub-millisecond resolution), so times taken in different processes on this machine compare.
 */
import { flag, floorRow, fmt as formatNumber, percentile, table, which } from './report.js';
import { startProc, type Proc } from './proc.js';
import { machineRows, readMachine } from './machine.js';
import { Agent, request } from 'node:http';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { cpus } from 'node:os';
import { mkdir } from 'node:fs/promises';
import { generateKeyPair } from '../src/domain/did.js';

const RATE = flag('rate', 'BENCH_MSG_RATE', 1000);
const SECONDS = flag('seconds', 'BENCH_MSG_SECONDS', 10);
const POSTERS = flag('posters', 'BENCH_POSTERS', 10);
const SUBSCRIBERS = flag('subscribers', 'BENCH_FEED_SUBSCRIBERS', 5000);
const MESSAGES = flag('messages', 'BENCH_FEED_MESSAGES', 20);

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const fmt = (n: number, d = 2) => formatNumber(n, d);


interface Gc {
  count: number;
  totalMs: number;
  maxMs: number;
}




// -------------------------------------------------------------------------------------------------
// (a) mention -> agent latency under load

/** What one run of (a) measured, against Steward or against the floor. */
interface MentionRun {
  expected: number;
  elapsed: number;
  received: number;
  errors: number;
  latencies: number[];
  answers: number[];
  /** The poster's own event-loop delay (ms). */
  loop: { p99: number; max: number };
  counters: { cpuMs: number; loopDelayP99Ms: number; loopDelayMaxMs: number; rssMB: number; gc: Gc };
}

/**
 * Posts RATE messages per second, each mentioning the agent, to `path` (two warm-up seconds
 * first, not counted), and reads when the agent had each: the same client for Steward and floor.
 */
async function driveMentions(url: string, path: string, tokens: string[], agentName: string, server: Proc, agent: Proc): Promise<MentionRun> {
  const sentAt = new Map<number, number>();
  const answers: number[] = [];
  let errors = 0;
  /** Posts not answered yet (a loaded server answers late: the run waits for them before it counts). */
  let pending = 0;
  const http = new Agent({ keepAlive: true, maxSockets: 128 });
  const { port, hostname } = new URL(url);
  const postOne = (n: number, token: string) => {
    const body = JSON.stringify({ content: `@${agentName} status please #${n}` });
    const t0 = now();
    sentAt.set(n, t0);
    const req = request(
      {
        agent: http,
        hostname,
        port,
        method: 'POST',
        path,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), authorization: `Bearer ${token}` },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          pending--;
          if (res.statusCode !== 201) errors++;
          else if (n >= 0) answers.push(now() - t0);
        });
      },
    );
    req.on('error', () => {
      pending--;
      errors++;
    });
    pending++;
    req.end(body);
  };

  /** Posts at RATE per second for `seconds`; message numbers from `first`. */
  const drive = async (seconds: number, first: number): Promise<number> => {
    const started = now();
    let sent = 0;
    const total = Math.round(RATE * seconds);
    while (sent < total) {
      const due = Math.min(total, Math.floor(((now() - started) / 1000) * RATE));
      for (; sent < due; sent++) postOne(first + sent, tokens[sent % tokens.length]!);
      await sleep(1);
    }
    return (now() - started) / 1000;
  };

  await drive(2, -1_000_000); // warm-up (negative numbers are not counted)
  await sleep(500);
  await agent.call({ cmd: 'collect' });
  await server.call({ cmd: 'counters' }); // resets the server's event-loop histogram and CPU mark
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const elapsed = await drive(SECONDS, 0);
  // Every post answered (at most 60 s more), then time for the last pushes to arrive.
  for (const until = now() + 60_000; pending > 0 && now() < until; ) await sleep(50);
  await sleep(2000);
  loop.disable();
  const counters = await server.call<MentionRun['counters']>({ cmd: 'counters' });
  const got = new Map((await agent.call<{ received: Array<[number, number]> }>({ cmd: 'collect' })).received);
  const expected = Math.round(RATE * SECONDS);
  const latencies: number[] = [];
  for (let n = 0; n < expected; n++) {
    const at = got.get(n);
    if (at !== undefined) latencies.push(at - sentAt.get(n)!);
  }
  latencies.sort((a, b) => a - b);
  answers.sort((a, b) => a - b);
  http.destroy();
  return { expected, elapsed, received: latencies.length, errors, latencies, answers, loop: { p99: loop.percentile(99) / 1e6, max: loop.max / 1e6 }, counters };
}

async function mentions(): Promise<void> {
  const server = startProc('./channels-server.ts');
  const { url } = await server.call<{ url: string }>({ cmd: 'start', env: {} });
  const keys = generateKeyPair();
  const agentName = 'benchagent';
  const { channelId, tokens } = await server.call<{ channelId: string; tokens: string[] }>({
    cmd: 'setup',
    posters: POSTERS,
    agent: { did: keys.did, publicKey: keys.publicKey, name: agentName },
  });
  const agent = startProc('./channels-agent.ts');
  await agent.call({ cmd: 'start', url, keys, name: agentName });
  const r = await driveMentions(url, `/api/channels/${channelId}/messages`, tokens, agentName, server, agent);
  await agent.call({ cmd: 'stop' });
  await server.call({ cmd: 'stop' });

  // The floor: a bare uWS POST that parses the body, appends a line to a file and sends one frame.
  const floorServer = startProc('./floor-server.ts');
  const { port } = await floorServer.call<{ port: number }>({ cmd: 'start' });
  const floorUrl = `http://127.0.0.1:${port}`;
  const floorAgent = startProc('./channels-agent.ts');
  await floorAgent.call({ cmd: 'floor', url: floorUrl });
  const floorCpu = floorCounters(floorServer);
  const f = await driveMentions(floorUrl, '/post', tokens, agentName, floorCpu, floorAgent);
  await floorAgent.call({ cmd: 'stop' });
  await floorServer.call({ cmd: 'stop' });

  const { counters } = r;
  table(`(a) @mention -> agent while ${RATE} messages/s are posted (${SECONDS} s, ${POSTERS} posters, one channel, every message mentions the agent)`, [
    ['machine', `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}, embedded store`],
    ['messages posted (measured phase)', String(r.expected)],
    ['achieved post rate (msg/s)', fmt(r.expected / r.elapsed, 0)],
    ['channel_message_send received by the agent', `${r.received} of ${r.expected}`],
    ['HTTP errors', String(r.errors)],
    ['mention -> agent p50 (ms)', fmt(percentile(r.latencies, 50))],
    ['mention -> agent p90 (ms)', fmt(percentile(r.latencies, 90))],
    ['mention -> agent p99 (ms)', fmt(percentile(r.latencies, 99))],
    ['mention -> agent max (ms)', fmt(r.latencies[r.latencies.length - 1] ?? NaN)],
    ['HTTP 201 answer p50 / p99 (ms)', `${fmt(percentile(r.answers, 50))} / ${fmt(percentile(r.answers, 99))}`],
    ['server event-loop delay p99 / max (ms)', `${fmt(counters.loopDelayP99Ms)} / ${fmt(counters.loopDelayMaxMs)}`],
    ['poster event-loop delay p99 / max (ms)', `${fmt(r.loop.p99)} / ${fmt(r.loop.max)}`],
    ['server CPU per message (ms)', fmt(counters.cpuMs / r.expected, 3)],
    ['server GC pauses: count / total / longest (ms)', `${counters.gc.count} / ${fmt(counters.gc.totalMs, 0)} / ${fmt(counters.gc.maxMs)}`],
    ['server RSS after (MB)', fmt(counters.rssMB, 0)],
    [
      'the floor (bare uWS: parse, append a line, one frame): received, mention -> agent p50 / p99 / max (ms)',
      `${f.received} of ${f.expected}, ${fmt(percentile(f.latencies, 50))} / ${fmt(percentile(f.latencies, 99))} / ${fmt(f.latencies[f.latencies.length - 1] ?? NaN)}`,
    ],
    floorRow('message (the measured seconds until all answered, and 2 s more)', (1000 * counters.cpuMs) / r.expected, (1000 * f.counters.cpuMs) / f.expected),
  ]);
}

/** The floor's CPU as channels-server.ts's `counters` gives it (since the last call), for driveMentions. */
function floorCounters(floor: Proc): Proc {
  let mark: { user: number; system: number } | null = null;
  return {
    call: async <T>(msg: { cmd: string }): Promise<T> => {
      if (msg.cmd !== 'counters') return floor.call<T>(msg);
      const now = await floor.call<{ user: number; system: number }>({ cmd: 'cpu' });
      const cpuMs = mark ? (now.user - mark.user + now.system - mark.system) / 1000 : 0;
      mark = now;
      return { cpuMs, loopDelayP99Ms: NaN, loopDelayMaxMs: NaN, rssMB: NaN, gc: { count: 0, totalMs: 0, maxMs: 0 } } as T;
    },
  } as Proc;
}

// -------------------------------------------------------------------------------------------------
// (b) live-feed fan-out

/** What one run of (b) measured, against Steward or against the floor. */
interface FanOut {
  subscribed: number;
  connectSeconds: number;
  deliveries: number;
  complete: number;
  toAll: number[];
  each: number[];
  cpuMs: number;
}

/**
 * SUBSCRIBERS feed sockets in two processes subscribe to the channel; MESSAGES posts to `path`
 * 300 ms apart (`bodyOf` their content); for each, when every subscriber had it.
 */
async function driveFeed(
  url: string,
  tokens: string[],
  channelId: string,
  path: string,
  bodyOf: (content: string) => string,
  cpuMs: () => Promise<number>,
  /** Takes `profile` commands: with BENCH_PROFILE_DIR, a CPU profile of the posting phase. */
  server: Proc,
  profileName: string,
): Promise<FanOut> {
  const clients = [startProc('./channels-feed-client.ts'), startProc('./channels-feed-client.ts')];
  const connectStarted = now();
  const per = Math.ceil(SUBSCRIBERS / clients.length);
  const counts = await Promise.all(
    clients.map((c, i) => c.call<{ connected: number }>({ cmd: 'connect', url, tokens, channelId, count: Math.min(per, SUBSCRIBERS - i * per), concurrency: 200 })),
  );
  const subscribed = counts.reduce((n, c) => n + c.connected, 0);
  const connectSeconds = (now() - connectStarted) / 1000;
  await sleep(1000);
  await cpuMs();

  const http = new Agent({ keepAlive: true, maxSockets: 4 });
  const { port, hostname } = new URL(url);
  const postOne = (content: string) =>
    new Promise<number>((resolve, reject) => {
      const body = bodyOf(content);
      const t0 = now();
      const req = request(
        {
          agent: http,
          hostname,
          port,
          method: 'POST',
          path,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), authorization: `Bearer ${tokens[0]}` },
        },
        (res) => {
          res.resume();
          res.on('end', () => (res.statusCode === 201 ? resolve(t0) : reject(new Error(`post answered ${res.statusCode}`))));
        },
      );
      req.on('error', reject);
      req.end(body);
    });

  const pdir = process.env.BENCH_PROFILE_DIR;
  if (pdir) {
    await mkdir(pdir, { recursive: true });
    await server.call({ cmd: 'profile' });
  }
  const sentAt = new Map<string, number>();
  for (let i = 0; i < MESSAGES; i++) {
    const content = `fan-out #${i}`;
    sentAt.set(content, await postOne(content));
    await sleep(300);
  }
  await sleep(1500);
  const cpu = await cpuMs();
  if (pdir) await server.call({ cmd: 'profile', file: `${pdir}/${profileName}-${SUBSCRIBERS}.cpuprofile` });
  const got = await Promise.all(clients.map((c) => c.call<{ received: Record<string, number[]> }>({ cmd: 'collect' })));
  const toAll: number[] = [];
  const each: number[] = [];
  let deliveries = 0;
  let complete = 0;
  for (const [content, t0] of sentAt) {
    const times = got.flatMap((g) => g.received[content] ?? []);
    deliveries += times.length;
    if (times.length === subscribed) complete++;
    for (const t of times) each.push(t - t0);
    if (times.length > 0) toAll.push(Math.max(...times) - t0);
  }
  toAll.sort((a, b) => a - b);
  each.sort((a, b) => a - b);
  http.destroy();
  await Promise.all(clients.map((c) => c.call({ cmd: 'close' })));
  return { subscribed, connectSeconds, deliveries, complete, toAll, each, cpuMs: cpu };
}

async function feed(): Promise<void> {
  const server = startProc('./channels-server.ts');
  const { url } = await server.call<{ url: string }>({ cmd: 'start', env: {} });
  // Subscribers are people (members of the channel), at most 40 sockets each: under FEED_SOCKETS_PER_PERSON's default.
  const { channelId, tokens } = await server.call<{ channelId: string; tokens: string[] }>({ cmd: 'setup', posters: Math.ceil(SUBSCRIBERS / 40) });
  type Counters = { cpuMs: number; loopDelayP99Ms: number; loopDelayMaxMs: number; rssMB: number };
  let counters: Counters | undefined;
  const readCounters = async () => {
    counters = await server.call<Counters>({ cmd: 'counters' });
    return counters.cpuMs;
  };
  const r = await driveFeed(url, tokens, channelId, `/api/channels/${channelId}/messages`, (content) => JSON.stringify({ content }), readCounters, server, 'fanout');
  await server.call({ cmd: 'stop' });

  // The floor: uWS's own publish to a topic the same sockets subscribed to, the frame as Steward's begins.
  const floorServer = startProc('./floor-server.ts');
  const { port } = await floorServer.call<{ port: number }>({ cmd: 'start' });
  const floorCpu = floorCounters(floorServer);
  const f = await driveFeed(
    `http://127.0.0.1:${port}`,
    tokens,
    channelId,
    `/publish/${channelId}`,
    (content) => `{"type":"message.created","channelId":"${channelId}","message":${JSON.stringify({ content })}}`,
    async () => (await floorCpu.call<{ cpuMs: number }>({ cmd: 'counters' })).cpuMs,
    floorServer,
    'floor-fanout',
  );
  await floorServer.call({ cmd: 'stop' });

  table(`(b) one channel, ${r.subscribed} live-feed subscribers, ${MESSAGES} messages posted 300 ms apart`, [
    ['machine', `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}, subscribers in 2 processes`],
    ['sockets subscribed', `${r.subscribed} (in ${fmt(r.connectSeconds, 1)} s)`],
    ['deliveries received / expected', `${r.deliveries} / ${r.subscribed * MESSAGES}`],
    ['messages that reached every subscriber', `${r.complete} of ${MESSAGES}`],
    ['post -> last subscriber p50 (ms)', fmt(percentile(r.toAll, 50))],
    ['post -> last subscriber p99 (ms)', fmt(percentile(r.toAll, 99))],
    ['post -> last subscriber max (ms)', fmt(r.toAll[r.toAll.length - 1] ?? NaN)],
    ['post -> one subscriber p50 / p99 (ms)', `${fmt(percentile(r.each, 50))} / ${fmt(percentile(r.each, 99))}`],
    ['server event-loop delay p99 / max (ms)', `${fmt(counters!.loopDelayP99Ms)} / ${fmt(counters!.loopDelayMaxMs)}`],
    ['server RSS (MB)', fmt(counters!.rssMB, 0)],
    [
      `the floor (uWS publish to one topic, ${f.subscribed} subscribers): complete, post -> last subscriber p50 / p99 / max (ms)`,
      `${f.complete} of ${MESSAGES}, ${fmt(percentile(f.toAll, 50))} / ${fmt(percentile(f.toAll, 99))} / ${fmt(f.toAll[f.toAll.length - 1] ?? NaN)}`,
    ],
    floorRow('delivery (one message to one subscriber)', (1000 * r.cpuMs) / Math.max(1, r.deliveries), (1000 * f.cpuMs) / Math.max(1, f.deliveries)),
  ]);
}

table('the machine, right before', machineRows(await readMachine()));
if (which === 'all' || which === 'mentions') await mentions();
if (which === 'all' || which === 'feed') await feed();
