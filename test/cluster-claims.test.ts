/**
 * Once-only claims among several nodes sharing one store (each through its own fault injector,
 * with one clock advanced by hand): cron firings, a named lease, work items. Runs on the embedded
 * store, and on MongoDB too when MONGODB_URI is set.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { collections, ensureClusterIndexes } from '../src/store/collections.js';
import type { Store } from '../src/store/types.js';
import { FiringClaims, NamedLease, WorkQueue, type ClaimableDoc, type LeaseLossReason } from '../src/cluster/claims.js';
import type { LeaseDoc } from '../src/store/cluster-docs.js';
import { FaultInjector } from './fault-store.js';
import { ManualClock, recordingLog } from './cluster-helpers.js';
import { storeTargets } from './cluster-stores.js';

const LEASE = 15_000;
const MARGIN = 3_000;

interface Item extends ClaimableDoc {
  n: number;
  nextAttemptAt: string;
}

for (const target of storeTargets()) {
  const s = suite(`claims: ${target.name}`);
  let store: Store;
  let cleanup: () => Promise<void>;
  let clock: ManualClock;

  s.before.each(async () => {
    ({ store, cleanup } = await target.open());
    await ensureClusterIndexes(collections(store));
    clock = new ManualClock();
  });

  s.after.each(async () => {
    await cleanup();
  });

  s('a cron firing is claimed by exactly one of three nodes, each firing on its own', async () => {
    const faults = [new FaultInjector(), new FaultInjector(), new FaultInjector()];
    const nodes = faults.map((f, i) => new FiringClaims({ claims: collections(f.wrap(store)).clusterClaims, owner: `node-${i}/inc`, clock: clock.view() }));
    const base = Date.UTC(2030, 0, 1, 12, 0);
    const winners: number[] = [];
    for (let k = 0; k < 20; k++) {
      const fireTime = new Date(base + k * 60_000);
      // Every node names the same firing, in whichever form it has it.
      const results = await Promise.all(nodes.map((n, i) => n.claim('sched-1', i === 1 ? fireTime.toISOString() : fireTime)));
      assert.is(results.filter(Boolean).length, 1, `firing ${k}`);
      winners.push(results.indexOf(true));
    }
    // Another schedule at the same time is another firing.
    assert.is(await nodes[0]!.claim('sched-2', new Date(base)), true);
    // Asking again changes nothing: the winner keeps it, the others do not get it.
    const again = await Promise.all(nodes.map((n) => n.claim('sched-1', new Date(base))));
    assert.equal(again, nodes.map((_, i) => i === winners[0]));
  });

  s('a claim whose answer was lost is found again by its own node, and by nobody else', async () => {
    const f = new FaultInjector();
    const mine = new FiringClaims({ claims: collections(f.wrap(store)).clusterClaims, owner: 'node-a/1', clock: clock.view() });
    const other = new FiringClaims({ claims: collections(store).clusterClaims, owner: 'node-b/1', clock: clock.view() });
    f.add({ collection: 'cluster_claims', op: 'insertOne', mode: 'land-then-fail' });
    const at = new Date(Date.UTC(2030, 0, 1, 6));
    await mine.claim('s', at).then(
      () => assert.unreachable('the lost acknowledgement'),
      () => undefined,
    );
    assert.is(await other.claim('s', at), false);
    assert.is(await mine.claim('s', at), true);
    // A restarted process (another incarnation) does not inherit it.
    const restarted = new FiringClaims({ claims: collections(store).clusterClaims, owner: 'node-a/2', clock: clock.view() });
    assert.is(await restarted.claim('s', at), false);
  });

  s('firing claims are swept once their keeping time is over', async () => {
    const claims = new FiringClaims({ claims: collections(store).clusterClaims, owner: 'n/1', clock: clock.view(), keepMs: 60_000 });
    assert.is(await claims.claim('s', new Date(clock.now())), true);
    assert.is(await claims.sweep(), 0);
    await clock.advance(60_000);
    assert.is(await claims.sweep(), 1);
    assert.is(await collections(store).clusterClaims.count({}), 0);
  });

  s('a named lease: one holder; taken over only after it ran out; the holder that cannot renew stops first', async () => {
    const make = (owner: string) => {
      const faults = new FaultInjector();
      const view = clock.view();
      const log = recordingLog();
      const lease = new NamedLease({ claims: collections(faults.wrap(store)).clusterClaims, name: 'token-rollup', owner, leaseMs: LEASE, marginMs: MARGIN, log, clock: view });
      const events: Array<{ at: number; what: string; epoch: number; reason?: LeaseLossReason }> = [];
      lease.onAcquired((epoch) => events.push({ at: clock.now(), what: 'acquired', epoch }));
      lease.onLost((epoch, reason) => events.push({ at: clock.now(), what: 'lost', epoch, reason }));
      return { lease, faults, events, view };
    };
    const [a, b, c] = [make('node-a/1'), make('node-b/1'), make('node-c/1')];
    await a.lease.start();
    await b.lease.start();
    await c.lease.start();
    assert.equal(a.lease.held(), { epoch: 1 });
    assert.is(b.lease.held(), null);
    for (let i = 0; i < 9; i++) await clock.advance(LEASE / 3);
    assert.equal(a.lease.held(), { epoch: 1 }, 'renewed all along');
    assert.equal([b.events, c.events], [[], []]);

    // A's store calls fail: it cannot renew.
    for (const op of ['updateOne', 'findById', 'findOneAndUpdate', 'insertOne'] as const) a.faults.add({ collection: 'cluster_claims', op, mode: 'fail', times: Infinity });
    const leaseUntil = Date.parse(((await collections(store).clusterClaims.findById('lease:token-rollup')) as LeaseDoc).leaseUntil);
    for (let i = 0; i < 60; i++) {
      await clock.advance(LEASE / 30);
      const holders = [a, b, c].filter((n) => n.lease.held() !== null);
      assert.ok(holders.length <= 1, 'never two holders at once');
      if (clock.now() >= leaseUntil - MARGIN) assert.is(a.lease.held(), null);
    }
    const lost = a.events.find((e) => e.what === 'lost')!;
    assert.equal([lost.reason, lost.epoch], ['expired', 1]);
    assert.ok(lost.at <= leaseUntil - MARGIN);
    const takeover = [...b.events, ...c.events].find((e) => e.what === 'acquired')!;
    assert.ok(takeover.at >= leaseUntil, 'taken over after the stored lease ended');
    assert.is(takeover.epoch, 2);
    const holder = [b, c].find((n) => n.lease.held() !== null)!;
    const bystander = holder === b ? c : b;

    // A's store comes back: it does not get the lease back while the new holder renews it.
    a.faults.clear();
    for (let i = 0; i < 6; i++) await clock.advance(LEASE / 3);
    assert.is(a.lease.held(), null);
    assert.equal(holder.lease.held(), { epoch: 2 });

    // A graceful stop frees it at once for the next.
    await holder.lease.stop();
    assert.is(holder.events.at(-1)!.reason, 'released');
    await clock.advance(LEASE / 3);
    const next = [a, bystander].filter((n) => n.lease.held() !== null);
    assert.is(next.length, 1);
    assert.equal(next[0]!.lease.held(), { epoch: 3 });
    for (const n of [a, b, c]) n.view.halt();
  });

  s("a lease's note is written under the epoch held alone: a holder that lapsed without noticing cannot change it", async () => {
    const aView = clock.view();
    const make = (owner: string, view = clock.view()) => new NamedLease({ claims: collections(store).clusterClaims, name: 'token-rollup', owner, leaseMs: LEASE, marginMs: MARGIN, log: recordingLog(), clock: view });
    const a = make('node-a/1', aView);
    const b = make('node-b/1');
    await a.start();
    assert.equal(a.held(), { epoch: 1 });
    assert.is(await a.readNote(), null);
    assert.is(await a.writeNote(1, { last: 1 }), true);
    // A is paused (its timers stop: no renewal); B takes over once the lease ran out, under a new epoch.
    aView.halted = true;
    assert.is(await b.tryAcquire(), false, 'not before it runs out');
    await clock.advance(LEASE + 1);
    assert.is(await b.tryAcquire(), true);
    assert.equal(b.held(), { epoch: 2 });
    assert.equal(await b.readNote(), { last: 1 }, 'the note outlives the change of holder');
    assert.is(await a.writeNote(1, { last: 99 }), false, 'the old epoch writes nothing');
    assert.is(await b.writeNote(2, { last: 2 }), true);
    assert.equal(await a.readNote(), { last: 2 });
    await b.stop();
  });

  s('work items are claimed once each by competing nodes; completion and release need the live claim', async () => {
    const items = store.collection<Item>('outbox_items');
    const now = clock.now();
    await items.insertMany(Array.from({ length: 30 }, (_, n) => ({ _id: `d${String(n).padStart(2, '0')}`, n, nextAttemptAt: new Date(now).toISOString() })));
    const queues = ['a', 'b', 'c'].map((o) => new WorkQueue<Item>({ items, owner: `node-${o}/1`, claimMs: 30_000, clock: clock.view() }));
    const due = () => ({ nextAttemptAt: { $lte: new Date(clock.now()).toISOString() } });
    const claimed = await Promise.all(
      queues.map(async (q) => {
        const got: string[] = [];
        for (;;) {
          const c = await q.claim(due(), { nextAttemptAt: 1, _id: 1 });
          if (!c) return got;
          assert.ok(got.length < 30, 'claimed more items than there are');
          got.push(c.item._id);
          assert.is(c.item.claimToken, c.claim.token);
        }
      }),
    );
    const all = claimed.flat().sort();
    assert.is(all.length, 30, 'every item claimed');
    assert.is(new Set(all).size, 30, 'none twice');
    assert.is(await queues[0]!.claim(due()), null, 'nothing left while the claims hold');
  });

  s('a claim that ran out can be taken by another node; the first one can then neither complete nor release it', async () => {
    const items = store.collection<Item>('outbox_items2');
    await items.insertOne({ _id: 'd1', n: 1, nextAttemptAt: new Date(clock.now()).toISOString() });
    const [qa, qb] = ['a', 'b'].map((o) => new WorkQueue<Item>({ items, owner: `node-${o}/1`, claimMs: 30_000, clock: clock.view() }));
    const first = (await qa!.claim())!;
    assert.ok(first);
    assert.is(await qb!.claim(), null);
    assert.is(await qa!.extend(first.claim), true);
    await clock.advance(30_000);
    const second = (await qb!.claim())!;
    assert.ok(second, 'claimable again once the claim ran out');
    assert.is.not(second.claim.token, first.claim.token);
    assert.is(await qa!.complete(first.claim), false);
    assert.is(await qa!.release(first.claim), false);
    assert.is(await qa!.extend(first.claim), false);
    assert.is((await items.findById('d1'))?.claimedBy, 'node-b/1');
    // Released with the next attempt's time: not due before it, due after it.
    const later = new Date(clock.now() + 60_000).toISOString();
    assert.is(await qb!.release(second.claim, { $set: { nextAttemptAt: later }, $inc: { n: 1 } }), true);
    const stored = (await items.findById('d1'))!;
    assert.equal([stored.claimedBy, stored.claimToken, stored.n], [null, null, 2]);
    const due = () => ({ nextAttemptAt: { $lte: new Date(clock.now()).toISOString() } });
    assert.is(await qa!.claim(due()), null);
    await clock.advance(60_000);
    const third = (await qa!.claim(due()))!;
    assert.ok(third);
    assert.is(await qa!.complete(third.claim), true);
    assert.is(await items.findById('d1'), null);
  });

  s.run();
}
