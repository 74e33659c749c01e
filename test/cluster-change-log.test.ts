/**
 * The change log across two nodes on one store and a real nats-server (docs/cluster.md, "What
 * each node reads"): a change made through A whose broadcasts the bus drops still reaches B's
 * agents list, fleet summary and presence within a period; with the fleet in the store and
 * nothing changing, B reads no agent, also when it catches up after a bus outage; a writer that
 * died between numbering its entries and writing them makes B read everything again, and B's
 * pages answer meanwhile.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { generateKeyPair, type Ed25519KeyPair } from '../src/domain/did.js';
import { AGENT_ACTOR_KIND } from '../src/actors/agent.js';
import { CHANGE_COUNTER_ID } from '../src/store/cluster-docs.js';
import type { StewardAgent } from '../src/agent/index.js';
import { client, waitFor } from './helpers.js';
import { approve, newAgent, stopAll } from './fleet-helpers.js';
import { startCluster, type ClusterNodeServer, type TestCluster } from './cluster-nodes.js';
import type { TestUser } from './fixtures.js';

const test = suite('cluster: the change log');
let cl: TestCluster;
let A: ClusterNodeServer;
let B: ClusterNodeServer;
const agents: StewardAgent[] = [];
/** Agents written straight into the store: a fleet that only a full read would bring. */
const FLEET = 300;
/** The collections whose size grows with the number of agents (runs in progress are read when a shard is taken, not periodically). */
const FLEET_SIZED = new Set(['agents', 'agent_presence', 'workspace_agents', 'certificates', 'registrations']);

test.before(async () => {
  cl = await startCluster({ nodes: 2 });
  [A, B] = cl.nodes as [ClusterNodeServer, ClusterNodeServer];
  await waitFor(() => B.ctx.cluster!.shards.ownedShards().size >= 6, 20_000, 50);
});

test.after(async () => {
  await stopAll(...agents);
  await cl.stop();
});

const ownerOn = (node: ClusterNodeServer): TestUser => ({ ...cl.owner, api: cl.as(node) });

/** Keys whose agent actor lives on `node`. */
function keysHeldBy(node: ClusterNodeServer): Ed25519KeyPair {
  for (;;) {
    const keys = generateKeyPair();
    if (node.ctx.cluster!.placement.isLocal(`${AGENT_ACTOR_KIND}:${keys.did}`)) return keys;
  }
}

/** Makes the bus lose `node`'s broadcasts on these topics (they seem sent); returns the undo. */
function dropBroadcasts(node: ClusterNodeServer, topics: string[]): () => void {
  const bus = node.ctx.cluster!.bus as { publish(subject: string, data: unknown): boolean };
  const publish = bus.publish;
  const lost = new Set(topics.map((t) => node.ctx.cluster!.subjects.bcast(t)));
  bus.publish = (subject, data) => (lost.has(subject) ? true : publish.call(bus, subject, data));
  return () => {
    bus.publish = publish;
  };
}

async function listed(node: ClusterNodeServer, did: string): Promise<boolean> {
  const r = await client(node.url, cl.owner.token).get(`/api/agents?q=${encodeURIComponent(did)}`);
  assert.is(r.status, 200, r.text);
  return (r.body.agents as Array<{ id: string }>).some((a) => a.id === did);
}

async function total(node: ClusterNodeServer): Promise<number> {
  const r = await client(node.url, cl.owner.token).get('/api/fleet/summary');
  assert.is(r.status, 200, r.text);
  return r.body.agents.total;
}

/** B's change-log reads recorded so far. */
const logReads = (node: ClusterNodeServer) => node.faults.calls.filter((c) => c.collection === 'change_log' && c.op === 'find');

test('a change made through A while the bus drops its broadcasts reaches B within a period: agents list, summary, presence', async () => {
  const before = await total(B);
  const restore = dropBroadcasts(A, ['agent-roster', 'agent-roster.seen', 'fleet-summary', 'presence']);
  try {
    const agent = newAgent(A, { name: 'unheard', keys: keysHeldBy(A) });
    agents.push(agent);
    await approve(ownerOn(A), agent);
    await agent.waitFor('ready');
    assert.ok(await listed(A, agent.did));
    await waitFor(() => listed(B, agent.did), 10_000, 50);
    await waitFor(async () => (await total(B)) === before + 1, 10_000, 50);
    await waitFor(() => B.ctx.agents.isOnline(agent.did), 10_000, 50);

    await agent.stop();
    await waitFor(() => !A.ctx.agents.isOnline(agent.did), 10_000, 50);
    // Its going offline is read from the store as well (the news is older than what the store says).
    await waitFor(() => !B.ctx.agents.isOnline(agent.did), 10_000, 50);
  } finally {
    restore();
  }
});

test("the store refusing A's appends for a while (numbering failed, a write landed but reported failed): the change still reaches B, once", async () => {
  const restore = dropBroadcasts(A, ['agent-roster', 'agent-roster.seen', 'fleet-summary', 'presence']);
  A.faults.add({ collection: 'change_log', op: 'findOneAndUpdate', mode: 'fail', times: 2 });
  A.faults.add({ collection: 'change_log', op: 'bulkUpdate', mode: 'land-then-fail', times: 1 });
  try {
    const before = await total(B);
    const agent = newAgent(A, { name: 'appended-late', keys: keysHeldBy(A) });
    agents.push(agent);
    await approve(ownerOn(A), agent);
    await waitFor(() => listed(B, agent.did), 15_000, 50);
    await waitFor(async () => (await total(B)) === before + 1, 10_000, 50);
    assert.ok(A.faults.injected.includes('change_log.findOneAndUpdate fail'));
    assert.ok(A.faults.injected.includes('change_log.bulkUpdate land-then-fail'));
    assert.ok(A.logs.some((l) => l.includes('appending to the change log failed')));
    // Each numbered entry is stored once, numbers without a gap.
    const seqs = (await cl.store.collection<any>('change_log').find({ seq: { $gt: 0 } }, { sort: { seq: 1 } })).map((e) => e.seq as number);
    assert.equal(seqs, Array.from({ length: seqs.length }, (_, i) => seqs[0]! + i));
  } finally {
    A.faults.clear();
    restore();
  }
});

test(`with ${FLEET} agents in the store and nothing changing, B reads the change log only, and no fleet-sized collection`, async () => {
  const template = (await cl.store.collection<any>('agents').findOne({ status: 'active' }))!;
  const fleet = Array.from({ length: FLEET }, (_, i) => ({ ...template, _id: `did:key:zQuiet${i}`, name: `quiet-${i}` }));
  await cl.store.collection<any>('agents').insertMany(fleet);
  await cl.store.collection<any>('agent_presence').insertMany(fleet.map((a) => ({ _id: a._id, node: 'gone/0', since: 1 })));

  B.faults.metering = true;
  try {
    // What the previous test changed has been read: a read of the log found nothing new.
    await waitFor(() => logReads(B).at(-1)?.docs === 0, 10_000, 50);
    B.faults.calls.length = 0;
    await waitFor(() => logReads(B).length >= 4, 10_000, 50);
    const quiet = B.faults.calls.filter((c) => FLEET_SIZED.has(c.collection));
    assert.equal(quiet.map((c) => `${c.collection}.${c.op} ${JSON.stringify(c.args)}`), [], 'B read fleet-sized collections while nothing changed');
    assert.ok(logReads(B).every((c) => c.docs === 0), 'no entry while nothing changed');
  } finally {
    B.faults.metering = false;
    B.faults.calls.length = 0;
  }
});

test('catching up after a bus outage, B reads what changed meanwhile, not the whole fleet', async () => {
  B.faults.metering = true;
  try {
    await cl.nats.kill();
    await waitFor(() => A.ctx.cluster!.bus.status !== 'connected' && B.ctx.cluster!.bus.status !== 'connected', 10_000, 50);
    // Made through A while no broadcast can leave it.
    const agent = newAgent(A, { name: 'during-the-outage', keys: keysHeldBy(A) });
    agents.push(agent);
    await approve(ownerOn(A), agent);
    await cl.nats.restart();
    await waitFor(() => A.ctx.cluster!.bus.status === 'connected' && B.ctx.cluster!.bus.status === 'connected', 15_000, 50);
    await waitFor(() => listed(B, agent.did), 10_000, 50);
    const read = B.faults.calls.filter((c) => FLEET_SIZED.has(c.collection) && c.docs !== undefined);
    const docs = read.reduce((n, c) => n + c.docs!, 0);
    assert.ok(docs < FLEET, `B read ${docs} documents of fleet-sized collections: ${read.map((c) => `${c.collection}.${c.op}→${c.docs}`).join(', ')}`);
  } finally {
    B.faults.metering = false;
    B.faults.calls.length = 0;
  }
});

test('a writer that died between numbering its entries and writing them: B reads everything again once the hole has lasted', async () => {
  // The counter moved on without an entry, as after a writer killed between the two.
  await cl.store.collection<any>('change_log').updateOne({ _id: CHANGE_COUNTER_ID }, { $inc: { next: 1 } });
  // An agent that only a full read brings (no node announced it).
  const template = (await cl.store.collection<any>('agents').findOne({ status: 'active' }))!;
  const hidden = { ...template, _id: 'did:key:zHidden', name: 'hidden' };
  await cl.store.collection<any>('agents').insertOne(hidden);
  assert.not.ok(await listed(B, hidden._id));
  // B's read of every row is held until released: its pages must not wait for it.
  const rows = B.ctx.c.agents;
  const find = rows.find;
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let held = 0;
  rows.find = (async (...args: Parameters<typeof find>) => {
    if (JSON.stringify(args[0]) === '{"status":"active"}') {
      held++;
      await released;
    }
    return find.apply(rows, args);
  }) as typeof find;
  let agent: StewardAgent;
  try {
    // A later entry behind the hole.
    agent = newAgent(A, { name: 'behind-the-hole', keys: keysHeldBy(A) });
    agents.push(agent);
    await approve(ownerOn(A), agent);
    await waitFor(() => held > 0, 20_000, 100);
    assert.ok(B.logs.some((l) => l.includes('the change log has a hole')));
    const page = await Promise.race([listed(B, hidden._id), new Promise<'waited'>((r) => setTimeout(() => r('waited'), 10_000))]);
    assert.is(page, false, 'a page answered, without the hidden agent, while the full read was held');
  } finally {
    release();
    rows.find = find;
  }
  await waitFor(() => listed(B, hidden._id), 10_000, 50);
  await waitFor(() => listed(B, agent.did), 10_000, 50);
});

test.run();
