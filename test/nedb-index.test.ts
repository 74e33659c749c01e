/**
 * The embedded store's single-field indexes (src/store/nedb-index.ts): nedb's own Datastore,
 * in memory, with its indexes swapped for KeyedTrees, checked against the meaning of nedb's
 * ordering (compareThings) by brute force over random operations.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import nedbModule from '@seald-io/nedb';
import { compareThings, getDotValues } from '@seald-io/nedb/lib/model.js';
import { installKeyedIndexes, KeyedTree } from '../src/store/nedb-index.js';

installKeyedIndexes();

// CommonJS (`module.exports = Datastore`) whose typings say `export default` (as in the store).
const Datastore = nedbModule as unknown as typeof nedbModule.default;
type nedb = InstanceType<typeof Datastore>;

const test = suite('nedb single-field indexes');

/** Resolves when the operation fails with nedb's unique-constraint error; fails the test otherwise. */
async function refusedAsDuplicate(op: () => Promise<unknown>, message?: string): Promise<void> {
  try {
    await op();
  } catch (err) {
    assert.is((err as { errorType?: string }).errorType, 'uniqueViolated', message);
    return;
  }
  assert.unreachable(message ?? 'expected a unique-constraint error');
}

type D = { _id: string; k?: unknown; tag?: string; a?: number; b?: number };
const indexes = (db: nedb) => (db as unknown as { indexes: Record<string, { tree: unknown; getMatching(v: unknown): D[]; getBetweenBounds(q: object): D[]; getAll(): D[] }> }).indexes;
const ids = (docs: D[]) => docs.map((d) => d._id).sort();

/** Keys of every kind nedb orders: numbers (with 0/-0), strings, booleans, null, dates, arrays, objects, missing. */
const KEYS: unknown[] = [0, -0, 1, 2.5, -7, 'a', 'b', '', '1', true, false, null, new Date(1000), new Date(1000), new Date(2000), ['x', 'y'], [], { p: 1 }, { p: 1 }, { p: 2 }, undefined];

test('single-field indexes are KeyedTrees; a compound index keeps nedb’s tree', async () => {
  const db = new Datastore({ inMemoryOnly: true });
  await db.ensureIndexAsync({ fieldName: 'tag' });
  await db.ensureIndexAsync({ fieldName: ['a', 'b'], unique: true });
  assert.instance(indexes(db)._id!.tree, KeyedTree);
  assert.instance(indexes(db).tag!.tree, KeyedTree);
  assert.not.instance(indexes(db)['a,b']!.tree, KeyedTree);
  await db.insertAsync([{ _id: '1', a: 1, b: 1 }, { _id: '2', a: 1, b: 2 }]);
  await refusedAsDuplicate(() => db.insertAsync({ _id: '3', a: 1, b: 2 }));
  assert.equal(ids(await db.findAsync({ a: 1, b: 2 })), ['2']);
});

test('a unique index refuses keys nedb considers equal, and only those', async () => {
  const db = new Datastore({ inMemoryOnly: true });
  // Not sparse: nedb's sparse check skips a Date key (an object without own values).
  await db.ensureIndexAsync({ fieldName: 'k', unique: true });
  const stored: unknown[] = [];
  for (const [i, k] of KEYS.entries()) {
    // Arrays are indexed element by element, as in nedb: a clash of any element refuses the document.
    const parts = Array.isArray(k) ? k : [k];
    const clashes = parts.some((p) => stored.some((s) => compareThings(s, p) === 0));
    const insert = () => db.insertAsync({ _id: `d${i}`, k });
    if (clashes) {
      await refusedAsDuplicate(insert, `key ${String(k)} clashes`);
    } else {
      await insert();
      stored.push(...parts);
    }
  }
  // 0 and -0, the two equal dates and the two equal objects clashed.
  assert.is(await db.countAsync({}), KEYS.length - 3);
  assert.equal(ids(indexes(db).k!.getMatching(new Date(1000))), ['d12']);
  assert.equal(ids(indexes(db).k!.getMatching('y')), ['d15'], 'an array is indexed by its elements');
  assert.equal(ids(indexes(db).k!.getMatching({ p: 1 })), ['d17']);
});

test('random inserts, updates and removals: look-ups and ranges agree with a brute-force scan', async () => {
  const db = new Datastore({ inMemoryOnly: true });
  await db.ensureIndexAsync({ fieldName: 'k' });
  let seed = 7;
  const rnd = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  const pick = () => KEYS[rnd(KEYS.length)];
  for (let step = 0; step < 600; step++) {
    const id = `d${rnd(40)}`;
    const op = rnd(3);
    const exists = (await db.findOneAsync({ _id: id })) !== null;
    if (op === 0 && !exists) await db.insertAsync({ _id: id, k: pick(), tag: 't' });
    else if (op === 1 && exists) await db.updateAsync({ _id: id }, rnd(2) ? { $set: { k: pick() } } : { $set: { tag: `t${step}` } });
    else if (op === 2 && exists) await db.removeAsync({ _id: id }, {});
  }
  const all = indexes(db)._id!.getAll();
  assert.is(all.length, await db.countAsync({}));
  const index = indexes(db).k!;
  const keysOf = (d: D) => {
    const v = getDotValues(d, ['k']);
    return Array.isArray(v) ? v : [v];
  };
  for (const probe of KEYS) {
    if (Array.isArray(probe)) continue; // nedb looks up an array as "any of"
    const expected = all.filter((d) => keysOf(d).some((v) => compareThings(v, probe) === 0));
    assert.equal(ids(index.getMatching(probe)), ids(expected), `look-up of ${String(probe)}`);
  }
  const ranges = [{ $gt: 0 }, { $gte: 0, $lt: 2.5 }, { $lte: 'b' }, { $gt: 'a', $lt: true }, { $gte: null }, { $lt: new Date(2000) }];
  for (const q of ranges) {
    const inRange = (v: unknown) =>
      (!('$gt' in q) || compareThings(v, q.$gt) > 0) &&
      (!('$gte' in q) || compareThings(v, q.$gte) >= 0) &&
      (!('$lt' in q) || compareThings(v, q.$lt) < 0) &&
      (!('$lte' in q) || compareThings(v, q.$lte) <= 0);
    const got = index.getBetweenBounds(q);
    assert.equal(ids(got), ids(all.filter((d) => keysOf(d).some(inRange))), `range ${JSON.stringify(q)}`);
    for (let i = 1; i < got.length; i++) {
      const prev = keysOf(got[i - 1]!).filter(inRange).sort(compareThings)[0];
      const cur = keysOf(got[i]!).filter(inRange).sort(compareThings)[0];
      assert.ok(compareThings(prev, cur) <= 0, 'in key order');
    }
  }
});

test('an update that keeps the key keeps the document in place; one that collides changes nothing', async () => {
  const db = new Datastore({ inMemoryOnly: true });
  await db.ensureIndexAsync({ fieldName: 'tag', unique: true });
  await db.insertAsync([{ _id: 'c', tag: 'x' }, { _id: 'a', tag: 'y' }, { _id: 'b', tag: 'z' }]);
  await db.updateAsync({ _id: 'c' }, { $set: { a: 1 } });
  assert.equal(((await db.findAsync({})) as D[]).map((d) => d._id), ['c', 'a', 'b'], 'insertion order, kept across an update');
  await refusedAsDuplicate(() => db.updateAsync({}, { $set: { tag: 'same' } }, { multi: true }));
  assert.equal(((await db.findAsync({})) as D[]).map((d) => [d._id, d.tag]), [['c', 'x'], ['a', 'y'], ['b', 'z']], 'rolled back whole');
  assert.equal(ids(indexes(db).tag!.getMatching('x')), ['c']);
  assert.is((indexes(db).tag!.getMatching('x')[0] as D).a, 1, 'the index holds the updated document');
  await db.updateAsync({ _id: 'a' }, { $set: { tag: 'w' } });
  assert.equal(indexes(db).tag!.getMatching('y'), []);
  assert.equal(ids(indexes(db).tag!.getMatching('w')), ['a']);
});

test.run();
