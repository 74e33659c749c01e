/**
 * The Store contract as executable cases. Every backend runs the same suite; each case works in a
 * collection of its own so cases stay independent of one another and of run order.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { nanoid } from 'nanoid';
import {
  BulkUpdateError,
  DocumentTooLargeError,
  DuplicateKeyError,
  InvalidQueryError,
  MAX_DOCUMENT_BYTES,
  StoreUnavailableError,
  type Collection,
  type Doc,
  type Store,
  type Update,
} from '../src/store/types.js';

export interface ContractTarget {
  store: Store;
  /** Opens the same data again (after the current store was closed). */
  reopen?: () => Promise<Store>;
  cleanup: () => Promise<void>;
}

// Loose document shape for the cases: fields vary from case to case.
type AnyDoc = Doc & Record<string, any>;

/** Awaits a promise that must reject with `type`; returns the error for further checks. */
export async function rejects<E>(p: Promise<unknown>, type: new (...args: any[]) => E, what = 'operation'): Promise<E> {
  try {
    await p;
  } catch (err) {
    assert.instance(err, type, `${what} should fail with ${type.name}, got ${String(err)}`);
    return err as E;
  }
  assert.unreachable(`${what} should have failed with ${type.name}`);
  throw new Error('unreachable');
}

/** Awaits a bulkUpdate that must fail with a BulkUpdateError whose first failed op failed with `type`. */
export async function rejectsBulk<E>(p: Promise<unknown>, type: new (...args: any[]) => E, what = 'bulkUpdate'): Promise<BulkUpdateError> {
  const err = await rejects(p, BulkUpdateError, what);
  assert.instance(err.first, type, `${what}: the failed op should fail with ${type.name}, got ${String(err.first)}`);
  return err;
}

const ids = (docs: Array<{ _id: string }>) => docs.map((d) => d._id);
const sortedIds = (docs: Array<{ _id: string }>) => ids(docs).sort();

export function runStoreContract(name: string, open: () => Promise<ContractTarget>): void {
  const s = suite(`store contract: ${name}`);
  let target: ContractTarget;
  let store: Store;
  let counter = 0;

  /** A fresh, empty collection for one case. */
  const fresh = (label: string): Collection<AnyDoc> => store.collection<AnyDoc>(`c${++counter}_${label}_${nanoid(6).replace(/[^A-Za-z0-9]/g, 'x')}`);

  /** A collection preloaded with a small fleet of agents used by the query cases. */
  async function agents(label: string): Promise<Collection<AnyDoc>> {
    const c = fresh(label);
    await c.insertMany([
      {
        _id: 'a1',
        name: 'Alpha',
        status: 'active',
        tags: ['red', 'blue'],
        limits: { maxTokensPerDay: 1000, tier: 'gold' },
        score: 10,
        createdAt: '2024-01-03T10:00:00.000Z',
        skills: [
          { name: 'search', level: 3 },
          { name: 'mail', level: 1 },
        ],
        nums: [1, 5, 9],
      },
      {
        _id: 'a2',
        name: 'beta',
        status: 'paused',
        tags: ['blue'],
        limits: { maxTokensPerDay: 500, tier: 'silver' },
        score: 20,
        createdAt: '2024-01-01T10:00:00.000Z',
        skills: [{ name: 'search', level: 1 }],
        nums: [2, 3],
      },
      {
        _id: 'a3',
        name: 'Gamma',
        status: 'active',
        tags: [],
        limits: { maxTokensPerDay: 2000, tier: 'gold' },
        score: 30,
        createdAt: '2024-01-02T10:00:00.000Z',
        skills: [],
        nums: [10],
        note: null,
      },
      {
        _id: 'a4',
        name: 'delta',
        status: 'retired',
        score: 5,
        createdAt: '2023-12-31T23:59:59.999Z',
        nums: [],
      },
    ]);
    return c;
  }

  s.before(async () => {
    target = await open();
    store = target.store;
  });

  s.after(async () => {
    try {
      await store?.close();
    } finally {
      await target?.cleanup();
    }
  });

  // -- basics -----------------------------------------------------------------------------------

  s('kind and ping', async () => {
    assert.ok(store.kind === 'embedded' || store.kind === 'mongodb');
    await store.ping();
  });

  s("the store's clock: MongoDB reports its own (hello.localTime); the embedded store has none (the process's is used)", async () => {
    if (store.kind === 'embedded') {
      assert.is(store.time, undefined);
      return;
    }
    const before = Date.now();
    const t = await store.time!();
    // The stand-in runs on this machine: its clock reads within the call. A MongoDB elsewhere (MONGODB_URI) may be off a little.
    const slack = process.env.MONGODB_URI ? 300_000 : 1;
    assert.ok(Number.isInteger(t) && t >= before - slack && t <= Date.now() + slack, `${before} ≤ ${t}`);
  });

  s('collection() returns a usable handle with its name', async () => {
    const c = fresh('name');
    assert.type(c.name, 'string');
    assert.ok(c.name.startsWith('c'));
  });

  s('insertOne, findById, findOne', async () => {
    const c = fresh('insert');
    const doc = { _id: 'x1', name: 'one', nested: { a: 1, list: [1, 2] }, at: '2024-05-01T00:00:00.000Z' };
    const returned = await c.insertOne(doc);
    assert.equal(returned, doc);
    assert.equal(await c.findById('x1'), doc);
    assert.equal(await c.findOne({ name: 'one' }), doc);
    assert.is(await c.findById('nope'), null);
    assert.is(await c.findOne({ name: 'nope' }), null);
  });

  s('returned documents are copies', async () => {
    const c = fresh('copies');
    const doc = { _id: 'x', list: [1], nested: { a: 1 } };
    await c.insertOne(doc);
    doc.list.push(2); // mutating the inserted object does not change the store
    const found = (await c.findById('x'))!;
    assert.equal(found.list, [1]);
    found.nested.a = 99;
    assert.equal((await c.findById('x'))!.nested, { a: 1 });
  });

  s('insertMany and count', async () => {
    const c = fresh('many');
    await c.insertMany([]);
    assert.is(await c.count(), 0);
    await c.insertMany([
      { _id: '1', k: 'a' },
      { _id: '2', k: 'b' },
      { _id: '3', k: 'a' },
    ]);
    assert.is(await c.count(), 3);
    assert.is(await c.count({}), 3);
    assert.is(await c.count({ k: 'a' }), 2);
    assert.is(await c.count({ k: 'z' }), 0);
  });

  s('duplicate _id throws DuplicateKeyError', async () => {
    const c = fresh('dupid');
    await c.insertOne({ _id: 'same', v: 1 });
    const err = await rejects(c.insertOne({ _id: 'same', v: 2 }), DuplicateKeyError);
    assert.is(err.collection, c.name);
    assert.equal(await c.findById('same'), { _id: 'same', v: 1 });
  });

  s('insertMany is ordered: documents before a duplicate stay, later ones are not inserted', async () => {
    const c = fresh('ordered');
    await c.insertOne({ _id: 'b' });
    await rejects(c.insertMany([{ _id: 'a' }, { _id: 'b' }, { _id: 'c' }]), DuplicateKeyError);
    assert.equal(sortedIds(await c.find({})), ['a', 'b']);
    // duplicates inside one batch are caught too
    await rejects(c.insertMany([{ _id: 'd' }, { _id: 'd' }]), DuplicateKeyError);
    assert.equal(sortedIds(await c.find({})), ['a', 'b', 'd']);
  });

  // -- filters ----------------------------------------------------------------------------------

  s('equality: top level, nested path, array contains, sub-document arrays', async () => {
    const c = await agents('eq');
    assert.equal(sortedIds(await c.find({ status: 'active' })), ['a1', 'a3']);
    assert.equal(sortedIds(await c.find({ 'limits.maxTokensPerDay': 500 })), ['a2']);
    assert.equal(sortedIds(await c.find({ 'limits.tier': 'gold', status: 'active' })), ['a1', 'a3']);
    assert.equal(sortedIds(await c.find({ tags: 'blue' })), ['a1', 'a2']);
    assert.equal(sortedIds(await c.find({ 'skills.name': 'search' })), ['a1', 'a2']);
    assert.equal(sortedIds(await c.find({ 'skills.name': 'mail' })), ['a1']);
    assert.equal(sortedIds(await c.find({ nums: 9 })), ['a1']);
    assert.equal(sortedIds(await c.find({ _id: 'a2' })), ['a2']);
    assert.equal(await c.find({ status: 'nope' }), []);
  });

  s('equality with a string or $in of strings: the string itself or an array holding it, nothing else; with and without an index', async () => {
    const c = fresh('streq');
    await c.insertMany([
      { _id: 's1', v: '1' },
      { _id: 's2', v: 1 },
      { _id: 's3', v: ['0', '1'] },
      { _id: 's4', v: [['1']] },
      { _id: 's5' },
      { _id: 's6', v: { x: '1' } },
      { _id: 's7', v: null },
      { _id: 's8', v: '1 ' },
      { _id: 's9', w: '1' },
    ]);
    for (const indexed of [false, true]) {
      if (indexed) await c.createIndex({ fields: { v: 1 } });
      assert.equal(sortedIds(await c.find({ v: '1' })), ['s1', 's3'], indexed ? 'indexed' : 'not indexed');
      assert.equal(sortedIds(await c.find({ v: '' })), []);
      assert.is(await c.count({ v: '1' }), 2);
      assert.equal(sortedIds(await c.find({ v: '1' }, { sort: { _id: -1 }, limit: 1 })), ['s3']);
      assert.equal(sortedIds(await c.find({ w: '1' })), ['s9']);
      assert.equal(sortedIds(await c.find({ v: { $in: ['1', 'x'] } })), ['s1', 's3']);
      assert.equal(sortedIds(await c.find({ v: { $in: ['0'] } })), ['s3']);
      assert.equal(sortedIds(await c.find({ v: { $in: ['1 ', '0'] } })), ['s3', 's8']);
      // A document holding two of the values, or a value listed twice, is found once.
      assert.equal(sortedIds(await c.find({ v: { $in: ['0', '1'] } })), ['s1', 's3']);
      assert.equal(sortedIds(await c.find({ v: { $in: ['1', '1'] } })), ['s1', 's3']);
      assert.is(await c.count({ v: { $in: ['0', '1', '0'] } }), 2);
      assert.equal(await c.find({ v: { $in: [] } }), []);
      assert.equal(sortedIds(await c.find({ _id: { $in: ['s9', 's1', 'zz'] } })), ['s1', 's9']);
    }
    // A document changed or removed is found (or not) accordingly.
    await c.updateOne({ _id: 's2' }, { $set: { v: '1' } });
    await c.deleteOne({ _id: 's3' });
    assert.equal(sortedIds(await c.find({ v: '1' })), ['s1', 's2']);
  });

  s('equality: whole arrays and whole sub-documents', async () => {
    const c = await agents('eqwhole');
    assert.equal(sortedIds(await c.find({ tags: ['blue'] })), ['a2']);
    assert.equal(sortedIds(await c.find({ tags: ['red', 'blue'] })), ['a1']);
    assert.equal(await c.find({ tags: ['blue', 'red'] }), [], 'array equality is ordered');
    assert.equal(sortedIds(await c.find({ tags: [] })), ['a3']);
    assert.equal(sortedIds(await c.find({ limits: { maxTokensPerDay: 500, tier: 'silver' } })), ['a2']);
    assert.equal(await c.find({ limits: { maxTokensPerDay: 500 } }), [], 'sub-document equality is exact');
  });

  s('null matches null and missing fields', async () => {
    const c = await agents('null');
    assert.equal(sortedIds(await c.find({ note: null })), ['a1', 'a2', 'a3', 'a4']);
    assert.equal(sortedIds(await c.find({ limits: null })), ['a4']);
    assert.equal(sortedIds(await c.find({ limits: { $ne: null } })), ['a1', 'a2', 'a3']);
  });

  s('$eq, $ne (including arrays: no element equal)', async () => {
    const c = await agents('ne');
    assert.equal(sortedIds(await c.find({ status: { $eq: 'paused' } })), ['a2']);
    assert.equal(sortedIds(await c.find({ status: { $ne: 'active' } })), ['a2', 'a4']);
    assert.equal(sortedIds(await c.find({ tags: { $ne: 'blue' } })), ['a3', 'a4']);
    assert.equal(sortedIds(await c.find({ 'limits.tier': { $ne: 'gold' } })), ['a2', 'a4']);
  });

  s('$in and $nin', async () => {
    const c = await agents('in');
    assert.equal(sortedIds(await c.find({ status: { $in: ['paused', 'retired'] } })), ['a2', 'a4']);
    assert.equal(sortedIds(await c.find({ tags: { $in: ['red', 'green'] } })), ['a1']);
    assert.equal(sortedIds(await c.find({ _id: { $in: ['a1', 'a3', 'zz'] } })), ['a1', 'a3']);
    assert.equal(await c.find({ _id: { $in: [] } }), []);
    assert.equal(sortedIds(await c.find({ status: { $nin: ['active', 'paused'] } })), ['a4']);
    assert.equal(sortedIds(await c.find({ tags: { $nin: ['blue'] } })), ['a3', 'a4']);
    assert.equal(sortedIds(await c.find({ note: { $in: [null] } })), ['a1', 'a2', 'a3', 'a4']);
  });

  s('$exists', async () => {
    const c = await agents('exists');
    assert.equal(sortedIds(await c.find({ tags: { $exists: true } })), ['a1', 'a2', 'a3']);
    assert.equal(sortedIds(await c.find({ tags: { $exists: false } })), ['a4']);
    assert.equal(sortedIds(await c.find({ note: { $exists: true } })), ['a3'], 'a null value exists');
    assert.equal(sortedIds(await c.find({ 'limits.tier': { $exists: true } })), ['a1', 'a2', 'a3']);
  });

  s('$regex, case-insensitive with $options: "i", on arrays too', async () => {
    const c = await agents('regex');
    assert.equal(sortedIds(await c.find({ name: { $regex: '^a' } })), [], 'case-sensitive by default');
    assert.equal(sortedIds(await c.find({ name: { $regex: '^a', $options: 'i' } })), ['a1']);
    assert.equal(sortedIds(await c.find({ name: { $regex: 'TA$', $options: 'i' } })), ['a2', 'a4']);
    assert.equal(sortedIds(await c.find({ name: { $regex: 'a', $options: '' } })), ['a1', 'a2', 'a3', 'a4']);
    assert.equal(sortedIds(await c.find({ tags: { $regex: '^bl' } })), ['a1', 'a2']);
    assert.equal(sortedIds(await c.find({ 'skills.name': { $regex: 'MAI', $options: 'i' } })), ['a1']);
    assert.equal(sortedIds(await c.find({ score: { $regex: '1' } })), [], 'numbers never match a regex');
  });

  s('invalid regex throws InvalidQueryError', async () => {
    const c = await agents('badregex');
    await rejects(c.find({ name: { $regex: '(unclosed' } }), InvalidQueryError, 'find with bad regex');
    await rejects(c.count({ name: { $regex: '[z-a]' } }), InvalidQueryError, 'count with bad regex');
    // also when no document has the field: the filter is rejected, not silently unmatched
    const other = fresh('badregex_other');
    await other.insertOne({ _id: 'o' });
    await rejects(other.find({ name: { $regex: '(' } }), InvalidQueryError, 'no candidate documents');
  });

  s('unknown operators throw InvalidQueryError', async () => {
    const c = await agents('badop');
    await rejects(c.find({ score: { $bogus: 1 } }), InvalidQueryError, 'unknown field operator');
    await rejects(c.find({ $bogus: [{ score: 1 }] } as never), InvalidQueryError, 'unknown top-level operator');
    await rejects(c.find({ score: { $in: 5 } }), InvalidQueryError, '$in without array');
  });

  s('$lt, $lte, $gt, $gte on numbers, ISO strings and arrays', async () => {
    const c = await agents('cmp');
    assert.equal(sortedIds(await c.find({ score: { $lt: 20 } })), ['a1', 'a4']);
    assert.equal(sortedIds(await c.find({ score: { $lte: 20 } })), ['a1', 'a2', 'a4']);
    assert.equal(sortedIds(await c.find({ score: { $gt: 20 } })), ['a3']);
    assert.equal(sortedIds(await c.find({ score: { $gte: 10, $lt: 30 } })), ['a1', 'a2']);
    assert.equal(sortedIds(await c.find({ createdAt: { $gte: '2024-01-02T00:00:00.000Z' } })), ['a1', 'a3']);
    assert.equal(sortedIds(await c.find({ createdAt: { $lt: '2024-01-01T00:00:00.000Z' } })), ['a4']);
    assert.equal(sortedIds(await c.find({ 'limits.maxTokensPerDay': { $gt: 600 } })), ['a1', 'a3']);
    assert.equal(sortedIds(await c.find({ nums: { $gt: 8 } })), ['a1', 'a3'], 'any element');
    assert.equal(sortedIds(await c.find({ score: { $gt: '5' } })), [], 'no comparison across types');
    assert.equal(sortedIds(await c.find({ missing: { $lt: 100 } })), [], 'missing fields never compare');
  });

  s('$all', async () => {
    const c = await agents('all');
    assert.equal(sortedIds(await c.find({ tags: { $all: ['blue'] } })), ['a1', 'a2']);
    assert.equal(sortedIds(await c.find({ tags: { $all: ['blue', 'red'] } })), ['a1']);
    assert.equal(sortedIds(await c.find({ tags: { $all: ['blue', 'green'] } })), []);
    assert.equal(sortedIds(await c.find({ tags: { $all: [] } })), [], 'empty $all matches nothing');
  });

  s('$elemMatch on sub-documents and on scalars', async () => {
    const c = await agents('elem');
    assert.equal(sortedIds(await c.find({ skills: { $elemMatch: { name: 'search', level: { $gte: 2 } } } })), ['a1']);
    assert.equal(sortedIds(await c.find({ skills: { $elemMatch: { name: 'mail', level: 3 } } })), []);
    // without $elemMatch the two conditions may be met by different elements
    assert.equal(sortedIds(await c.find({ 'skills.name': 'mail', 'skills.level': 3 })), ['a1']);
    assert.equal(sortedIds(await c.find({ nums: { $elemMatch: { $gt: 2, $lt: 4 } } })), ['a2']);
    assert.equal(sortedIds(await c.find({ nums: { $gt: 2, $lt: 4 } })), ['a1', 'a2'], 'per-element only with $elemMatch');
  });

  s('$or, $and and their combinations', async () => {
    const c = await agents('logic');
    assert.equal(sortedIds(await c.find({ $or: [{ status: 'paused' }, { score: { $gte: 30 } }] })), ['a2', 'a3']);
    assert.equal(sortedIds(await c.find({ $and: [{ status: 'active' }, { score: { $lt: 20 } }] })), ['a1']);
    assert.equal(sortedIds(await c.find({ status: 'active', $or: [{ tags: 'red' }, { tags: [] }] })), ['a1', 'a3']);
    assert.equal(
      sortedIds(await c.find({ $and: [{ $or: [{ name: 'beta' }, { name: 'delta' }] }, { $or: [{ score: 5 }, { score: 30 }] }] })),
      ['a4'],
    );
    assert.equal(sortedIds(await c.find({})), ['a1', 'a2', 'a3', 'a4']);
  });

  // -- sort, skip, limit, projection ------------------------------------------------------------

  s('sort ascending and descending, by nested and ISO string fields', async () => {
    const c = await agents('sort');
    assert.equal(ids(await c.find({}, { sort: { score: 1 } })), ['a4', 'a1', 'a2', 'a3']);
    assert.equal(ids(await c.find({}, { sort: { score: -1 } })), ['a3', 'a2', 'a1', 'a4']);
    assert.equal(ids(await c.find({}, { sort: { createdAt: 1 } })), ['a4', 'a2', 'a3', 'a1']);
    assert.equal(ids(await c.find({}, { sort: { createdAt: -1 } })), ['a1', 'a3', 'a2', 'a4']);
    // a4 has no limits: missing sorts first ascending, last descending
    assert.equal(ids(await c.find({}, { sort: { 'limits.maxTokensPerDay': 1 } })), ['a4', 'a2', 'a1', 'a3']);
    assert.equal(ids(await c.find({}, { sort: { 'limits.maxTokensPerDay': -1 } })), ['a3', 'a1', 'a2', 'a4']);
  });

  s('compound sort', async () => {
    const c = await agents('sort2');
    assert.equal(ids(await c.find({ status: { $ne: 'retired' } }, { sort: { 'limits.tier': 1, score: -1 } })), ['a3', 'a1', 'a2']);
    assert.equal(ids(await c.find({}, { sort: { status: 1, _id: -1 } })), ['a3', 'a1', 'a2', 'a4']);
  });

  s('skip and limit, with and without sort', async () => {
    const c = await agents('page');
    assert.equal(ids(await c.find({}, { sort: { score: 1 }, limit: 2 })), ['a4', 'a1']);
    assert.equal(ids(await c.find({}, { sort: { score: 1 }, skip: 1, limit: 2 })), ['a1', 'a2']);
    assert.equal(ids(await c.find({}, { sort: { score: 1 }, skip: 3 })), ['a3']);
    assert.equal(ids(await c.find({}, { sort: { score: 1 }, skip: 10 })), []);
    assert.is((await c.find({}, { limit: 3 })).length, 3);
    assert.is((await c.find({}, { skip: 1 })).length, 3);
    assert.is((await c.find({}, { limit: 0 })).length, 4, 'limit 0 means no limit');
    const first = await c.findOne({}, { sort: { score: -1 } });
    assert.is(first?._id, 'a3');
    const second = await c.findOne({}, { sort: { score: -1 }, skip: 1 });
    assert.is(second?._id, 'a2');
  });

  s('projection: inclusion, nested paths, _id always returned', async () => {
    const c = await agents('proj');
    assert.equal(await c.find({ _id: 'a1' }, { projection: { name: 1 } }), [{ _id: 'a1', name: 'Alpha' }]);
    assert.equal(await c.findOne({ _id: 'a2' }, { projection: { name: 1, score: 1 } }), { _id: 'a2', name: 'beta', score: 20 });
    assert.equal(await c.findOne({ _id: 'a2' }, { projection: { 'limits.tier': 1 } }), { _id: 'a2', limits: { tier: 'silver' } });
    assert.equal(await c.findOne({ _id: 'a4' }, { projection: { name: 1, limits: 1 } }), { _id: 'a4', name: 'delta' });
    assert.equal(await c.findOne({ _id: 'a1' }, { projection: { 'skills.name': 1 } }), {
      _id: 'a1',
      skills: [{ name: 'search' }, { name: 'mail' }],
    });
    assert.equal(
      await c.find({ status: 'active' }, { projection: { score: 1 }, sort: { score: -1 } }),
      [
        { _id: 'a3', score: 30 },
        { _id: 'a1', score: 10 },
      ],
    );
  });

  // -- distinct ---------------------------------------------------------------------------------

  s('distinct: scalar, array (unwound), nested, with filter', async () => {
    const c = await agents('distinct');
    const sortVals = (vs: unknown[]) => [...vs].sort((a, b) => String(a).localeCompare(String(b)));
    assert.equal(sortVals(await c.distinct('status')), ['active', 'paused', 'retired']);
    assert.equal(sortVals(await c.distinct('tags')), ['blue', 'red']);
    assert.equal(sortVals(await c.distinct('limits.tier')), ['gold', 'silver']);
    assert.equal(sortVals(await c.distinct('skills.name')), ['mail', 'search']);
    assert.equal(sortVals(await c.distinct('status', { score: { $gte: 10 } })), ['active', 'paused']);
    assert.equal(await c.distinct('nothing'), []);
  });

  // -- update operators -------------------------------------------------------------------------

  s('$set: top level, nested (creating parents), whole sub-document', async () => {
    const c = fresh('set');
    await c.insertOne({ _id: 'd', a: 1, limits: { x: 1 } });
    const r = await c.updateOne({ _id: 'd' }, { $set: { a: 2, 'limits.y': 2, 'deep.er.path': 'v', obj: { k: [1] } } });
    assert.equal(r, { matched: 1, modified: 1, upserted: 0 });
    assert.equal(await c.findById('d'), { _id: 'd', a: 2, limits: { x: 1, y: 2 }, deep: { er: { path: 'v' } }, obj: { k: [1] } });
  });

  s('no-op $set counts as matched but not modified', async () => {
    const c = fresh('noop');
    await c.insertOne({ _id: 'd', a: 1 });
    assert.equal(await c.updateOne({ _id: 'd' }, { $set: { a: 1 } }), { matched: 1, modified: 0, upserted: 0 });
    assert.equal(await c.updateOne({ _id: 'zz' }, { $set: { a: 1 } }), { matched: 0, modified: 0, upserted: 0 });
  });

  s('$unset', async () => {
    const c = fresh('unset');
    await c.insertOne({ _id: 'd', a: 1, b: 2, n: { x: 1, y: 2 } });
    await c.updateOne({ _id: 'd' }, { $unset: { a: true, 'n.x': 1, nothere: '' } });
    assert.equal(await c.findById('d'), { _id: 'd', b: 2, n: { y: 2 } });
  });

  s('$inc: existing, missing, negative, nested', async () => {
    const c = fresh('inc');
    await c.insertOne({ _id: 'd', n: 5, s: { c: 1 } });
    await c.updateOne({ _id: 'd' }, { $inc: { n: 2, fresh: 3, 's.c': -4, 's.new': 1.5 } });
    assert.equal(await c.findById('d'), { _id: 'd', n: 7, s: { c: -3, new: 1.5 }, fresh: 3 });
  });

  s('$max: raises a number or an ISO time, keeps a greater one, sets a missing one, upserts', async () => {
    const c = fresh('max');
    await c.insertOne({ _id: 'd', n: 5, at: '2030-01-01T00:00:00.000Z' });
    await c.updateOne({ _id: 'd' }, { $max: { n: 3, at: '2030-01-02T00:00:00.000Z', fresh: 7 } });
    assert.equal(await c.findById('d'), { _id: 'd', n: 5, at: '2030-01-02T00:00:00.000Z', fresh: 7 });
    await c.updateOne({ _id: 'd' }, { $max: { n: 9 } });
    assert.is((await c.findById('d'))!.n, 9);
    await c.updateOne({ _id: 'u' }, { $max: { n: 2 }, $set: { x: 1 } }, { upsert: true });
    assert.equal(await c.findById('u'), { _id: 'u', n: 2, x: 1 });
    await c.bulkUpdate([
      { filter: { _id: 'd' }, update: { $max: { n: 4 } } },
      { filter: { _id: 'u' }, update: { $max: { n: 4 } } },
    ]);
    assert.equal([(await c.findById('d'))!.n, (await c.findById('u'))!.n], [9, 4]);
  });

  s('$inc on a non-number is rejected', async () => {
    const c = fresh('incbad');
    await c.insertOne({ _id: 'd', s: 'text' });
    await rejects(c.updateOne({ _id: 'd' }, { $inc: { s: 1 } }), InvalidQueryError);
    assert.equal(await c.findById('d'), { _id: 'd', s: 'text' });
  });

  s('$push: single value, $each, onto missing field', async () => {
    const c = fresh('push');
    await c.insertOne({ _id: 'd', list: [1] });
    await c.updateOne({ _id: 'd' }, { $push: { list: 2, other: 'x' } });
    await c.updateOne({ _id: 'd' }, { $push: { list: { $each: [3, 4] } } });
    await c.updateOne({ _id: 'd' }, { $push: { list: 2 } });
    assert.equal(await c.findById('d'), { _id: 'd', list: [1, 2, 3, 4, 2], other: ['x'] });
  });

  s('$pull with a value and with a condition', async () => {
    const c = fresh('pull');
    await c.insertOne({
      _id: 'd',
      tags: ['a', 'b', 'a', 'c'],
      nums: [1, 5, 7, 3, 9],
      items: [
        { name: 'x', qty: 1 },
        { name: 'y', qty: 5 },
        { name: 'x', qty: 9 },
      ],
    });
    await c.updateOne({ _id: 'd' }, { $pull: { tags: 'a' } });
    await c.updateOne({ _id: 'd' }, { $pull: { nums: { $gte: 6 } } });
    await c.updateOne({ _id: 'd' }, { $pull: { items: { name: 'x', qty: { $gt: 2 } } } });
    assert.equal(await c.findById('d'), {
      _id: 'd',
      tags: ['b', 'c'],
      nums: [1, 5, 3],
      items: [
        { name: 'x', qty: 1 },
        { name: 'y', qty: 5 },
      ],
    });
    await c.updateOne({ _id: 'd' }, { $pull: { nums: { $in: [1, 3] }, items: { name: 'y' } } });
    assert.equal(await c.findById('d'), { _id: 'd', tags: ['b', 'c'], nums: [5], items: [{ name: 'x', qty: 1 }] });
    // nothing to pull (missing field, no match): matched, not modified
    assert.equal(await c.updateOne({ _id: 'd' }, { $pull: { tags: 'zz', missing: 1 } }), { matched: 1, modified: 0, upserted: 0 });
  });

  s('$addToSet does not duplicate', async () => {
    const c = fresh('addtoset');
    await c.insertOne({ _id: 'd', tags: ['a'] });
    await c.updateOne({ _id: 'd' }, { $addToSet: { tags: 'a' } });
    await c.updateOne({ _id: 'd' }, { $addToSet: { tags: 'b', fresh: 'x' } });
    await c.updateOne({ _id: 'd' }, { $addToSet: { tags: { $each: ['b', 'c', 'c'] } } });
    assert.equal(await c.findById('d'), { _id: 'd', tags: ['a', 'b', 'c'], fresh: ['x'] });
    assert.equal(await c.updateOne({ _id: 'd' }, { $addToSet: { tags: 'c' } }), { matched: 1, modified: 0, upserted: 0 });
  });

  s('conflicting or unknown update operators are rejected', async () => {
    const c = fresh('badupdate');
    await c.insertOne({ _id: 'd', a: 1 });
    await rejects(c.updateOne({ _id: 'd' }, { $set: { a: 2 }, $inc: { a: 1 } }), InvalidQueryError, 'same path twice');
    await rejects(c.updateOne({ _id: 'd' }, { $set: { a: 2, 'a.b': 1 } }), InvalidQueryError, 'nested paths');
    await rejects(c.updateOne({ _id: 'd' }, { $bogus: { a: 1 } } as never), InvalidQueryError, 'unknown operator');
    await rejects(c.updateOne({ _id: 'd' }, { $set: { _id: 'other' } }), InvalidQueryError, 'changing _id');
    assert.equal(await c.findById('d'), { _id: 'd', a: 1 });
  });

  s('updateMany counts', async () => {
    const c = await agents('updmany');
    assert.equal(await c.updateMany({ status: 'active' }, { $set: { flagged: true } }), { matched: 2, modified: 2, upserted: 0 });
    assert.equal(await c.updateMany({ status: 'active' }, { $set: { flagged: true } }), { matched: 2, modified: 0, upserted: 0 });
    assert.equal(await c.updateMany({ status: 'nope' }, { $set: { flagged: true } }), { matched: 0, modified: 0, upserted: 0 });
    assert.equal(sortedIds(await c.find({ flagged: true })), ['a1', 'a3']);
  });

  s('updateOne changes only the first match', async () => {
    const c = await agents('updone');
    assert.equal(await c.updateOne({ status: 'active' }, { $inc: { score: 1 } }), { matched: 1, modified: 1, upserted: 0 });
    const scores = (await c.find({ status: 'active' }, { sort: { _id: 1 } })).map((d) => d.score);
    assert.ok((scores[0] === 11 && scores[1] === 30) || (scores[0] === 10 && scores[1] === 31), `scores ${scores}`);
  });

  s('upsert with $setOnInsert', async () => {
    const c = fresh('upsert');
    const first = await c.updateOne(
      { _id: 'u1' },
      { $set: { seen: 1 }, $setOnInsert: { createdAt: '2024-01-01T00:00:00.000Z' }, $inc: { hits: 1 } },
      { upsert: true },
    );
    assert.equal(first, { matched: 0, modified: 0, upserted: 1 });
    assert.equal(await c.findById('u1'), { _id: 'u1', createdAt: '2024-01-01T00:00:00.000Z', hits: 1, seen: 1 });
    const second = await c.updateOne(
      { _id: 'u1' },
      { $set: { seen: 2 }, $setOnInsert: { createdAt: '2099-01-01T00:00:00.000Z' }, $inc: { hits: 1 } },
      { upsert: true },
    );
    assert.equal(second, { matched: 1, modified: 1, upserted: 0 });
    assert.equal(await c.findById('u1'), { _id: 'u1', createdAt: '2024-01-01T00:00:00.000Z', hits: 2, seen: 2 });
  });

  s('upsert seeds the new document from the filter equalities', async () => {
    const c = fresh('upsertseed');
    await c.updateOne(
      { _id: 'k', 'meta.kind': 'counter', status: { $in: ['a', 'b'] }, $and: [{ owner: 'me' }] },
      { $inc: { n: 1 } },
      { upsert: true },
    );
    assert.equal(await c.findById('k'), { _id: 'k', meta: { kind: 'counter' }, owner: 'me', n: 1 });
  });

  s('upsert by a natural key gives the new document a string _id', async () => {
    const c = fresh('upsertid');
    await c.updateOne({ day: '2024-01-01', agent: 'a' }, { $inc: { tokens: 5 } }, { upsert: true });
    await c.updateOne({ day: '2024-01-01', agent: 'a' }, { $inc: { tokens: 5 } }, { upsert: true });
    const docs = await c.find({});
    assert.is(docs.length, 1);
    assert.type(docs[0]._id, 'string');
    assert.is(docs[0].tokens, 10);
    assert.equal(await c.findById(docs[0]._id), docs[0]);
  });

  s('findOneAndUpdate: after (default), before, no match, upsert', async () => {
    const c = fresh('foau');
    await c.insertOne({ _id: 'd', n: 1 });
    assert.equal(await c.findOneAndUpdate({ _id: 'd' }, { $inc: { n: 1 } }), { _id: 'd', n: 2 });
    assert.equal(await c.findOneAndUpdate({ _id: 'd' }, { $inc: { n: 1 } }, { returnDocument: 'after' }), { _id: 'd', n: 3 });
    assert.equal(await c.findOneAndUpdate({ _id: 'd' }, { $inc: { n: 1 } }, { returnDocument: 'before' }), { _id: 'd', n: 3 });
    assert.equal(await c.findById('d'), { _id: 'd', n: 4 });
    assert.is(await c.findOneAndUpdate({ _id: 'none' }, { $inc: { n: 1 } }), null);
    assert.is(await c.findById('none'), null);
    const up = await c.findOneAndUpdate({ _id: 'new' }, { $inc: { n: 1 }, $setOnInsert: { fresh: true } }, { upsert: true });
    assert.equal(up, { _id: 'new', fresh: true, n: 1 });
    const upBefore = await c.findOneAndUpdate({ _id: 'new2' }, { $set: { n: 1 } }, { upsert: true, returnDocument: 'before' });
    assert.is(upBefore, null, 'before-image of an inserted document is null');
    assert.equal(await c.findById('new2'), { _id: 'new2', n: 1 });
  });

  s('findOneAndUpdate with sort picks the first in sort order (a queue)', async () => {
    const c = fresh('queue');
    await c.insertMany([
      { _id: 'j1', state: 'queued', at: '2024-01-03T00:00:00.000Z' },
      { _id: 'j2', state: 'queued', at: '2024-01-01T00:00:00.000Z' },
      { _id: 'j3', state: 'queued', at: '2024-01-02T00:00:00.000Z' },
    ]);
    const claim = () => c.findOneAndUpdate({ state: 'queued' }, { $set: { state: 'running' } }, { sort: { at: 1 } });
    assert.is((await claim())?._id, 'j2');
    assert.is((await claim())?._id, 'j3');
    assert.is((await claim())?._id, 'j1');
    assert.is(await claim(), null);
  });

  s('atomicity: 50 concurrent findOneAndUpdate($inc) end at exactly 50', async () => {
    const c = fresh('atomic');
    await c.insertOne({ _id: 'counter', n: 0 });
    const results = await Promise.all(
      Array.from({ length: 50 }, () => c.findOneAndUpdate({ _id: 'counter' }, { $inc: { n: 1 } }, { returnDocument: 'after' })),
    );
    assert.is((await c.findById('counter'))!.n, 50);
    const seen = results.map((d) => d!.n).sort((a, b) => a - b);
    assert.equal(seen, Array.from({ length: 50 }, (_, i) => i + 1), 'every caller saw a distinct value');
  });

  s('atomicity: concurrent upserting findOneAndUpdate($inc by k) on a missing counter hands out disjoint ranges (the change log numbers its entries so)', async () => {
    const c = fresh('ranges');
    const sizes = Array.from({ length: 20 }, (_, i) => (i % 4) + 1);
    const results = await Promise.all(sizes.map((k) => c.findOneAndUpdate({ _id: 'counter' }, { $inc: { next: k } }, { upsert: true })));
    const taken = results.flatMap((d, i) => Array.from({ length: sizes[i]! }, (_, j) => d!.next - sizes[i]! + 1 + j)).sort((a, b) => a - b);
    const total = sizes.reduce((a, b) => a + b, 0);
    assert.equal(taken, Array.from({ length: total }, (_, i) => i + 1), 'every number handed out once, none skipped');
    // The counter has no `seq`: a read of the numbered entries after a position never returns it.
    await c.insertMany([3, 1, 2].map((seq) => ({ _id: `change:${seq}`, seq })));
    assert.equal(ids(await c.find({ seq: { $gt: 1 } }, { sort: { seq: 1 }, limit: 5 })), ['change:2', 'change:3']);
  });

  s('atomicity: concurrent upserts of one key create one document', async () => {
    const c = fresh('atomicupsert');
    await Promise.all(Array.from({ length: 20 }, () => c.updateOne({ _id: 'k' }, { $inc: { n: 1 } }, { upsert: true })));
    assert.equal(await c.find({}), [{ _id: 'k', n: 20 }]);
  });

  s('atomicity: concurrent claims hand each job to exactly one claimer', async () => {
    const c = fresh('claims');
    await c.insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: `j${i}`, state: 'queued' })));
    const claimed = await Promise.all(
      Array.from({ length: 15 }, (_, i) => c.findOneAndUpdate({ state: 'queued' }, { $set: { state: 'running', by: i } })),
    );
    const got = claimed.filter((d) => d !== null).map((d) => d!._id);
    assert.is(got.length, 10);
    assert.is(new Set(got).size, 10);
    assert.is(await c.count({ state: 'queued' }), 0);
  });

  s('replaceOne replaces the whole document; upsert inserts', async () => {
    const c = fresh('replace');
    await c.insertOne({ _id: 'r', a: 1, b: 2 });
    assert.equal(await c.replaceOne({ _id: 'r' }, { _id: 'r', c: 3 }), { matched: 1, modified: 1, upserted: 0 });
    assert.equal(await c.findById('r'), { _id: 'r', c: 3 });
    assert.equal(await c.replaceOne({ _id: 'r' }, { _id: 'r', c: 3 }), { matched: 1, modified: 0, upserted: 0 });
    assert.equal(await c.replaceOne({ _id: 'x' }, { _id: 'x', c: 1 }), { matched: 0, modified: 0, upserted: 0 });
    assert.is(await c.findById('x'), null);
    assert.equal(await c.replaceOne({ _id: 'x' }, { _id: 'x', c: 1 }, { upsert: true }), { matched: 0, modified: 0, upserted: 1 });
    assert.equal(await c.findById('x'), { _id: 'x', c: 1 });
    await rejects(c.replaceOne({ _id: 'r' }, { _id: 'other', c: 1 }), InvalidQueryError, 'changing _id');
  });

  // -- deletes ----------------------------------------------------------------------------------

  s('deleteOne deletes one match and returns the count', async () => {
    const c = await agents('delete');
    assert.is(await c.deleteOne({ status: 'active' }), 1);
    assert.is(await c.count({ status: 'active' }), 1);
    assert.is(await c.deleteOne({ status: 'active' }), 1);
    assert.is(await c.deleteOne({ status: 'active' }), 0);
    assert.is(await c.deleteOne({ status: 'nope' }), 0);
    assert.equal(sortedIds(await c.find({})), ['a2', 'a4']);
  });

  s('deleteMany with filter and deleteMany({}) empty the collection', async () => {
    const c = await agents('delete2');
    assert.is(await c.deleteMany({ status: 'active' }), 2);
    assert.equal(sortedIds(await c.find({})), ['a2', 'a4']);
    assert.is(await c.deleteMany({}), 2);
    assert.is(await c.count(), 0);
    assert.is(await c.deleteMany({}), 0);
  });

  // -- bulk -------------------------------------------------------------------------------------

  s('an update creates new fields in path order, whatever order it names them in', async () => {
    const c = fresh('pathorder');
    await c.insertOne({ _id: 'k1', m: 0 });
    await c.updateOne({ _id: 'k1' }, { $set: { z: 1, 'b.y': 1, a: 1, 'b.x': 1 }, $inc: { c: 2, 'b.w': 3 } });
    const doc = (await c.findById('k1'))!;
    assert.equal(Object.keys(doc), ['_id', 'm', 'a', 'b', 'c', 'z']);
    assert.equal(Object.keys(doc.b), ['w', 'x', 'y']);
    await c.bulkUpdate([{ filter: { _id: 'k1' }, update: { $inc: { 'n.q': 1, 'n.p': 1, l: 1 } } }]);
    const again = (await c.findById('k1'))!;
    assert.equal(Object.keys(again), ['_id', 'm', 'a', 'b', 'c', 'z', 'l', 'n']);
    assert.equal(Object.keys(again.n), ['p', 'q']);
  });

  s('an update that fails part-way leaves the stored document exactly as it was', async () => {
    const c = fresh('partway');
    const original = { _id: 'p1', a: { b: { c: 1 }, list: [1, 2, { x: 1 }] }, tags: ['t1'], s: 'text', n: 1 };
    await c.insertOne(original);
    // Steps run in path order; the last one ($inc on a string) fails after the others were applied to the new version.
    const failing: Update[] = [
      { $set: { 'a.b.c': 2, 'a.list.2.x': 5, 'a.new.deep': true }, $unset: { n: '' as const }, $push: { tags: 't2' }, $inc: { s: 1 } },
      { $pull: { 'a.list': 1 }, $addToSet: { tags: 't3' }, $inc: { 'a.b.c': 1, s: 1 } },
    ];
    for (const update of failing) {
      await rejects(c.updateOne({ _id: 'p1' }, update), InvalidQueryError, 'updateOne');
      await rejectsBulk(c.bulkUpdate([{ filter: { _id: 'p1' }, update }]), InvalidQueryError);
      assert.equal(await c.findById('p1'), original);
    }
    // And a good update of nested paths leaves the parts it does not touch as they were.
    await c.bulkUpdate([{ filter: { _id: 'p1' }, update: { $set: { 'a.list.2.x': 7 }, $push: { tags: 't2' } } }]);
    assert.equal(await c.findById('p1'), { _id: 'p1', a: { b: { c: 1 }, list: [1, 2, { x: 7 }] }, tags: ['t1', 't2'], s: 'text', n: 1 });
    await c.updateOne({ _id: 'p1' }, { $unset: { 'a.b.c': '' }, $inc: { n: 1 } });
    assert.equal(await c.findById('p1'), { _id: 'p1', a: { b: {}, list: [1, 2, { x: 7 }] }, tags: ['t1', 't2'], s: 'text', n: 2 });
  });

  s('bulkUpdate applies every op and sums the results', async () => {
    const c = fresh('bulk');
    await c.insertMany([
      { _id: 'b1', n: 1 },
      { _id: 'b2', n: 2 },
    ]);
    const r = await c.bulkUpdate([
      { filter: { _id: 'b1' }, update: { $inc: { n: 10 } } },
      { filter: { _id: 'b2' }, update: { $set: { n: 2 } } }, // matched, not modified
      { filter: { _id: 'b3' }, update: { $set: { n: 3 } }, upsert: true },
      { filter: { _id: 'b4' }, update: { $set: { n: 4 } } }, // no match, no upsert
    ]);
    assert.equal(r, { matched: 2, modified: 1, upserted: 1 });
    assert.equal(await c.find({}, { sort: { _id: 1 } }), [
      { _id: 'b1', n: 11 },
      { _id: 'b2', n: 2 },
      { _id: 'b3', n: 3 },
    ]);
    assert.equal(await c.bulkUpdate([]), { matched: 0, modified: 0, upserted: 0 });
  });

  s('bulkUpdate: a failing op fails alone; the error lists it and what the others did', async () => {
    const c = fresh('bulkerr');
    await c.createIndex({ fields: { email: 1 }, unique: true });
    await c.insertMany([
      { _id: 'u1', email: 'a@x' },
      { _id: 'u2', email: 'b@x' },
    ]);
    const err = await rejects(
      c.bulkUpdate([
        { filter: { _id: 'u1' }, update: { $set: { email: 'b@x' } } }, // duplicate
        { filter: { _id: 'u2' }, update: { $set: { seen: true } } },
      ]),
      BulkUpdateError,
    );
    assert.equal(err.failures.map((f) => f.index), [0]);
    assert.instance(err.first, DuplicateKeyError);
    assert.is(err.collection, c.name);
    assert.equal(err.result, { matched: 1, modified: 1, upserted: 0 });
    assert.equal(await c.findById('u1'), { _id: 'u1', email: 'a@x' });
    assert.equal(await c.findById('u2'), { _id: 'u2', email: 'b@x', seen: true });
  });

  s('bulkUpdate: an op sees the effect of every op before it, on the same document or not', async () => {
    const c = fresh('bulkorder');
    await c.insertMany([
      { _id: 'o1', n: 1, tag: 'a' },
      { _id: 'o2', n: 1, tag: 'a' },
    ]);
    const r = await c.bulkUpdate([
      { filter: { _id: 'o1' }, update: { $inc: { n: 1 } } },
      { filter: { _id: 'o1' }, update: { $inc: { n: 10 } } }, // same document again
      { filter: { _id: 'o2' }, update: { $set: { tag: 'b' } } },
      { filter: { tag: 'b' }, update: { $inc: { n: 100 } } }, // matches only after the op before
      { filter: { _id: 'o3' }, update: { $set: { n: 5 } }, upsert: true },
      { filter: { _id: 'o3' }, update: { $inc: { n: 1 } } }, // the document upserted just before
    ]);
    assert.equal(r, { matched: 5, modified: 5, upserted: 1 });
    assert.equal(await c.find({}, { sort: { _id: 1 } }), [
      { _id: 'o1', n: 12, tag: 'a' },
      { _id: 'o2', n: 101, tag: 'b' },
      { _id: 'o3', n: 6 },
    ]);
  });

  s('bulkUpdate stays in order across failures: the ops after a failed one run, in order, and see the ones before', async () => {
    const c = fresh('bulkorderfail');
    await c.createIndex({ fields: { email: 1 }, unique: true });
    await c.insertMany([
      { _id: 'f1', email: 'a@x', n: 0 },
      { _id: 'f2', email: 'b@x', n: 0 },
    ]);
    const err = await rejects(
      c.bulkUpdate([
        { filter: { _id: 'f1' }, update: { $set: { tag: 't' } } },
        { filter: { _id: 'f2' }, update: { $set: { email: 'a@x' } } }, // duplicate: fails
        { filter: { tag: 't' }, update: { $inc: { n: 1 } } }, // sees the first op
        { filter: { _id: 'f1' }, update: { $inc: { 'n': 10 } } },
        { filter: { _id: 'f2' }, update: { $inc: { n: 'x' } as never } }, // invalid: fails
        { filter: { _id: 'f3' }, update: { $set: { n: 7 } }, upsert: true },
        { filter: { n: 7 }, update: { $inc: { n: 1 } } }, // sees the upsert before it
      ]),
      BulkUpdateError,
    );
    assert.equal(err.failures.map((f) => f.index), [1, 4]);
    assert.instance(err.failures[0]!.error, DuplicateKeyError);
    assert.instance(err.failures[1]!.error, InvalidQueryError);
    assert.equal(err.result, { matched: 4, modified: 4, upserted: 1 });
    assert.equal(await c.find({}, { sort: { _id: 1 } }), [
      { _id: 'f1', email: 'a@x', n: 11, tag: 't' },
      { _id: 'f2', email: 'b@x', n: 0 },
      { _id: 'f3', n: 8 },
    ]);
  });

  s('bulkUpdate: an upsert refused by a unique index does not stop the other upserts', async () => {
    const c = fresh('bulkupsert');
    await c.createIndex({ fields: { email: 1 }, unique: true });
    await c.insertOne({ _id: 'v1', email: 'a@x' });
    const err = await rejects(
      c.bulkUpdate([
        { filter: { _id: 'v2' }, update: { $set: { email: 'b@x' } }, upsert: true },
        { filter: { _id: 'v3' }, update: { $set: { email: 'a@x' } }, upsert: true }, // duplicate
        { filter: { _id: 'v4' }, update: { $set: { email: 'c@x' } }, upsert: true },
        { filter: { _id: 'v1' }, update: { $set: { seen: true } } },
      ]),
      BulkUpdateError,
    );
    assert.equal(err.failures.map((f) => f.index), [1]);
    assert.instance(err.first, DuplicateKeyError);
    assert.equal(err.result, { matched: 1, modified: 1, upserted: 2 });
    assert.equal(await c.find({}, { sort: { _id: 1 } }), [
      { _id: 'v1', email: 'a@x', seen: true },
      { _id: 'v2', email: 'b@x' },
      { _id: 'v4', email: 'c@x' },
    ]);
  });

  // -- the document size limit ------------------------------------------------------------------

  /** A string that alone makes a document larger than the limit. */
  const oversized = () => 'x'.repeat(MAX_DOCUMENT_BYTES + 1);

  s('a document over the size limit is refused with DocumentTooLargeError, and nothing of it is written', async () => {
    const c = fresh('toolarge');
    await c.insertOne({ _id: 'd1', n: 1 });
    const big = oversized();
    const e1 = await rejects(c.insertOne({ _id: 'd2', big }), DocumentTooLargeError, 'insertOne');
    assert.is(e1.collection, c.name);
    await rejects(c.updateOne({ _id: 'd1' }, { $set: { big } }), DocumentTooLargeError, 'updateOne');
    await rejects(c.updateOne({ _id: 'd3' }, { $set: { big } }, { upsert: true }), DocumentTooLargeError, 'upsert');
    await rejects(c.findOneAndUpdate({ _id: 'd1' }, { $set: { big } }), DocumentTooLargeError, 'findOneAndUpdate');
    await rejects(c.replaceOne({ _id: 'd1' }, { _id: 'd1', big }), DocumentTooLargeError, 'replaceOne');
    // Growing a stored document past the limit, a half at a time.
    const half = 'y'.repeat(MAX_DOCUMENT_BYTES / 2);
    await c.updateOne({ _id: 'd1' }, { $set: { a: half } });
    await rejects(c.updateOne({ _id: 'd1' }, { $set: { b: half } }), DocumentTooLargeError, 'update growing a document');
    assert.equal(await c.find({}, { projection: { n: 1 } }), [{ _id: 'd1', n: 1 }]);
    assert.equal(Object.keys((await c.findById('d1'))!), ['_id', 'n', 'a']);
    // insertMany is ordered: the documents before the oversized one are inserted, the later ones not.
    await rejects(c.insertMany([{ _id: 'm1' }, { _id: 'm2', big }, { _id: 'm3' }]), DocumentTooLargeError, 'insertMany');
    assert.equal(sortedIds(await c.find({}, { projection: { _id: 1 } })), ['d1', 'm1']);
  });

  s('bulkUpdate: an op that would make a document too large fails alone; the others are written', async () => {
    const c = fresh('bulktoolarge');
    await c.insertMany([
      { _id: 'k1', n: 1 },
      { _id: 'k2', n: 1 },
    ]);
    const err = await rejects(
      c.bulkUpdate([
        { filter: { _id: 'k1' }, update: { $set: { n: 2 } } },
        { filter: { _id: 'k2' }, update: { $set: { snapshot: oversized() } } },
        { filter: { _id: 'k3' }, update: { $set: { snapshot: oversized() } }, upsert: true },
        { filter: { _id: 'k4' }, update: { $set: { n: 4 } }, upsert: true },
        { filter: { _id: 'k2' }, update: { $inc: { n: 1 } } },
      ]),
      BulkUpdateError,
    );
    assert.equal(err.failures.map((f) => f.index), [1, 2]);
    for (const f of err.failures) assert.instance(f.error, DocumentTooLargeError);
    assert.equal(err.result, { matched: 2, modified: 2, upserted: 1 });
    assert.equal(await c.find({}, { sort: { _id: 1 } }), [
      { _id: 'k1', n: 2 },
      { _id: 'k2', n: 2 },
      { _id: 'k4', n: 4 },
    ]);
  });

  // -- indexes ----------------------------------------------------------------------------------

  s('unique index: insert and update that would duplicate throw DuplicateKeyError', async () => {
    const c = fresh('unique');
    await c.createIndex({ fields: { email: 1 }, unique: true, name: 'email_unique' });
    await c.createIndex({ fields: { email: 1 }, unique: true, name: 'email_unique' }); // idempotent
    await c.insertOne({ _id: 'u1', email: 'a@x' });
    await c.insertOne({ _id: 'u2', email: 'b@x' });
    const e1 = await rejects(c.insertOne({ _id: 'u3', email: 'a@x' }), DuplicateKeyError, 'insert');
    assert.is(e1.index, 'email_unique');
    assert.is(e1.collection, c.name);
    const e2 = await rejects(c.updateOne({ _id: 'u2' }, { $set: { email: 'a@x' } }), DuplicateKeyError, 'update');
    assert.is(e2.index, 'email_unique');
    await rejects(c.findOneAndUpdate({ _id: 'u2' }, { $set: { email: 'a@x' } }), DuplicateKeyError, 'findOneAndUpdate');
    await rejects(c.replaceOne({ _id: 'u2' }, { _id: 'u2', email: 'a@x' }), DuplicateKeyError, 'replaceOne');
    await rejects(c.updateOne({ _id: 'u9' }, { $set: { email: 'a@x' } }, { upsert: true }), DuplicateKeyError, 'upsert');
    assert.equal(await c.findById('u2'), { _id: 'u2', email: 'b@x' }, 'failed writes leave the document unchanged');
    assert.is(await c.count(), 2);
    // changing to a free value and back is fine
    await c.updateOne({ _id: 'u2' }, { $set: { email: 'c@x' } });
    await c.insertOne({ _id: 'u5', email: 'b@x' });
  });

  s('unique index on existing duplicates fails with DuplicateKeyError', async () => {
    const c = fresh('uniquelate');
    await c.insertMany([
      { _id: '1', k: 'same' },
      { _id: '2', k: 'same' },
    ]);
    await rejects(c.createIndex({ fields: { k: 1 }, unique: true }), DuplicateKeyError);
    await c.insertOne({ _id: '3', k: 'same' }); // no index was left behind
  });

  s('compound unique index', async () => {
    const c = fresh('compound');
    await c.createIndex({ fields: { workspaceId: 1, userId: 1 }, unique: true, name: 'member_unique' });
    await c.insertOne({ _id: 'm1', workspaceId: 'w1', userId: 'u1' });
    await c.insertOne({ _id: 'm2', workspaceId: 'w1', userId: 'u2' });
    await c.insertOne({ _id: 'm3', workspaceId: 'w2', userId: 'u1' });
    const err = await rejects(c.insertOne({ _id: 'm4', userId: 'u1', workspaceId: 'w1' }), DuplicateKeyError, 'same pair');
    assert.is(err.index, 'member_unique');
    await rejects(c.updateOne({ _id: 'm2' }, { $set: { userId: 'u1' } }), DuplicateKeyError, 'update into same pair');
    assert.is(await c.count(), 3);
  });

  s('sparse unique index ignores documents without the field', async () => {
    const c = fresh('sparse');
    await c.createIndex({ fields: { did: 1 }, unique: true, sparse: true, name: 'did_unique' });
    await c.insertOne({ _id: 's1' });
    await c.insertOne({ _id: 's2' });
    await c.insertOne({ _id: 's3', did: 'did:key:a' });
    const err = await rejects(c.insertOne({ _id: 's4', did: 'did:key:a' }), DuplicateKeyError);
    assert.is(err.index, 'did_unique');
    await c.updateOne({ _id: 's1' }, { $set: { did: 'did:key:b' } });
    await rejects(c.updateOne({ _id: 's2' }, { $set: { did: 'did:key:b' } }), DuplicateKeyError);
    assert.is(await c.count(), 3);
  });

  s('sparse unique index: a field holding null is present, and indexed', async () => {
    const c = fresh('sparsenull');
    await c.createIndex({ fields: { did: 1 }, unique: true, sparse: true });
    await c.insertOne({ _id: 'n1', did: null });
    await c.insertOne({ _id: 'n2' });
    await rejects(c.insertOne({ _id: 'n3', did: null }), DuplicateKeyError, 'a second null');
    assert.is(await c.count(), 2);
  });

  s('compound sparse unique index: left out only without every field; a missing field of the others counts as null', async () => {
    const c = fresh('sparsecompound');
    await c.createIndex({ fields: { a: 1, b: 1 }, unique: true, sparse: true, name: 'ab_unique' });
    await c.insertOne({ _id: 'p1' });
    await c.insertOne({ _id: 'p2' }); // neither field: not indexed, no collision
    await c.insertOne({ _id: 'p3', a: 'x' });
    const e1 = await rejects(c.insertOne({ _id: 'p4', a: 'x' }), DuplicateKeyError, 'same field present, other missing');
    assert.is(e1.index, 'ab_unique');
    await rejects(c.insertOne({ _id: 'p5', a: 'x', b: null }), DuplicateKeyError, 'missing and null are one key');
    await c.insertOne({ _id: 'p6', a: 'x', b: 'y' });
    await c.insertOne({ _id: 'p7', b: 'y' });
    await rejects(c.updateOne({ _id: 'p1' }, { $set: { b: 'y' } }), DuplicateKeyError, 'an update into a taken key');
    assert.equal(sortedIds(await c.find({})), ['p1', 'p2', 'p3', 'p6', 'p7']);
  });

  s('non-sparse unique index treats two missing values as duplicates', async () => {
    const c = fresh('nonsparse');
    await c.createIndex({ fields: { code: 1 }, unique: true });
    await c.insertOne({ _id: 'n1' });
    await rejects(c.insertOne({ _id: 'n2' }), DuplicateKeyError);
    await rejects(c.insertOne({ _id: 'n3', code: null }), DuplicateKeyError, 'missing and null are one key');
    await c.insertOne({ _id: 'n4', code: 'c' });
    await rejects(c.updateOne({ _id: 'n4' }, { $unset: { code: '' } }), DuplicateKeyError, 'unset into the missing key');
    assert.equal(sortedIds(await c.find({})), ['n1', 'n4']);
  });

  s('non-unique index does not constrain and queries still work', async () => {
    const c = fresh('plainidx');
    await c.createIndex({ fields: { userId: 1 } });
    await c.createIndex({ fields: { at: -1 } });
    await c.insertMany([
      { _id: '1', userId: 'u', at: '2024-01-01' },
      { _id: '2', userId: 'u', at: '2024-01-02' },
    ]);
    assert.equal(ids(await c.find({ userId: 'u' }, { sort: { at: -1 } })), ['2', '1']);
    assert.equal(ids(await c.find({ userId: { $in: ['u', 'v'] } }, { sort: { at: 1 } })), ['1', '2']);
  });

  s('20 concurrent inserts of one unique key: exactly one succeeds', async () => {
    const c = fresh('race');
    await c.createIndex({ fields: { slug: 1 }, unique: true, name: 'slug_unique' });
    const outcomes = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => c.insertOne({ _id: `w${i}`, slug: 'same' })));
    const ok = outcomes.filter((o) => o.status === 'fulfilled');
    const failed = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    assert.is(ok.length, 1);
    assert.is(failed.length, 19);
    for (const f of failed) assert.instance(f.reason, DuplicateKeyError);
    assert.is(await c.count({ slug: 'same' }), 1);
  });

  // -- durability (last: it swaps the store) ------------------------------------------------------

  s('data and unique indexes survive close and reopen', async () => {
    if (!target.reopen) return;
    const c = fresh('durable');
    await c.createIndex({ fields: { email: 1 }, unique: true, name: 'email_unique' });
    await c.insertMany([
      { _id: 'p1', email: 'a@x', n: 1 },
      { _id: 'p2', email: 'b@x', n: 2 },
    ]);
    await c.updateOne({ _id: 'p1' }, { $inc: { n: 10 }, $push: { log: 'x' } });
    await c.deleteOne({ _id: 'p2' });
    await c.updateOne({ _id: 'p3' }, { $set: { email: 'c@x' } }, { upsert: true });
    const name = c.name;
    await store.close();
    await rejects(c.findById('p1'), StoreUnavailableError, 'use after close');
    store = await target.reopen();
    const again = store.collection<AnyDoc>(name);
    assert.equal(await again.find({}, { sort: { _id: 1 } }), [
      { _id: 'p1', email: 'a@x', n: 11, log: ['x'] },
      { _id: 'p3', email: 'c@x' },
    ]);
    await rejects(again.insertOne({ _id: 'p4', email: 'a@x' }), DuplicateKeyError, 'index survives reopen');
  });

  s.run();
}
