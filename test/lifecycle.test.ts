import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createMachine, assign } from 'xstate';
import { http, startServer, tempDir } from './helpers.js';
import { FrameSocket } from './frames.js';
import { StewardProcess } from './cli-process.js';

const test = suite('lifecycle');

test('data written through the store survives a restart', async () => {
  let s = await startServer();
  await s.ctx.store.collection<{ _id: string; n: number }>('things').insertOne({ _id: 'a', n: 1 });
  s = await s.restart();
  const doc = await s.ctx.store.collection<{ _id: string; n: number }>('things').findById('a');
  assert.equal(doc, { _id: 'a', n: 1 });
  await s.stop(true);
});

const counter = createMachine({
  id: 'counter',
  types: {} as { context: { n: number }; events: { type: 'inc' } },
  context: { n: 0 },
  initial: 'counting',
  states: { counting: { on: { inc: { actions: assign({ n: ({ context }) => context.n + 1 }) } } } },
});

test('close() flushes pending actor snapshots', async () => {
  let s = await startServer();
  s.ctx.actors.define('counter', { machine: counter });
  const actor = await s.ctx.actors.get('counter', 'c1');
  for (let i = 0; i < 25; i++) actor.send({ type: 'inc' });
  // No await between the events and close: the writes are still pending.
  s = await s.restart();
  s.ctx.actors.define('counter', { machine: counter });
  const back = await s.ctx.actors.get('counter', 'c1');
  assert.is((back.getSnapshot() as any).context.n, 25);
  await s.stop(true);
});

test('SIGTERM stops listening and exits 0 within the shutdown timeout', async () => {
  const child = await StewardProcess.serve({ DATA_DIR: await tempDir() });
  assert.match(child.all, /uWebSockets.js native binary loaded/);
  const r = await http(child.url, 'GET', '/healthz');
  assert.is(r.status, 200);
  // Exit code 0 also proves it finished within SHUTDOWN_TIMEOUT_MS (the watchdog exits 1).
  assert.is(await child.stop(), 0);
  assert.match(child.all, /shutdown complete/);
  const reachable = await http(child.url, 'GET', '/healthz').then(() => true, () => false);
  assert.not.ok(reachable, 'no longer listening');
});

test('close() ends open WebSockets with 1001 (going away)', async () => {
  const s = await startServer();
  const sockets = [new FrameSocket(s.url, '/ws/agent'), new FrameSocket(s.url, '/ws/feed')];
  await Promise.all(sockets.map((ws) => ws.open()));
  await s.stop(true);
  assert.equal(await Promise.all(sockets.map(async (ws) => (await ws.waitClosed()).code)), [1001, 1001]);
});

test.run();
