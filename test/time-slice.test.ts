/**
 * TimeSlice (src/domain/time-slice.ts): background work yields once its budget is used, on the
 * next turn of the loop or, with a rest, after a timer. Checked by what else gets to run in
 * between (a timer that is due), not by how long anything took.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { TimeSlice } from '../src/domain/time-slice.js';

const test = suite('time-slice');

/** Spins until the slice's budget is surely used. */
const spin = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};

test('within its budget a slice does not yield', async () => {
  const slice = new TimeSlice(1000, 50);
  let ran = false;
  setImmediate(() => (ran = true));
  await slice.yieldIfDue();
  assert.is(ran, false, 'returned without a turn of the loop');
  await new Promise((r) => setImmediate(r));
});

test('without a rest a used slice comes back on the next turn, before a timer set just then', async () => {
  const slice = new TimeSlice(1, 0);
  let immediate = false;
  let timer = false;
  spin(2);
  setImmediate(() => (immediate = true));
  const t = setTimeout(() => (timer = true), 200);
  await slice.yieldIfDue();
  assert.is(immediate, true, 'the loop turned');
  assert.is(timer, false, 'it did not wait for a timer');
  clearTimeout(t);
});

test('with a rest a used slice stays away until a shorter timer set just then has run, then starts a new budget', async () => {
  const slice = new TimeSlice(50, 100);
  spin(55);
  let timer = false;
  setTimeout(() => (timer = true), 10);
  await slice.yieldIfDue();
  assert.is(timer, true, 'a timer due during the rest ran first');
  // A new slice: its budget starts after the rest, so the next check returns at once.
  let ran = false;
  setImmediate(() => (ran = true));
  await slice.yieldIfDue();
  assert.is(ran, false);
  await new Promise((r) => setImmediate(r));
});

test.run();
