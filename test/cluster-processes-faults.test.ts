/**
 * Cluster mode as separate processes (test/cluster-processes.ts) under the faults of the network
 * and the store: n3 reaches NATS and the store through TCP proxies the test cuts and restores.
 * Agents connect through a TCP balancer and the owner posts to a channel through the nodes while
 * - the store is down for 20 s (every node), then back;
 * - n3 is cut off from NATS only, then from the store only;
 * - every node is restarted in turn (a rolling restart).
 * Then the invariants: no shard ever had two owners, the channel's `seq` unique and gap-free,
 * every acknowledged post stored once, every agent back online.
 */
import { MongoClient } from 'mongodb';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { http, waitFor } from './helpers.js';
import { ProcessCluster, SHARDS } from './cluster-processes.js';
import { TcpProxy } from './tcp-proxy.js';

const test = suite('cluster as processes: store down, partitions, rolling restart');
const pc = new ProcessCluster();
let natsProxy: TcpProxy;
let storeProxy: TcpProxy;

test.before(async () => {
  await pc.start({
    // n3 reaches NATS and the store through proxies (the driver talks to the proxy alone: directConnection).
    perNode: async (i, _id, parts) => {
      if (i !== 2) return {};
      const store = new URL(parts.mongodbUri);
      natsProxy = await TcpProxy.start({ host: '127.0.0.1', port: Number(new URL(parts.natsUrl).port) });
      storeProxy = await TcpProxy.start({ host: '127.0.0.1', port: Number(store.port) });
      return { natsUrl: natsProxy.url('nats'), mongodbUri: `mongodb://127.0.0.1:${storeProxy.port}${store.pathname}?directConnection=true` };
    },
  });
  const r = await pc.api(pc.nodes[0]!).post('/api/channels', { name: 'faults' });
  assert.is(r.status, 201, r.text);
  pc.channelId = r.body.channel.id;
});

test.after(async () => {
  await pc.stop();
  await natsProxy?.close();
  await storeProxy?.close();
});

test('the store down for 20 s: every node loses its leases, and all come back by themselves', async () => {
  await pc.settled();
  await pc.addAgents(6);
  const posting = pc.keepPosting();
  await pc.postsFlow();
  const client = new MongoClient(pc.cl.mongodbUri, { directConnection: true });
  try {
    await client.db('admin').command({ standinOutage: 20_000 });
  } finally {
    await client.close(true);
  }
  // Down: no node is ready (its store does not answer).
  await waitFor(async () => (await Promise.all(pc.nodes.map((n) => http(n.url, 'GET', '/readyz')))).every((r) => r.status === 503), 20_000, 100);
  // Back: ready, every shard owned, posts taken, agents online.
  await pc.settled(90_000);
  await pc.postsFlow(10, 60_000);
  await pc.allAgentsOnline();
  await posting.stop();
});

test('n3 cut off from NATS only: it hands its shards over and says so; restored, it takes its share back', async () => {
  const n3 = pc.nodes[2]!;
  const posting = pc.keepPosting();
  pc.away.add(n3.nodeId);
  natsProxy.cut();
  await waitFor(async () => {
    const r = await http(n3.url, 'GET', '/readyz');
    return r.status === 503 && /handed its shards over/.test(r.body.error.message) && r.body.error.message.includes('owns 0 of');
  }, 30_000, 100);
  await pc.settled();
  await pc.postsFlow();
  natsProxy.restore();
  pc.away.delete(n3.nodeId);
  await pc.settled(60_000);
  await waitFor(async () => ((await http(n3.url, 'GET', '/readyz')).body.cluster?.ownedShards ?? 0) > 0, 60_000, 100);
  await posting.stop();
});

test('n3 cut off from the store only: its leases lapse and the others take over; restored, it rejoins', async () => {
  const n3 = pc.nodes[2]!;
  const posting = pc.keepPosting();
  pc.away.add(n3.nodeId);
  storeProxy.cut();
  await waitFor(async () => (await http(n3.url, 'GET', '/readyz')).status === 503, 30_000, 100);
  await pc.settled();
  await pc.postsFlow();
  storeProxy.restore();
  pc.away.delete(n3.nodeId);
  await pc.settled(60_000);
  await waitFor(async () => ((await http(n3.url, 'GET', '/readyz')).body.cluster?.ownedShards ?? 0) > 0, 60_000, 100);
  await posting.stop();
});

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
  assert.ok((await pc.assertOneOwnerPerShard()) > SHARDS, 'ownership moved');
  await pc.assertTokensExact();
  assert.ok((await pc.assertChannelIntact()) >= 40);
});

test.run();
