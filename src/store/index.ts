/**
 * Store entry point: picks the backend from configuration and offers a timing wrapper for metrics.
 */
import type { BulkUpdateOp, Collection, Doc, Filter, FindOneAndUpdateOptions, FindOptions, IndexSpec, Store, Update, UpdateOptions } from './types.js';

export * from './types.js';

/**
 * MongoDB when a URI is configured, otherwise the embedded store under `dataDir`. Backends are
 * loaded on demand, so embedded deployments never load the MongoDB driver.
 */
export async function openStore(opts: { dataDir: string; mongodbUri?: string; mongodbDb?: string }): Promise<Store> {
  if (opts.mongodbUri) {
    const { openMongoStore } = await import('./mongo.js');
    return openMongoStore({ uri: opts.mongodbUri, dbName: opts.mongodbDb || undefined });
  }
  const { openEmbeddedStore } = await import('./embedded.js');
  return openEmbeddedStore({ dataDir: opts.dataDir });
}

/**
 * Makes the recorder of one collection method's calls: it receives each call's duration in
 * seconds and whether it succeeded. Asked once per collection and method, so a call records
 * without allocating anything for it (e.g. a series of a Prometheus histogram).
 */
export type StoreObserver = (collection: string, op: string) => (seconds: number, ok: boolean) => void;

/**
 * Wraps a store so every Collection method call reports its duration and outcome to the recorder
 * `observe` made for its collection and method. Everything else is forwarded unchanged. Wrapped
 * collections are cached per name.
 */
export function instrumentStore(store: Store, observe: StoreObserver): Store {
  const cache = new Map<string, Collection<Doc>>();
  return {
    get kind() {
      return store.kind;
    },
    collection<T extends Doc>(name: string): Collection<T> {
      let wrapped = cache.get(name);
      if (!wrapped) {
        wrapped = instrumentCollection(store.collection<Doc>(name), observe);
        cache.set(name, wrapped);
      }
      return wrapped as unknown as Collection<T>;
    },
    ping: () => store.ping(),
    close: () => store.close(),
  };
}

type Recorder = (seconds: number, ok: boolean) => void;

/** Reports a call's outcome; a failing recorder must never fail a store call. */
function report(record: Recorder, started: number, ok: boolean): void {
  try {
    record((performance.now() - started) / 1000, ok);
  } catch {
    // ignored
  }
}

/** Resolves as `call` does, once its duration and outcome are reported. */
async function timed<R>(record: Recorder, started: number, call: Promise<R>): Promise<R> {
  try {
    const result = await call;
    report(record, started, true);
    return result;
  } catch (err) {
    report(record, started, false);
    throw err;
  }
}

/** Runs a collection method, reporting to its recorder; a method that throws at once is reported and rejects. */
function run<R>(record: Recorder, call: () => Promise<R>): Promise<R> {
  const started = performance.now();
  let p: Promise<R>;
  try {
    p = call();
  } catch (err) {
    report(record, started, false);
    return Promise.reject(err);
  }
  return timed(record, started, p);
}

function instrumentCollection<T extends Doc>(inner: Collection<T>, observe: StoreObserver): Collection<T> {
  const name = inner.name;
  const r = (op: keyof Collection<T>): Recorder => {
    try {
      return observe(name, op);
    } catch {
      return () => undefined; // an observer that cannot make a recorder: nothing is reported
    }
  };
  const rec = {
    insertOne: r('insertOne'),
    insertMany: r('insertMany'),
    findOne: r('findOne'),
    findById: r('findById'),
    find: r('find'),
    count: r('count'),
    updateOne: r('updateOne'),
    updateMany: r('updateMany'),
    findOneAndUpdate: r('findOneAndUpdate'),
    replaceOne: r('replaceOne'),
    deleteOne: r('deleteOne'),
    deleteMany: r('deleteMany'),
    bulkUpdate: r('bulkUpdate'),
    distinct: r('distinct'),
    createIndex: r('createIndex'),
  };
  // Written out member by member so a method added to Collection fails to compile here.
  return {
    name,
    insertOne: (doc: T) => run(rec.insertOne, () => inner.insertOne(doc)),
    insertMany: (docs: T[]) => run(rec.insertMany, () => inner.insertMany(docs)),
    findOne: (filter: Filter, options?: FindOptions) => run(rec.findOne, () => inner.findOne(filter, options)),
    findById: (id: string) => run(rec.findById, () => inner.findById(id)),
    find: (filter: Filter, options?: FindOptions) => run(rec.find, () => inner.find(filter, options)),
    count: (filter?: Filter) => run(rec.count, () => inner.count(filter)),
    updateOne: (filter: Filter, update: Update, options?: UpdateOptions) => run(rec.updateOne, () => inner.updateOne(filter, update, options)),
    updateMany: (filter: Filter, update: Update) => run(rec.updateMany, () => inner.updateMany(filter, update)),
    findOneAndUpdate: (filter: Filter, update: Update, options?: FindOneAndUpdateOptions) =>
      run(rec.findOneAndUpdate, () => inner.findOneAndUpdate(filter, update, options)),
    replaceOne: (filter: Filter, doc: T, options?: UpdateOptions) => run(rec.replaceOne, () => inner.replaceOne(filter, doc, options)),
    deleteOne: (filter: Filter) => run(rec.deleteOne, () => inner.deleteOne(filter)),
    deleteMany: (filter: Filter) => run(rec.deleteMany, () => inner.deleteMany(filter)),
    bulkUpdate: (ops: BulkUpdateOp[]) => run(rec.bulkUpdate, () => inner.bulkUpdate(ops)),
    distinct: (field: string, filter?: Filter) => run(rec.distinct, () => inner.distinct(field, filter)),
    createIndex: (spec: IndexSpec) => run(rec.createIndex, () => inner.createIndex(spec)),
  };
}
