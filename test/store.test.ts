/**
 * Store backends: the shared contract against the embedded store and against MongoStore through
 * the official driver, on the MongoDB stand-in (tools/mongo-standin) or, when MONGODB_URI is set,
 * on that server; plus backend-specific cases.
 */
import { access, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { getHeapSnapshot } from 'node:v8';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { BSON, MongoBulkWriteError, MongoClient, MongoInvalidArgumentError, MongoNetworkError, MongoServerError } from 'mongodb';
import { nanoid } from 'nanoid';
import { openEmbeddedStore } from '../src/store/embedded/index.js';
import { updateScalarsInPlace } from '../src/store/embedded/in-place.js';
import { clientOptions, collectionOver, mapMongoError, openMongoStore, parseMongoUri, PING_TIMEOUT_MS, redactUri, STARTUP_TIMEOUT_MS } from '../src/store/mongo.js';
import { bsonDocumentSize } from '../src/store/embedded/bson-size.js';
import { instrumentStore, openStore } from '../src/store/index.js';
import { BulkUpdateError, DocumentTooLargeError, DuplicateKeyError, InvalidQueryError, MAX_DOCUMENT_BYTES, StoreUnavailableError, type Doc } from '../src/store/types.js';
import { rejects, rejectsBulk, runStoreContract } from './store-contract.js';
import { startMongoStandin, type MongoStandin } from '../tools/mongo-standin/server.js';
import { tempDir } from './helpers.js';

/** Runs `fn` with a fresh data directory, removed afterwards whatever happens. */
async function inTempDir(fn: (dataDir: string) => Promise<void>): Promise<void> {
  const dataDir = await tempDir('steward-store-');
  try {
    await fn(dataDir);
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

runStoreContract('embedded', async () => {
  const dataDir = await tempDir('steward-store-');
  return {
    store: await openEmbeddedStore({ dataDir }),
    reopen: () => openEmbeddedStore({ dataDir }),
    cleanup: () => rm(dataDir, { recursive: true, force: true }),
  };
});

// The same contract with the datafiles compacted whenever they double: compactions run between
// (and while) the contract's own operations.
runStoreContract('embedded, compacting', async () => {
  const dataDir = await tempDir('steward-store-');
  return {
    store: await openEmbeddedStore({ dataDir, compactMinBytes: 1 }),
    reopen: () => openEmbeddedStore({ dataDir, compactMinBytes: 1 }),
    cleanup: () => rm(dataDir, { recursive: true, force: true }),
  };
});

const mongoUri = process.env.MONGODB_URI || undefined;
const testDb = () => `steward_test_${Date.now()}_${nanoid(6).replace(/[^A-Za-z0-9]/g, 'x')}`;
let standin: MongoStandin | undefined;

runStoreContract(mongoUri ? 'mongodb' : 'mongodb stand-in', async () => {
  standin ??= mongoUri ? undefined : await startMongoStandin({ log: () => undefined });
  const uri = mongoUri ?? standin!.uri();
  const dbName = testDb();
  return {
    store: await openMongoStore({ uri, dbName }),
    reopen: () => openMongoStore({ uri, dbName }),
    cleanup: async () => {
      const client = new MongoClient(uri);
      try {
        await client.db(dbName).dropDatabase();
      } finally {
        await client.close();
      }
      await standin?.stop();
    },
  };
});

// -- embedded specifics -----------------------------------------------------------------------------

const embedded = suite('embedded store specifics');

const exists = (path: string) => access(path).then(
  () => true,
  () => false,
);
const lineCount = async (file: string) => (await readFile(file, 'utf8')).split('\n').filter((l) => l.trim() !== '').length;

embedded('a datafile is compacted when the collection is opened again', async () => {
  await inTempDir(async (dataDir) => {
    let store = await openEmbeddedStore({ dataDir });
    const c = store.collection<Doc & { v: number }>('counters');
    await c.insertOne({ _id: 'n', v: 0 });
    for (let i = 0; i < 200; i++) await c.updateOne({ _id: 'n' }, { $inc: { v: 1 } });
    await c.insertOne({ _id: 'gone', v: 0 });
    await c.deleteOne({ _id: 'gone' });
    await store.close();

    const file = join(dataDir, 'store', 'counters.db');
    const sizeBefore = (await stat(file)).size;
    assert.ok((await lineCount(file)) > 200, 'every write appended a line');

    store = await openEmbeddedStore({ dataDir });
    assert.is((await store.collection<Doc & { v: number }>('counters').findById('n'))?.v, 200); // first use loads it
    assert.is(await lineCount(file), 1, 'one line per live document');
    assert.ok((await stat(file)).size < sizeBefore / 50, 'the file shrank');
    // Writes after the compaction go to the new file, not to the one it replaced.
    const after = store.collection<Doc & { v: number }>('counters');
    await after.updateOne({ _id: 'n' }, { $inc: { v: 1 } });
    await after.insertOne({ _id: 'later', v: 7 });
    assert.is(await lineCount(file), 3);
    await store.close();
    store = await openEmbeddedStore({ dataDir });
    assert.equal(await store.collection('counters').find({}, { sort: { _id: 1 } }), [
      { _id: 'later', v: 7 },
      { _id: 'n', v: 201 },
    ]);
    await store.close();
  });
});

embedded('a datafile is compacted while the store runs, once it has doubled and reached the minimum', async () => {
  await inTempDir(async (dataDir) => {
    const file = join(dataDir, 'store', 'counters.db');
    const minBytes = 16 * 1024;
    let store = await openEmbeddedStore({ dataDir, compactMinBytes: minBytes });
    const c = store.collection<Doc & { v: number; pad: string }>('counters');
    await c.createIndex({ fields: { pad: 1, v: 1 }, unique: true });
    await c.insertOne({ _id: 'n', v: 0, pad: 'x'.repeat(100) });
    await c.insertOne({ _id: 'other', v: -1, pad: 'y' });
    let largest = 0;
    let compactions = 0;
    for (let i = 0; i < 2000; i++) {
      await c.updateOne({ _id: 'n' }, { $inc: { v: 1 } });
      const size = (await stat(file)).size;
      largest = Math.max(largest, size);
      // Each compaction is let finish before the next write (writes during one are the tests
      // below): the file then never holds more than the minimum and the line that reached it.
      await store.compactionsIdle();
      if ((await stat(file)).size < size) compactions++;
    }
    // 2,000 appended lines of about 140 bytes (~280 KB) without compaction (the next test).
    assert.ok(largest >= minBytes, 'it grew to the minimum before it was rewritten');
    assert.ok(largest < minBytes + 1000, `it was rewritten once it reached the minimum (largest ${largest} bytes)`);
    // About 270 KB appended in all, rewritten at every 16 KB: some fifteen times.
    assert.ok(compactions >= 10, `rewritten every time it reached it (${compactions} times)`);
    assert.is((await c.findById('n'))?.v, 2000);
    await store.close();

    // What the rewrites left loads as it was, the compound unique index included.
    store = await openEmbeddedStore({ dataDir, compactMinBytes: minBytes });
    const again = store.collection<Doc & { v: number; pad: string }>('counters');
    assert.equal(await again.find({}, { sort: { _id: 1 } }), [
      { _id: 'n', v: 2000, pad: 'x'.repeat(100) },
      { _id: 'other', v: -1, pad: 'y' },
    ]);
    await rejects(again.insertOne({ _id: 'dup', v: -1, pad: 'y' }), DuplicateKeyError);
    await store.close();
  });
});

embedded('without compaction the same writes grow the datafile (the test above can fail)', async () => {
  await inTempDir(async (dataDir) => {
    const store = await openEmbeddedStore({ dataDir, compactMinBytes: 64 * 1024 * 1024 });
    const c = store.collection<Doc & { v: number; pad: string }>('counters');
    await c.insertOne({ _id: 'n', v: 0, pad: 'x'.repeat(100) });
    for (let i = 0; i < 2000; i++) await c.updateOne({ _id: 'n' }, { $inc: { v: 1 } });
    assert.ok((await stat(join(dataDir, 'store', 'counters.db'))).size > 200_000);
    await store.close();
  });
});

embedded('writes made while a datafile is being compacted are all kept', async () => {
  await inTempDir(async (dataDir) => {
    // A tiny minimum: compactions start again and again while hundreds of writes are in flight.
    let store = await openEmbeddedStore({ dataDir, compactMinBytes: 2048 });
    const c = store.collection<Doc & { v: number; at?: Date }>('counters');
    const ids = Array.from({ length: 50 }, (_, i) => `d${String(i).padStart(2, '0')}`);
    await c.insertMany(ids.map((_id) => ({ _id, v: 0 })));
    const writes: Array<Promise<unknown>> = [];
    for (let round = 0; round < 20; round++) {
      for (const _id of ids) writes.push(c.updateOne({ _id }, { $inc: { v: 1 } }));
      writes.push(c.bulkUpdate(ids.map((_id) => ({ filter: { _id }, update: { $inc: { v: 1 } } }))));
      writes.push(c.insertOne({ _id: `new${round}`, v: round, at: new Date(Date.UTC(2026, 0, round + 1)) }));
      if (round % 2 === 1) writes.push(c.deleteOne({ _id: `new${round - 1}` }));
    }
    await Promise.all(writes);
    const expected = await c.find({}, { sort: { _id: 1 } });
    assert.is(expected.length, 60);
    assert.ok(expected.filter((d) => d._id.startsWith('d')).every((d) => d.v === 40));
    await store.close();
    // Every write appended a line (a bulk update one per document, a delete a tombstone): 2,080
    // without compaction. A compaction copies the writes made during it, so how many lines are left
    // depends on when the last one started; fewer than were appended says one ran meanwhile.
    const appended = ids.length + 20 * (2 * ids.length + 1) + 10;
    assert.ok((await lineCount(join(dataDir, 'store', 'counters.db'))) < appended, 'the datafile was compacted meanwhile');
    store = await openEmbeddedStore({ dataDir });
    const loaded = await store.collection<Doc & { v: number; at?: Date }>('counters').find({}, { sort: { _id: 1 } });
    assert.equal(loaded, expected);
    assert.instance(loaded.find((d) => d._id === 'new19')?.at, Date);
    await store.close();
  });
});

embedded('closing waits for a compaction still queued, so a store opened right after keeps its writes', async () => {
  await inTempDir(async (dataDir) => {
    for (let round = 0; round < 5; round++) {
      const store = await openEmbeddedStore({ dataDir, compactMinBytes: 100 });
      // A new collection each time, of lines of 18 bytes: the sixth passes the minimum, so the
      // last update asks for a compaction, still queued when close is called.
      const c = store.collection<Doc & { v: number }>(`things${round}`);
      await c.insertOne({ _id: 'a', v: round });
      for (let i = 0; i < 5; i++) await c.updateOne({ _id: 'a' }, { $inc: { v: 1 } });
      await store.close();
      assert.is(await lineCount(join(dataDir, 'store', `things${round}.db`)), 1, 'closed with the compaction done');
    }
    const store = await openEmbeddedStore({ dataDir });
    for (let round = 0; round < 5; round++) assert.equal(await store.collection(`things${round}`).find({}), [{ _id: 'a', v: round + 5 }]);
    await store.close();
  });
});

embedded('writes go on while a compaction writes its copy, and the copy gets them too', async () => {
  await inTempDir(async (dataDir) => {
    const file = join(dataDir, 'store', 'things.db');
    // About 2 MB of documents: the copy is written in several chunks and flushed to disk.
    let store = await openEmbeddedStore({ dataDir, compactMinBytes: 1024 * 1024 });
    const c = store.collection<Doc & { v: number; pad: string }>('things');
    const pad = 'p'.repeat(200);
    for (let i = 0; i < 10; i++) await c.insertMany(Array.from({ length: 1000 }, (_, j) => ({ _id: `d${i}-${j}`, v: 0, pad })));
    // The file is at its first doubling past the minimum: this update asks for the compaction,
    // which takes the documents right after it.
    await c.updateOne({ _id: 'd0-0' }, { $inc: { v: 1 } });
    assert.ok((await stat(file)).size >= 1024 * 1024);
    // Writes made now are answered while the copy is still beside the datafile.
    let answeredDuringCopy = 0;
    for (let i = 0; i < 5; i++) {
      await c.updateOne({ _id: 'd0-1' }, { $inc: { v: 1 } });
      await c.deleteOne({ _id: `d1-${i}` });
      if (await exists(`${file}~`)) answeredDuringCopy++;
    }
    await c.insertOne({ _id: 'late', v: 7, pad: '' });
    assert.ok(answeredDuringCopy > 0, 'writes were answered before the copy replaced the datafile');
    await store.close();
    assert.not.ok(await exists(`${file}~`), 'the copy was renamed over the datafile');
    // The compacted file holds the writes made during the copy: the deleted documents are gone,
    // the others are as written, and no document has two lines once the copy's writes are folded.
    store = await openEmbeddedStore({ dataDir });
    const again = store.collection<Doc & { v: number; pad: string }>('things');
    assert.is(await again.count({}), 10_000 - 5 + 1);
    assert.is((await again.findById('d0-0'))?.v, 1);
    assert.is((await again.findById('d0-1'))?.v, 5);
    assert.is(await again.findById('d1-0'), null);
    assert.is((await again.findById('late'))?.v, 7);
    await store.close();
  });
});

embedded('a compaction that cannot write its copy leaves the datafile, and a later one succeeds', async () => {
  await inTempDir(async (dataDir) => {
    const file = join(dataDir, 'store', 'counters.db');
    let store = await openEmbeddedStore({ dataDir, compactMinBytes: 4096 });
    const c = store.collection<Doc & { v: number }>('counters');
    await c.insertOne({ _id: 'n', v: 0 });
    // A directory where the copy would go: every compaction fails to open it.
    await mkdir(`${file}~`);
    for (let i = 0; i < 1000; i++) await c.updateOne({ _id: 'n' }, { $inc: { v: 1 } });
    assert.ok((await stat(file)).size > 12_000, 'no compaction replaced the datafile');
    await rm(`${file}~`, { recursive: true });
    for (let i = 0; i < 1000; i++) await c.updateOne({ _id: 'n' }, { $inc: { v: 1 } });
    await store.close();
    assert.ok((await stat(file)).size < 12_000, 'a compaction after the failures replaced it');
    store = await openEmbeddedStore({ dataDir });
    assert.is((await store.collection<Doc & { v: number }>('counters').findById('n'))?.v, 2000);
    await store.close();
  });
});

embedded('a copy left by a compaction cut short does not replace the datafile', async () => {
  await inTempDir(async (dataDir) => {
    let store = await openEmbeddedStore({ dataDir });
    await store.collection<Doc & { v: number }>('things').insertOne({ _id: 'a', v: 1 });
    await store.close();
    // A crash while the copy was written: the datafile is whole, the copy beside it is not.
    await writeFile(join(dataDir, 'store', 'things.db~'), '{"_id":"a","v":');
    store = await openEmbeddedStore({ dataDir });
    assert.equal(await store.collection('things').find({}), [{ _id: 'a', v: 1 }]);
    await store.close();
  });
});

embedded('a store directory cannot be opened twice at once, and again after close', async () => {
  await inTempDir(async (dataDir) => {
    const store = await openEmbeddedStore({ dataDir });
    try {
      await openEmbeddedStore({ dataDir });
      assert.unreachable('second open should fail');
    } catch (err) {
      assert.instance(err, StoreUnavailableError);
    }
    await store.close();
    await store.close(); // idempotent
    const again = await openEmbeddedStore({ dataDir });
    await again.ping();
    await again.close();
    try {
      await again.ping();
      assert.unreachable('ping after close should fail');
    } catch (err) {
      assert.instance(err, StoreUnavailableError);
    }
  });
});

embedded('close waits for writes that are still queued', async () => {
  await inTempDir(async (dataDir) => {
    let store = await openEmbeddedStore({ dataDir });
    const c = store.collection<Doc & { n: number }>('pending');
    const writes = Array.from({ length: 30 }, (_, i) => c.insertOne({ _id: `d${i}`, n: i }));
    await store.close(); // not awaiting the inserts first
    // close() resolved, so every queued insert is already on disk
    assert.is(await lineCount(join(dataDir, 'store', 'pending.db')), 30);
    await Promise.all(writes);
    store = await openEmbeddedStore({ dataDir });
    assert.is(await store.collection('pending').count(), 30);
    await store.close();
  });
});

embedded('bulkUpdate: a refused field name fails that op only, and gathered writes survive a reopen', async () => {
  await inTempDir(async (dataDir) => {
    let store = await openEmbeddedStore({ dataDir });
    const c = store.collection<Doc & { n?: number }>('batched');
    await c.insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: `d${i}`, n: i })));
    const err = await rejectsBulk(
      c.bulkUpdate([
        { filter: { _id: 'd0' }, update: { $set: { bad: { $x: 1 } } } },
        ...Array.from({ length: 50 }, (_, i) => ({ filter: { _id: `d${i}` }, update: { $inc: { n: 1000 } } })),
        { filter: { _id: 'new' }, update: { $set: { n: -1 } }, upsert: true },
      ]),
      InvalidQueryError,
    );
    assert.equal(err.failures.map((f) => f.index), [0]);
    await store.close();
    store = await openEmbeddedStore({ dataDir });
    const docs = await store.collection<Doc & { n: number; bad?: unknown }>('batched').find({}, { sort: { n: 1 } });
    assert.is(docs.length, 51);
    assert.equal(docs[0], { _id: 'new', n: -1 });
    assert.equal(docs.slice(1).map((d) => d.n), Array.from({ length: 50 }, (_, i) => i + 1000));
    assert.ok(docs.every((d) => d.bad === undefined));
    await store.close();
  });
});

embedded('bulkUpdate by _id merges changes into the stored document in place when no indexed field moves', async () => {
  await inTempDir(async (dataDir) => {
    type Usage = Doc & { owner: string; note?: string; total: { n: number }; days: Record<string, { n: number }>; tags: string[]; seen?: string };
    let store = await openEmbeddedStore({ dataDir });
    const c = store.collection<Usage>('usage');
    await c.createIndex({ fields: { owner: 1 }, unique: true });
    await c.insertMany([
      { _id: 'a', owner: 'oa', note: 'x', total: { n: 1 }, days: { d1: { n: 1 } }, tags: ['t'] },
      { _id: 'b', owner: 'ob', note: 'x', total: { n: 1 }, days: { d1: { n: 1 } }, tags: ['t'] },
      { _id: 'c', owner: 'oc', note: 'x', total: { n: 1 }, days: { d1: { n: 1 } }, tags: ['t'] },
      { _id: 'd', owner: 'od', note: 'x', total: { n: 1 }, days: { d1: { n: 1 } }, tags: ['t'] },
    ]);
    // The stored objects, to tell a merge (same object) from a replacement (a new one).
    const ds = await (c as unknown as { loaded: Promise<{ getAllData(): Usage[] }> }).loaded;
    const stored = (id: string) => ds.getAllData().find((d) => d._id === id)!;
    const before = { a: stored('a'), aDays: stored('a').days, aTags: stored('a').tags, b: stored('b'), c: stored('c'), d: stored('d') };
    const copyOfA = await c.findById('a');

    await rejectsBulk(
      c.bulkUpdate([
        // in place: nested $inc, a new nested key, a new top-level key
        { filter: { _id: 'a' }, update: { $inc: { 'total.n': 5, 'days.d2.n': 2 }, $set: { seen: 'now' } } },
        // an indexed field changes: replaced
        { filter: { _id: 'b' }, update: { $set: { owner: 'ob2' } } },
        // a field removed: replaced
        { filter: { _id: 'c' }, update: { $unset: { note: '' } } },
        // refused by the unique index (another replacement): fails alone
        { filter: { _id: 'd' }, update: { $set: { owner: 'oa' } } },
      ]),
      DuplicateKeyError,
    );

    assert.ok(stored('a') === before.a, 'a is merged into the stored object');
    assert.ok(stored('a').days === before.aDays && stored('a').tags === before.aTags, 'unchanged parts are kept');
    assert.ok(stored('b') !== before.b && stored('c') !== before.c, 'b and c are replaced');
    assert.ok(stored('d') === before.d, 'd is untouched');
    assert.equal(copyOfA, { _id: 'a', owner: 'oa', note: 'x', total: { n: 1 }, days: { d1: { n: 1 } }, tags: ['t'] }, 'a copy read before is its own');

    const expected = {
      a: { _id: 'a', owner: 'oa', note: 'x', total: { n: 6 }, days: { d1: { n: 1 }, d2: { n: 2 } }, tags: ['t'], seen: 'now' },
      b: { _id: 'b', owner: 'ob2', note: 'x', total: { n: 1 }, days: { d1: { n: 1 } }, tags: ['t'] },
      c: { _id: 'c', owner: 'oc', total: { n: 1 }, days: { d1: { n: 1 } }, tags: ['t'] },
      d: { _id: 'd', owner: 'od', note: 'x', total: { n: 1 }, days: { d1: { n: 1 } }, tags: ['t'] },
    };
    const check = async (col: typeof c, when: string) => {
      for (const [id, doc] of Object.entries(expected)) {
        const got = await col.findById(id);
        assert.equal(got, doc, `${id} ${when}`);
        assert.equal(Object.keys(got!), Object.keys(doc), `${id}: field order ${when}`);
      }
      assert.equal((await col.find({ owner: 'oa' })).map((d) => d._id), ['a'], `index on owner ${when}`);
      assert.equal((await col.find({ owner: 'ob' })).length, 0, `old key of b ${when}`);
      assert.equal((await col.find({ owner: 'ob2' })).map((d) => d._id), ['b'], `new key of b ${when}`);
      assert.equal((await col.find({ 'total.n': { $gt: 5 } })).map((d) => d._id), ['a'], `query on a merged field ${when}`);
    };
    await check(c, 'in memory');
    // A second merge into the same document keeps working on the merged object.
    await c.bulkUpdate([{ filter: { _id: 'a' }, update: { $inc: { 'days.d2.n': 1 } } }]);
    expected.a.days.d2.n = 3;
    assert.ok(stored('a') === before.a);
    await check(c, 'after a second merge');

    await store.close();
    store = await openEmbeddedStore({ dataDir });
    await check(store.collection<Usage>('usage'), 'after a reopen');
    await store.close();
  });
});

embedded('an update that only sets or increments existing scalar fields is applied to the stored document in place, all steps or none', async () => {
  type Row = Doc & { owner: string; seen: string | null; total: { n: number }; days: Record<string, { n: number }>; tags: string[] };
  const row = (): Row => ({ _id: 'r', owner: 'o', seen: null, total: { n: 1 }, days: { d1: { n: 1 } }, tags: ['t'] });
  const run = (doc: Row, update: object, indexed: string[] = []) => updateScalarsInPlace(doc as unknown as Doc & Record<string, unknown>, update, indexed);

  const doc = row();
  const total = doc.total;
  assert.is(run(doc, { $inc: { 'total.n': 2, 'days.d1.n': 1 }, $set: { seen: 'now' } }), true);
  assert.equal(doc, { _id: 'r', owner: 'o', seen: 'now', total: { n: 3 }, days: { d1: { n: 2 } }, tags: ['t'] });
  assert.ok(doc.total === total, 'the nested object itself changed');
  assert.is(run(doc, { $set: { seen: 'now', 'total.n': 3 } }), false, 'equal values: nothing changed');
  assert.is(run(doc, { $set: { owner: 'o2' } }, ['own', 'owner.x.y', 'total.m']), undefined, 'a field inside the path is indexed');
  assert.is(run(doc, { $set: { seen: 'again' } }, ['see', 'seenAt', 'total.n']), true, 'indexed fields that only share a prefix');
  // Anything else is left to the general path, and nothing is applied: a new field, an object or
  // array value, an indexed field, _id, another operator, a non-number to increment, a path through
  // an array.
  const refused: Array<[object, string[]?]> = [
    [{ $inc: { 'total.n': 1, 'days.d2.n': 1 } }],
    [{ $inc: { 'total.n': 1 }, $set: { extra: 1 } }],
    [{ $inc: { 'days.d1.n': 1 }, $set: { total: { n: 9 } } }],
    [{ $inc: { 'total.n': 1 }, $set: { seen: ['x'] } }],
    [{ $inc: { 'total.n': 1 }, $set: { owner: 'p' } }, ['owner']],
    [{ $inc: { 'total.n': 1 } }, ['total']],
    [{ $set: { seen: 'x' } }, ['seen.deep']],
    [{ $set: { _id: 'r', seen: 'x' } }],
    [{ $inc: { 'total.n': 1 }, $unset: { seen: '' } }],
    [{ $inc: { 'total.n': 1, seen: 1 } }],
    [{ $inc: { 'total.n': 1 }, $set: { 'tags.0': 'u' } }],
    [{ $inc: { 'total.n': 1 }, $set: { tags: 'u' } }],
    // It works from the update as given, so whatever the general path would refuse goes there.
    [{ $set: { 'total..n': 1 } }],
    [{ $set: { 'total.$': 1 } }],
    [{ $set: { 'total.n': 1 }, $inc: { 'total.n': 1 } }],
    [{ $set: { total: 1, 'total.n': 1 } }],
    [{ $set: { seen: 'x' }, $max: { 'total.n': 9 } }],
    [{ $set: { seen: 'x' }, other: 1 }],
    [{ $set: { seen: undefined } }],
    [{ $set: { seen: new Date(0) } }],
    [{ $set: {} }],
    [{}],
  ];
  for (const [update, indexed] of refused) {
    const before = JSON.stringify(doc);
    assert.is(run(doc, update, indexed), undefined, JSON.stringify(update));
    assert.is(JSON.stringify(doc), before, `untouched by ${JSON.stringify(update)}`);
  }

  // Through bulkUpdate: counts, a copy read before, the index, errors, and the datafile.
  await inTempDir(async (dataDir) => {
    let store = await openEmbeddedStore({ dataDir });
    let c = store.collection<Row>('rows');
    await c.createIndex({ fields: { owner: 1 }, unique: true });
    await c.insertMany([row(), { ...row(), _id: 's', owner: 'p' }]);
    const copy = await c.findById('r');
    const result = await c.bulkUpdate([
      { filter: { _id: 'r' }, update: { $inc: { 'total.n': 4 }, $set: { seen: 'later' } } },
      { filter: { _id: 's' }, update: { $set: { seen: null } } }, // unchanged
      { filter: { _id: 's' }, update: { $set: { owner: 'q' } } }, // indexed: general path
    ]);
    assert.equal(result, { matched: 3, modified: 2, upserted: 0 });
    assert.equal(copy, row(), 'a copy read before is its own');
    await rejectsBulk(c.bulkUpdate([{ filter: { _id: 'r' }, update: { $inc: { seen: 1 } } }]), InvalidQueryError);
    const conflict = await rejectsBulk(c.bulkUpdate([{ filter: { _id: 'r' }, update: { $inc: { 'total.n': 1 }, $set: { 'total.n': 1 } } }]), InvalidQueryError);
    assert.match(conflict.first.message, /conflict/);
    await rejectsBulk(c.bulkUpdate([{ filter: { _id: 'r' }, update: { $set: { 'total..n': 1 } } }]), InvalidQueryError);
    const check = async (when: string) => {
      assert.equal(await c.findById('r'), { ...row(), seen: 'later', total: { n: 5 } }, when);
      assert.equal((await c.find({ owner: 'q' })).map((d) => d._id), ['s'], `index ${when}`);
      assert.equal(await c.find({ owner: 'p' }), [], `old key ${when}`);
    };
    await check('in memory');
    await store.close();
    store = await openEmbeddedStore({ dataDir });
    c = store.collection<Row>('rows');
    await check('after a reopen');
    await store.close();
  });
});

embedded('datafile lines: plain JSON for documents without dates, nedb\'s date form for the others; both read back after a reopen', async () => {
  await inTempDir(async (dataDir) => {
    let store = await openEmbeddedStore({ dataDir });
    const c = store.collection<Doc & Record<string, unknown>>('lines');
    const at = new Date('2026-03-04T05:06:07.089Z');
    const plain = { _id: 'plain', s: 'x "quoted" \u00e9', n: 1.5, list: [1, null, { deep: true }], nested: { a: null } };
    await c.insertMany([plain, { _id: 'dated', at, list: [{ when: at }] }]);
    await c.bulkUpdate([{ filter: { _id: 'plain' }, update: { $set: { more: 'y' } } }]);
    // One write larger than the append buffer, of multi-byte text (the buffer grows to fit).
    const big = Array.from({ length: 60 }, (_, i) => ({ _id: `big${i}`, text: `é€𝄞 ${i} `.repeat(400) }));
    await c.insertMany(big);
    await store.close();
    const lines = (await readFile(join(dataDir, 'store', 'lines.db'), 'utf8')).split('\n').filter((l) => l.trim() !== '' && !l.includes('$$indexCreated'));
    assert.ok(lines.includes(JSON.stringify(plain)), 'a document without dates is its JSON text');
    assert.ok(lines.includes(JSON.stringify({ ...plain, more: 'y' })), 'and so is its update');
    assert.ok(lines.some((l) => l.includes('"$$date":' + at.getTime())), 'a date is written in nedb\'s form');
    store = await openEmbeddedStore({ dataDir });
    const again = store.collection<Doc & Record<string, unknown>>('lines');
    assert.equal(await again.findById('plain'), { ...plain, more: 'y' });
    const dated = (await again.findById('dated'))!;
    assert.instance(dated.at, Date);
    assert.is((dated.at as Date).getTime(), at.getTime());
    assert.is(((dated.list as Array<{ when: Date }>)[0]!.when).getTime(), at.getTime());
    assert.equal(await again.find({ _id: { $regex: '^big' } }, { sort: { _id: 1 } }), [...big].sort((a, b) => a._id.localeCompare(b._id)));
    await store.close();
  });
});

embedded('invalid collection names and field names are rejected', async () => {
  await inTempDir(async (dataDir) => {
    const store = await openEmbeddedStore({ dataDir });
    for (const name of ['../escape', 'a/b', '', '.hidden']) {
      try {
        store.collection(name);
        assert.unreachable(`collection name ${JSON.stringify(name)} should be rejected`);
      } catch (err) {
        assert.instance(err, InvalidQueryError);
      }
    }
    try {
      await store.collection('fields').insertOne({ _id: 'x', ['a.b']: 1 } as Doc);
      assert.unreachable('dotted field name should be rejected');
    } catch (err) {
      assert.instance(err, InvalidQueryError);
    }
    try {
      await store.collection('fields').insertMany([{ _id: 'ok' }, { _id: 'bad', nested: { $x: 1 } }] as Doc[]);
      assert.unreachable('a "$" field name should be rejected');
    } catch (err) {
      assert.instance(err, InvalidQueryError);
    }
    assert.is(await store.collection('fields').count(), 0, 'a refused batch inserts nothing');
    await store.collection<Doc & { n: number }>('fields').insertMany([{ _id: 'a', n: 1 }, { _id: 'b', n: 2 }]);
    assert.equal(await store.collection('fields').find({}, { sort: { _id: 1 } }), [{ _id: 'a', n: 1 }, { _id: 'b', n: 2 }]);
    await store.close();
  });
});

/** How many string objects with exactly these (latin1) bytes as content the heap holds (from a heap snapshot). */
async function heapCopies(bytes: Buffer): Promise<number> {
  let text = '';
  for await (const chunk of getHeapSnapshot()) text += chunk;
  const content = bytes.toString('latin1'); // made after the snapshot, so not in it
  const snap = JSON.parse(text) as { snapshot: { meta: { node_fields: string[]; node_types: [string[]] } }; nodes: number[]; strings: string[] };
  const { node_fields: fields, node_types: [types] } = snap.snapshot.meta;
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const stringType = types.indexOf('string');
  let copies = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    if (snap.nodes[i + typeAt] === stringType && snap.strings[snap.nodes[i + nameAt]!] === content) copies++;
  }
  return copies;
}

embedded('stored identifiers and timestamps are kept once, whether loaded from the datafile or written', async () => {
  await inTempDir(async (dataDir) => {
    // The test keeps the values as bytes: every string it makes is a fresh copy of its own.
    const did = Buffer.from(`did:key:z6Mk${nanoid(44)}`);
    const at = Buffer.from(new Date(Date.UTC(2031, 0, 2, 3, 4, 5, 6)).toISOString());
    const fresh = (b: Buffer) => b.toString('latin1');
    let store = await openEmbeddedStore({ dataDir });
    type Held = Doc & { owner: string; seenAt: string; tags: string[]; log?: Array<{ by: string; at: string }> };
    let c = store.collection<Held>('held');
    for (let i = 0; i < 40; i++) await c.insertOne({ _id: `h${i}`, owner: fresh(did), seenAt: fresh(at), tags: [fresh(did)] });
    for (let i = 0; i < 40; i += 2) await c.updateOne({ _id: `h${i}` }, { $set: { seenAt: fresh(at) }, $push: { log: { by: fresh(did), at: fresh(at) } } });
    await c.bulkUpdate([{ filter: { owner: fresh(did), _id: 'new' }, update: { $set: { seenAt: fresh(at) } }, upsert: true }]);
    await c.replaceOne({ _id: 'h1' }, { _id: 'h1', owner: fresh(did), seenAt: fresh(at), tags: [] });
    assert.is(await c.count({ owner: fresh(did) }), 41);
    assert.is(await heapCopies(did), 1, 'written: one copy of the DID');
    assert.is(await heapCopies(at), 1, 'written: one copy of the timestamp');
    await store.close();

    store = await openEmbeddedStore({ dataDir });
    c = store.collection<Held>('held');
    assert.is(await c.count({ owner: fresh(did) }), 41); // loads the datafile: 101 lines holding the DID
    assert.is(await heapCopies(did), 1, 'loaded: one copy of the DID');
    assert.is(await heapCopies(at), 1, 'loaded: one copy of the timestamp');
    assert.is((await c.findById('h2'))?.log?.[0]?.by, fresh(did));
    await store.close();
  });
});

embedded('openStore picks the embedded backend without a MongoDB URI', async () => {
  await inTempDir(async (dataDir) => {
    const store = await openStore({ dataDir, mongodbUri: '' });
    assert.is(store.kind, 'embedded');
    await store.close();
  });
});

embedded.run();

// -- instrumentation --------------------------------------------------------------------------------

const instrumented = suite('instrumentStore');

instrumented('times every collection call, reports failures, caches wrappers', async () => {
  await inTempDir(async (dataDir) => {
    const calls: Array<{ collection: string; op: string; seconds: number; ok: boolean }> = [];
    const made: string[] = [];
    const store = instrumentStore(await openEmbeddedStore({ dataDir }), (collection, op) => {
      made.push(`${collection}.${op}`);
      return (seconds, ok) => calls.push({ collection, op, seconds, ok });
    });
    assert.is(store.kind, 'embedded');
    const c = store.collection<Doc & { n?: number }>('things');
    assert.is(store.collection('things'), c, 'wrapper is cached');
    assert.is(c.name, 'things');
    await c.insertOne({ _id: 'a', n: 1 });
    assert.equal(await c.findById('a'), { _id: 'a', n: 1 });
    try {
      await c.insertOne({ _id: 'a' });
    } catch (err) {
      assert.instance(err, DuplicateKeyError);
    }
    await c.updateOne({ _id: 'a' }, { $inc: { n: 1 } });
    assert.equal(
      calls.map((x) => `${x.collection}.${x.op}:${x.ok}`),
      ['things.insertOne:true', 'things.findById:true', 'things.insertOne:false', 'things.updateOne:true'],
    );
    assert.ok(calls.every((x) => x.seconds >= 0 && x.seconds < 10));
    // One recorder per collection and method, made when the collection is first wrapped.
    assert.is(made.length, new Set(made).size);
    assert.ok(made.includes('things.findById') && made.includes('things.bulkUpdate'));
    store.collection('things');
    assert.is(made.filter((m) => m.startsWith('things.')).length, made.length);
    await store.ping();
    await store.close();
  });
});

instrumented('a throwing observer or recorder does not break store calls', async () => {
  await inTempDir(async (dataDir) => {
    const inner = await openEmbeddedStore({ dataDir });
    const store = instrumentStore(inner, () => {
      throw new Error('observer broke');
    });
    await store.collection('x').insertOne({ _id: '1' });
    assert.is(await store.collection('x').count(), 1);
    const store2 = instrumentStore(inner, () => () => {
      throw new Error('recorder broke');
    });
    await store2.collection('x').insertOne({ _id: '2' });
    assert.is(await store2.collection('x').count(), 2);
    await store.close();
  });
});

instrumented('a method that throws at once rejects, and is reported as a failure', async () => {
  await inTempDir(async (dataDir) => {
    const inner = await openEmbeddedStore({ dataDir });
    const outcomes: boolean[] = [];
    const broken = instrumentStore(
      {
        kind: inner.kind,
        collection: <T extends Doc>(name: string) =>
          ({
            ...inner.collection<T>(name),
            name,
            count: () => {
              throw new Error('thrown synchronously');
            },
          }) as never,
        ping: () => inner.ping(),
        close: () => inner.close(),
      },
      () => (_seconds, ok) => outcomes.push(ok),
    );
    const p = broken.collection('y').count();
    assert.instance(p, Promise);
    const err = await p.then(
      () => null,
      (e: unknown) => e,
    );
    assert.match(String(err), /thrown synchronously/);
    assert.equal(outcomes, [false]);
    await inner.close();
  });
});

instrumented.run();

// -- MongoDB pieces that need no server ---------------------------------------------------------------

const mongoOffline = suite('mongo backend (no server needed)');

mongoOffline('parseMongoUri reads the database and option names', () => {
  assert.equal(parseMongoUri('mongodb://localhost:27017/fleet?maxPoolSize=5&w=majority'), {
    dbName: 'fleet',
    optionNames: new Set(['maxpoolsize', 'w']),
  });
  assert.equal(parseMongoUri('mongodb+srv://u:p%40ss@cluster.example.net/?retryWrites=true'), {
    dbName: undefined,
    optionNames: new Set(['retrywrites']),
  });
  assert.equal(parseMongoUri('mongodb://h1:27017,h2:27017/my%2Ddb'), { dbName: 'my-db', optionNames: new Set() });
  assert.equal(parseMongoUri('mongodb://localhost'), { dbName: undefined, optionNames: new Set() });
});

mongoOffline('client options keep URI settings and add defaults otherwise', () => {
  const fromUri = clientOptions('mongodb://localhost/db?maxPoolSize=7&appName=x');
  assert.is(fromUri.maxPoolSize, undefined, 'the URI value is left to the driver');
  assert.is(fromUri.appName, undefined);
  assert.is(fromUri.ignoreUndefined, true);
  const defaults = clientOptions('mongodb://localhost/db');
  assert.is(defaults.maxPoolSize, 50);
  assert.is(defaults.appName, 'steward');
  // Operations wait out an election; writes are majority-acknowledged and retried after a failover.
  assert.is(defaults.serverSelectionTimeoutMS, 30_000);
  assert.ok(defaults.serverSelectionTimeoutMS! > STARTUP_TIMEOUT_MS && STARTUP_TIMEOUT_MS > PING_TIMEOUT_MS);
  assert.is(defaults.retryWrites, true);
  assert.is(defaults.retryReads, true);
  assert.is(defaults.w, 'majority');
  // A refused connection (a restart) is retried with back-off long enough to outlast it.
  assert.is(defaults.maxAdaptiveRetries, 8);
  const own = clientOptions('mongodb://localhost/db?w=1&retryWrites=false&serverSelectionTimeoutMS=5000&maxAdaptiveRetries=1');
  assert.is(own.maxAdaptiveRetries, undefined);
  assert.is(own.w, undefined, 'the URI decides');
  assert.is(own.retryWrites, undefined);
  assert.is(own.serverSelectionTimeoutMS, undefined);
  // The driver takes them.
  const c = new MongoClient('mongodb://localhost/db', defaults);
  assert.is(c.options.serverSelectionTimeoutMS, 30_000);
  assert.equal({ ...c.options.writeConcern }, { w: 'majority' });
  assert.is(c.options.retryWrites, true);
  assert.is(c.options.maxAdaptiveRetries, 8);
});

mongoOffline('in a cluster the driver waits for a server at most a renewal round, below the lease; the URI still decides', () => {
  const leaseMs = 15_000;
  const cluster = clientOptions('mongodb://localhost/db', { leaseMs });
  assert.is(cluster.serverSelectionTimeoutMS, leaseMs / 3);
  assert.ok(cluster.connectTimeoutMS! <= leaseMs / 3);
  assert.is(new MongoClient('mongodb://localhost/db', cluster).options.serverSelectionTimeoutMS, leaseMs / 3, 'the driver takes it');
  assert.is(cluster.w, 'majority', 'the other defaults stay');
  assert.is(cluster.maxAdaptiveRetries, 3, 'refused-connection retries that end within a renewal round');
  assert.is(clientOptions('mongodb://localhost/db?serverSelectionTimeoutMS=2000', { leaseMs }).serverSelectionTimeoutMS, undefined);
});

mongoOffline('documents too large for the store map to DocumentTooLargeError, however the driver or the server says it', () => {
  const cases: unknown[] = [
    new MongoServerError({ code: 10334, errmsg: 'BSONObj size: 16912181 (0x1020F35) is invalid. Size must be between 0 and 16793600(16MB)' }),
    new MongoServerError({ code: 2, errmsg: 'object to insert too large. size in bytes: 16777250, max size: 16777216' }),
    new MongoServerError({ code: 17419, errmsg: 'Resulting document after update is larger than 16777216' }),
    new MongoInvalidArgumentError('Document is larger than the maximum size 16777216'),
    (() => {
      try {
        BSON.serialize({ s: 'x'.repeat(17.5 * 1024 * 1024), t: 1 });
      } catch (err) {
        return err;
      }
      return new Error('BSON encoded a document over its buffer');
    })(),
  ];
  for (const err of cases) {
    const mapped = mapMongoError(err, 'actor_snapshots');
    assert.instance(mapped, DocumentTooLargeError, String(err));
    assert.is((mapped as DocumentTooLargeError).collection, 'actor_snapshots');
  }
  // Other BadValue errors stay what they were.
  assert.instance(mapMongoError(new MongoServerError({ code: 2, errmsg: 'unknown operator: $bogus' })), InvalidQueryError);
  const other = new RangeError('Maximum call stack size exceeded');
  assert.is(mapMongoError(other), other);
});

mongoOffline('the embedded store measures documents as the MongoDB driver does', () => {
  const docs: object[] = [
    {},
    { _id: 'a' },
    { _id: 'x', s: 'héllo 𝄞', n: 1, big: 2 ** 40, neg: -5, f: 1.5, z: -0, t: true, nul: null, u: undefined, d: new Date(5) },
    { _id: 'n', nested: { list: [1, 'two', null, undefined, { deep: [[]] }], e: {} }, 'k é': 'v' },
    { _id: 'snap', snapshot: JSON.stringify({ value: 'running', context: { steps: Array.from({ length: 50 }, (_, i) => ({ i, out: 'x'.repeat(i * 7) })) } }) },
  ];
  for (const doc of docs) assert.is(bsonDocumentSize(doc), BSON.calculateObjectSize(doc, { ignoreUndefined: true }), JSON.stringify(doc));
});

mongoOffline('redactUri hides credentials', () => {
  assert.is(redactUri('mongodb://user:secret@db.example:27017/x'), 'mongodb://***@db.example:27017/x');
  assert.is(redactUri('mongodb://db.example/x'), 'mongodb://db.example/x');
});

mongoOffline('server errors map to Store errors', () => {
  const dup = mapMongoError(
    new MongoServerError({
      code: 11000,
      errmsg: 'E11000 duplicate key error collection: steward.users index: email_unique dup key: { email: "a@x" }',
    }),
    'users',
  );
  assert.instance(dup, DuplicateKeyError);
  assert.is((dup as DuplicateKeyError).index, 'email_unique');
  assert.is((dup as DuplicateKeyError).collection, 'users');
  assert.instance(mapMongoError(new MongoServerError({ code: 51091, errmsg: 'Regular expression is invalid' })), InvalidQueryError);
  assert.instance(mapMongoError(new MongoServerError({ code: 2, errmsg: 'unknown operator: $bogus' })), InvalidQueryError);
  assert.instance(mapMongoError(new MongoServerError({ code: 91, errmsg: 'shutdown in progress' })), StoreUnavailableError);
  const plain = new TypeError('not a driver error');
  assert.is(mapMongoError(plain), plain);
});

mongoOffline('an unreachable server fails to open with StoreUnavailableError, without leaking credentials', async () => {
  const started = Date.now();
  try {
    await openMongoStore({ uri: 'mongodb://user:secret@127.0.0.1:1/x?serverSelectionTimeoutMS=300&connectTimeoutMS=300' });
    assert.unreachable('open should fail');
  } catch (err) {
    assert.instance(err, StoreUnavailableError);
    assert.not.match((err as Error).message, 'secret');
    assert.match((err as Error).message, '127.0.0.1:1');
  }
  assert.ok(Date.now() - started < 5000, 'fails fast');
});

/**
 * A stand-in for a driver collection that answers bulkWrite and updateOne as the driver does
 * against a server (ordered: it stops at the first refused op and reports it by its index in the
 * call, with what the ops before it did), over documents in memory. An op setting `refuse: <code>`
 * is refused by the server with that code; one setting `unbuildable` is refused by the driver
 * while it builds the batch, before anything is sent; `network` fails the whole call.
 */
function scriptedDriver() {
  const docs = new Map<string, Record<string, unknown>>();
  const calls: Array<{ method: string; ids: string[] }> = [];
  type Model = { updateOne: { filter: { _id: string }; update: { $set?: Record<string, unknown>; $inc?: Record<string, number> }; upsert?: boolean } };
  const apply = (m: Model['updateOne'], counts: { matchedCount: number; modifiedCount: number; upsertedCount: number }) => {
    const doc = docs.get(m.filter._id);
    if (!doc && !m.upsert) return;
    const next = { ...(doc ?? { _id: m.filter._id }) };
    for (const [k, v] of Object.entries(m.update.$set ?? {})) next[k] = v;
    for (const [k, v] of Object.entries(m.update.$inc ?? {})) next[k] = ((next[k] as number) ?? 0) + v;
    docs.set(m.filter._id, next);
    if (doc) {
      counts.matchedCount++;
      counts.modifiedCount++;
    } else counts.upsertedCount++;
  };
  const driver = {
    async bulkWrite(models: Model[], options: { ordered?: boolean }) {
      calls.push({ method: 'bulkWrite', ids: models.map((m) => m.updateOne.filter._id) });
      assert.is(options.ordered, true, 'ops run in order');
      for (const m of models) {
        if (m.updateOne.update.$set?.unbuildable) throw new MongoInvalidArgumentError('Update document requires atomic operators');
      }
      const counts = { matchedCount: 0, modifiedCount: 0, upsertedCount: 0 };
      for (const [index, m] of models.entries()) {
        if (m.updateOne.update.$set?.network) {
          throw new MongoBulkWriteError(new MongoNetworkError('connection reset'), { ...counts, getWriteConcernError: () => undefined } as never);
        }
        const code = m.updateOne.update.$set?.refuse as number | undefined;
        if (code !== undefined) {
          const writeErrors = [{ index, code, errmsg: code === 11000 ? 'E11000 duplicate key error collection: t.c index: email_1 dup key: { email: "x" }' : 'refused' }];
          throw new MongoBulkWriteError({ message: writeErrors[0]!.errmsg, code, writeErrors } as never, { ...counts, getWriteConcernError: () => undefined } as never);
        }
        apply(m.updateOne, counts);
      }
      return counts;
    },
    async updateOne(filter: { _id: string }, update: Model['updateOne']['update'], options: { upsert?: boolean }) {
      calls.push({ method: 'updateOne', ids: [filter._id] });
      if (update.$set?.unbuildable) throw new MongoInvalidArgumentError('Update document requires atomic operators');
      const counts = { matchedCount: 0, modifiedCount: 0, upsertedCount: 0 };
      apply({ filter, update, upsert: options.upsert }, counts);
      return counts;
    },
  };
  return { docs, calls, collection: collectionOver<Doc & Record<string, unknown>>('scripted', driver as never) };
}

mongoOffline('bulkUpdate on MongoDB: ordered bulk writes that go on after the op the server refused, so it fails alone', async () => {
  const { docs, calls, collection } = scriptedDriver();
  const err = await rejectsBulk(
    collection.bulkUpdate([
      { filter: { _id: 'a' }, update: { $set: { n: 1 } }, upsert: true },
      { filter: { _id: 'b' }, update: { $set: { refuse: 11000 } }, upsert: true },
      { filter: { _id: 'a' }, update: { $inc: { n: 10 } } },
      { filter: { _id: 'c' }, update: { $set: { refuse: 14 } }, upsert: true },
      { filter: { _id: 'd' }, update: { $set: { n: 4 } }, upsert: true },
    ]),
    DuplicateKeyError,
  );
  assert.equal(
    err.failures.map((f) => [f.index, f.error.constructor.name]),
    [
      [1, 'DuplicateKeyError'],
      [3, 'InvalidQueryError'],
    ],
  );
  assert.is((err.first as DuplicateKeyError).index, 'email_1');
  assert.equal(err.result, { matched: 1, modified: 1, upserted: 2 });
  assert.equal(Object.fromEntries(docs), { a: { _id: 'a', n: 11 }, d: { _id: 'd', n: 4 } });
  assert.equal(calls, [
    { method: 'bulkWrite', ids: ['a', 'b', 'a', 'c', 'd'] },
    { method: 'bulkWrite', ids: ['a', 'c', 'd'] },
    { method: 'bulkWrite', ids: ['d'] },
  ]);
});

mongoOffline('bulkUpdate on MongoDB: an op too large is refused before anything is sent; one the driver cannot build sends the rest one at a time', async () => {
  const { docs, calls, collection } = scriptedDriver();
  const err = await rejects(
    collection.bulkUpdate([
      { filter: { _id: 'a' }, update: { $set: { n: 1 } }, upsert: true },
      { filter: { _id: 'b' }, update: { $set: { snapshot: 'x'.repeat(MAX_DOCUMENT_BYTES) } }, upsert: true },
      { filter: { _id: 'c' }, update: { $set: { unbuildable: true } }, upsert: true },
      { filter: { _id: 'a' }, update: { $inc: { n: 1 } } },
    ]),
    BulkUpdateError,
  );
  assert.equal(
    err.failures.map((f) => [f.index, f.error.constructor.name]),
    [
      [1, 'DocumentTooLargeError'],
      [2, 'InvalidQueryError'],
    ],
  );
  assert.ok((err.failures[0]!.error as DocumentTooLargeError).bytes! > MAX_DOCUMENT_BYTES);
  assert.equal(err.result, { matched: 1, modified: 1, upserted: 1 });
  assert.equal(Object.fromEntries(docs), { a: { _id: 'a', n: 2 } });
  assert.equal(calls.map((c) => c.method), ['bulkWrite', 'updateOne', 'updateOne', 'updateOne']);
  assert.equal(calls[0]!.ids, ['a', 'c', 'a'], 'the oversized op is never handed to the driver');
});

mongoOffline('bulkUpdate on MongoDB: a failure of the whole call (a dropped connection) is the store unavailable, not a per-op failure', async () => {
  const { collection } = scriptedDriver();
  await rejects(
    collection.bulkUpdate([
      { filter: { _id: 'a' }, update: { $set: { n: 1 } }, upsert: true },
      { filter: { _id: 'b' }, update: { $set: { network: true } }, upsert: true },
    ]),
    StoreUnavailableError,
  );
});

mongoOffline.run();
