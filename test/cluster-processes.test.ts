/**
 * Cluster mode as separate processes (test/cluster-processes.ts, the code of `npm run cluster`): a
 * real nats-server, the MongoDB stand-in and three Steward nodes, n2's clock 60 s ahead and n3's
 * 60 s behind (Debian's faketime), n3 reaching NATS and the store through TCP proxies the test
 * cuts and restores. Agents connect through a TCP balancer and report token usage, and the owner
 * posts to a channel through every node, while in turn:
 * - the node holding the channel's actor and some agents is killed (kill -9), later started again;
 * - a node is paused (SIGSTOP) past its lease, then continued (SIGCONT);
 * - the store is down for 20 s, then back;
 * - n3 is cut off from NATS only, then from the store only;
 * - every node is restarted in turn (a rolling restart).
 * Then the invariants: no shard ever had two owners, the channel's `seq` unique and gap-free,
 * every acknowledged post stored once, the token totals what the agents reported, every agent
 * back online. One cluster for all of it: its start is the slow part, and two at once on a small
 * machine slow each other past their timeouts.
 */
// test-runner: alone
import { existsSync } from 'node:fs';
import { MongoClient } from 'mongodb';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { shardOf } from '../src/cluster/shards.js';
import { http, waitFor } from './helpers.js';
import { ProcessCluster, SHARDS } from './cluster-processes.js';
import { TcpProxy } from './tcp-proxy.js';

const FAKETIME = ['/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1', '/usr/lib/faketime/libfaketimeMT.so.1'].find((p) => existsSync(p));
const clockOf = (i: number): Record<string, string> => (i === 0 || !FAKETIME ? {} : { LD_PRELOAD: FAKETIME, FAKETIME: i === 1 ? '+60s' : '-60s' });

const test = suite('cluster as processes: kill -9, SIGSTOP, store down, partitions, rolling restart; clocks ±60 s');
const pc = new ProcessCluster();
let natsProxy: TcpProxy;
let storeProxy: TcpProxy;

test.before(() =>
  pc.start({
    // n3 reaches NATS and the store through proxies (the driver talks to the proxy alone: directConnection).
    perNode: async (i, _id, parts) => {
      if (i !== 2) return { env: clockOf(i) };
      const store = new URL(parts.mongodbUri);
      natsProxy = await TcpProxy.start({ host: '127.0.0.1', port: Number(new URL(parts.natsUrl).port) });
      storeProxy = await TcpProxy.start({ host: '127.0.0.1', port: Number(store.port) });
      return { env: clockOf(i), natsUrl: natsProxy.url('nats'), mongodbUri: `mongodb://127.0.0.1:${storeProxy.port}${store.pathname}?directConnection=true` };
    },
  }),
);

test.after(async () => {
  await pc.stop();
  await natsProxy?.close();
  await storeProxy?.close();
});

test('three node processes are ready, every shard owned once; the store clock hides the nodes’ ±60 s', async () => {
  await pc.settled();
  if (!FAKETIME) return;
  // The offsets are real: each node's wall clock is a minute off the store's.
  const offsets = await Promise.all(pc.nodes.map(async (n) => (await http(n.url, 'GET', '/readyz')).body.cluster.storeClock.offsetMs as number));
  assert.ok(Math.abs(offsets[0]!) < 5000, String(offsets));
  assert.ok(offsets[1]! > 55_000, String(offsets));
  assert.ok(offsets[2]! < -55_000, String(offsets));
});

test('kill -9 of the node holding a channel in use and agents: the others take over, agents come back, posts go on', async () => {
  await pc.addAgents(6);
  const r = await pc.api(pc.nodes[0]!).post('/api/channels', { name: 'in use' });
  assert.is(r.status, 201, r.text);
  pc.channelId = r.body.channel.id;
  const posting = pc.keepPosting();
  await pc.postsFlow();
  // The node that holds the channel's actor (as its log says).
  const victim = await waitFor(() => pc.holderOf(shardOf(`channel:${pc.channelId}`, SHARDS)), 30_000, 100);

  await pc.kill(victim);
  pc.lb.down(victim.port);
  // The others own every shard within a lease or two, the agents reconnect, posts are taken again.
  await pc.settled();
  await pc.allAgentsOnline();
  await pc.postsFlow();

  // Started again, it rejoins (its id's lease ran out) and takes its share back.
  await victim.start();
  pc.away.delete(victim.nodeId);
  await pc.settled();
  const { sent } = await posting.stop();
  assert.ok(sent >= 20);
});

test('SIGSTOP of a shard owner past its lease, then SIGCONT: the others take over, it rejoins', async () => {
  const paused = pc.nodes[1]!;
  const posting = pc.keepPosting();
  await waitFor(async () => ((await http(paused.url, 'GET', '/readyz')).body.cluster?.ownedShards ?? 0) > 0, 60_000, 100);
  pc.away.add(paused.nodeId);
  paused.signal('SIGSTOP');
  try {
    await pc.settled();
    await pc.postsFlow();
  } finally {
    paused.signal('SIGCONT');
    pc.away.delete(paused.nodeId);
  }
  await pc.settled();
  await posting.stop();
  await pc.allAgentsOnline();
});

test('the store down for 20 s: every node loses its leases, and all come back by themselves', async () => {
  await pc.settled();
  const posting = pc.keepPosting();
  await pc.postsFlow();
  const client = new MongoClient(pc.cl.mongodbUri, { directConnection: true });
  try {
    await client.db('admin').command({ standinOutage: 20_000 });
  } finally {
    await client.close(true);
  }
  // Down: every node says it is not ready (its store does not answer), each seen at least once
  // while the outage lasts (a loaded machine answers one /readyz slower than another).
  const seenDown = new Set<string>();
  await waitFor(async () => {
    await Promise.all(pc.nodes.map(async (n) => ((await http(n.url, 'GET', '/readyz')).status === 503 ? seenDown.add(n.nodeId) : null)));
    return seenDown.size === pc.nodes.length;
  }, 20_000, 100);
  // Back: ready, every shard owned, posts taken, agents online.
  await pc.settled(90_000);
  await pc.postsFlow(10, 60_000);
  await pc.allAgentsOnline();
  await posting.stop();
});

/**
 * n3 cut off through `proxy` while posts go on: until its /readyz shows `cutOff`, the others own
 * every shard and take posts; restored, n3 is ready again and takes its share back.
 */
async function partition(proxy: TcpProxy, cutOff: (readyz: { status: number; body: any }) => boolean): Promise<void> {
  const n3 = pc.nodes[2]!;
  const posting = pc.keepPosting();
  pc.away.add(n3.nodeId);
  proxy.cut();
  await waitFor(async () => cutOff(await http(n3.url, 'GET', '/readyz')), 30_000, 100);
  await pc.settled();
  await pc.postsFlow();
  proxy.restore();
  pc.away.delete(n3.nodeId);
  await pc.settled(60_000);
  await waitFor(async () => ((await http(n3.url, 'GET', '/readyz')).body.cluster?.ownedShards ?? 0) > 0, 60_000, 100);
  await posting.stop();
}

test('n3 cut off from NATS only: it hands its shards over and says so; restored, it takes its share back', () =>
  partition(natsProxy, (r) => r.status === 503 && /handed its shards over/.test(r.body.error.message) && r.body.error.message.includes('owns 0 of')));

test('n3 cut off from the store only: its leases lapse and the others take over; restored, it rejoins', () => partition(storeProxy, (r) => r.status === 503));

test('a rolling restart of every node under agent and HTTP load: nothing acknowledged lost, every agent back', async () => {
  const posting = pc.keepPosting();
  for (const node of pc.nodes) {
    pc.away.add(node.nodeId);
    await node.stop();
    await pc.settled();
    await pc.postsFlow(5);
    await node.start();
    pc.away.delete(node.nodeId);
    await pc.settled();
  }
  await posting.stop();
  await pc.allAgentsOnline();
});

test('invariants: one owner per shard at any instant; channel seq unique and gap-free; every acknowledged post stored once; token totals exact', async () => {
  await pc.assertInvariants(60);
});

test.run();
