/**
 * The token roll-up fenced by its lease's epoch: a holder that pauses in the middle of a batch
 * (its clock halted, so it neither renews nor notices its lease lapse) while another node takes
 * the lease over and folds, then resumes and writes what it had begun, counts nothing twice and
 * loses nothing. Two TokenUsage instances over one store (each its own node), with real leases on
 * one clock advanced by hand. Runs on the embedded store and on MongoDB (the stand-in, or MONGODB_URI).
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { collections, ensureClusterIndexes, ensureIndexes, type Collections } from '../src/store/collections.js';
import type { Collection, Doc, Store } from '../src/store/types.js';
import { NamedLease } from '../src/cluster/claims.js';
import { loadConfig } from '../src/config.js';
import { GLOBAL_ID, TokenUsage } from '../src/services/token-usage.js';
import type { ServiceCore } from '../src/services/core.js';
import { exactCount } from '../src/domain/token-count.js';
import { ManualClock, eventually, recordingLog, type ClockView } from './cluster-helpers.js';
import { storeTargets } from './cluster-stores.js';

const LEASE = 15_000;
const MARGIN = 3_000;
const SETTLE = 1_000;

/** Holds a call of one of `ops` on one collection (after `skip` others) until released: the caller's process "paused" there. */
class Gate {
  private armed: { collection: string; ops: string[]; skip: number } | null = null;
  private release: (() => void) | null = null;
  private reachedResolve: (() => void) | null = null;
  reached: Promise<void> = Promise.resolve();

  arm(collection: string, ops: string[], skip = 0): void {
    this.armed = { collection, ops, skip };
    this.reached = new Promise((resolve) => (this.reachedResolve = resolve));
  }

  open(): void {
    this.release?.();
    this.release = null;
  }

  wrap(store: Store): Store {
    const gate = this;
    return new Proxy(store, {
      get(target, prop, receiver) {
        if (prop !== 'collection') return Reflect.get(target, prop, receiver);
        return (name: string) => {
          const col = target.collection(name) as Collection<Doc>;
          return new Proxy(col, {
            get(c, op, r) {
              const fn = Reflect.get(c, op, r) as unknown;
              if (typeof fn !== 'function') return fn;
              return async (...args: unknown[]) => {
                if (gate.armed && gate.armed.collection === name && gate.armed.ops.includes(String(op)) && gate.armed.skip-- === 0) {
                  gate.armed = null;
                  const held = new Promise<void>((resolve) => (gate.release = resolve));
                  gate.reachedResolve?.();
                  await held;
                }
                return (fn as (...a: unknown[]) => unknown).apply(c, args);
              };
            },
          });
        };
      },
    });
  }
}

interface Node {
  tokens: TokenUsage;
  lease: NamedLease;
  view: ClockView;
  gate: Gate;
  c: Collections;
}

for (const target of storeTargets()) {
  const s = suite(`token roll-up fenced by its lease: ${target.name}`);
  let store: Store;
  let cleanup: () => Promise<void>;
  let clock: ManualClock;
  const started: Node[] = [];

  s.before.each(async () => {
    ({ store, cleanup } = await target.open());
    await ensureIndexes(collections(store), store.kind);
    await ensureClusterIndexes(collections(store));
    clock = new ManualClock(Date.now());
  });

  s.after.each(async () => {
    for (const n of started.splice(0)) {
      n.gate.open();
      n.view.halted = true;
      await n.tokens.stop().catch(() => undefined);
    }
    await cleanup();
  });

  const node = (name: string): Node => {
    const gate = new Gate();
    const c = collections(gate.wrap(store));
    const view = clock.view();
    const log = recordingLog();
    const lease = new NamedLease({ claims: c.clusterClaims, name: 'token-rollup', owner: `${name}/1`, leaseMs: LEASE, marginMs: MARGIN, log, clock: view });
    const config = loadConfig({ TOKEN_ROLLUP_INTERVAL_SECONDS: '3600' });
    const ctx = { config, log, c } as unknown as ServiceCore;
    const tokens = new TokenUsage(ctx, undefined, undefined, { lease, settleMs: SETTLE, idClock: () => view.now() });
    const n = { tokens, lease, view, gate, c };
    started.push(n);
    return n;
  };

  /** Heartbeats from `agents` agents through `n`, each acknowledged; returns what was acknowledged, per agent. */
  const report = async (n: Node, agents: number, from: number, seqFrom: number): Promise<Map<string, { p: number; c: number }>> => {
    const acked = new Map<string, { p: number; c: number }>();
    for (let a = 0; a < agents; a++) {
      const did = `did:key:agent-${from + a}`;
      for (let k = 0; k < 3; k++) {
        const p = 100 + a * 7 + k;
        const cc = 10 + k;
        n.tokens.record(
          {
            did,
            alive: true,
            ackHeartbeat: () => {
              const t = acked.get(did) ?? { p: 0, c: 0 };
              acked.set(did, { p: t.p + p, c: t.c + cc });
            },
          },
          seqFrom + k,
          p,
          cc,
        );
      }
    }
    await n.tokens.drain();
    await eventually(() => [...acked.values()].length === agents, 'every heartbeat acknowledged');
    return acked;
  };

  /** Reports through `n` (see report), then lets the ledger settle and rolls it up there. */
  const reportAndFold = async (n: Node, agents: number, from: number, seqFrom: number) => {
    const acked = await report(n, agents, from, seqFrom);
    await clock.advance(SETTLE + 1);
    await n.tokens.rollup();
    return acked;
  };

  const merge = (...maps: Array<Map<string, { p: number; c: number }>>) => {
    const out = new Map<string, { p: number; c: number }>();
    for (const m of maps) for (const [did, t] of m) out.set(did, { p: (out.get(did)?.p ?? 0) + t.p, c: (out.get(did)?.c ?? 0) + t.c });
    return out;
  };

  const assertTotals = async (expected: Map<string, { p: number; c: number }>) => {
    const c = collections(store);
    assert.is(await c.tokenLedger.count({}), 0, 'everything folded');
    for (const [did, t] of expected) {
      const u = await c.tokenUsage.findById(did);
      assert.equal(
        { p: exactCount(u?.allTime?.promptTokens, u?.allTime?.promptTokensBillions), c: exactCount(u?.allTime?.completionTokens, u?.allTime?.completionTokensBillions) },
        t,
        did,
      );
    }
    const sum = { p: 0, c: 0 };
    for (const t of expected.values()) (sum.p += t.p), (sum.c += t.c);
    const g = await c.tokenUsage.findById(GLOBAL_ID);
    assert.equal({ p: exactCount(g?.allTime?.promptTokens, g?.allTime?.promptTokensBillions), c: exactCount(g?.allTime?.completionTokens, g?.allTime?.completionTokensBillions) }, sum, 'global');
    const totals = await started[0]!.tokens.totals();
    assert.equal({ p: Number(totals.allTime.promptTokens), c: Number(totals.allTime.completionTokens) }, sum, 'GET /api/stats/tokens');
  };

  /**
   * A holds the lease and begins a roll-up that stops at `collection.op` (paused there); its
   * lease lapses, B takes over and folds; then A resumes and finishes what it began.
   */
  const pausedHolder = async (collection: string, ops: string[], skip = 0) => {
    const A = node('node-a');
    const B = node('node-b');
    await A.tokens.start();
    assert.ok(A.lease.held(), 'A holds the roll-up');
    const first = await report(A, 5, 0, 1);
    const second = await report(B, 4, 3, 10); // agents 3 and 4 reported through both nodes
    await clock.advance(SETTLE + 1);
    A.gate.arm(collection, ops, skip);
    const rolling = A.tokens.rollup();
    await A.gate.reached;
    // A is paused: its clock's timers stop (no renewal), and its lease runs out.
    A.view.halted = true;
    await clock.advance(LEASE + 1);
    assert.is(A.lease.held(), null, "A's lease lapsed");
    await B.tokens.start();
    assert.ok(B.lease.held(), 'B took the roll-up over');
    await B.tokens.rollup();
    // A resumes where it stopped and writes what it had begun.
    A.gate.open();
    await rolling;
    await A.tokens.rollup();
    await B.tokens.rollup();
    const third = await reportAndFold(B, 2, 8, 20);
    await assertTotals(merge(first, second, third));
  };

  s('a holder paused before its first increments: the next holder folds the batch, and the paused one adds nothing', async () => {
    await pausedHolder('token_usage', ['bulkUpdate']);
  });

  s('a holder paused after its agents, before the global totals: each count lands once', async () => {
    // (The agents' updates are one call; the global document's is the next.)
    await pausedHolder('token_usage', ['bulkUpdate', 'updateOne'], 1);
  });

  s('a holder paused after its increments, before deleting the ledger: nothing is folded again', async () => {
    await pausedHolder('token_ledger', ['deleteMany']);
  });

  s('a ledger document that lands below what was folded is counted once, after a change of holder too', async () => {
    const A = node('node-a');
    await A.tokens.start();
    const first = await reportAndFold(A, 3, 0, 1);
    const rolledUpTo = (await collections(store).tokenUsage.findById(GLOBAL_ID))?.rolledUpTo;
    assert.ok(rolledUpTo, 'folded');
    // A write whose id was given before the roll-up's, which the store applied only now.
    const late = await report(A, 1, 10, 1);
    const [doc] = await collections(store).tokenLedger.find({});
    await collections(store).tokenLedger.deleteOne({ _id: doc!._id });
    const below = (parseInt(rolledUpTo!.slice(0, 10), 36) - 1).toString(36).padStart(10, '0');
    await collections(store).tokenLedger.insertOne({ ...doc!, _id: `${below}-00000-late00` });
    // The holder changes, and the new one folds it.
    A.view.halted = true;
    await clock.advance(LEASE + 1);
    const B = node('node-b');
    await B.tokens.start();
    assert.ok(B.lease.held(), 'B took the roll-up over');
    await B.tokens.rollup();
    await assertTotals(merge(first, late));
  });

  s("a journal lost with the lease's document: new batches are numbered above every one applied", async () => {
    const A = node('node-a');
    await A.tokens.start();
    const first = await reportAndFold(A, 3, 0, 1);
    const second = await reportAndFold(A, 3, 0, 10);
    // The lease's note is gone (its document removed and made again, say).
    await collections(store).clusterClaims.updateOne({ _id: 'lease:token-rollup' }, { $unset: { note: '' } });
    const third = await reportAndFold(A, 3, 0, 20);
    await assertTotals(merge(first, second, third));
  });

  s.run();
}
