/**
 * Cluster mode as separate processes (test/cluster-processes.ts): a real nats-server, the MongoDB
 * stand-in and three Steward nodes, n2's clock 60 s ahead and n3's 60 s behind (Debian's
 * faketime). Agents connect through a TCP balancer, and the owner posts to a channel through every
 * node while the faults happen:
 * - kill -9 of the node that holds the channel's actor and some of the agents, later started again;
 * - SIGSTOP of a node past its lease, then SIGCONT.
 * Then the invariants: no shard ever had two owners, the channel's `seq` unique and gap-free,
 * every acknowledged post stored once, every agent back online.
 */
import { existsSync } from 'node:fs';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { shardOf } from '../src/cluster/shards.js';
import { http, waitFor } from './helpers.js';
import { ProcessCluster, SHARDS } from './cluster-processes.js';

const FAKETIME = ['/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1', '/usr/lib/faketime/libfaketimeMT.so.1'].find((p) => existsSync(p));
const clockOf = (i: number): Record<string, string> => (i === 0 || !FAKETIME ? {} : { LD_PRELOAD: FAKETIME, FAKETIME: i === 1 ? '+60s' : '-60s' });

const test = suite('cluster as processes: kill -9, SIGSTOP, clocks ±60 s');
const pc = new ProcessCluster();

test.before(() => pc.start({ perNode: (i) => ({ env: clockOf(i) }) }));
test.after(() => pc.stop());

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

test('invariants: one owner per shard at any instant; channel seq unique and gap-free; every acknowledged post stored once; token totals exact', async () => {
  assert.ok((await pc.assertOneOwnerPerShard()) > SHARDS, 'ownership moved');
  await pc.assertTokensExact();
  assert.ok((await pc.assertChannelIntact()) >= 30);
});

test.run();
