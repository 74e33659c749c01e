/**
 * A collection: the Collection contract over a nedb Datastore. Writes run one at a time under the
 * collection's mutex, so each read-modify-write is atomic; reads take no lock and see whole writes.
 */
import { nanoid } from 'nanoid';
import {
  DuplicateKeyError,
  InvalidQueryError,
  MAX_DOCUMENT_BYTES,
  StoreUnavailableError,
  type BulkUpdateOp,
  type Collection,
  type Doc,
  type Filter,
  type FindOneAndUpdateOptions,
  type FindOptions,
  type IndexSpec,
  type StoreError,
  type Update,
  type UpdateOptions,
  type UpdateResult,
} from '../types.js';
import { AppendLog } from './append-log.js';
import { bsonDocumentSize } from './bson-size.js';
import { bulkUpdateLocked } from './bulk-update.js';
import { insertPrepared, internals, nedbIndexes, openDatastore, scan, type NedbStore } from './datastore.js';
import { checkSize, defaultIndexName, failure, isUniqueViolation, writeError } from './errors.js';
import { collectEqualities, prepareQuery } from './filter.js';
import { collectValues, splitPath } from './paths.js';
import { compileProjection, compileSort, nonNegativeInteger, type SortFn } from './sort-projection.js';
import { applyUpdate, buildUpsertDoc, compileUpdate, prepareNewDoc, withIdFirst, type UpdatePlan } from './update.js';
import { cloneStored, cloneValue, compareValues, isPlainObject, typeRank, valuesEqual, type Obj, type StoredDoc } from './values.js';

/** What a collection uses of its store. */
export interface CollectionOwner {
  readonly compactMinBytes: number;
  /** Registers an operation so the store's close waits for it; refuses new ones once closing. */
  track<R>(fn: () => Promise<R>): Promise<R>;
}

/** A FIFO async mutex: `run` executes callbacks one at a time in call order. */
export class Mutex {
  private tail: Promise<unknown> = Promise.resolve();

  run<R>(fn: () => Promise<R>): Promise<R> {
    const result = this.tail.then(fn);
    this.tail = result.catch(() => undefined);
    return result;
  }

  idle(): Promise<unknown> {
    return this.tail;
  }
}

interface WriteOutcome {
  result: UpdateResult;
  before: StoredDoc | null;
  after: StoredDoc | null;
}

const NO_MATCH: UpdateResult = { matched: 0, modified: 0, upserted: 0 };

export class EmbeddedCollection<T extends Doc> implements Collection<T> {
  private readonly mutex = new Mutex();
  private readonly loaded: Promise<NedbStore>;
  private readonly log: AppendLog;
  /** Names given to createIndex, by nedb index key. */
  private readonly indexNames = new Map<string, string>();

  constructor(
    readonly name: string,
    private readonly filename: string,
    private readonly owner: CollectionOwner,
  ) {
    this.log = new AppendLog(filename, owner.compactMinBytes);
    this.loaded = openDatastore(filename, this.log);
    this.loaded.catch(() => undefined); // reported by whichever operation uses the collection
  }

  // -- reads ----------------------------------------------------------------------------------

  findOne(filter: Filter, options: FindOptions = {}): Promise<T | null> {
    return this.find(filter, { ...options, limit: 1 }).then((docs) => docs[0] ?? null);
  }

  /** Straight from nedb's `_id` index, not queued behind the appends of writes waiting in its executor. */
  findById(id: string): Promise<T | null> {
    if (typeof id !== 'string') return this.findOne({ _id: id });
    return this.read(async (ds) => {
      const doc = internals(ds).indexes._id.getMatching(id)[0];
      return doc ? (cloneValue(doc) as T) : null;
    });
  }

  find(filter: Filter, options: FindOptions = {}): Promise<T[]> {
    return this.read(async (ds) => {
      const query = prepareQuery(filter);
      const sort = compileSort(options.sort);
      const skip = nonNegativeInteger('skip', options.skip);
      const limit = nonNegativeInteger('limit', options.limit);
      const project = compileProjection(options.projection);
      const end = limit > 0 ? skip + limit : Infinity;
      let docs = scan(ds, query, sort ? Infinity : end);
      if (sort) docs = sort(docs);
      return docs.slice(skip, end).map((d) => project(d) as T);
    });
  }

  count(filter: Filter = {}): Promise<number> {
    return this.read(async (ds) => scan(ds, prepareQuery(filter)).length);
  }

  distinct(field: string, filter: Filter = {}): Promise<unknown[]> {
    return this.read(async (ds) => {
      const parts = splitPath(field);
      const query = prepareQuery(filter);
      const seen = new Map<string, unknown>();
      for (const doc of scan(ds, query)) {
        const raw: unknown[] = [];
        collectValues(doc, parts, 0, raw);
        for (const v of raw.flatMap((x) => (Array.isArray(x) ? x : [x]))) {
          if (v === undefined) continue;
          // typeRank + JSON identifies a value up to MongoDB equality (key order included).
          const key = `${typeRank(v)}:${JSON.stringify(v)}`;
          if (!seen.has(key)) seen.set(key, cloneValue(v));
        }
      }
      return [...seen.values()].sort(compareValues);
    });
  }

  // -- writes ---------------------------------------------------------------------------------

  insertOne(doc: T): Promise<T> {
    return this.write(async (ds) => {
      await this.insertLocked(ds, [prepareNewDoc(doc)]);
      return doc;
    });
  }

  insertMany(docs: T[]): Promise<void> {
    return this.write(async (ds) => {
      if (!Array.isArray(docs)) throw new InvalidQueryError('insertMany needs an array');
      if (docs.length > 0) await this.insertLocked(ds, docs.map(prepareNewDoc));
    });
  }

  updateOne(filter: Filter, update: Update, options: UpdateOptions = {}): Promise<UpdateResult> {
    return this.write(async (ds) => {
      const plan = compileUpdate(update);
      return (await this.updateLocked(ds, filter, plan, { upsert: Boolean(options.upsert), multi: false })).result;
    });
  }

  updateMany(filter: Filter, update: Update): Promise<UpdateResult> {
    return this.write(async (ds) => {
      const plan = compileUpdate(update);
      return (await this.updateLocked(ds, filter, plan, { upsert: false, multi: true })).result;
    });
  }

  findOneAndUpdate(filter: Filter, update: Update, options: FindOneAndUpdateOptions = {}): Promise<T | null> {
    return this.write(async (ds) => {
      const plan = compileUpdate(update);
      const sort = compileSort(options.sort);
      const outcome = await this.updateLocked(ds, filter, plan, { upsert: Boolean(options.upsert), multi: false, sort });
      const doc = options.returnDocument === 'before' ? outcome.before : outcome.after;
      return doc ? (cloneValue(doc) as T) : null;
    });
  }

  replaceOne(filter: Filter, doc: T, options: UpdateOptions = {}): Promise<UpdateResult> {
    return this.write(async (ds) => {
      if (!isPlainObject(doc)) throw new InvalidQueryError('replacement must be an object');
      if (Object.keys(doc).some((k) => k.startsWith('$'))) {
        throw new InvalidQueryError('replacement document must not contain update operators');
      }
      const replacement = cloneStored(doc) as Obj;
      const [target] = scan(ds, prepareQuery(filter), 1);
      if (target === undefined) {
        if (!options.upsert) return NO_MATCH;
        const pairs: Array<[string, unknown]> = [];
        collectEqualities(filter, pairs);
        const filterId = pairs.find(([path]) => path === '_id')?.[1];
        await this.insertLocked(ds, [withIdFirst(replacement, replacement._id ?? filterId ?? nanoid())]);
        return { matched: 0, modified: 0, upserted: 1 };
      }
      if (replacement._id !== undefined && !valuesEqual(replacement._id, target._id)) {
        throw new InvalidQueryError("the (immutable) field '_id' was found to have been altered");
      }
      const next = withIdFirst(replacement, target._id);
      if (valuesEqual(next, target)) return { matched: 1, modified: 0, upserted: 0 };
      checkSize(this.name, next);
      await this.replaceLocked(ds, target, next);
      return { matched: 1, modified: 1, upserted: 0 };
    });
  }

  deleteOne(filter: Filter): Promise<number> {
    return this.write((ds) => this.removeLocked(ds, filter, false));
  }

  deleteMany(filter: Filter): Promise<number> {
    return this.write((ds) => this.removeLocked(ds, filter, true));
  }

  /** In order, each op failing alone (see bulk-update.ts). */
  bulkUpdate(ops: BulkUpdateOp[]): Promise<UpdateResult> {
    return this.write((ds) => bulkUpdateLocked(this, ds, ops));
  }

  createIndex(spec: IndexSpec): Promise<void> {
    return this.write(async (ds) => {
      if (!isPlainObject(spec) || !isPlainObject(spec.fields)) throw new InvalidQueryError('index spec needs fields');
      const entries = Object.entries(spec.fields);
      if (entries.length === 0) throw new InvalidQueryError('index spec needs at least one field');
      for (const [field, dir] of entries) {
        splitPath(field);
        if (field.includes(',')) throw new InvalidQueryError(`index field "${field}" may not contain a comma`);
        if (dir !== 1 && dir !== -1) throw new InvalidQueryError(`index direction for "${field}" must be 1 or -1`);
      }
      const fields = entries.map(([f]) => f);
      const key = [...fields].sort().join(',');
      if (key === '_id') return; // always present and unique
      const name = spec.name ?? defaultIndexName(entries);
      const unique = Boolean(spec.unique);
      const sparse = Boolean(spec.sparse);
      for (const [otherKey, otherName] of this.indexNames) {
        if (otherName === name && otherKey !== key) throw new InvalidQueryError(`index name ${name} is already used for other fields`);
      }
      const existing = nedbIndexes(ds).find((d) => d.key === key);
      if (existing) {
        // MongoDB refuses to redefine an index with other options (IndexOptionsConflict).
        const knownName = this.indexNames.get(key);
        if (existing.unique !== unique || existing.sparse !== sparse || (knownName !== undefined && knownName !== name)) {
          throw new InvalidQueryError(`an index on ${key} already exists with different options`);
        }
        this.indexNames.set(key, name);
        return;
      }
      try {
        await ds.ensureIndexAsync({ fieldName: fields.length === 1 ? fields[0] : fields, unique, sparse });
      } catch (err) {
        if (isUniqueViolation(err)) throw new DuplicateKeyError(this.name, name, { cause: err });
        throw failure(this.name, err);
      }
      this.indexNames.set(key, name);
    });
  }

  // -- internals ------------------------------------------------------------------------------

  /** Resolves once no compaction of this collection is under way. */
  compactionIdle(): Promise<void> {
    return this.log.idle();
  }

  /** Rewrites the datafile now (Store.compact). */
  compactNow(): Promise<void> {
    return this.owner.track(async () => {
      await this.datastore();
      await this.log.compactNow();
    });
  }

  /** Waits for the collection's load, writes and compaction, then closes its datafile. */
  async settle(): Promise<void> {
    await this.loaded.catch(() => undefined);
    await this.mutex.idle();
    await this.log.idle();
    await this.log.close();
  }

  private async datastore(): Promise<NedbStore> {
    try {
      return await this.loaded;
    } catch (err) {
      throw new StoreUnavailableError(`cannot load collection ${this.name} from ${this.filename}: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  private read<R>(fn: (ds: NedbStore) => Promise<R>): Promise<R> {
    return this.owner.track(async () => fn(await this.datastore()));
  }

  private write<R>(fn: (ds: NedbStore) => Promise<R>): Promise<R> {
    return this.owner.track(async () => {
      const ds = await this.datastore();
      return this.mutex.run(() => fn(ds));
    });
  }

  // -- single writes, under the mutex (bulkUpdate falls back on them) --------------------------

  async updateLocked(
    ds: NedbStore,
    filter: Filter,
    plan: UpdatePlan,
    opts: { upsert: boolean; multi: boolean; sort?: SortFn },
  ): Promise<WriteOutcome> {
    let targets = scan(ds, prepareQuery(filter), opts.multi || opts.sort ? Infinity : 1);
    if (opts.sort) targets = opts.sort(targets).slice(0, 1);
    if (targets.length === 0) {
      if (!opts.upsert) return { result: NO_MATCH, before: null, after: null };
      const doc = buildUpsertDoc(filter, plan);
      await this.insertLocked(ds, [doc]);
      return { result: { matched: 0, modified: 0, upserted: 1 }, before: null, after: doc };
    }
    let modified = 0;
    let after: StoredDoc | null = null;
    for (const old of targets) {
      const next = applyUpdate(old, plan, false) as StoredDoc;
      if (!valuesEqual(old, next)) {
        checkSize(this.name, next);
        await this.replaceLocked(ds, old, next);
        modified++;
      }
      after ??= next;
    }
    return { result: { matched: targets.length, modified, upserted: 0 }, before: targets[0], after };
  }

  private async insertLocked(ds: NedbStore, docs: StoredDoc[]): Promise<void> {
    const tooLarge = docs.findIndex((doc) => bsonDocumentSize(doc) > MAX_DOCUMENT_BYTES);
    if (tooLarge >= 0) {
      // Like MongoDB's ordered insertMany: the documents before the offending one are inserted.
      if (tooLarge > 0) await this.insertLocked(ds, docs.slice(0, tooLarge));
      checkSize(this.name, docs[tooLarge]!);
    }
    try {
      // One nedb call (one append) for the whole batch; nedb rolls the batch back on a violation.
      await insertPrepared(ds, docs);
    } catch (err) {
      if (docs.length === 1 || !isUniqueViolation(err)) throw this.writeError(ds, err, docs[0], true);
      // Reproduce MongoDB's ordered insertMany: documents before the offending one stay inserted.
      for (const doc of docs) {
        try {
          await insertPrepared(ds, [doc]);
        } catch (inner) {
          throw this.writeError(ds, inner, doc, true);
        }
      }
    }
  }

  async replaceLocked(ds: NedbStore, old: StoredDoc, next: StoredDoc): Promise<void> {
    try {
      await ds.updateAsync({ _id: old._id }, next, {});
    } catch (err) {
      throw this.writeError(ds, err, next, false);
    }
  }

  private async removeLocked(ds: NedbStore, filter: Filter, multi: boolean): Promise<number> {
    const query = prepareQuery(filter);
    try {
      return await ds.removeAsync(
        {
          ...query.hints,
          $where(this: Obj) {
            return query.predicate(this);
          },
        },
        { multi },
      );
    } catch (err) {
      throw failure(this.name, err);
    }
  }

  /** The error of a failed write of `doc` (a unique index it violates named). */
  writeError(ds: NedbStore, err: unknown, doc: StoredDoc, inserting: boolean): StoreError {
    return writeError(ds, this.name, this.indexNames, err, doc, inserting);
  }

}
