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
 *
 * Clocks: `performance.timeOrigin + performance.now()` in every process (the wall clock at
 * sub-millisecond resolution), so times taken in different processes on this machine compare.
 */
import { flag, fmt as formatNumber, percentile, table, which } from './report.js';
import { startProc } from './proc.js';
import { machineRows, readMachine } from './machine.js';
import { Agent, request } from 'node:http';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { cpus } from 'node:os';
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

  const sentAt = new Map<number, number>();
  const answerLatencies: number[] = [];
  let errors = 0;
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
        path: `/api/channels/${channelId}/messages`,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), authorization: `Bearer ${token}` },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode !== 201) errors++;
          else if (n >= 0) answerLatencies.push(now() - t0);
        });
      },
    );
    req.on('error', () => errors++);
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
  await sleep(2000);
  loop.disable();
  const counters = await server.call<{ cpuMs: number; loopDelayP99Ms: number; loopDelayMaxMs: number; rssMB: number; gc: Gc }>({ cmd: 'counters' });
  const got = new Map((await agent.call<{ received: Array<[number, number]> }>({ cmd: 'collect' })).received);
  const expected = Math.round(RATE * SECONDS);
  const latencies: number[] = [];
  for (let n = 0; n < expected; n++) {
    const at = got.get(n);
    if (at !== undefined) latencies.push(at - sentAt.get(n)!);
  }
  latencies.sort((a, b) => a - b);
  answerLatencies.sort((a, b) => a - b);
  table(`(a) @mention -> agent while ${RATE} messages/s are posted (${SECONDS} s, ${POSTERS} posters, one channel, every message mentions the agent)`, [
    ['machine', `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}, embedded store`],
    ['messages posted (measured phase)', String(expected)],
    ['achieved post rate (msg/s)', fmt(expected / elapsed, 0)],
    ['channel_message_send received by the agent', `${latencies.length} of ${expected}`],
    ['HTTP errors', String(errors)],
    ['mention -> agent p50 (ms)', fmt(percentile(latencies, 50))],
    ['mention -> agent p90 (ms)', fmt(percentile(latencies, 90))],
    ['mention -> agent p99 (ms)', fmt(percentile(latencies, 99))],
    ['mention -> agent max (ms)', fmt(latencies[latencies.length - 1] ?? NaN)],
    ['HTTP 201 answer p50 / p99 (ms)', `${fmt(percentile(answerLatencies, 50))} / ${fmt(percentile(answerLatencies, 99))}`],
    ['server event-loop delay p99 / max (ms)', `${fmt(counters.loopDelayP99Ms)} / ${fmt(counters.loopDelayMaxMs)}`],
    ['poster event-loop delay p99 / max (ms)', `${fmt(loop.percentile(99) / 1e6)} / ${fmt(loop.max / 1e6)}`],
    ['server CPU per message (ms)', fmt(counters.cpuMs / expected, 3)],
    ['server GC pauses: count / total / longest (ms)', `${counters.gc.count} / ${fmt(counters.gc.totalMs, 0)} / ${fmt(counters.gc.maxMs)}`],
    ['server RSS after (MB)', fmt(counters.rssMB, 0)],
  ]);
  http.destroy();
  await agent.call({ cmd: 'stop' });
  await server.call({ cmd: 'stop' });
}

// -------------------------------------------------------------------------------------------------
// (b) live-feed fan-out

async function feed(): Promise<void> {
  const server = startProc('./channels-server.ts');
  const { url } = await server.call<{ url: string }>({ cmd: 'start', env: {} });
  const { channelId, tokens } = await server.call<{ channelId: string; tokens: string[] }>({ cmd: 'setup', posters: 1 });
  const token = tokens[0]!;
  const clients = [startProc('./channels-feed-client.ts'), startProc('./channels-feed-client.ts')];
  const connectStarted = now();
  const per = Math.ceil(SUBSCRIBERS / clients.length);
  const counts = await Promise.all(
    clients.map((c, i) => c.call<{ connected: number }>({ cmd: 'connect', url, token, channelId, count: Math.min(per, SUBSCRIBERS - i * per), concurrency: 200 })),
  );
  const subscribed = counts.reduce((n, c) => n + c.connected, 0);
  const connectSeconds = (now() - connectStarted) / 1000;
  await sleep(1000);
  await server.call({ cmd: 'counters' });

  const http = new Agent({ keepAlive: true, maxSockets: 4 });
  const { port, hostname } = new URL(url);
  const postOne = (content: string) =>
    new Promise<number>((resolve, reject) => {
      const body = JSON.stringify({ content });
      const t0 = now();
      const req = request(
        {
          agent: http,
          hostname,
          port,
          method: 'POST',
          path: `/api/channels/${channelId}/messages`,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), authorization: `Bearer ${token}` },
        },
        (res) => {
          res.resume();
          res.on('end', () => (res.statusCode === 201 ? resolve(t0) : reject(new Error(`post answered ${res.statusCode}`))));
        },
      );
      req.on('error', reject);
      req.end(body);
    });

  const sentAt = new Map<string, number>();
  for (let i = 0; i < MESSAGES; i++) {
    const content = `fan-out #${i}`;
    sentAt.set(content, await postOne(content));
    await sleep(300);
  }
  await sleep(1500);
  const counters = await server.call<{ loopDelayP99Ms: number; loopDelayMaxMs: number; rssMB: number; sockets: Record<string, number> }>({ cmd: 'counters' });
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
  table(`(b) one channel, ${subscribed} live-feed subscribers, ${MESSAGES} messages posted 300 ms apart`, [
    ['machine', `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}, subscribers in 2 processes`],
    ['sockets subscribed', `${subscribed} (in ${fmt(connectSeconds, 1)} s)`],
    ['deliveries received / expected', `${deliveries} / ${subscribed * MESSAGES}`],
    ['messages that reached every subscriber', `${complete} of ${MESSAGES}`],
    ['post -> last subscriber p50 (ms)', fmt(percentile(toAll, 50))],
    ['post -> last subscriber p99 (ms)', fmt(percentile(toAll, 99))],
    ['post -> last subscriber max (ms)', fmt(toAll[toAll.length - 1] ?? NaN)],
    ['post -> one subscriber p50 / p99 (ms)', `${fmt(percentile(each, 50))} / ${fmt(percentile(each, 99))}`],
    ['server event-loop delay p99 / max (ms)', `${fmt(counters.loopDelayP99Ms)} / ${fmt(counters.loopDelayMaxMs)}`],
    ['server RSS (MB)', fmt(counters.rssMB, 0)],
  ]);
  http.destroy();
  await Promise.all(clients.map((c) => c.call({ cmd: 'close' })));
  await server.call({ cmd: 'stop' });
}

table('the machine, right before', machineRows(await readMachine()));
if (which === 'all' || which === 'mentions') await mentions();
if (which === 'all' || which === 'feed') await feed();
