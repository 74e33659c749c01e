/**
 * MongoDB Store backend (official driver). This is what large fleets run on: one MongoClient per
 * process with an explicit pool, typed error mapping at this boundary, and no client-side
 * emulation of anything the server does natively.
 *
 * Documents keep the caller's string `_id`. Filters and updates are passed through unchanged,
 * except that an upsert which would otherwise let the server invent an ObjectId `_id` gets a
 * string one (see ensureUpsertId).
 */
import {
  BSON,
  MongoAPIError,
  MongoBulkWriteError,
  MongoClient,
  MongoError,
  MongoInvalidArgumentError,
  MongoServerError,
  type AnyBulkWriteOperation,
  type Collection as DriverCollection,
  type Db,
  type Document,
  type MongoClientOptions,
} from 'mongodb';
import { nanoid } from 'nanoid';
import {
  DuplicateKeyError,
  InvalidQueryError,
  StoreError,
  StoreUnavailableError,
  type BulkUpdateOp,
  type Collection,
  type Doc,
  type Filter,
  type FindOneAndUpdateOptions,
  type FindOptions,
  type IndexSpec,
  type Store,
  type Update,
  type UpdateOptions,
  type UpdateResult,
} from './types.js';

// ---------------------------------------------------------------------------------------------
// Connection string and client options
// ---------------------------------------------------------------------------------------------

export interface ParsedMongoUri {
  /** Database named in the URI path, if any. */
  dbName?: string;
  /** Lower-cased names of the options given in the query string. */
  optionNames: Set<string>;
}

/**
 * Reads the parts of a `mongodb://` / `mongodb+srv://` URI we need; the driver does the real
 * validation. Credentials must be percent-encoded in such URIs, so the first `/` or `?` after the
 * scheme ends the host list.
 */
export function parseMongoUri(uri: string): ParsedMongoUri {
  const m = /^mongodb(?:\+srv)?:\/\/([^/?]*)(?:\/([^?]*))?(?:\?(.*))?$/i.exec(uri.trim());
  if (!m) return { optionNames: new Set() };
  let dbName: string | undefined;
  if (m[2]) {
    try {
      dbName = decodeURIComponent(m[2]);
    } catch {
      dbName = m[2];
    }
  }
  const optionNames = new Set([...new URLSearchParams(m[3] ?? '').keys()].map((k) => k.toLowerCase()));
  return { dbName: dbName || undefined, optionNames };
}

/**
 * Defaults applied only when the URI does not set the option (constructor options would
 * otherwise override the URI): a bounded pool that sheds idle connections, and timeouts short
 * enough that startup and /readyz fail in seconds rather than the driver's 30 s.
 */
const CLIENT_DEFAULTS = {
  maxPoolSize: 50,
  minPoolSize: 0,
  maxIdleTimeMS: 60_000,
  serverSelectionTimeoutMS: 10_000,
  connectTimeoutMS: 10_000,
} as const satisfies MongoClientOptions;

export function clientOptions(uri: string): MongoClientOptions {
  const { optionNames } = parseMongoUri(uri);
  const options: MongoClientOptions = { ignoreUndefined: true };
  for (const [key, value] of Object.entries(CLIENT_DEFAULTS)) {
    if (!optionNames.has(key.toLowerCase())) Object.assign(options, { [key]: value });
  }
  if (!optionNames.has('appname')) options.appName = 'steward';
  return options;
}

/** The URI without credentials, for error messages and logs. */
export function redactUri(uri: string): string {
  return uri.replace(/^(mongodb(?:\+srv)?:\/\/)[^@/?]*@/i, '$1***@');
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

const DUPLICATE_KEY_CODES = new Set([11000, 11001, 12582]);

/** Server codes meaning "this filter/update/index spec cannot run", not "the server failed". */
const INVALID_QUERY_CODES = new Set([
  2, // BadValue (unknown operator, $in needs an array, $pull on a non-array, ...)
  9, // FailedToParse (unknown update modifier, ...)
  14, // TypeMismatch ($inc on a string, $push on a non-array, ...)
  28, // PathNotViable
  40, // ConflictingUpdateOperators
  52, // DollarPrefixedFieldName
  54, // NotSingleValueField
  56, // EmptyFieldName
  57, // DottedFieldName
  66, // ImmutableField (_id changed)
  67, // CannotCreateIndex
  72, // InvalidOptions
  73, // InvalidNamespace
  85, // IndexOptionsConflict
  86, // IndexKeySpecsConflict
  197, // InvalidIndexSpecificationOption
  15974, // bad $sort key
  15975,
  15976,
  16410, // dollar-prefixed field in a stored document (older servers)
  31249, // projection path collision
  31250,
  31253,
  31254,
  51091, // invalid regular expression
  51108, // invalid regex flags
]);

/** Index name from an E11000 message: `... index: email_1 dup key: { ... }`. */
function duplicateIndexName(message: string | undefined): string | undefined {
  return message ? /index: (\S+) dup key/.exec(message)?.[1] : undefined;
}

function writeErrorsOf(err: MongoBulkWriteError): Array<{ code?: number; errmsg?: string }> {
  const w = err.writeErrors as unknown;
  if (Array.isArray(w)) return w as Array<{ code?: number; errmsg?: string }>;
  return w ? [w as { code?: number; errmsg?: string }] : [];
}

/** Maps driver and server errors to the Store's typed errors. Non-driver errors pass through. */
export function mapMongoError(err: unknown, collection = ''): unknown {
  if (err instanceof StoreError) return err;
  if (err instanceof MongoBulkWriteError) {
    const dup = writeErrorsOf(err).find((w) => w.code !== undefined && DUPLICATE_KEY_CODES.has(w.code));
    if (dup) return new DuplicateKeyError(collection, duplicateIndexName(dup.errmsg), { cause: err });
    const invalid = writeErrorsOf(err).find((w) => w.code !== undefined && INVALID_QUERY_CODES.has(w.code));
    if (invalid) return new InvalidQueryError(invalid.errmsg ?? err.message, { cause: err });
  }
  if (err instanceof MongoServerError) {
    const code = typeof err.code === 'number' ? err.code : undefined;
    if (code !== undefined && DUPLICATE_KEY_CODES.has(code)) {
      return new DuplicateKeyError(collection, duplicateIndexName(err.errmsg ?? err.message), { cause: err });
    }
    if (code !== undefined && INVALID_QUERY_CODES.has(code)) return new InvalidQueryError(err.message, { cause: err });
  }
  // Driver-side validation (e.g. "Update document requires atomic operators") and BSON encoding.
  if (err instanceof MongoInvalidArgumentError || BSON.BSONError.isBSONError(err)) {
    return new InvalidQueryError((err as Error).message, { cause: err });
  }
  if (err instanceof MongoAPIError) {
    // Client closed, not connected, expired session, ...
    return new StoreUnavailableError(err.message, { cause: err });
  }
  if (err instanceof MongoError) {
    // Network, server selection, timeouts, not-primary, shutdown, auth and any other server failure.
    return new StoreUnavailableError(`MongoDB${collection ? ` (${collection})` : ''}: ${err.message}`, { cause: err });
  }
  return err;
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** True when the filter fixes `_id` by equality, so an upsert inserts that `_id`. */
function filterPinsId(filter: Filter): boolean {
  const id = filter._id;
  if (id !== undefined) {
    if (!isPlainObject(id)) return true;
    const first = Object.keys(id)[0];
    if (first === undefined || !first.startsWith('$')) return true; // equality with a document
    if (id.$eq !== undefined) return true;
  }
  if (Array.isArray(filter.$and) && filter.$and.some((f) => isPlainObject(f) && filterPinsId(f))) return true;
  if (Array.isArray(filter.$or) && filter.$or.length === 1 && isPlainObject(filter.$or[0])) return filterPinsId(filter.$or[0]);
  return false;
}

/**
 * Ids are strings everywhere in Steward. An upsert whose filter and update do not name an `_id`
 * (upsert by a natural key) would make the server invent an ObjectId; give it a string id instead,
 * used only if the upsert inserts. The embedded backend does the same.
 */
function ensureUpsertId(filter: Filter, update: Update): Update {
  if (filterPinsId(filter)) return update;
  if (update.$set?._id !== undefined || update.$setOnInsert?._id !== undefined) return update;
  return { ...update, $setOnInsert: { ...update.$setOnInsert, _id: nanoid() } };
}

function requireStringId(doc: unknown): void {
  if (!isPlainObject(doc) || typeof doc._id !== 'string') throw new InvalidQueryError('documents need a string _id');
}

function checkCount(name: string, v: number | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!Number.isInteger(v) || v < 0) throw new InvalidQueryError(`${name} must be a non-negative integer`);
  return v;
}

/** Driver find options from ours, leaving out what was not given. */
function findOptions(options: FindOptions): Document {
  const out: Document = {};
  if (options.sort && Object.keys(options.sort).length > 0) out.sort = options.sort;
  const skip = checkCount('skip', options.skip);
  if (skip) out.skip = skip;
  const limit = checkCount('limit', options.limit);
  if (limit) out.limit = limit;
  if (options.projection && Object.keys(options.projection).length > 0) out.projection = options.projection;
  return out;
}

const COLLECTION_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,119}$/;

// ---------------------------------------------------------------------------------------------
// Collection and store
// ---------------------------------------------------------------------------------------------

class MongoStoreCollection<T extends Doc> implements Collection<T> {
  constructor(
    readonly name: string,
    private readonly coll: DriverCollection<Document>,
    private readonly owner: MongoStore,
  ) {}

  /** Runs one driver call: registered for close(), errors mapped to Store errors. */
  private run<R>(op: () => Promise<R>): Promise<R> {
    return this.owner.track(async () => {
      try {
        return await op();
      } catch (err) {
        throw mapMongoError(err, this.name);
      }
    });
  }

  insertOne(doc: T): Promise<T> {
    return this.run(async () => {
      requireStringId(doc);
      await this.coll.insertOne(doc as Document);
      return doc;
    });
  }

  insertMany(docs: T[]): Promise<void> {
    return this.run(async () => {
      if (!Array.isArray(docs)) throw new InvalidQueryError('insertMany needs an array');
      if (docs.length === 0) return; // the driver rejects empty batches
      docs.forEach(requireStringId);
      await this.coll.insertMany(docs as Document[], { ordered: true });
    });
  }

  findOne(filter: Filter, options: FindOptions = {}): Promise<T | null> {
    return this.run(async () => {
      const { limit: _limit, ...rest } = findOptions(options);
      return (await this.coll.findOne(filter as Document, rest)) as T | null;
    });
  }

  findById(id: string): Promise<T | null> {
    return this.run(async () => (await this.coll.findOne({ _id: id } as Document)) as T | null);
  }

  find(filter: Filter, options: FindOptions = {}): Promise<T[]> {
    return this.run(async () => (await this.coll.find(filter as Document, findOptions(options)).toArray()) as unknown as T[]);
  }

  count(filter: Filter = {}): Promise<number> {
    return this.run(() => this.coll.countDocuments(filter as Document));
  }

  updateOne(filter: Filter, update: Update, options: UpdateOptions = {}): Promise<UpdateResult> {
    return this.run(async () => {
      const upsert = Boolean(options.upsert);
      const r = await this.coll.updateOne(filter as Document, (upsert ? ensureUpsertId(filter, update) : update) as Document, {
        upsert,
      });
      return { matched: r.matchedCount, modified: r.modifiedCount, upserted: r.upsertedCount };
    });
  }

  updateMany(filter: Filter, update: Update): Promise<UpdateResult> {
    return this.run(async () => {
      const r = await this.coll.updateMany(filter as Document, update as Document);
      return { matched: r.matchedCount, modified: r.modifiedCount, upserted: r.upsertedCount };
    });
  }

  findOneAndUpdate(filter: Filter, update: Update, options: FindOneAndUpdateOptions = {}): Promise<T | null> {
    return this.run(async () => {
      const upsert = Boolean(options.upsert);
      const doc = await this.coll.findOneAndUpdate(filter as Document, (upsert ? ensureUpsertId(filter, update) : update) as Document, {
        upsert,
        returnDocument: options.returnDocument ?? 'after',
        ...(options.sort && Object.keys(options.sort).length > 0 ? { sort: options.sort } : {}),
        includeResultMetadata: false,
      });
      return doc as T | null;
    });
  }

  replaceOne(filter: Filter, doc: T, options: UpdateOptions = {}): Promise<UpdateResult> {
    return this.run(async () => {
      if (!isPlainObject(doc)) throw new InvalidQueryError('replacement must be an object');
      const r = await this.coll.replaceOne(filter as Document, doc as Document, { upsert: Boolean(options.upsert) });
      return { matched: r.matchedCount, modified: r.modifiedCount, upserted: r.upsertedCount };
    });
  }

  deleteOne(filter: Filter): Promise<number> {
    return this.run(async () => (await this.coll.deleteOne(filter as Document)).deletedCount);
  }

  deleteMany(filter: Filter): Promise<number> {
    return this.run(async () => (await this.coll.deleteMany(filter as Document)).deletedCount);
  }

  /** One unordered bulkWrite: every op is attempted; the first failure is reported after. */
  bulkUpdate(ops: BulkUpdateOp[]): Promise<UpdateResult> {
    return this.run(async () => {
      if (!Array.isArray(ops)) throw new InvalidQueryError('bulkUpdate needs an array');
      if (ops.length === 0) return { matched: 0, modified: 0, upserted: 0 };
      const models: AnyBulkWriteOperation<Document>[] = ops.map((op) => ({
        updateOne: {
          filter: op.filter as Document,
          update: (op.upsert ? ensureUpsertId(op.filter, op.update) : op.update) as Document,
          upsert: Boolean(op.upsert),
        },
      }));
      const r = await this.coll.bulkWrite(models, { ordered: false });
      return { matched: r.matchedCount, modified: r.modifiedCount, upserted: r.upsertedCount };
    });
  }

  distinct(field: string, filter: Filter = {}): Promise<unknown[]> {
    return this.run(() => this.coll.distinct(field, filter as Document));
  }

  createIndex(spec: IndexSpec): Promise<void> {
    return this.run(async () => {
      if (!isPlainObject(spec) || !isPlainObject(spec.fields) || Object.keys(spec.fields).length === 0) {
        throw new InvalidQueryError('index spec needs at least one field');
      }
      await this.coll.createIndex(spec.fields, {
        ...(spec.unique ? { unique: true } : {}),
        ...(spec.sparse ? { sparse: true } : {}),
        ...(spec.name ? { name: spec.name } : {}),
      });
    });
  }
}

/** How long close() waits for in-flight operations before closing the pool under them. */
const CLOSE_GRACE_MS = 10_000;

class MongoStore implements Store {
  readonly kind = 'mongodb' as const;
  private readonly collections = new Map<string, MongoStoreCollection<Doc>>();
  private readonly inflight = new Set<Promise<unknown>>();
  private closed = false;
  private closing: Promise<void> | undefined;

  constructor(
    private readonly client: MongoClient,
    private readonly db: Db,
  ) {}

  collection<T extends Doc>(name: string): Collection<T> {
    if (this.closed) throw new StoreUnavailableError('store is closed');
    if (typeof name !== 'string' || !COLLECTION_NAME.test(name)) throw new InvalidQueryError(`invalid collection name "${name}"`);
    let coll = this.collections.get(name);
    if (!coll) {
      coll = new MongoStoreCollection<Doc>(name, this.db.collection(name), this);
      this.collections.set(name, coll);
    }
    return coll as unknown as Collection<T>;
  }

  async ping(): Promise<void> {
    if (this.closed) throw new StoreUnavailableError('store is closed');
    try {
      await this.db.command({ ping: 1 });
    } catch (err) {
      const mapped = mapMongoError(err);
      throw mapped instanceof StoreUnavailableError
        ? mapped
        : new StoreUnavailableError(`MongoDB ping failed: ${(err as Error).message}`, { cause: err });
    }
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.closed = true;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...this.inflight]),
        new Promise((resolve) => {
          timer = setTimeout(resolve, CLOSE_GRACE_MS);
          timer.unref();
        }),
      ]);
      clearTimeout(timer);
      await this.client.close();
    })();
    return this.closing;
  }

  /** Registers an operation so close() can wait for it; refuses new ones once closing. */
  track<R>(fn: () => Promise<R>): Promise<R> {
    if (this.closed) return Promise.reject(new StoreUnavailableError('store is closed'));
    const p = fn();
    this.inflight.add(p);
    const done = () => this.inflight.delete(p);
    p.then(done, done);
    return p;
  }
}

export async function openMongoStore(opts: { uri: string; dbName?: string }): Promise<Store> {
  const where = redactUri(opts.uri);
  const dbName = opts.dbName || parseMongoUri(opts.uri).dbName || 'steward';
  let client: MongoClient;
  try {
    client = new MongoClient(opts.uri, clientOptions(opts.uri));
  } catch (err) {
    throw new StoreUnavailableError(`invalid MongoDB URI ${where}: ${(err as Error).message}`, { cause: err });
  }
  try {
    await client.connect();
    const db = client.db(dbName);
    await db.command({ ping: 1 });
    return new MongoStore(client, db);
  } catch (err) {
    await client.close().catch(() => undefined);
    throw new StoreUnavailableError(`cannot connect to MongoDB at ${where} (database ${dbName}): ${(err as Error).message}`, {
      cause: err,
    });
  }
}
