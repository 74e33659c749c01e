/**
 * The embedded store's indexes (src/store/embedded/nedb-index.ts): nedb's own Datastore,
 * in memory, with its indexes swapped for KeyedTrees, checked against the meaning of nedb's
 * ordering (compareThings) by brute force over random operations.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import nedbModule from '@seald-io/nedb';
import { compareThings, getDotValues } from '@seald-io/nedb/lib/model.js';
import { installKeyedIndexes, KeyedTree } from '../src/store/embedded/nedb-index.js';

installKeyedIndexes();

// CommonJS (`module.exports = Datastore`) whose typings say `export default` (as in the store).
const Datastore = nedbModule as unknown as typeof nedbModule.default;
type nedb = InstanceType<typeof Datastore>;

const test = suite('nedb indexes in maps');

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

type D = { _id: string; k?: unknown; tag?: string; a?: unknown; b?: unknown };
/** The key an index keeps for a value: a missing field (undefined) is null, as in MongoDB. */
const asKey = (v: unknown) => (v === undefined ? null : v);
/** Index-key equality: compareThings over keys. */
const sameValue = (x: unknown, y: unknown) => compareThings(asKey(x), asKey(y)) === 0;
const indexes = (db: nedb) => (db as unknown as { indexes: Record<string, { tree: unknown; getMatching(v: unknown): D[]; getBetweenBounds(q: object): D[]; getAll(): D[] }> }).indexes;
const ids = (docs: D[]) => docs.map((d) => d._id).sort();

/** Keys of every kind nedb orders: numbers (with 0/-0), strings, booleans, null, dates, arrays, objects, missing. */
const KEYS: unknown[] = [0, -0, 1, 2.5, -7, 'a', 'b', '', '1', true, false, null, new Date(1000), new Date(1000), new Date(2000), ['x', 'y'], [], { p: 1 }, { p: 1 }, { p: 2 }, undefined];

test('single-field and compound indexes are KeyedTrees', async () => {
  const db = new Datastore({ inMemoryOnly: true });
  await db.ensureIndexAsync({ fieldName: 'tag' });
  await db.ensureIndexAsync({ fieldName: ['a', 'b'], unique: true });
  assert.instance(indexes(db)._id!.tree, KeyedTree);
  assert.instance(indexes(db).tag!.tree, KeyedTree);
  assert.instance(indexes(db)['a,b']!.tree, KeyedTree);
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
    const clashes = parts.some((p) => stored.some((s) => sameValue(s, p)));
    const insert = () => db.insertAsync({ _id: `d${i}`, k });
    if (clashes) {
      await refusedAsDuplicate(insert, `key ${String(k)} clashes`);
    } else {
      await insert();
      stored.push(...parts);
    }
  }
  // 0 and -0, the two equal dates, the two equal objects, and null and missing clashed.
  assert.is(await db.countAsync({}), KEYS.length - 4);
  assert.equal(ids(indexes(db).k!.getMatching(null)), ['d11'], 'null and missing are one key');
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
    return (Array.isArray(v) ? v : [v]).map(asKey);
  };
  for (const probe of KEYS) {
    if (Array.isArray(probe)) continue; // nedb looks up an array as "any of"
    const expected = all.filter((d) => keysOf(d).some((v) => sameValue(v, probe)));
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

test('compound indexes: random inserts, updates and removals agree with a brute-force scan, unique keys are refused', async () => {
  const db = new Datastore({ inMemoryOnly: true });
  await db.ensureIndexAsync({ fieldName: ['a', 'b'] });
  await db.ensureIndexAsync({ fieldName: ['b', 'k'], unique: true, sparse: true });
  // Primitive values (nested maps), with null and missing fields, and a few non-primitive ones
  // (arrays, objects, dates), which take the general path.
  const VALUES: unknown[] = [0, -0, 1, 'x', 'y', '', true, null, undefined, new Date(5), new Date(5), { p: 1 }, { p: 1 }, [1, 2]];
  let seed = 11;
  const rnd = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  const pick = () => VALUES[rnd(VALUES.length)];
  const keyOf = (d: D, fields: string[]) => getDotValues(d, fields) as Record<string, unknown>;
  const asCompoundKey = (x: Record<string, unknown>) => Object.fromEntries(Object.entries(x).map(([f, v]) => [f, asKey(v)]));
  const sameKey = (x: Record<string, unknown>, y: Record<string, unknown>) => compareThings(asCompoundKey(x), asCompoundKey(y)) === 0;
  let refused = 0;
  for (let step = 0; step < 800; step++) {
    const id = `d${rnd(50)}`;
    const op = rnd(4);
    const exists = (await db.findOneAsync({ _id: id })) !== null;
    const doc = (): Partial<D> => {
      const d: Record<string, unknown> = {};
      for (const f of ['a', 'b', 'k']) {
        const v = pick();
        if (v !== undefined) d[f] = v;
      }
      return d as Partial<D>;
    };
    try {
      if (op === 0 && !exists) await db.insertAsync({ _id: id, ...doc() });
      else if (op === 1 && exists) await db.updateAsync({ _id: id }, { $set: doc() });
      else if (op === 2 && exists) await db.updateAsync({ _id: id }, { $set: { tag: `t${step}` } }); // keys unchanged
      else if (op === 3 && exists) await db.removeAsync({ _id: id }, {});
    } catch (err) {
      assert.is((err as { errorType?: string }).errorType, 'uniqueViolated');
      refused++;
    }
  }
  assert.ok(refused > 0, 'the unique compound index refused some writes');
  const all = indexes(db)._id!.getAll();
  for (const fields of [['a', 'b'], ['b', 'k']]) {
    const index = indexes(db)[fields.join(',')]!;
    const sparse = fields[1] === 'k';
    const indexed = all.filter((d) => !sparse || Object.values(keyOf(d, fields)).some((v) => v !== undefined));
    assert.equal(ids(index.getAll()), ids(indexed), `${fields.join(',')}: every indexed document once`);
    for (const x of VALUES) {
      for (const y of VALUES) {
        const probe = { [fields[0]!]: x, [fields[1]!]: y };
        const expected = indexed.filter((d) => sameKey(keyOf(d, fields), probe));
        assert.equal(ids(index.getMatching(probe)), ids(expected), `${fields.join(',')} look-up of ${String(x)}, ${String(y)}`);
        if (sparse && expected.length > 1) assert.unreachable('the unique index holds two documents with one key');
      }
    }
  }
  // Through queries, as the store asks them.
  assert.equal(ids(await db.findAsync({ a: 'x', b: null })), ids(all.filter((d) => d.a === 'x' && d.b === null)));
});

test('a compound key that stays keeps the document in place, one that moves is found under its new key only', async () => {
  const db = new Datastore({ inMemoryOnly: true });
  await db.ensureIndexAsync({ fieldName: ['a', 'b'], unique: true });
  await db.insertAsync([{ _id: 'c', a: 1, b: 1 }, { _id: 'a', a: 1, b: 2 }, { _id: 'b', a: 2, b: 1 }]);
  await db.updateAsync({ _id: 'c' }, { $set: { tag: 'x' } });
  const index = indexes(db)['a,b']!;
  assert.equal(index.getAll().map((d) => d._id), ['c', 'a', 'b'], 'kept its place');
  assert.is(index.getMatching({ a: 1, b: 1 })[0]?.tag, 'x', 'the index holds the updated document');
  await db.updateAsync({ _id: 'c' }, { $set: { b: 3 } });
  assert.equal(index.getMatching({ a: 1, b: 1 }), []);
  assert.equal(ids(index.getMatching({ a: 1, b: 3 })), ['c']);
  await refusedAsDuplicate(() => db.updateAsync({ _id: 'c' }, { $set: { b: 2 } }));
  assert.equal(ids(index.getMatching({ a: 1, b: 3 })), ['c'], 'a refused update leaves the key');
  await db.removeAsync({}, { multi: true });
  assert.equal(index.getAll(), []);
  assert.equal((index.tree as unknown as { plain: Map<unknown, unknown> }).plain.size, 0, 'no empty levels left behind');
});

test.run();
