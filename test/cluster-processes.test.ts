/**
 * Cluster mode as separate processes (tools/cluster/local-cluster.ts, what `npm run cluster`
 * runs): a real nats-server, the MongoDB stand-in and three Steward nodes, n2's clock 60 s ahead
 * and n3's 60 s behind (Debian's faketime). Agents connect through a TCP balancer, and people post
 * to a channel through every node while the faults happen:
 * - kill -9 of the node that holds the channel's actor and some of the agents, later started again;
 * - SIGSTOP of a node past its lease, then SIGCONT.
 * Then the invariants: no shard ever had two owners (the nodes' ownership intervals, logged on
 * the store's clock), the channel's `seq` is unique and gap-free, every acknowledged post is
 * stored once, and every agent is back online.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { StewardAgent } from '../src/agent/index.js';
import { generateKeyPair, signMessage, type Ed25519KeyPair } from '../src/domain/did.js';
import { shardOf } from '../src/cluster/shards.js';
import { openMongoStore } from '../src/store/mongo.js';
import type { Store } from '../src/store/types.js';
import { startLocalCluster, type LocalCluster, type LocalNode } from '../tools/cluster/local-cluster.js';
import { client, http, waitFor } from './helpers.js';
import { TcpBalancer } from './tcp-balancer.js';
import { stopAll } from './fleet-helpers.js';

const SHARDS = 16;
const LEASE_MS = 3000;
const FAKETIME = ['/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1', '/usr/lib/faketime/libfaketimeMT.so.1'].find((p) => existsSync(p));

const test = suite('cluster as processes: kill -9, SIGSTOP, clocks ±60 s');
let cl: LocalCluster;
let lb: TcpBalancer;
let store: Store;
let token = '';
let channelId = '';
const ownerKeys: Ed25519KeyPair = generateKeyPair();
const agents: StewardAgent[] = [];
/** Posts the server acknowledged (201), by message id. */
const acknowledged = new Set<string>();
/** Nodes out of the posting rotation (killed or paused). */
const killedAt = new Map<string, number>();
/** When each node's processes were killed, in order (test clock = the stand-in's: both unfaked on this machine). */
const kills_ = new Map<string, number[]>();

const clockOf = (i: number): Record<string, string> =>
  i === 0 || !FAKETIME ? {} : { LD_PRELOAD: FAKETIME, FAKETIME: i === 1 ? '+60s' : '-60s', FAKETIME_NO_CACHE: '1' };

test.before(async () => {
  try {
    await startAll();
  } catch (err) {
    // uvu does not print a hook's failure: say what it was.
    console.error(err);
    throw err;
  }
});

async function startAll(): Promise<void> {
  const { MONGODB_URI: _ignored, ...env } = process.env;
  cl = await startLocalCluster({
    nodes: 3,
    port: 0,
    env: {
      ...env,
      ...(process.env.MONGODB_URI ? { MONGODB_URI: process.env.MONGODB_URI } : {}),
      LOG_LEVEL: 'debug',
      STEWARD_OWNER_DID: ownerKeys.did,
      CLUSTER_SHARDS: String(SHARDS),
      CLUSTER_LEASE_MS: String(LEASE_MS),
      CLUSTER_LEASE_MARGIN_MS: '500',
      CLUSTER_BUS_LOSS_RELEASE_MS: '3000',
      AGENT_OFFLINE_GRACE_MS: '0',
    },
    perNode: (i) => ({ env: clockOf(i) }),
  });
  store = await openMongoStore({ uri: cl.mongodbUri });
  lb = await TcpBalancer.start(cl.nodes.map((n) => n.port));
}

test.after(async () => {
  await stopAll(...agents);
  await lb?.close();
  await store?.close();
  await cl?.stop();
});

const api = (node: LocalNode) => client(node.url, token);
const live = () => cl.nodes.filter((n) => n.running && !killedAt.has(n.nodeId));

async function login(node: LocalNode): Promise<string> {
  const ch = await http(node.url, 'POST', '/api/auth/challenge', { json: { did: ownerKeys.did } });
  assert.is(ch.status, 200, ch.text);
  const signature = signMessage(ownerKeys, `steward-login:${ch.body.nonce}`);
  const r = await http(node.url, 'POST', '/api/auth/login', { json: { challengeId: ch.body.challengeId, did: ownerKeys.did, signature } });
  assert.is(r.status, 200, r.text);
  return r.body.token as string;
}

/** Which node's log says it holds `shard` now (its last event for the shard is an acquisition). */
async function holderOf(shard: number): Promise<LocalNode | undefined> {
  for (const node of cl.nodes) {
    const events = (await ownershipEvents(node)).filter((e) => e.shard === shard);
    if (events.at(-1)?.msg === 'shard acquired') return node;
  }
  return undefined;
}

interface OwnershipEvent {
  msg: 'shard acquired' | 'shard lost';
  shard: number;
  epoch: number;
  from?: number;
  until?: number;
}

async function ownershipEvents(node: LocalNode): Promise<OwnershipEvent[]> {
  const text = await readFile(node.logFile, 'utf8').catch(() => '');
  const out: OwnershipEvent[] = [];
  for (const line of text.split('\n')) {
    if (!line.includes('"shard ')) continue;
    try {
      const e = JSON.parse(line) as OwnershipEvent;
      if (e.msg === 'shard acquired' || e.msg === 'shard lost') out.push(e);
    } catch {
      // a line cut by kill -9
    }
  }
  return out;
}

/** Posts through the live nodes in turn until stopped; what is acknowledged is recorded. */
function keepPosting(): { stop(): Promise<{ sent: number; refused: number }> } {
  let running = true;
  let sent = 0;
  let refused = 0;
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const nodes = live();
      const node = nodes[i % nodes.length]!;
      const r = await api(node)
        .post(`/api/channels/${channelId}/messages`, { content: `m${i}` })
        .catch(() => null);
      if (r?.status === 201) {
        acknowledged.add(r.body.message.id);
        sent++;
      } else refused++;
      await new Promise((res) => setTimeout(res, 20));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { sent, refused };
    },
  };
}

async function onlineAgents(): Promise<number> {
  const r = await api(live()[0]!).get('/api/fleet/summary');
  return r.status === 200 ? (r.body.agents.online as number) : -1;
}

test('three node processes are ready, every shard owned once; the store clock hides the nodes’ ±60 s', async () => {
  token = await login(cl.nodes[0]!);
  const ready = await waitFor(
    async () => {
      const all = await Promise.all(cl.nodes.map((n) => http(n.url, 'GET', '/readyz')));
      const owned = all.reduce((sum, r) => sum + (r.status === 200 ? r.body.cluster.ownedShards : 0), 0);
      return all.every((r) => r.status === 200 && r.body.cluster.nodes === 3) && owned === SHARDS ? all : null;
    },
    60_000,
    100,
  );
  if (FAKETIME) {
    // The offsets are real: each node's wall clock is a minute off the store's.
    assert.ok(Math.abs(ready[0]!.body.cluster.storeClock.offsetMs) < 5000);
    assert.ok(ready[1]!.body.cluster.storeClock.offsetMs > 55_000, JSON.stringify(ready[1]!.body));
    assert.ok(ready[2]!.body.cluster.storeClock.offsetMs < -55_000, JSON.stringify(ready[2]!.body));
  }
});

test('kill -9 of the node holding a channel in use and agents: the others take over, agents come back, posts go on', async () => {
  // Six agents through the balancer (two a node), approved by the owner.
  for (let i = 0; i < 6; i++) {
    const agent = new StewardAgent({
      url: lb.url,
      keys: generateKeyPair(),
      name: `proc-agent-${i}`,
      version: '1.0.0',
      capabilities: ['api_call'],
      reconnect: { initialDelayMs: 50, maxDelayMs: 500 },
    }).start();
    agents.push(agent);
    await agent.waitFor('pending');
    const r = await api(cl.nodes[0]!).post(`/api/registrations/${agent.registrationId}/approve`, { capabilities: ['api_call'] });
    assert.is(r.status, 200, r.text);
    await agent.waitFor('ready');
  }
  await waitFor(async () => (await onlineAgents()) === 6, 30_000, 100);

  // A channel whose actor lives on n1.
  const victim = cl.nodes[0]!;
  for (let i = 0; !channelId; i++) {
    assert.ok(i < 50, 'no channel landed on n1');
    const r = await api(victim).post('/api/channels', { name: `proc-${i}` });
    assert.is(r.status, 201, r.text);
    if ((await holderOf(shardOf(`channel:${r.body.channel.id}`, SHARDS))) === victim) channelId = r.body.channel.id;
  }
  const posting = keepPosting();
  await waitFor(() => acknowledged.size >= 10, 20_000, 20);

  killedAt.set(victim.nodeId, Date.now());
  kills_.set(victim.nodeId, [...(kills_.get(victim.nodeId) ?? []), Date.now()]);
  victim.signal('SIGKILL');
  await victim.exited();
  lb.down(victim.port);
  // The others own every shard within a lease or two, the agents reconnect, posts are taken again.
  await waitFor(
    async () => {
      const rs = await Promise.all(live().map((n) => http(n.url, 'GET', '/readyz')));
      return rs.every((r) => r.status === 200) && rs.reduce((s, r) => s + r.body.cluster.ownedShards, 0) === SHARDS;
    },
    30_000,
    100,
  );
  await waitFor(async () => (await onlineAgents()) === 6, 30_000, 100);
  const before = acknowledged.size;
  await waitFor(() => acknowledged.size >= before + 10, 30_000, 20);

  // Started again, it rejoins (its id's lease ran out) and takes its share back.
  killedAt.delete(victim.nodeId);
  await victim.start();
  const { sent } = await posting.stop();
  assert.ok(sent >= 20);
});

test('SIGSTOP of a shard owner past its lease, then SIGCONT: the others take over, it rejoins', async () => {
  const paused = cl.nodes[1]!;
  const posting = keepPosting();
  await waitFor(async () => ((await http(paused.url, 'GET', '/readyz')).body.cluster?.ownedShards ?? 0) > 0, 60_000, 100);
  killedAt.set(paused.nodeId, Number.NaN); // not killed: out of the posting rotation while paused
  paused.signal('SIGSTOP');
  await waitFor(
    async () => {
      const rs = await Promise.all(live().map((n) => http(n.url, 'GET', '/readyz')));
      return rs.every((r) => r.status === 200) && rs.reduce((s, r) => s + r.body.cluster.ownedShards, 0) === SHARDS;
    },
    30_000,
    100,
  );
  paused.signal('SIGCONT');
  killedAt.delete(paused.nodeId);
  await waitFor(async () => (await http(paused.url, 'GET', '/readyz')).status === 200, 30_000, 100);
  await posting.stop();
  await waitFor(async () => (await onlineAgents()) === 6, 30_000, 100);
});

test('invariants: one owner per shard at any instant; channel seq unique and gap-free; every acknowledged post stored once', async () => {
  // Ownership intervals per shard, on the store's clock. A holding a killed process left open
  // ended at the kill; one still open at the end runs on.
  const intervals = new Map<number, Array<{ node: string; epoch: number; from: number; until: number }>>();
  const add = (shard: number, h: { node: string; epoch: number; from: number; until: number }) => {
    const list = intervals.get(shard) ?? [];
    list.push(h);
    intervals.set(shard, list);
  };
  for (const node of cl.nodes) {
    const open = new Map<string, { epoch: number; from: number; shard: number }>();
    const kills = [...(kills_.get(node.nodeId) ?? [])];
    const text = await readFile(node.logFile, 'utf8');
    for (const line of text.split('\n')) {
      let e: Omit<OwnershipEvent, "msg"> & { msg: string };
      try {
        e = JSON.parse(line);
      } catch {
        continue; // a line cut by kill -9, or not JSON
      }
      if (e.msg === 'joined the cluster' && open.size > 0) {
        // A new process of this node: the previous one was killed with these holdings.
        const at = kills.shift()!;
        assert.ok(at !== undefined, `${node.nodeId}: holdings left open by a process that was not killed`);
        for (const o of open.values()) add(o.shard, { node: node.nodeId, epoch: o.epoch, from: o.from, until: at });
        open.clear();
      } else if (e.msg === 'shard acquired') open.set(`${e.shard}/${e.epoch}`, { epoch: e.epoch, from: e.from!, shard: e.shard });
      else if (e.msg === 'shard lost') {
        const o = open.get(`${e.shard}/${e.epoch}`);
        if (!o) continue;
        open.delete(`${e.shard}/${e.epoch}`);
        add(e.shard, { node: node.nodeId, epoch: e.epoch, from: o.from, until: e.until! });
      }
    }
    for (const o of open.values()) add(o.shard, { node: node.nodeId, epoch: o.epoch, from: o.from, until: Number.POSITIVE_INFINITY });
  }
  let holdings = 0;
  for (const [shard, list] of intervals) {
    list.sort((a, b) => a.from - b.from);
    holdings += list.length;
    for (let i = 1; i < list.length; i++) {
      const prev = list[i - 1]!;
      const cur = list[i]!;
      assert.ok(prev.until <= cur.from, `shard ${shard}: ${prev.node}@${prev.epoch} until ${prev.until} overlaps ${cur.node}@${cur.epoch} from ${cur.from}`);
      assert.ok(cur.epoch > prev.epoch, `shard ${shard}: epochs rise`);
    }
  }
  assert.ok(holdings > SHARDS, `ownership moved (${holdings} holdings)`);

  const messages = await store.collection<{ _id: string; channelId: string; seq: number }>('channel_messages').find({ channelId }, { sort: { seq: 1 } });
  const seqs = messages.map((m) => m.seq);
  assert.equal(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1), 'seq 1…n, no gap, no repeat');
  const ids = new Set(messages.map((m) => m._id));
  for (const id of acknowledged) assert.ok(ids.has(id), `acknowledged message ${id} stored`);
  assert.is(ids.size, messages.length);
});

test.run();
