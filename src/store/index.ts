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

export type StoreObserver = (collection: string, op: string, seconds: number, ok: boolean) => void;

/**
 * Wraps a store so every Collection method call reports its collection, method name, duration
 * and outcome to `observe` (e.g. a Prometheus histogram). Everything else is forwarded unchanged.
 * Wrapped collections are cached per name.
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

function instrumentCollection<T extends Doc>(inner: Collection<T>, observe: StoreObserver): Collection<T> {
  const name = inner.name;
  const report = (op: string, started: number, ok: boolean) => {
    try {
      observe(name, op, (performance.now() - started) / 1000, ok);
    } catch {
      // A failing observer must never fail a store call.
    }
  };
  const timed = async <R>(op: string, call: () => Promise<R>): Promise<R> => {
    const started = performance.now();
    try {
      const result = await call();
      report(op, started, true);
      return result;
    } catch (err) {
      report(op, started, false);
      throw err;
    }
  };
  // Written out member by member so a method added to Collection fails to compile here.
  return {
    name,
    insertOne: (doc: T) => timed('insertOne', () => inner.insertOne(doc)),
    insertMany: (docs: T[]) => timed('insertMany', () => inner.insertMany(docs)),
    findOne: (filter: Filter, options?: FindOptions) => timed('findOne', () => inner.findOne(filter, options)),
    findById: (id: string) => timed('findById', () => inner.findById(id)),
    find: (filter: Filter, options?: FindOptions) => timed('find', () => inner.find(filter, options)),
    count: (filter?: Filter) => timed('count', () => inner.count(filter)),
    updateOne: (filter: Filter, update: Update, options?: UpdateOptions) => timed('updateOne', () => inner.updateOne(filter, update, options)),
    updateMany: (filter: Filter, update: Update) => timed('updateMany', () => inner.updateMany(filter, update)),
    findOneAndUpdate: (filter: Filter, update: Update, options?: FindOneAndUpdateOptions) =>
      timed('findOneAndUpdate', () => inner.findOneAndUpdate(filter, update, options)),
    replaceOne: (filter: Filter, doc: T, options?: UpdateOptions) => timed('replaceOne', () => inner.replaceOne(filter, doc, options)),
    deleteOne: (filter: Filter) => timed('deleteOne', () => inner.deleteOne(filter)),
    deleteMany: (filter: Filter) => timed('deleteMany', () => inner.deleteMany(filter)),
    bulkUpdate: (ops: BulkUpdateOp[]) => timed('bulkUpdate', () => inner.bulkUpdate(ops)),
    distinct: (field: string, filter?: Filter) => timed('distinct', () => inner.distinct(field, filter)),
    createIndex: (spec: IndexSpec) => timed('createIndex', () => inner.createIndex(spec)),
  };
}
