import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { assign, setup } from 'xstate';
import { ActorHost, type ActorOwnership, type ActorTransition } from '../src/actors/host.js';
import { openStore } from '../src/store/index.js';
import { waitFor } from './helpers.js';
import type { Collection, Doc, Store } from '../src/store/types.js';

// A small machine of the test's own: a toggle with a counter, a delayed state, a failure and a final state.
const counter = setup({
  types: {
    context: {} as { count: number; secret: string; owner: string },
    events: {} as
      | { type: 'INC' }
      | { type: 'TOGGLE' }
      | { type: 'NOOP' }
      | { type: 'WAIT' }
      | { type: 'BOOM' }
      | { type: 'FINISH' },
    input: {} as { owner: string },
  },
  actions: {
    explode: () => {
      throw new Error('boom');
    },
  },
}).createMachine({
  id: 'counter',
  context: ({ input }) => ({ count: 0, secret: 'hunter2', owner: input.owner }),
  initial: 'off',
  on: {
    INC: { actions: assign({ count: ({ context }) => context.count + 1 }) },
    BOOM: { actions: 'explode' },
    FINISH: '.finished',
  },
  states: {
    off: { on: { TOGGLE: 'on', WAIT: 'waiting' } },
    on: { on: { TOGGLE: 'off' } },
    waiting: { after: { 300: 'off' } },
    finished: { type: 'final' },
  },
});

interface Counts {
  bulkCalls: number;
  bulkOps: number;
  otherWrites: number;
  findById: number;
  /** Highest number of writes of one document in flight at once. */
  maxConcurrentPerDoc: number;
}

interface Ctx {
  dir: string;
  store: Store;
  host: ActorHost;
  counts: Counts;
  logs: Array<{ level: string; msg: string; obj: object }>;
  /** Delay added to every bulkUpdate (ms). */
  slow: { ms: number };
  /** Number of upcoming bulkUpdate calls to fail. */
  failNext: { n: number };
}

function newCounts(): Counts {
  return { bulkCalls: 0, bulkOps: 0, otherWrites: 0, findById: 0, maxConcurrentPerDoc: 0 };
}

/** Wraps the store so that the snapshot collection counts (and can slow down or fail) its calls. */
function instrument(store: Store, ctx: Pick<Ctx, 'counts' | 'slow' | 'failNext'>): Store {
  const inflight = new Map<string, number>();
  const wrapped = new Map<string, Collection<Doc>>();
  return {
    kind: store.kind,
    ping: () => store.ping(),
    close: () => store.close(),
    collection<T extends Doc>(name: string): Collection<T> {
      const inner = store.collection<T>(name);
      if (name !== 'actor_snapshots') return inner;
      let c = wrapped.get(name);
      if (!c) {
        c = new Proxy(inner, {
          get(target, prop, receiver) {
            const v = Reflect.get(target, prop, receiver);
            if (typeof v !== 'function') return v;
            if (prop === 'bulkUpdate') {
              return async (ops: Array<{ filter: { _id: string } }>) => {
                ctx.counts.bulkCalls++;
                ctx.counts.bulkOps += ops.length;
                const ids = ops.map((o) => String(o.filter._id));
                for (const id of ids) {
                  const n = (inflight.get(id) ?? 0) + 1;
                  inflight.set(id, n);
                  ctx.counts.maxConcurrentPerDoc = Math.max(ctx.counts.maxConcurrentPerDoc, n);
                }
                try {
                  if (ctx.slow.ms > 0) await sleep(ctx.slow.ms);
                  if (ctx.failNext.n > 0) {
                    ctx.failNext.n--;
                    throw new Error('injected store failure');
                  }
                  return await (v as (...a: unknown[]) => Promise<unknown>).call(target, ops);
                } finally {
                  for (const id of ids) inflight.set(id, (inflight.get(id) ?? 1) - 1);
                }
              };
            }
            if (prop === 'findById') {
              return (id: string) => {
                ctx.counts.findById++;
                return (v as (id: string) => Promise<unknown>).call(target, id);
              };
            }
            if (['insertOne', 'insertMany', 'updateOne', 'replaceOne', 'updateMany', 'findOneAndUpdate'].includes(String(prop))) {
              return (...args: unknown[]) => {
                ctx.counts.otherWrites++;
                return (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
              };
            }
            return (v as (...a: unknown[]) => unknown).bind(target);
          },
        }) as unknown as Collection<Doc>;
        wrapped.set(name, c);
      }
      return c as unknown as Collection<T>;
    },
  };
}

async function open(dir: string, opts: { idleMs?: number } = {}): Promise<Ctx> {
  const raw = await openStore({ dataDir: dir });
  const partial = { counts: newCounts(), slow: { ms: 0 }, failNext: { n: 0 } };
  const store = instrument(raw, partial);
  const logs: Ctx['logs'] = [];
  const host = new ActorHost({
    store,
    idleMs: opts.idleMs,
    log: {
      warn: (obj, msg) => logs.push({ level: 'warn', msg, obj }),
      error: (obj, msg) => logs.push({ level: 'error', msg, obj }),
    },
  });
  host.define('counter', {
    machine: counter,
    input: (id) => ({ owner: id }),
    redact: ['secret'],
  });
  host.define('ephemeral', { machine: counter, input: (id) => ({ owner: id }), deleteWhenDone: true });
  return { dir, store, host, logs, ...partial };
}

async function close(ctx: Ctx): Promise<void> {
  await ctx.host.stop();
  await ctx.store.close();
}

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'steward-actor-host-'));
  dirs.push(d);
  return d;
}

async function storedDoc(store: Store, id: string): Promise<any> {
  return store.collection('actor_snapshots').findById(id);
}

/** The counter machine's `count` in an actor's stored snapshot. */
async function storedCount(store: Store, id: string): Promise<number> {
  return JSON.parse((await storedDoc(store, id)).snapshot).context.count;
}

const test = suite('actor host');

test.after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

test('creates an actor, sends events, reports its state', async () => {
  const ctx = await open(tempDir());
  try {
    const { host } = ctx;
    assert.is(await host.exists('counter', 'a'), false);
    const a = await host.get('counter', 'a');
    assert.is(a.getSnapshot().value, 'off');
    assert.is(a.getSnapshot().context.owner, 'a');
    await host.send('counter', 'a', { type: 'TOGGLE' });
    await host.send('counter', 'a', { type: 'INC' });
    await host.send('counter', 'a', { type: 'INC' });
    assert.is(a.getSnapshot().value, 'on');
    assert.is(a.getSnapshot().context.count, 2);
    assert.is(host.peek('counter', 'a'), a);
    assert.is(host.peek('counter', 'b'), undefined);
    assert.equal(host.list().map(({ since: _since, ...rest }) => rest), [{ kind: 'counter', id: 'a', state: 'on', status: 'active' }]);
    assert.ok(Date.parse(host.list()[0]!.since) > 0, 'since when it is in that state');
    assert.equal(host.list('ephemeral'), []);
    assert.equal(host.counts(), { counter: 1, ephemeral: 0 });
    await host.flush();
    assert.is(await host.exists('counter', 'a'), true);
    const doc = await storedDoc(ctx.store, 'counter:a');
    assert.is(doc.kind, 'counter');
    assert.is(doc.actorId, 'a');
    assert.is(doc.status, 'active');
    assert.is(doc.stateValue, 'on');
    assert.type(doc.updatedAt, 'string');
    assert.is(JSON.parse(doc.snapshot).context.count, 2);
    try {
      await host.get('nope', 'x');
      assert.unreachable('unknown kind should reject');
    } catch (err) {
      assert.match(String(err), /unknown actor kind/);
    }
  } finally {
    await close(ctx);
  }
});

test('coalesces a burst of events into one write', async () => {
  const ctx = await open(tempDir());
  try {
    const { host, counts } = ctx;
    await host.get('counter', 'a');
    await host.flush();
    const before = { ...counts };
    const writesBefore = host.stats.writes;
    const sends: Array<Promise<void>> = [];
    for (let i = 0; i < 100; i++) sends.push(host.send('counter', 'a', { type: 'INC' }));
    await Promise.all(sends);
    const a = host.peek('counter', 'a')!;
    for (let i = 0; i < 100; i++) a.send({ type: 'INC' });
    await host.flush();
    const ops = counts.bulkOps - before.bulkOps;
    assert.ok(ops >= 1 && ops <= 2, `expected 1-2 snapshot writes, got ${ops}`);
    assert.ok(host.stats.writes - writesBefore <= 2);
    assert.is(counts.otherWrites, 0);
    assert.is(await storedCount(ctx.store, 'counter:a'), 200);

    // Many actors changing in one tick share one store round trip.
    const callsBefore = counts.bulkCalls;
    await Promise.all(Array.from({ length: 50 }, (_, i) => host.send('counter', `m${i}`, { type: 'INC' })));
    await host.flush();
    assert.ok(counts.bulkCalls - callsBefore <= 2, `expected batched writes, got ${counts.bulkCalls - callsBefore}`);
    assert.is(await ctx.store.collection('actor_snapshots').count({ kind: 'counter' }), 51);
  } finally {
    await close(ctx);
  }
});

test('events that change nothing are not written or reported', async () => {
  const ctx = await open(tempDir());
  try {
    const { host, counts } = ctx;
    await host.get('counter', 'a');
    await host.flush();
    const seen: ActorTransition[] = [];
    host.onTransition((t) => seen.push(t));
    const before = counts.bulkOps;
    await host.send('counter', 'a', { type: 'NOOP' });
    await host.flush();
    assert.is(counts.bulkOps, before);
    assert.equal(seen, []);
  } finally {
    await close(ctx);
  }
});

test('one write per actor in flight; a change during a write is written once more after it', async () => {
  const ctx = await open(tempDir());
  try {
    const { host, counts } = ctx;
    ctx.slow.ms = 40;
    const a = await host.get('counter', 'a'); // first write starts on the next tick
    await sleep(5);
    a.send({ type: 'INC' });
    await sleep(5);
    a.send({ type: 'INC' });
    a.send({ type: 'TOGGLE' });
    await sleep(5);
    a.send({ type: 'INC' });
    await host.flush();
    assert.is(counts.maxConcurrentPerDoc, 1);
    assert.is(counts.bulkOps, 2, 'the initial write, then one more with the latest snapshot');
    const doc = await storedDoc(ctx.store, 'counter:a');
    assert.is(doc.stateValue, 'on');
    assert.is(JSON.parse(doc.snapshot).context.count, 3);
    assert.is(host.pendingWrites(), 0);
  } finally {
    await close(ctx);
  }
});

test('writeDelayMs: transitions within the window cost one write; flush, other kinds and removal do not wait', async () => {
  const ctx = await open(tempDir());
  try {
    const { host, counts } = ctx;
    // A window longer than the test: whatever is written, something other than the timer wrote it.
    host.define('lazy', { machine: counter, input: (id) => ({ owner: id }), writeDelayMs: 60_000 });
    const a = await host.get('lazy', 'a');
    a.send({ type: 'INC' });
    await sleep(20);
    a.send({ type: 'TOGGLE' });
    a.send({ type: 'INC' });
    await sleep(20);
    assert.is(counts.bulkOps, 0, 'nothing written inside the window');
    assert.ok(host.pendingWrites() > 0);

    // A round for a kind without a delay takes the waiting actors along.
    await host.send('counter', 'c', { type: 'INC' });
    await waitFor(() => host.pendingWrites() === 0);
    const doc = await storedDoc(ctx.store, 'lazy:a');
    assert.is(doc.stateValue, 'on');
    assert.is(JSON.parse(doc.snapshot).context.count, 2);

    // flush() writes at once.
    a.send({ type: 'INC' });
    await host.flush();
    assert.is(await storedCount(ctx.store, 'lazy:a'), 3);

    // persist() writes one actor at once.
    a.send({ type: 'INC' });
    await host.persist('lazy', 'a');
    assert.is(await storedCount(ctx.store, 'lazy:a'), 4);

    // Removal deletes at once (waiting for the window would outlast the test).
    a.send({ type: 'INC' });
    await host.remove('lazy', 'a');
    assert.is(await host.exists('lazy', 'a'), false);

    // A short window: a burst is written once, when it ends.
    host.define('brief', { machine: counter, input: (id) => ({ owner: id }), writeDelayMs: 50 });
    const opsBefore = counts.bulkOps;
    const b = await host.get('brief', 'b');
    for (let i = 0; i < 5; i++) b.send({ type: 'INC' });
    await waitFor(() => host.pendingWrites() === 0); // written after the window
    assert.is(counts.bulkOps - opsBefore, 1, 'one write for the creation and five transitions');
    assert.is(await storedCount(ctx.store, 'brief:b'), 5);
  } finally {
    await close(ctx);
  }
});

test('writeDelayMs: a delayed write waits while the event loop is saturated, then goes out', async () => {
  const ctx = await open(tempDir());
  try {
    const { host, counts } = ctx;
    host.define('patient', { machine: counter, input: (id) => ({ owner: id }), writeDelayMs: 50 });
    const a = await host.get('patient', 'a');
    a.send({ type: 'INC' });
    // Keep the loop busy for 400 ms (eight windows), giving it back briefly every 25 ms.
    const until = Date.now() + 400;
    while (Date.now() < until) {
      const sliceEnd = Math.min(until, Date.now() + 25);
      while (Date.now() < sliceEnd) {
        /* busy */
      }
      await new Promise((r) => setImmediate(r));
    }
    assert.is(counts.bulkOps, 0, 'not written while the loop was saturated');
    assert.ok(host.pendingWrites() > 0);
    await waitFor(() => host.pendingWrites() === 0); // written once the loop was free
    assert.is(counts.bulkOps, 1);
    assert.is(await storedCount(ctx.store, 'patient:a'), 1);
  } finally {
    await close(ctx);
  }
});

test('flush() waits for pending writes', async () => {
  const ctx = await open(tempDir());
  try {
    const { host } = ctx;
    ctx.slow.ms = 30;
    await host.send('counter', 'a', { type: 'TOGGLE' });
    assert.ok(host.pendingWrites() > 0);
    await host.flush();
    assert.is(host.pendingWrites(), 0);
    assert.is((await storedDoc(ctx.store, 'counter:a')).stateValue, 'on');
  } finally {
    await close(ctx);
  }
});

test('restores actors after a restart; stop() flushes', async () => {
  const dir = tempDir();
  const first = await open(dir);
  await first.host.send('counter', 'a', { type: 'TOGGLE' });
  for (let i = 0; i < 5; i++) await first.host.send('counter', 'a', { type: 'INC' });
  first.slow.ms = 20;
  await first.host.send('counter', 'a', { type: 'INC' }); // not flushed: stop() must write it
  await first.host.stop();
  try {
    await first.host.get('counter', 'a');
    assert.unreachable('get() after stop() should reject');
  } catch (err) {
    assert.match(String(err), /stopped/);
  }
  await first.store.close();

  const second = await open(dir);
  try {
    const { host, counts } = second;
    assert.equal(host.list(), []);
    const gets = await Promise.all([host.get('counter', 'a'), host.get('counter', 'a'), host.get('counter', 'a')]);
    assert.ok(gets[0] === gets[1] && gets[1] === gets[2], 'concurrent get() share one actor');
    assert.is(host.stats.restores, 1);
    assert.is(counts.findById, 1, 'one store read for three concurrent get()');
    const snap = gets[0].getSnapshot();
    assert.is(snap.value, 'on');
    assert.is(snap.context.count, 6);
    assert.is(snap.context.owner, 'a');
    assert.is(snap.context.secret, 'hunter2');
    await host.flush();
    assert.is(counts.bulkOps, 0, 'restoring is not a change');
    await host.send('counter', 'a', { type: 'TOGGLE' });
    assert.is(gets[0].getSnapshot().value, 'off');
  } finally {
    await close(second);
  }
});

test('restoreAll() brings back the active actors of a kind', async () => {
  const dir = tempDir();
  const first = await open(dir);
  await first.host.send('counter', 'a', { type: 'TOGGLE' });
  await first.host.get('counter', 'b');
  await first.host.send('counter', 'c', { type: 'FINISH' });
  await first.host.send('ephemeral', 'z', { type: 'INC' });
  await close(first);

  const second = await open(dir);
  try {
    const { host } = second;
    const ids = (await host.restoreAll('counter')).sort();
    assert.equal(ids, ['a', 'b']);
    assert.equal(
      host.list().map((l) => `${l.kind}:${l.id}:${String(l.state)}`).sort(),
      ['counter:a:on', 'counter:b:off'],
    );
    const on = await host.restoreAll('ephemeral', (p) => (p as { value: string }).value === 'on');
    assert.equal(on, []);
    assert.is(host.counts().ephemeral, 0);
  } finally {
    await close(second);
  }
});

test('passivates idle actors and restores them on demand', async () => {
  const ctx = await open(tempDir(), { idleMs: 100 });
  try {
    const { host } = ctx;
    await host.send('counter', 'a', { type: 'TOGGLE' });
    await host.send('counter', 'a', { type: 'INC' });
    const a1 = host.peek('counter', 'a');
    assert.ok(a1);
    // Activity keeps it alive.
    let lastEvent = 0;
    for (let i = 0; i < 4; i++) {
      await sleep(25);
      lastEvent = performance.now(); // the event marks the actor used before it returns
      await host.send('counter', 'a', { type: 'INC' });
    }
    assert.ok(host.peek('counter', 'a'));
    await sleep(80);
    // Never before idleMs (100 ms) after its last event; a loaded machine may oversleep, though.
    if (performance.now() - lastEvent < 100) assert.ok(host.peek('counter', 'a'), 'not before idleMs');
    await sleep(220);
    assert.is(host.peek('counter', 'a'), undefined);
    assert.equal(host.list(), []);
    assert.equal(host.counts().counter, 0);
    assert.is(host.stats.passivations, 1);
    assert.is(a1!.getSnapshot().status, 'stopped');
    const doc = await storedDoc(ctx.store, 'counter:a');
    assert.is(doc.status, 'active', 'the snapshot is kept, not the stopped one');

    const insp = await host.inspect('counter', 'a');
    assert.equal(insp, { kind: 'counter', id: 'a', state: 'on', status: 'active', context: { count: 5, owner: 'a' }, live: false, since: null, history: [] });

    const a2 = await host.get('counter', 'a');
    assert.is.not(a2, a1);
    assert.is(a2.getSnapshot().value, 'on');
    assert.is(a2.getSnapshot().context.count, 5);
    assert.is(host.stats.restores, 1);
  } finally {
    await close(ctx);
  }
});

test('getLive(): the actor in memory, counted as used like get(); undefined when it is not in memory or the host stopped', async () => {
  const ctx = await open(tempDir(), { idleMs: 100 });
  try {
    const { host } = ctx;
    assert.is(host.getLive('counter', 'a'), undefined, 'never loaded: not made by getLive');
    assert.is(host.peek('counter', 'a'), undefined);
    const a = await host.get('counter', 'a');
    assert.is(host.getLive('counter', 'a'), a);
    // Asked for every 25 ms without an event: getLive alone keeps it in memory past idleMs.
    for (let i = 0; i < 10; i++) {
      await sleep(25);
      assert.is(host.getLive('counter', 'a'), a, `still in memory after ${(i + 1) * 25} ms of use`);
    }
    host.getLive('counter', 'a')!.send({ type: 'TOGGLE' });
    assert.is(a.getSnapshot().value, 'on');
    await waitFor(() => host.peek('counter', 'a') === undefined, 5000);
    assert.is(host.getLive('counter', 'a'), undefined, 'passivated once no longer used');
    assert.is((await host.get('counter', 'a')).getSnapshot().value, 'on');
  } finally {
    await close(ctx);
  }
  assert.is(ctx.host.getLive('counter', 'a'), undefined, 'a stopped host hands out nothing');
});

test('per-kind idleMs overrides the host default; 0 never passivates', async () => {
  const ctx = await open(tempDir(), { idleMs: 30 });
  try {
    const { host } = ctx;
    host.define('sticky', { machine: counter, input: (id) => ({ owner: id }), idleMs: 0 });
    await host.get('sticky', 's');
    await host.get('counter', 'c');
    await sleep(150);
    assert.ok(host.peek('sticky', 's'));
    assert.is(host.peek('counter', 'c'), undefined);
  } finally {
    await close(ctx);
  }
});

test('does not passivate an actor waiting on a delayed transition', async () => {
  const ctx = await open(tempDir(), { idleMs: 50 });
  try {
    const { host } = ctx;
    await host.send('counter', 'w', { type: 'WAIT' });
    await sleep(200);
    assert.ok(host.peek('counter', 'w'), 'still live while the delayed event is pending');
    assert.is(host.peek('counter', 'w')!.getSnapshot().value, 'waiting');
    await sleep(600);
    assert.is(host.peek('counter', 'w'), undefined, 'passivated once the delayed transition happened');
    assert.is((await storedDoc(ctx.store, 'counter:w')).stateValue, 'off');
  } finally {
    await close(ctx);
  }
});

/** An actor that naps for a minute on WAIT (a delayed transition), and counts INC. */
const napper = setup({
  types: {} as { context: { count: number }; events: { type: 'WAIT' } | { type: 'INC' } },
}).createMachine({
  context: { count: 0 },
  initial: 'idle',
  states: {
    idle: { on: { WAIT: 'napping', INC: { actions: assign({ count: ({ context }) => context.count + 1 }) } } },
    napping: { after: { 60_000: 'idle' } },
  },
});

test('actors of a kind share one XState system; one actor’s delayed event keeps only that actor in memory', async () => {
  const ctx = await open(tempDir());
  try {
    const { host } = ctx;
    host.define('napper', { machine: napper, idleMs: 50 });
    const w = await host.get('napper', 'w');
    const idle = await host.get('napper', 'idle');
    const other = await host.get('counter', 'c');
    assert.is(w.system, idle.system, 'one system per kind');
    assert.is.not(w.system, other.system, 'kinds do not share a system');
    const options = (a: unknown) => (a as { options: unknown }).options;
    assert.is(options(w), options(idle), 'started actors share one options object, not a copy each');
    await host.send('napper', 'w', { type: 'WAIT' });
    await waitFor(() => host.peek('napper', 'idle') === undefined, 10_000);
    assert.is(idle.getSnapshot().status, 'stopped', 'the idle actor of the kind was passivated');
    await sleep(200); // four more idle periods
    assert.ok(host.peek('napper', 'w'), 'the napping one stays: its delayed event is not in its snapshot');
    assert.is(host.peek('napper', 'w')!.getSnapshot().value, 'napping');
    // A passivated actor is back on demand, in the same system, and takes events.
    const again = await host.get('napper', 'idle');
    assert.is(again.system, w.system);
    await host.send('napper', 'idle', { type: 'INC' });
    assert.is(again.getSnapshot().context.count, 1);
  } finally {
    await close(ctx);
  }
});

test('an actor in a final state is written once more and dropped', async () => {
  const ctx = await open(tempDir());
  try {
    const { host } = ctx;
    const seen: ActorTransition[] = [];
    host.onTransition((t) => seen.push(t));
    await host.send('counter', 'a', { type: 'INC' });
    await host.send('counter', 'a', { type: 'FINISH' });
    assert.is(host.peek('counter', 'a'), undefined);
    assert.equal(host.list(), []);
    // Until written, get() hands out the finished actor rather than an older stored snapshot.
    const done = await host.get('counter', 'a');
    assert.is(done.getSnapshot().status, 'done');
    await host.flush();
    const doc = await storedDoc(ctx.store, 'counter:a');
    assert.is(doc.status, 'done');
    assert.is(doc.stateValue, 'finished');
    assert.ok(await host.exists('counter', 'a'));
    const insp = await host.inspect('counter', 'a');
    assert.is(insp!.status, 'done');
    assert.is(insp!.live, false);
    assert.equal(insp!.context, { count: 1, owner: 'a' });
    // A later get() restores the done actor without keeping it in memory.
    const again = await host.get('counter', 'a');
    assert.is(again.getSnapshot().status, 'done');
    assert.is(host.peek('counter', 'a'), undefined);
    assert.equal(
      seen.filter((t) => t.actorId === 'a').map((t) => `${t.event}->${String(t.state)}`),
      ['xstate.init->off', 'INC->off', 'FINISH->finished'],
    );
  } finally {
    await close(ctx);
  }
});

test('deleteWhenDone removes the snapshot of a finished actor', async () => {
  const ctx = await open(tempDir());
  try {
    const { host } = ctx;
    await host.send('ephemeral', 'e', { type: 'INC' });
    await host.flush();
    assert.ok(await storedDoc(ctx.store, 'ephemeral:e'));
    await host.send('ephemeral', 'e', { type: 'FINISH' });
    await host.flush();
    assert.is(await storedDoc(ctx.store, 'ephemeral:e'), null);
    assert.is(await host.exists('ephemeral', 'e'), false);
    assert.is(await host.inspect('ephemeral', 'e'), null);
    const fresh = await host.get('ephemeral', 'e');
    assert.is(fresh.getSnapshot().context.count, 0);
  } finally {
    await close(ctx);
  }
});

test('inspect() redacts context keys, live and stored', async () => {
  const ctx = await open(tempDir());
  try {
    const { host } = ctx;
    await host.send('counter', 'a', { type: 'INC' });
    const live = await host.inspect('counter', 'a');
    assert.equal({ ...live, since: typeof live?.since }, { kind: 'counter', id: 'a', state: 'off', status: 'active', context: { count: 1, owner: 'a' }, live: true, since: 'string', history: [] });
    // Not redacted for a kind without redact.
    await host.get('ephemeral', 'x');
    assert.is(((await host.inspect('ephemeral', 'x'))!.context as { secret: string }).secret, 'hunter2');
    // Mutating the inspection does not touch the actor.
    (live!.context as { count: number }).count = 99;
    assert.is(host.peek('counter', 'a')!.getSnapshot().context.count, 1);
    assert.is(await host.inspect('counter', 'nobody'), null);
    assert.is(await host.inspect('nokind', 'a'), null);
    await host.flush();
    await host.remove('counter', 'a');
    assert.is(await host.inspect('counter', 'a'), null);
  } finally {
    await close(ctx);
  }
});

test('onTransition() follows transitions and unsubscribes', async () => {
  const ctx = await open(tempDir());
  try {
    const { host } = ctx;
    const seen: ActorTransition[] = [];
    const off = host.onTransition((t) => seen.push(t));
    await host.get('counter', 'a');
    await host.send('counter', 'a', { type: 'TOGGLE' });
    off();
    await host.send('counter', 'a', { type: 'TOGGLE' });
    assert.is(seen.length, 2);
    assert.equal(
      seen.map(({ kind, actorId, state, event }) => ({ kind, actorId, state, event })),
      [
        { kind: 'counter', actorId: 'a', state: 'off', event: 'xstate.init' },
        { kind: 'counter', actorId: 'a', state: 'on', event: 'TOGGLE' },
      ],
    );
    assert.ok(!Number.isNaN(Date.parse(seen[1]!.at)));
    // A throwing listener is logged, not fatal.
    host.onTransition(() => {
      throw new Error('bad listener');
    });
    await host.send('counter', 'a', { type: 'TOGGLE' });
    assert.ok(ctx.logs.some((l) => l.msg.includes('listener')));
  } finally {
    await close(ctx);
  }
});

test('sendAndWait() resolves with the awaited snapshot or times out', async () => {
  const ctx = await open(tempDir());
  try {
    const { host } = ctx;
    const snap = await host.sendAndWait('counter', 'a', { type: 'TOGGLE' }, (s) => s.matches('on'));
    assert.is(snap.value, 'on');
    try {
      await host.sendAndWait('counter', 'a', { type: 'INC' }, (s) => s.context.count > 5, 50);
      assert.unreachable('should time out');
    } catch (err) {
      assert.match(String(err), /timed out/);
    }
    const done = await host.sendAndWait('counter', 'a', { type: 'FINISH' }, (s) => s.status === 'done');
    assert.is(done.value, 'finished');
  } finally {
    await close(ctx);
  }
});

test('a failing actor is logged, persisted as error and dropped, without crashing', async () => {
  const ctx = await open(tempDir());
  try {
    const { host } = ctx;
    await host.send('counter', 'a', { type: 'TOGGLE' });
    await host.send('counter', 'a', { type: 'BOOM' });
    await sleep(20); // an unhandled actor error would be thrown from a timer here
    assert.is(host.peek('counter', 'a'), undefined);
    assert.ok(ctx.logs.some((l) => l.level === 'error' && l.msg === 'actor failed'));
    await host.flush();
    const doc = await storedDoc(ctx.store, 'counter:a');
    assert.is(doc.status, 'error');
    assert.is(JSON.parse(doc.snapshot).error.message, 'boom');
    const insp = await host.inspect('counter', 'a');
    assert.is(insp!.status, 'error');
    // Restoring the failed actor does not crash either.
    const again = await host.get('counter', 'a');
    assert.is(again.getSnapshot().status, 'error');
    await sleep(20);
  } finally {
    await close(ctx);
  }
});

test('store write failures are logged and retried', async () => {
  const ctx = await open(tempDir());
  try {
    const { host } = ctx;
    ctx.failNext.n = 1;
    await host.send('counter', 'a', { type: 'TOGGLE' });
    await host.flush(); // the write fails
    assert.ok(ctx.logs.some((l) => l.level === 'error' && /failed/.test(l.msg)));
    assert.is(host.stats.failures, 1);
    assert.is(await storedDoc(ctx.store, 'counter:a'), null);
    assert.ok(host.pendingWrites() > 0);
    await host.flush(); // retried
    assert.is(host.pendingWrites(), 0);
    assert.is((await storedDoc(ctx.store, 'counter:a')).stateValue, 'on');

    // Retried on its own too (backoff timer), without another change or flush.
    ctx.failNext.n = 1;
    await host.send('counter', 'a', { type: 'TOGGLE' });
    await sleep(1000);
    assert.is((await storedDoc(ctx.store, 'counter:a')).stateValue, 'off');
  } finally {
    await close(ctx);
  }
});

test('remove() stops the actor and deletes its snapshot', async () => {
  const ctx = await open(tempDir());
  let closed = false;
  try {
    const { host } = ctx;
    const a = await host.get('counter', 'a');
    await host.send('counter', 'a', { type: 'INC' });
    await host.remove('counter', 'a');
    assert.is(a.getSnapshot().status, 'stopped');
    assert.is(host.peek('counter', 'a'), undefined);
    assert.is(await host.exists('counter', 'a'), false);
    await host.flush();
    assert.is(await storedDoc(ctx.store, 'counter:a'), null);
    const fresh = await host.get('counter', 'a');
    assert.is(fresh.getSnapshot().context.count, 0);
    // Removing an actor that is only stored.
    await host.flush();
    await close(ctx);
    closed = true;
    const second = await open(ctx.dir);
    try {
      assert.ok(await second.host.exists('counter', 'a'));
      await second.host.remove('counter', 'a');
      assert.is(await second.host.exists('counter', 'a'), false);
      assert.is(await storedDoc(second.store, 'counter:a'), null);
    } finally {
      await close(second);
    }
  } finally {
    if (!closed) await close(ctx);
  }
});

test('cluster mode: loading an actor claims its document, so an older owner cannot create it afterwards', async () => {
  const ctx = await open(tempDir());
  // Two hosts on one store that both count themselves owner of shard 0: the old one under epoch 1
  // (it paused through its takeover, say), the new one under epoch 2.
  const owner = (epoch: number, stale: number[]): ActorOwnership => ({
    isLocal: () => true,
    shardOf: () => 0,
    fenceFor: () => ({ shard: 0, epoch }),
    stale: (shard) => void stale.push(shard),
  });
  const oldStale: number[] = [];
  ctx.host.useOwnership(owner(1, oldStale));
  const newer = new ActorHost({ store: ctx.store, log: { warn: () => undefined, error: () => undefined } });
  newer.define('counter', { machine: counter, input: (id) => ({ owner: id }) });
  newer.useOwnership(owner(2, []));
  try {
    // The new owner loads an actor no one has stored yet: its document is claimed (a stub).
    const n = await newer.get('counter', 'fresh');
    assert.is((await storedDoc(ctx.store, 'counter:fresh')).fence.epoch, 2);
    assert.is((await storedDoc(ctx.store, 'counter:fresh')).snapshot, undefined, 'a stub, no snapshot');
    // The old owner creates the same actor and writes it: refused, and it stops acting for the shard.
    await ctx.host.send('counter', 'fresh', { type: 'INC' });
    await ctx.host.flush().catch(() => undefined);
    await waitFor(() => oldStale.length > 0);
    assert.is((await storedDoc(ctx.store, 'counter:fresh')).snapshot, undefined, "the old owner's snapshot did not land");
    // The new owner's own write goes through.
    n.send({ type: 'INC' });
    n.send({ type: 'INC' });
    await newer.flush();
    assert.is(await storedCount(ctx.store, 'counter:fresh'), 2);
    assert.is((await storedDoc(ctx.store, 'counter:fresh')).fence.epoch, 2);
  } finally {
    await newer.stop();
    await close(ctx);
  }
});

test.run();
