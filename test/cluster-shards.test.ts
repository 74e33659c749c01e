/**
 * Membership, shard ownership and the epoch fence with several nodes in one process: each node
 * has its own Membership and ShardManager, its own view of one shared store (through a fault
 * injector) and its own view of one clock that the test advances by hand. A node "crashes" by
 * having its timers halted; it "cannot renew" when its store calls fail. Runs on the embedded
 * store, and on MongoDB too when MONGODB_URI is set.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { collections, ensureClusterIndexes, type Collections } from '../src/store/collections.js';
import { BulkUpdateError, type BulkUpdateOp, type Store } from '../src/store/types.js';
import { Membership, NodeIdInUseError } from '../src/cluster/membership.js';
import { DEFAULT_SHARDS, fairShare, shardKey, shardOf, ShardManager, type ShardLossReason } from '../src/cluster/shards.js';
import { claimDocument, fencedOp, fencedUpdateOne, fenceFailures, StaleEpochError, type FencedDoc } from '../src/cluster/fence.js';
import type { ClusterShardDoc } from '../src/store/cluster-docs.js';
import { FaultInjector } from './fault-store.js';
import { ManualClock, recordingLog, type ClockView, type RecordingLog } from './cluster-helpers.js';
import { storeTargets } from './cluster-stores.js';
import { StoreClock } from '../src/cluster/store-clock.js';

const LEASE = 15_000;
const MARGIN = 3_000;
const TICK = LEASE / 3;

const pure = suite('shard placement');

pure('shardOf is stable: the same id lands on the same shard in every version', () => {
  // Pinned: changing the hash would move every stored actor to another owner.
  const ids = ['agent:did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK', 'channel:general', 'run:0001', '', 'é'];
  assert.equal(
    ids.map((id) => shardOf(id, 1024)),
    [886, 401, 452, 11, 711],
  );
});

pure('shardOf spreads ids evenly and stays in range', () => {
  const counts = new Array<number>(DEFAULT_SHARDS).fill(0);
  for (let i = 0; i < 200_000; i++) counts[shardOf(`agent:did:key:z6Mk${i.toString(36)}`, DEFAULT_SHARDS)]!++;
  const mean = 200_000 / DEFAULT_SHARDS;
  assert.ok(Math.min(...counts) > mean * 0.7, `min ${Math.min(...counts)}`);
  assert.ok(Math.max(...counts) < mean * 1.3, `max ${Math.max(...counts)}`);
  for (const n of [1, 7, 1024, 65536]) for (const id of ['a', 'b', 'zz']) assert.ok(shardOf(id, n) >= 0 && shardOf(id, n) < n);
});

pure('fair shares sum to the shard count and differ by at most one', () => {
  for (const [shards, nodes] of [
    [1024, 3],
    [1024, 10],
    [7, 3],
    [2, 5],
  ] as const) {
    const ids = Array.from({ length: nodes }, (_, i) => `n${i}`);
    const shares = ids.map((id) => fairShare(shards, ids, id));
    assert.is(shares.reduce((a, b) => a + b, 0), shards);
    assert.ok(Math.max(...shares) - Math.min(...shares) <= 1);
    assert.is(Math.max(...shares), Math.ceil(shards / nodes));
  }
  assert.is(fairShare(10, ['a', 'b'], 'c'), 0);
});

pure.run();

interface Event {
  at: number;
  type: 'acquired' | 'lost';
  shard: number;
  epoch: number;
  reason?: ShardLossReason;
}

interface TestNode {
  id: string;
  clock: ClockView;
  storeClock?: StoreClock;
  faults: FaultInjector;
  c: Collections;
  log: RecordingLog;
  membership: Membership;
  shards: ShardManager;
  events: Event[];
}

for (const target of storeTargets()) {
  const s = suite(`shards and membership: ${target.name}`);
  let store: Store;
  let cleanup: () => Promise<void>;
  let clock: ManualClock;
  let nodes: TestNode[];

  s.before.each(async () => {
    ({ store, cleanup } = await target.open());
    await ensureClusterIndexes(collections(store));
    clock = new ManualClock();
    nodes = [];
  });

  s.after.each(async () => {
    for (const n of nodes) n.clock.halt();
    await cleanup();
  });

  function makeNode(
    id: string,
    opts: {
      shardCount?: number;
      releasePerTick?: number;
      beforeRelease?: (shard: number, epoch: number) => Promise<void>;
      /** How far ahead of the shared time this node's own clock is. */
      offsetMs?: number;
      /** Judge leases on the store's clock (the shared time), as a node of a real cluster does. */
      storeClock?: boolean;
    } = {},
  ): TestNode {
    const own = clock.view(opts.offsetMs ?? 0);
    const faults = new FaultInjector();
    const c = collections(faults.wrap(store));
    const log = recordingLog();
    const storeClock = opts.storeClock ? new StoreClock({ time: async () => clock.now(), base: own, log }) : undefined;
    const view = storeClock ?? own;
    const shardCount = opts.shardCount ?? 64;
    const membership = new Membership({ nodes: c.clusterNodes, nodeId: id, shards: shardCount, leaseMs: LEASE, marginMs: MARGIN, log, clock: view });
    const shards = new ShardManager({
      shards: c.clusterShards,
      membership,
      shardCount,
      leaseMs: LEASE,
      marginMs: MARGIN,
      log,
      clock: view,
      releasePerTick: opts.releasePerTick,
      beforeRelease: opts.beforeRelease,
    });
    const events: Event[] = [];
    shards.on('acquired', (shard, epoch) => events.push({ at: clock.now(), type: 'acquired', shard, epoch }));
    shards.on('lost', (shard, epoch, reason) => events.push({ at: clock.now(), type: 'lost', shard, epoch, reason }));
    const node = { id, clock: own, storeClock, faults, c, log, membership, shards, events };
    nodes.push(node);
    return node;
  }

  async function startNode(...args: Parameters<typeof makeNode>): Promise<TestNode> {
    const node = makeNode(...args);
    await node.storeClock?.start();
    await node.membership.start();
    await node.shards.start();
    return node;
  }

  /** No shard has two nodes that count themselves its owner, at this instant. */
  function assertSingleOwners(): void {
    const seen = new Map<number, string>();
    for (const n of nodes) {
      for (const shard of n.shards.ownedShards().keys()) {
        assert.ok(!seen.has(shard), `shard ${shard} owned by ${seen.get(shard)} and ${n.id} at once`);
        seen.set(shard, n.id);
      }
    }
  }

  /** Advances the clock in small steps until `p` settles (it waits on the clock). */
  async function advanceUntil<T>(p: Promise<T>): Promise<T> {
    let settled = false;
    const watched = p.finally(() => (settled = true));
    for (let i = 0; !settled; i++) {
      assert.ok(i < 1000, 'never settled');
      await clock.advance(LEASE / 30);
      await new Promise((r) => setImmediate(r));
    }
    return watched;
  }

  /** Advances round by round until the live nodes hold `shards` between them, evenly. */
  async function converge(shards: number): Promise<void> {
    for (let round = 0; ; round++) {
      const live = nodes.filter((n) => !n.clock.halted && n.membership.isAlive());
      const sizes = live.map((n) => n.shards.ownedShards().size);
      if (sizes.reduce((x, y) => x + y, 0) === shards && Math.max(...sizes) - Math.min(...sizes) <= 1) return;
      assert.ok(round < 200, `no convergence: ${sizes}`);
      await clock.advance(TICK);
      assertSingleOwners();
    }
  }

  async function stored(shard: number): Promise<ClusterShardDoc> {
    return (await collections(store).clusterShards.findById(shardKey(shard))) as ClusterShardDoc;
  }

  s('three nodes spread 1024 shards evenly; a joining node fills up gradually, without a storm', async () => {
    const a = await startNode('node-a', { shardCount: 1024 });
    assert.is(a.shards.ownedShards().size, 1024, 'alone, a node takes every shard');
    const b = await startNode('node-b', { shardCount: 1024 });
    const c = await startNode('node-c', { shardCount: 1024 });
    let rounds = 0;
    for (;;) {
      const before = a.events.filter((e) => e.type === 'lost').length;
      await clock.advance(TICK);
      rounds++;
      assertSingleOwners();
      assert.ok(a.events.filter((e) => e.type === 'lost').length - before <= 16, 'at most releasePerTick (1024/64) shards move per round');
      const sizes = [a, b, c].map((n) => n.shards.ownedShards().size);
      if (sizes.reduce((x, y) => x + y, 0) === 1024 && Math.max(...sizes) - Math.min(...sizes) <= 1) break;
      assert.ok(rounds < 200, `no convergence: ${sizes}`);
    }
    assert.equal([a, b, c].map((n) => n.shards.ownedShards().size), [342, 341, 341]);
    assert.ok(a.events.filter((e) => e.type === 'lost').every((e) => e.reason === 'released'));
    // The store agrees with what each node believes.
    const docs = (await collections(store).clusterShards.find({ shard: { $gte: 0 } })) as ClusterShardDoc[];
    assert.is(docs.length, 1024);
    for (const d of docs) {
      const owner = [a, b, c].find((n) => n.shards.isOwner(d.shard));
      assert.is(d.owner, owner?.id, `shard ${d.shard}`);
      assert.is(owner!.shards.fence(d.shard)!.epoch, d.epoch);
    }
  });

  s('nodes starting together race for the same shards: each shard gets one owner, the one the store names', async () => {
    const racers = ['node-a', 'node-b', 'node-c', 'node-d'].map((id) => makeNode(id, { shardCount: 64 }));
    await Promise.all(racers.map((n) => n.membership.start()));
    // Every node sees four live nodes and all 64 shards free, and picks at random among them.
    await Promise.all(racers.map((n) => n.shards.start()));
    assertSingleOwners();
    await converge(64);
    const docs = (await collections(store).clusterShards.find({ shard: { $gte: 0 } })) as ClusterShardDoc[];
    for (const d of docs) assert.is(d.owner, racers.find((n) => n.shards.isOwner(d.shard))?.id, `shard ${d.shard}`);
    const acquired = racers.flatMap((n) => n.events.filter((e) => e.type === 'acquired'));
    assert.is(new Set(acquired.map((e) => e.epoch)).size, acquired.length, 'one epoch per takeover');
  });

  s('a node stopped abruptly (no release) has its shards taken over once its lease ran out, under higher epochs', async () => {
    const [a, b, c] = [await startNode('node-a'), await startNode('node-b'), await startNode('node-c')];
    await converge(64);
    const bShards = new Map(b.shards.ownedShards());
    const haltedAt = clock.now();
    const bLeaseEnds = Math.max(...(await Promise.all([...bShards.keys()].map(async (sh) => Date.parse((await stored(sh)).leaseUntil)))));
    b.clock.halt(); // the process is gone: no renewal, no release
    for (let i = 0; i < 8; i++) {
      await clock.advance(TICK);
      assertSingleOwners();
    }
    assert.is(b.shards.ownedShards().size, 0, 'by its own clock, B no longer counts itself owner');
    assert.is(a.shards.ownedShards().size + c.shards.ownedShards().size, 64);
    assert.equal([a.shards.ownedShards().size, c.shards.ownedShards().size], [32, 32]);
    for (const [shard, oldEpoch] of bShards) {
      const taken = [...a.events, ...c.events].find((e) => e.type === 'acquired' && e.shard === shard && e.at >= haltedAt)!;
      assert.ok(taken, `shard ${shard} taken over`);
      assert.ok(taken.at >= bLeaseEnds, 'not before the lease ended');
      assert.ok(taken.epoch > oldEpoch, 'under a higher epoch');
      assert.is((await stored(shard)).epoch, taken.epoch);
    }
  });

  s('a node that cannot renew stops acting as owner before its lease ends, and before anyone takes over', async () => {
    const [a, b, c] = [await startNode('node-a'), await startNode('node-b'), await startNode('node-c')];
    await converge(64);
    const bShards = new Map(b.shards.ownedShards());
    const faultAt = clock.now();
    // Every store call of B's fails from now on: it can neither renew nor release.
    for (const collection of ['cluster_shards', 'cluster_nodes']) {
      for (const op of ['updateMany', 'updateOne', 'find', 'findOne', 'findById', 'findOneAndUpdate'] as const) b.faults.add({ collection, op, mode: 'fail', times: Infinity });
    }
    const storedLease = Math.min(...(await Promise.all([...bShards.keys()].map(async (sh) => Date.parse((await stored(sh)).leaseUntil)))));
    for (let i = 0; i < 100; i++) {
      await clock.advance(LEASE / 50);
      assertSingleOwners();
      if (clock.now() >= storedLease - MARGIN) assert.is(b.shards.ownedShards().size, 0, 'no longer owner from lease − margin on');
    }
    const lost = b.events.filter((e) => e.type === 'lost');
    assert.is(lost.length, bShards.size);
    assert.ok(lost.every((e) => e.reason === 'expired'));
    const stoppedAt = Math.max(...lost.map((e) => e.at));
    assert.ok(stoppedAt <= storedLease - MARGIN, 'stopped by lease − margin');
    const firstTakeover = Math.min(...[...a.events, ...c.events].filter((e) => e.type === 'acquired' && bShards.has(e.shard) && e.at >= faultAt).map((e) => e.at));
    assert.ok(firstTakeover >= storedLease && firstTakeover > stoppedAt, 'taken over only after the lease, after B stopped');
    assert.ok(b.log.entries.some((e) => /stops acting as their owner/.test(e.msg)));

    // The store comes back: B renews its membership and gets its share again, under new epochs.
    b.faults.clear();
    await converge(64);
    for (const [shard, epoch] of b.shards.ownedShards()) if (bShards.has(shard)) assert.ok(epoch > bShards.get(shard)!);
    assertSingleOwners();
  });

  s("clocks up to 60 s apart never make two owners: leases are judged on the store's clock", async () => {
    for (const offsetMs of [5_000, 60_000, -60_000]) {
      // A on the right time, B's clock `offsetMs` ahead of it; they share the shards, then A cannot renew.
      const a = await startNode(`node-a${offsetMs}`, { shardCount: 16, storeClock: true });
      const b = await startNode(`node-b${offsetMs}`, { shardCount: 16, storeClock: true, offsetMs });
      await converge(16);
      assert.ok(a.shards.ownedShards().size > 0);
      for (const collection of ['cluster_shards', 'cluster_nodes']) {
        for (const op of ['updateMany', 'updateOne', 'find', 'findOne', 'findById', 'findOneAndUpdate'] as const) a.faults.add({ collection, op, mode: 'fail', times: Infinity });
      }
      for (let i = 0; i < 150 && b.shards.ownedShards().size < 16; i++) {
        await clock.advance(LEASE / 50);
        assertSingleOwners();
      }
      assert.is(b.shards.ownedShards().size, 16, `B (${offsetMs} ms) took every shard over`);
      a.clock.halt();
      b.clock.halt();
      await b.shards.stop();
      nodes.length = 0;
    }
  });

  s('every takeover raises the epoch; epochs are unique across shards', async () => {
    const a = await startNode('node-a', { shardCount: 8 });
    const first = new Map(a.shards.ownedShards());
    assert.is(first.size, 8);
    a.clock.halt();
    await clock.advance(LEASE + 1);
    const b = await startNode('node-b', { shardCount: 8 });
    const second = new Map(b.shards.ownedShards());
    assert.is(second.size, 8);
    b.clock.halt();
    await clock.advance(LEASE + 1);
    const c = await startNode('node-c', { shardCount: 8 });
    const third = new Map(c.shards.ownedShards());
    for (let shard = 0; shard < 8; shard++) {
      assert.ok(first.get(shard)! < second.get(shard)! && second.get(shard)! < third.get(shard)!, `shard ${shard}: ${first.get(shard)} < ${second.get(shard)} < ${third.get(shard)}`);
    }
    const all = [...first.values(), ...second.values(), ...third.values()];
    assert.is(new Set(all).size, all.length);
  });

  s("a stale owner's fenced writes are refused, alone and inside a bulk; the new owner's go through", async () => {
    const a = await startNode('node-a', { shardCount: 4 });
    const col = store.collection<FencedDoc & { value?: number }>('actor_docs');
    const idOn = (shard: number, tag: string) => {
      for (let i = 0; ; i++) if (shardOf(`${tag}${i}`, 4) === shard) return `${tag}${i}`;
    };
    const x = idOn(0, 'x');
    const y = idOn(0, 'y');
    const z = idOn(0, 'z');
    const staleFence = a.shards.fenceFor(x)!;
    assert.ok(staleFence);
    await fencedUpdateOne(col, x, { $set: { value: 1 } }, staleFence, { upsert: true });
    // A pauses past its lease (its timers stop); B takes the shards over and claims x.
    a.clock.halt();
    await clock.advance(LEASE + 1);
    const b = await startNode('node-b', { shardCount: 4 });
    const fresh = b.shards.fenceFor(x)!;
    assert.ok(fresh.epoch > staleFence.epoch);
    const claimed = await claimDocument(col, x, fresh);
    assert.is(claimed?.value, 1, 'the new owner reads what the old one wrote');
    assert.is(claimed?.fence?.epoch, fresh.epoch, 'and stamps it');
    assert.is(await claimDocument(col, z, fresh, { stampMissing: true }), null, 'nothing stored yet for z');
    assert.equal((await col.findById(z))?.fence, fresh, 'but z is stamped');

    const err = await fencedUpdateOne(col, x, { $set: { value: 2 } }, staleFence, { upsert: true }).then(
      () => assert.unreachable('a stale write went through'),
      (e: unknown) => e,
    );
    assert.instance(err, StaleEpochError);
    assert.is((err as StaleEpochError).storedEpoch, fresh.epoch);
    await fencedUpdateOne(col, x, { $set: { value: 3 } }, staleFence).then(
      () => assert.unreachable('a stale write (no upsert) went through'),
      (e: unknown) => assert.instance(e, StaleEpochError),
    );
    // Inside a bulk: the stale ops fail alone, the rest is written.
    const ops: BulkUpdateOp[] = [
      fencedOp({ filter: { _id: y }, update: { $set: { value: 10 } }, upsert: true }, staleFence),
      fencedOp({ filter: { _id: x }, update: { $set: { value: 11 } }, upsert: true }, staleFence),
      fencedOp({ filter: { _id: z }, update: { $set: { value: 12 } }, upsert: true }, staleFence),
      fencedOp({ filter: { _id: 'other' }, update: { $set: { value: 13 } }, upsert: true }, fresh),
    ];
    const bulkErr = await col.bulkUpdate(ops).then(
      () => assert.unreachable('a stale bulk op went through'),
      (e: unknown) => e,
    );
    assert.instance(bulkErr, BulkUpdateError);
    const sorted = await fenceFailures(col, ops, bulkErr as BulkUpdateError);
    assert.equal(sorted.stale.map((f) => f.index), [1, 2]);
    assert.equal(sorted.other, []);
    assert.ok(sorted.stale.every((f) => f.error.storedEpoch === fresh.epoch));
    assert.is((await col.findById(x))?.value, 1, 'x keeps what was there when B claimed it');
    assert.is((await col.findById(z))?.value, undefined, 'the stub B stamped refused the stale first write');
    assert.is((await col.findById(y))?.value, 10, 'y was never claimed by B: the write landed (B reads it when it claims y)');
    assert.is((await col.findById('other'))?.value, 13);
    // The new owner writes on; a claim by the stale owner fails.
    await fencedUpdateOne(col, x, { $set: { value: 20 } }, fresh);
    assert.is((await col.findById(x))?.value, 20);
    await claimDocument(col, x, staleFence).then(
      () => assert.unreachable('a stale claim'),
      (e: unknown) => assert.instance(e, StaleEpochError),
    );
    assert.equal(await claimDocument(col, 'missing', fresh), null);
  });

  s('a graceful stop stops each shard (beforeRelease) while still owner, then frees it for the others at once', async () => {
    const order: string[] = [];
    let b!: TestNode;
    const a = await startNode('node-a', { shardCount: 16 });
    b = await startNode('node-b', {
      shardCount: 16,
      beforeRelease: async (shard) => {
        const doc = await stored(shard);
        order.push(`${shard}:${doc.owner}:${b.shards.isOwner(shard)}`);
      },
    });
    for (let i = 0; i < 10 && b.shards.ownedShards().size < 8; i++) await clock.advance(TICK);
    const held = [...b.shards.ownedShards().keys()];
    assert.is(held.length, 8);
    await b.shards.stop();
    await b.membership.stop();
    assert.equal(order.sort(), held.map((sh) => `${sh}:node-b:true`).sort());
    for (const sh of held) assert.is((await stored(sh)).owner, null);
    assert.ok(b.events.filter((e) => e.type === 'lost').every((e) => e.reason === 'stopped'));
    await clock.advance(TICK); // one round: no lease to wait for
    assert.is(a.shards.ownedShards().size, 16);
  });

  s('a shard whose actors cannot be stopped is kept until they can', async () => {
    let refuse = true;
    const a = await startNode('node-a', {
      shardCount: 8,
      beforeRelease: async () => {
        if (refuse) throw new Error('cannot write the actors out');
      },
    });
    const b = await startNode('node-b', { shardCount: 8 });
    for (let i = 0; i < 4; i++) await clock.advance(TICK);
    assert.is(a.shards.ownedShards().size, 8, 'nothing released while beforeRelease fails');
    assert.is(b.shards.ownedShards().size, 0);
    refuse = false;
    for (let i = 0; i < 6; i++) await clock.advance(TICK);
    assert.equal([a.shards.ownedShards().size, b.shards.ownedShards().size], [4, 4]);
  });

  s('nodes with another shard count take nothing and say why', async () => {
    const a = await startNode('node-a', { shardCount: 8 });
    const b = await startNode('node-b', { shardCount: 16 });
    for (let i = 0; i < 3; i++) await clock.advance(TICK);
    assert.is(b.shards.ownedShards().size, 0);
    assert.ok(b.log.errors().some((e) => /another shard count/.test(e.msg)));
    assert.is(a.shards.ownedShards().size, 8, 'what a node holds it keeps renewing');
  });

  s('a node id is one process: a live holder refuses a second, a crashed one is waited out, a replaced one is evicted', async () => {
    const first = makeNode('node-a', { shardCount: 4 });
    await first.membership.start();
    await first.shards.start();
    // A second process with the same id while the first runs: refused once the first renews.
    const twin = makeNode('node-a', { shardCount: 4 });
    const refused = twin.membership.start().then(
      () => assert.unreachable('two processes with one node id'),
      (e: unknown) => e,
    );
    const err = await advanceUntil(refused);
    assert.instance(err, NodeIdInUseError);
    twin.clock.halt();

    // The first process cannot renew any more; a restart with the same id takes the id over once
    // the lease ran out, and the first learns it is evicted at its next renewal.
    for (const op of ['updateOne', 'updateMany', 'find', 'findOne', 'findById', 'findOneAndUpdate'] as const) {
      first.faults.add({ collection: 'cluster_nodes', op, mode: 'fail', times: Infinity });
      first.faults.add({ collection: 'cluster_shards', op, mode: 'fail', times: Infinity });
    }
    const restarted = makeNode('node-a', { shardCount: 4 });
    await advanceUntil(restarted.membership.start());
    await restarted.shards.start();
    for (let i = 0; i < 10 && restarted.shards.ownedShards().size < 4; i++) {
      await clock.advance(TICK);
      assertSingleOwners();
    }
    assert.is(restarted.shards.ownedShards().size, 4);
    first.faults.clear();
    await clock.advance(TICK);
    assert.ok(first.log.errors().some((e) => /replaced by a newer process/.test(e.msg)));
    assert.is(first.membership.isAlive(), false);
    assert.ok(first.events.filter((e) => e.type === 'lost').every((e) => e.reason === 'expired' || e.reason === 'evicted'));
    assert.is(first.shards.ownedShards().size, 0);
    assertSingleOwners();
  });

  s.run();
}
