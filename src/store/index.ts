/**
 * Store entry point: picks the backend from configuration and offers a timing wrapper for metrics.
 */
import type { BulkUpdateOp, Collection, Doc, Filter, FindOneAndUpdateOptions, FindOptions, IndexSpec, Store, Update, UpdateOptions } from './types.js';

export * from './types.js';

/**
 * MongoDB when a URI is configured, otherwise the embedded store under `dataDir`. Backends are
 * loaded on demand, so embedded deployments never load the MongoDB driver.
 */
export async function openStore(opts: {
  dataDir: string;
  mongodbUri?: string;
  mongodbDb?: string;
  compactMinBytes?: number;
  /** Cluster mode: the driver's timeouts are kept below the lease. */
  cluster?: { leaseMs: number };
}): Promise<Store> {
  if (opts.mongodbUri) {
    const { openMongoStore } = await import('./mongo.js');
    return openMongoStore({ uri: opts.mongodbUri, dbName: opts.mongodbDb || undefined, ...(opts.cluster ? { cluster: opts.cluster } : {}) });
  }
  const { openEmbeddedStore } = await import('./embedded/index.js');
  return openEmbeddedStore({ dataDir: opts.dataDir, compactMinBytes: opts.compactMinBytes });
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
    ...(store.time ? { time: () => store.time!() } : {}),
    ...(store.compact ? { compact: (name: string) => store.compact!(name) } : {}),
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
function run<A extends unknown[], R>(record: Recorder, method: (...args: A) => Promise<R>, args: A): Promise<R> {
  const started = performance.now();
  let p: Promise<R>;
  try {
    p = method(...args);
  } catch (err) {
    report(record, started, false);
    return Promise.reject(err);
  }
  return timed(record, started, p);
}

function instrumentCollection<T extends Doc>(inner: Collection<T>, observe: StoreObserver): Collection<T> {
  const name = inner.name;
  /** The method `op` of `inner`, reporting each call to the recorder made for it once, here. */
  const timedMethod = <A extends unknown[], R>(op: keyof Collection<T>, method: (...args: A) => Promise<R>): ((...args: A) => Promise<R>) => {
    let record: Recorder;
    try {
      record = observe(name, op);
    } catch {
      record = () => undefined; // an observer that cannot make a recorder: nothing is reported
    }
    return (...args) => run(record, method, args);
  };
  // Written out member by member so a method added to Collection fails to compile here.
  return {
    name,
    insertOne: timedMethod('insertOne', (doc: T) => inner.insertOne(doc)),
    insertMany: timedMethod('insertMany', (docs: T[]) => inner.insertMany(docs)),
    findOne: timedMethod('findOne', (filter: Filter, options?: FindOptions) => inner.findOne(filter, options)),
    findById: timedMethod('findById', (id: string) => inner.findById(id)),
    find: timedMethod('find', (filter: Filter, options?: FindOptions) => inner.find(filter, options)),
    count: timedMethod('count', (filter?: Filter) => inner.count(filter)),
    updateOne: timedMethod('updateOne', (filter: Filter, update: Update, options?: UpdateOptions) => inner.updateOne(filter, update, options)),
    updateMany: timedMethod('updateMany', (filter: Filter, update: Update) => inner.updateMany(filter, update)),
    findOneAndUpdate: timedMethod('findOneAndUpdate', (filter: Filter, update: Update, options?: FindOneAndUpdateOptions) =>
      inner.findOneAndUpdate(filter, update, options),
    ),
    replaceOne: timedMethod('replaceOne', (filter: Filter, doc: T, options?: UpdateOptions) => inner.replaceOne(filter, doc, options)),
    deleteOne: timedMethod('deleteOne', (filter: Filter) => inner.deleteOne(filter)),
    deleteMany: timedMethod('deleteMany', (filter: Filter) => inner.deleteMany(filter)),
    bulkUpdate: timedMethod('bulkUpdate', (ops: BulkUpdateOp[]) => inner.bulkUpdate(ops)),
    distinct: timedMethod('distinct', (field: string, filter?: Filter) => inner.distinct(field, filter)),
    createIndex: timedMethod('createIndex', (spec: IndexSpec) => inner.createIndex(spec)),
  };
}
