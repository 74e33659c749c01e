import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createActor, fromCallback, setup, type AnyActorRef } from 'xstate';
import { createHosted, createKindRoot, hasUnsavedWork, startHosted, stopHosted } from '../src/actors/xstate-adapter.js';

// A machine that waits on a delayed transition while a child it invokes runs, and can fail.
const worker = setup({
  actors: {
    ticker: fromCallback<{ type: 'never' }, { stopped: string[]; id: string }>(({ input }) => () => {
      input.stopped.push(input.id);
    }),
  },
  actions: {
    explode: () => {
      throw new Error('boom');
    },
  },
  types: { input: {} as { stopped: string[] }, context: {} as { stopped: string[] } },
}).createMachine({
  context: ({ input }) => ({ stopped: input.stopped }),
  initial: 'idle',
  on: { BOOM: { actions: 'explode' } },
  states: {
    idle: { on: { GO: 'busy' } },
    busy: {
      invoke: { src: 'ticker', input: ({ context, self }) => ({ stopped: context.stopped, id: self.id }) },
      after: { 100_000: 'idle' },
    },
  },
});

function kindRoot() {
  const failures: Array<{ actor: AnyActorRef; err: unknown }> = [];
  const root = createKindRoot('worker', { inspect: () => undefined, stopFailed: (actor, err) => failures.push({ actor, err }) });
  return { root, failures };
}

const test = suite('actor host: xstate adapter');

test('the kind’s root stops its child at once; its delayed events and invoked actors go with it, the others stay', () => {
  const { root, failures } = kindRoot();
  const stopped: string[] = [];
  const a = createHosted(root, worker, 'a', { input: { stopped } });
  const b = createHosted(root, worker, 'b', { input: { stopped } });
  startHosted(a);
  startHosted(b);
  assert.is(a.system, b.system, 'the kind’s actors share the root’s system');
  a.send({ type: 'GO' });
  b.send({ type: 'GO' });
  assert.ok(hasUnsavedWork(a), 'a delayed event and a running child are not in the snapshot');

  stopHosted(root, a);
  assert.is(a.getSnapshot().status, 'stopped');
  assert.equal(stopped, ['a'], 'its invoked actor was stopped, not the other actor’s');
  const scheduled = Object.values(a.system.getSnapshot()._scheduledEvents) as Array<{ source: unknown }>;
  assert.equal(
    scheduled.map((s) => s.source),
    [b],
    'only the other actor’s delayed event is left',
  );
  assert.is(b.getSnapshot().status, 'active');
  assert.is(root.getSnapshot().status, 'active');
  assert.equal(failures, []);
  stopHosted(root, a); // stopping twice is harmless
  assert.equal(failures, []);
  stopHosted(root, b);
  assert.is(b.getSnapshot().status, 'stopped');
});

test('the root outlives a child that fails, and reports an actor it cannot stop instead of failing', () => {
  const { root, failures } = kindRoot();
  const a = createHosted(root, worker, 'a', { input: { stopped: [] } });
  const errors: unknown[] = [];
  a.subscribe({ error: (err) => errors.push(err) });
  startHosted(a);
  a.send({ type: 'BOOM' });
  assert.is(a.getSnapshot().status, 'error');
  assert.is(errors.length, 1);
  assert.is(root.getSnapshot().status, 'active', 'the failure relayed to the root does not fail it');

  const stranger = createActor(worker, { input: { stopped: [] } }); // a root of its own, not the kind's child
  stranger.start();
  stopHosted(root, stranger);
  assert.is(failures.length, 1);
  assert.is(failures[0]!.actor, stranger);
  assert.match(String(failures[0]!.err), /not a child/);
  assert.is(stranger.getSnapshot().status, 'active');
  assert.is(root.getSnapshot().status, 'active');
  stranger.stop();

  const b = createHosted(root, worker, 'b', { input: { stopped: [] } });
  startHosted(b);
  stopHosted(root, b);
  assert.is(b.getSnapshot().status, 'stopped', 'the root still stops its children');
});

test.run();
