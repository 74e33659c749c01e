/**
 * The embedded store runs the filter and update operators the Store contract declares
 * (src/store/types.ts) and no others: anything else is refused as an InvalidQueryError, and a
 * refused update changes nothing.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openEmbeddedStore, type EmbeddedStoreHandle } from '../src/store/embedded/index.js';
import { InvalidQueryError, type Collection, type Doc, type Filter, type Update } from '../src/store/types.js';
import { rejects } from './store-contract.js';

type Row = Doc & { name: string; tags: string[]; items: Array<{ n: number }> };

const test = suite('embedded store: operators outside the contract');
let dataDir: string;
let store: EmbeddedStoreHandle;
let c: Collection<Row>;
const stored: Row = { _id: 'a', name: 'alpha', tags: ['x', 'y'], items: [{ n: 1 }, { n: 2 }] };

test.before(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'steward-store-ops-'));
  store = await openEmbeddedStore({ dataDir });
  c = store.collection<Row>('rows');
  await c.insertOne(stored);
});

test.after(async () => {
  await store.close();
  await rm(dataDir, { recursive: true, force: true });
});

const filters: Array<[string, Filter]> = [
  ['$nor', { $nor: [{ name: 'beta' }] }],
  ['$not', { name: { $not: { $regex: '^b' } } }],
  ['$size', { tags: { $size: 2 } }],
  ['a RegExp as a value', { name: /^al/ }],
  ['a RegExp in $in', { name: { $in: [/^al/] } }],
  ['a RegExp in $nin', { name: { $nin: [/^b/] } }],
  ['a RegExp as $regex', { name: { $regex: /^al/ } }],
  ['a RegExp in $all', { tags: { $all: [/x/] } }],
  ['$options other than "i"', { name: { $regex: '^al', $options: 'm' } }],
  ['$options "s"', { name: { $regex: '^al', $options: 's' } }],
  ['$elemMatch inside $all', { items: { $all: [{ $elemMatch: { n: 1 } }] } }],
];

for (const [what, filter] of filters) {
  test(`a filter with ${what} is refused`, async () => {
    await rejects(c.find(filter), InvalidQueryError, `find with ${what}`);
    await rejects(c.count(filter), InvalidQueryError, `count with ${what}`);
    await rejects(c.deleteMany(filter), InvalidQueryError, `deleteMany with ${what}`);
    assert.equal(await c.findById('a'), stored, 'nothing deleted');
  });
}

const updates: Array<[string, Update]> = [
  ['$push with $slice', { $push: { tags: { $each: ['z'], $slice: 2 } } }],
  ['$push with $position', { $push: { tags: { $each: ['z'], $position: 0 } } }],
  ['$push with $sort', { $push: { tags: { $each: ['z'], $sort: 1 } } }],
  ['$pull with a RegExp', { $pull: { tags: /x/ } }],
  ['$pull with a RegExp in $in', { $pull: { tags: { $in: [/x/] } } }],
];

for (const [what, update] of updates) {
  test(`an update with ${what} is refused and changes nothing`, async () => {
    await rejects(c.updateOne({ _id: 'a' }, update), InvalidQueryError, `updateOne with ${what}`);
    assert.equal(await c.findById('a'), stored);
  });
}

test('the declared forms beside them still work', async () => {
  const d = store.collection<Row>('declared');
  await d.insertOne(stored);
  assert.is(await d.count({ name: { $regex: '^AL', $options: 'i' } }), 1);
  assert.is(await d.count({ name: { $regex: '^al', $options: '' } }), 1);
  assert.is(await d.count({ items: { $elemMatch: { n: 2 } } }), 1);
  assert.is(await d.count({ tags: { $all: ['x', 'y'] } }), 1);
  await d.updateOne({ _id: 'a' }, { $push: { tags: { $each: ['z'] } } });
  await d.updateOne({ _id: 'a' }, { $pull: { tags: { $in: ['x'] } } });
  assert.equal((await d.findById('a'))?.tags, ['y', 'z']);
});

test.run();
