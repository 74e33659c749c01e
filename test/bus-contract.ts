/**
 * The Bus contract as executable cases, run against every implementation (in-process and NATS):
 * each case opens buses as separate nodes on one broker and works on subjects of its own.
 *
 * "Not delivered" is shown without waiting for time to pass: messages from one node reach
 * another in the order they were sent, so once a marker published after a message has arrived,
 * the message has arrived too or never will (`settle`).
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { nanoid } from 'nanoid';
import {
  BusNoRespondersError,
  BusPayloadError,
  BusSubjectError,
  BusTimeoutError,
  BusUnavailableError,
  type Bus,
  type BusLog,
  type BusMessage,
  type BusStatus,
} from '../src/cluster/bus.js';
import { InterestSubscriptions } from '../src/cluster/interest.js';
import { BusRemoteError, call, serve } from '../src/cluster/rpc.js';
import { eventually, recordingLog, type RecordingLog } from './cluster-helpers.js';

export interface BusTarget {
  /** A new bus on the shared broker: another node. */
  connect(log: BusLog): Promise<Bus>;
  cleanup(): Promise<void>;
}

async function rejects<E>(p: Promise<unknown>, type: new (...args: any[]) => E, what: string): Promise<E> {
  try {
    await p;
  } catch (err) {
    assert.instance(err, type, `${what}: expected ${type.name}, got ${String(err)}`);
    return err as E;
  }
  assert.unreachable(`${what} should have failed with ${type.name}`);
  throw new Error('unreachable');
}

function throws<E>(fn: () => unknown, type: new (...args: any[]) => E, what: string): E {
  try {
    fn();
  } catch (err) {
    assert.instance(err, type, `${what}: expected ${type.name}, got ${String(err)}`);
    return err as E;
  }
  assert.unreachable(`${what} should have thrown ${type.name}`);
  throw new Error('unreachable');
}

export function runBusContract(name: string, open: () => Promise<BusTarget>): void {
  const s = suite(`bus contract: ${name}`);
  let target: BusTarget;
  let log: RecordingLog;
  const open_: Bus[] = [];
  let n = 0;

  /** A subject prefix of one case. */
  const prefix = () => `t${++n}.${nanoid(8).replace(/[^A-Za-z0-9]/g, 'x')}`;

  async function node(): Promise<Bus> {
    const bus = await target.connect(log);
    open_.push(bus);
    return bus;
  }

  /** Returns once everything `from` published before reached `to` (or never will). */
  async function settle(from: Bus, to: Bus): Promise<void> {
    const subject = `settle.${nanoid(10).replace(/[^A-Za-z0-9]/g, 'x')}`;
    let got = false;
    const off = to.subscribe(subject, () => void (got = true));
    await to.flush();
    from.publish(subject, 1);
    await eventually(() => got, `marker on ${subject}`);
    off();
  }

  s.before(async () => {
    target = await open();
  });

  s.before.each(() => {
    log = recordingLog();
  });

  s.after.each(async () => {
    await Promise.all(open_.splice(0).map((b) => b.close()));
  });

  s.after(async () => {
    await target.cleanup();
  });

  s('a published message reaches every subscriber, on other nodes and its own, as JSON', async () => {
    const [a, b] = [await node(), await node()];
    const p = prefix();
    const atA: BusMessage[] = [];
    const atB: BusMessage[] = [];
    a.subscribe(`${p}.x`, (m) => void atA.push(m));
    b.subscribe(`${p}.x`, (m) => void atB.push(m));
    await Promise.all([a.flush(), b.flush()]);
    const payload = { s: 'é✓', n: 1.5, list: [1, null, { deep: true }], nil: null };
    assert.is(a.publish(`${p}.x`, payload), true);
    assert.is(a.publish(`${p}.x`), true);
    await eventually(() => atA.length === 2 && atB.length === 2, 'both deliveries');
    for (const got of [atA, atB]) {
      assert.equal(got[0]!.data, payload);
      assert.is(got[0]!.subject, `${p}.x`);
      assert.is(got[0]!.respond, undefined, 'a plain publish has nobody to answer');
      assert.is(got[1]!.data, undefined, 'an empty payload');
    }
    atA[0]!.data && ((atA[0]!.data as { s: string }).s = 'changed');
    assert.is((atB[0]!.data as { s: string }).s, 'é✓', 'each subscription has its own copy');
  });

  s('wildcards: * matches one token, > the rest; other subjects are not delivered', async () => {
    const [a, b] = [await node(), await node()];
    const p = prefix();
    const star: string[] = [];
    const rest: string[] = [];
    b.subscribe(`${p}.*.end`, (m) => void star.push(m.subject));
    b.subscribe(`${p}.>`, (m) => void rest.push(m.subject));
    await b.flush();
    for (const subj of [`${p}.one.end`, `${p}.one.two.end`, `${p}.one`, `${p}`, `other.${p}.one.end`]) a.publish(subj, subj);
    await settle(a, b);
    assert.equal(star, [`${p}.one.end`]);
    assert.equal(rest, [`${p}.one.end`, `${p}.one.two.end`, `${p}.one`]);
  });

  s('messages from one node arrive in the order they were published', async () => {
    const [a, b] = [await node(), await node()];
    const p = prefix();
    const got: number[] = [];
    b.subscribe(`${p}.seq`, (m) => void got.push(m.data as number));
    await b.flush();
    for (let i = 0; i < 200; i++) a.publish(`${p}.seq`, i);
    await eventually(() => got.length === 200, '200 messages');
    assert.equal(got, Array.from({ length: 200 }, (_, i) => i));
  });

  s('unsubscribe stops delivery at once and twice is harmless', async () => {
    const [a, b] = [await node(), await node()];
    const p = prefix();
    const got: unknown[] = [];
    const off = b.subscribe(`${p}.x`, (m) => void got.push(m.data));
    await b.flush();
    a.publish(`${p}.x`, 1);
    await eventually(() => got.length === 1, 'first message');
    off();
    off();
    await b.flush();
    a.publish(`${p}.x`, 2);
    await settle(a, b);
    assert.equal(got, [1]);
  });

  s('queue groups: each message goes to one member of the group, and to every plain subscriber', async () => {
    const [pub, q1, q2, plain] = [await node(), await node(), await node(), await node()];
    const p = prefix();
    const byMember: Record<string, number[]> = { q1: [], q2: [], q1b: [] };
    const all: number[] = [];
    q1.subscribe(`${p}.work`, (m) => void byMember.q1!.push(m.data as number), { queue: 'workers' });
    q1.subscribe(`${p}.work`, (m) => void byMember.q1b!.push(m.data as number), { queue: 'workers' });
    q2.subscribe(`${p}.work`, (m) => void byMember.q2!.push(m.data as number), { queue: 'workers' });
    plain.subscribe(`${p}.work`, (m) => void all.push(m.data as number));
    await Promise.all([q1.flush(), q2.flush(), plain.flush()]);
    const N = 60;
    for (let i = 0; i < N; i++) pub.publish(`${p}.work`, i);
    await eventually(() => all.length === N && byMember.q1!.length + byMember.q1b!.length + byMember.q2!.length === N, 'all work delivered');
    await settle(pub, q1);
    await settle(pub, q2);
    const members = [...byMember.q1!, ...byMember.q1b!, ...byMember.q2!].sort((x, y) => x - y);
    assert.equal(members, Array.from({ length: N }, (_, i) => i), 'every message once to the group');
    assert.equal(all, Array.from({ length: N }, (_, i) => i), 'every message to the plain subscriber');
    assert.ok(Object.values(byMember).filter((v) => v.length > 0).length >= 2, 'spread over the members');
  });

  s('request/reply: the reply of the responder on another node; a queue group answers once', async () => {
    const [a, b, c] = [await node(), await node(), await node()];
    const p = prefix();
    let calls = 0;
    for (const bus of [b, c]) {
      bus.subscribe(
        `${p}.inspect`,
        (m) => {
          calls++;
          m.respond!({ echo: m.data, at: bus === b ? 'b' : 'c' });
        },
        { queue: 'owners' },
      );
    }
    await Promise.all([b.flush(), c.flush()]);
    const reply = (await a.request(`${p}.inspect`, { id: 7 }, { timeoutMs: 10_000 })) as { echo: unknown; at: string };
    assert.equal(reply.echo, { id: 7 });
    assert.ok(reply.at === 'b' || reply.at === 'c');
    await settle(a, b);
    await settle(a, c);
    assert.is(calls, 1);
  });

  s('a request with nobody listening fails with BusNoRespondersError, without waiting out its timeout', async () => {
    const a = await node();
    const p = prefix();
    // A timeout error instead would mean it waited for an answer nobody could give.
    const err = await rejects(a.request(`${p}.nobody`, {}, { timeoutMs: 30_000 }), BusNoRespondersError, 'request');
    assert.is(err.subject, `${p}.nobody`);
  });

  s('a request nobody answers fails with BusTimeoutError', async () => {
    const [a, b] = [await node(), await node()];
    const p = prefix();
    let seen = 0;
    b.subscribe(`${p}.silent`, () => void seen++);
    await b.flush();
    const err = await rejects(a.request(`${p}.silent`, {}, { timeoutMs: 150 }), BusTimeoutError, 'request');
    assert.is(err.timeoutMs, 150);
    assert.is(seen, 1, 'the responder got it and did not answer');
  });

  s('payloads that are not JSON or too large, and bad subjects, are refused with typed errors', async () => {
    const a = await node();
    const p = prefix();
    const e1 = throws(() => a.publish(`${p}.x`, { n: 1n }), BusPayloadError, 'BigInt');
    assert.is(e1.reason, 'not-json');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    assert.is(throws(() => a.publish(`${p}.x`, cyclic), BusPayloadError, 'cycle').reason, 'not-json');
    assert.is(throws(() => a.publish(`${p}.x`, () => 1), BusPayloadError, 'function').reason, 'not-json');
    const big = 'x'.repeat(a.maxPayloadBytes);
    const e2 = throws(() => a.publish(`${p}.x`, big), BusPayloadError, 'too large');
    assert.is(e2.reason, 'too-large');
    assert.ok(e2.bytes! > a.maxPayloadBytes);
    await rejects(a.request(`${p}.x`, big, { timeoutMs: 1000 }), BusPayloadError, 'request too large');
    for (const bad of ['', `${p}..x`, `${p}.*`, `${p}.>`, `${p}.a b`, `${p}.x*`]) throws(() => a.publish(bad, 1), BusSubjectError, `publish "${bad}"`);
    for (const bad of ['', `${p}.>.x`, `${p}.a>`, `${p}. `]) throws(() => a.subscribe(bad, () => undefined), BusSubjectError, `subscribe "${bad}"`);
  });

  s('a handler that throws or rejects is logged and the subscription goes on', async () => {
    const [a, b] = [await node(), await node()];
    const p = prefix();
    const got: number[] = [];
    b.subscribe(`${p}.x`, (m) => {
      got.push(m.data as number);
      if (m.data === 1) throw new Error('boom');
    });
    b.subscribe(`${p}.y`, async () => {
      throw new Error('async boom');
    });
    await b.flush();
    a.publish(`${p}.x`, 1);
    a.publish(`${p}.y`, 1);
    a.publish(`${p}.x`, 2);
    await eventually(() => got.length === 2 && log.errors().length === 2, 'deliveries and logged failures');
    assert.equal(got, [1, 2]);
    assert.equal(log.errors().map((e) => (e.obj.err as Error).message).sort(), ['async boom', 'boom']);
  });

  s('interest: the bus holds one subscription per subject while local subscribers want it', async () => {
    const [a, b] = [await node(), await node()];
    const p = prefix();
    let subscribeCalls = 0;
    let unsubscribeCalls = 0;
    // Counts what the helper asks of the bus.
    const counting: Bus = Object.create(b, {
      subscribe: {
        value: (subject: string, handler: Parameters<Bus['subscribe']>[1], opts?: Parameters<Bus['subscribe']>[2]) => {
          subscribeCalls++;
          const off = b.subscribe(subject, handler, opts);
          return () => {
            unsubscribeCalls++;
            off();
          };
        },
      },
    });
    const interest = new InterestSubscriptions(counting, log);
    const first: unknown[] = [];
    const second: unknown[] = [];
    const release1 = interest.add(`${p}.feed`, (m) => void first.push(m.data));
    const release2 = interest.add(`${p}.feed`, (m) => void second.push(m.data));
    assert.is(subscribeCalls, 1);
    assert.is(interest.count(`${p}.feed`), 2);
    await b.flush();
    a.publish(`${p}.feed`, 'one');
    await eventually(() => first.length === 1 && second.length === 1, 'both local subscribers');
    release1();
    release1();
    assert.is(unsubscribeCalls, 0, 'still one local subscriber');
    a.publish(`${p}.feed`, 'two');
    await eventually(() => second.length === 2, 'the remaining subscriber');
    release2();
    assert.is(unsubscribeCalls, 1);
    assert.is(interest.count(`${p}.feed`), 0);
    assert.equal(interest.subjects(), []);
    await b.flush();
    a.publish(`${p}.feed`, 'three');
    await settle(a, b);
    assert.equal(first, ['one']);
    assert.equal(second, ['one', 'two']);
    const third: unknown[] = [];
    interest.add(`${p}.feed`, (m) => void third.push(m.data));
    assert.is(subscribeCalls, 2, 'a new subscriber subscribes again');
    await b.flush();
    a.publish(`${p}.feed`, 'four');
    await eventually(() => third.length === 1, 'the new subscriber');
    interest.clear();
    assert.is(unsubscribeCalls, 2);
  });

  s('rpc: serve answers with the value, or the failure its handler throws', async () => {
    const [a, b] = [await node(), await node()];
    const p = prefix();
    serve(
      b,
      `${p}.cmd`,
      async (data) => {
        const d = data as { op: string };
        if (d.op === 'known') throw Object.assign(new Error('no such agent'), { code: 'not_found' });
        if (d.op === 'bug') throw new Error('secret internals');
        return { done: d.op };
      },
      { log, describe: (err) => ((err as { code?: string }).code ? { code: (err as { code: string }).code, message: (err as Error).message } : (undefined as never)) },
    );
    serve(b, `${p}.plain`, () => 42, { log });
    await b.flush();
    assert.equal(await call(a, `${p}.cmd`, { op: 'ok' }, { timeoutMs: 10_000 }), { done: 'ok' });
    assert.is(await call(a, `${p}.plain`, null, { timeoutMs: 10_000 }), 42);
    const known = await rejects(call(a, `${p}.cmd`, { op: 'known' }, { timeoutMs: 10_000 }), BusRemoteError, 'known failure');
    assert.is(known.code, 'not_found');
    assert.is(known.message, 'no such agent');
    const bug = await rejects(call(a, `${p}.cmd`, { op: 'bug' }, { timeoutMs: 10_000 }), BusRemoteError, 'unexpected failure');
    assert.is(bug.code, 'internal');
    assert.not.match(bug.message, /secret/);
    assert.ok(log.errors().some((e) => (e.obj.err as Error)?.message === 'secret internals'), 'the unexpected failure is logged where it happened');
  });

  s('close: status closed, publish dropped, request and subscribe refused, pending requests rejected', async () => {
    const [a, b] = [await node(), await node()];
    const p = prefix();
    const statuses: BusStatus[] = [];
    a.onStatus((st) => statuses.push(st));
    assert.is(a.status, 'connected');
    b.subscribe(`${p}.slow`, () => undefined);
    await b.flush();
    const pending = a.request(`${p}.slow`, {}, { timeoutMs: 600_000 });
    pending.catch(() => undefined);
    await a.close();
    assert.is(a.status, 'closed');
    assert.equal(statuses, ['closed']);
    assert.is((await rejects(pending, BusUnavailableError, 'the pending request')).status, 'closed');
    assert.is(a.publish(`${p}.x`, 1), false);
    const err = await rejects(a.request(`${p}.slow`, {}, { timeoutMs: 1000 }), BusUnavailableError, 'request after close');
    assert.is(err.status, 'closed');
    throws(() => a.subscribe(`${p}.x`, () => undefined), BusUnavailableError, 'subscribe after close');
    await rejects(a.flush(), BusUnavailableError, 'flush after close');
    await a.close();
  });

  s.run();
}
