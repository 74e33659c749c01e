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
import { InflightOps } from './inflight.js';
import {
  BulkUpdateError,
  DocumentTooLargeError,
  DuplicateKeyError,
  InvalidQueryError,
  MAX_DOCUMENT_BYTES,
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
 * otherwise override the URI); docs/mongodb.md explains them. A bounded pool that sheds idle
 * connections; writes acknowledged by a majority of the replica set (an acknowledged write
 * survives a failover) and retried once by the driver after a failover or a dropped connection,
 * reads too; and a server selection timeout for operations long enough to wait out an election
 * (MongoDB's manual gives up to 12 s as the usual time to elect a new primary, and the driver
 * must then find it), so a failover delays writes instead of failing them. Start-up and /readyz
 * do not wait that long: they have timeouts of their own (STARTUP_TIMEOUT_MS, PING_TIMEOUT_MS).
 */
const CLIENT_DEFAULTS = {
  maxPoolSize: 50,
  minPoolSize: 0,
  maxIdleTimeMS: 60_000,
  serverSelectionTimeoutMS: 30_000,
  connectTimeoutMS: 10_000,
  retryWrites: true,
  retryReads: true,
  // A refused connection counts as an overloaded server: retried with random back-off (doubling
  // from 0.2 s up to 10 s), not by waiting for server selection. Eight retries ride out a restart.
  maxAdaptiveRetries: 8,
  w: 'majority',
} as const satisfies MongoClientOptions;

/** maxAdaptiveRetries in cluster mode, where an operation must end within a third of the lease. */
export const CLUSTER_ADAPTIVE_RETRIES = 3;

/** How long start-up waits for a server before it gives up (less when the URI's serverSelectionTimeoutMS is shorter). */
export const STARTUP_TIMEOUT_MS = 10_000;
/** How long a ping (/readyz) waits for an answer. */
export const PING_TIMEOUT_MS = 5_000;

/**
 * The client's options. In a cluster (`leaseMs` given) an operation waits for a server at most a
 * third of the lease, a renewal round: a lease renewal caught in an election then fails in time
 * for the next round to try again with a fresh send time, instead of returning after the lease has
 * lapsed and every node dropping every shard at once (docs/cluster.md).
 */
export function clientOptions(uri: string, cluster?: { leaseMs: number }): MongoClientOptions {
  const { optionNames } = parseMongoUri(uri);
  const options: MongoClientOptions = { ignoreUndefined: true };
  const round = cluster ? Math.floor(cluster.leaseMs / 3) : undefined;
  const defaults: MongoClientOptions =
    round === undefined
      ? CLIENT_DEFAULTS
      : {
          ...CLIENT_DEFAULTS,
          serverSelectionTimeoutMS: round,
          connectTimeoutMS: Math.min(CLIENT_DEFAULTS.connectTimeoutMS, round),
          // Three refused-connection retries wait at most 0.2 + 0.4 + 0.8 s, within a renewal round;
          // eight could wait past the lease.
          maxAdaptiveRetries: CLUSTER_ADAPTIVE_RETRIES,
        };
  for (const [key, value] of Object.entries(defaults)) {
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

/**
 * Server codes meaning "the document would be too large": BSONObjectTooLarge (a command or a
 * document over the limit), the result of an update or an upsert over 16 MiB (older servers).
 * BadValue (2) says so too, for an insert just over the limit ("object to insert too large").
 */
const TOO_LARGE_CODES = new Set([10334, 17419, 17420]);
const isTooLargeBadValue = (code: number | undefined, message: string | undefined) => code === 2 && /too large/i.test(message ?? '');

/** Index name from an E11000 message: `... index: email_1 dup key: { ... }`. */
function duplicateIndexName(message: string | undefined): string | undefined {
  return message ? /index: (\S+) dup key/.exec(message)?.[1] : undefined;
}

/** Maps one write error of the server (its code and message) to a Store error. */
function mapServerCode(code: number | undefined, message: string, collection: string, cause: unknown): StoreError | undefined {
  if (code === undefined) return undefined;
  if (DUPLICATE_KEY_CODES.has(code)) return new DuplicateKeyError(collection, duplicateIndexName(message), { cause });
  if (TOO_LARGE_CODES.has(code) || isTooLargeBadValue(code, message)) return new DocumentTooLargeError(collection, undefined, { cause });
  if (INVALID_QUERY_CODES.has(code)) return new InvalidQueryError(message, { cause });
  return undefined;
}

function writeErrorsOf(err: MongoBulkWriteError): Array<{ code?: number; errmsg?: string; index?: number }> {
  const w = err.writeErrors as unknown;
  if (Array.isArray(w)) return w as Array<{ code?: number; errmsg?: string; index?: number }>;
  return w ? [w as { code?: number; errmsg?: string; index?: number }] : [];
}

/**
 * The driver refuses a document over the limit before sending it: MongoInvalidArgumentError
 * ("Document is larger than the maximum size"), or, over the 17 MiB of its serialisation buffer,
 * a plain RangeError out of the BSON encoder.
 */
function isClientSizeRefusal(err: unknown): boolean {
  if (err instanceof MongoInvalidArgumentError) return /larger than the maximum size|too large/i.test(err.message);
  return err instanceof RangeError && /out of range|outside (the )?buffer|offset/i.test(err.message);
}

/**
 * An error the driver raises while it checks and encodes operations, before it sends anything
 * (inside a bulk write, the errors of sending come wrapped in a MongoBulkWriteError).
 */
function isClientRefusal(err: unknown): boolean {
  return isClientSizeRefusal(err) || err instanceof MongoInvalidArgumentError || BSON.BSONError.isBSONError(err);
}

/** Maps driver and server errors to the Store's typed errors. Non-driver errors pass through. */
export function mapMongoError(err: unknown, collection = ''): unknown {
  if (err instanceof StoreError) return err;
  if (isClientSizeRefusal(err)) return new DocumentTooLargeError(collection, undefined, { cause: err });
  if (err instanceof MongoBulkWriteError) {
    for (const w of writeErrorsOf(err)) {
      const mapped = mapServerCode(w.code, w.errmsg ?? err.message, collection, err);
      if (mapped) return mapped;
    }
  }
  if (err instanceof MongoServerError) {
    const code = typeof err.code === 'number' ? err.code : undefined;
    const mapped = mapServerCode(code, err.errmsg ?? err.message, collection, err);
    if (mapped) return mapped;
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

/** A Store error for one failed op of a bulk write: mapped when known, else the store failed. */
function storeErrorOf(err: unknown, collection: string): StoreError {
  const mapped = mapMongoError(err, collection);
  return mapped instanceof StoreError ? mapped : new StoreUnavailableError(`MongoDB (${collection}): ${(mapped as Error)?.message ?? String(mapped)}`, { cause: err });
}

/**
 * Where an ordered bulk write stopped: the index (in the ops it was given) of the op the server
 * refused, when that is all that went wrong. Undefined for anything else (a network error, a
 * write concern not met), after which it is unknown what was applied.
 */
function refusedOp(err: unknown): { index: number; code?: number; errmsg?: string } | undefined {
  if (!(err instanceof MongoBulkWriteError)) return undefined;
  const writeErrors = writeErrorsOf(err);
  if (writeErrors.length !== 1 || typeof writeErrors[0]!.index !== 'number') return undefined;
  if (err.result?.getWriteConcernError?.()) return undefined;
  return writeErrors[0] as { index: number; code?: number; errmsg?: string };
}

/** Refuses, before it is sent, a document (or an update, or a bulk statement) larger than the limit. */
function checkSize(collection: string, value: Document): void {
  const bytes = BSON.calculateObjectSize(value, { ignoreUndefined: true });
  if (bytes > MAX_DOCUMENT_BYTES) throw new DocumentTooLargeError(collection, bytes);
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

/** Adds what (part of) a bulk write did to a running total. */
function add(total: UpdateResult, r: { matchedCount: number; modifiedCount: number; upsertedCount: number } | undefined): void {
  if (!r) return;
  total.matched += r.matchedCount;
  total.modified += r.modifiedCount;
  total.upserted += r.upsertedCount;
}

// ---------------------------------------------------------------------------------------------
// Collection and store
// ---------------------------------------------------------------------------------------------

class MongoStoreCollection<T extends Doc> implements Collection<T> {
  constructor(
    readonly name: string,
    private readonly coll: DriverCollection<Document>,
    private readonly owner: Pick<MongoStore, 'track'>,
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
      checkSize(this.name, doc);
      await this.coll.insertOne(doc as Document);
      return doc;
    });
  }

  insertMany(docs: T[]): Promise<void> {
    return this.run(async () => {
      if (!Array.isArray(docs)) throw new InvalidQueryError('insertMany needs an array');
      if (docs.length === 0) return; // the driver rejects empty batches
      docs.forEach(requireStringId);
      const tooLarge = docs.findIndex((doc) => BSON.calculateObjectSize(doc, { ignoreUndefined: true }) > MAX_DOCUMENT_BYTES);
      if (tooLarge < 0) {
        await this.coll.insertMany(docs as Document[], { ordered: true });
        return;
      }
      // Ordered, as the server would have done it: the documents before the oversized one go in.
      if (tooLarge > 0) await this.coll.insertMany(docs.slice(0, tooLarge) as Document[], { ordered: true });
      checkSize(this.name, docs[tooLarge]!);
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
      checkSize(this.name, update as Document);
      const upsert = Boolean(options.upsert);
      const r = await this.coll.updateOne(filter as Document, (upsert ? ensureUpsertId(filter, update) : update) as Document, {
        upsert,
      });
      return { matched: r.matchedCount, modified: r.modifiedCount, upserted: r.upsertedCount };
    });
  }

  updateMany(filter: Filter, update: Update): Promise<UpdateResult> {
    return this.run(async () => {
      checkSize(this.name, update as Document);
      const r = await this.coll.updateMany(filter as Document, update as Document);
      return { matched: r.matchedCount, modified: r.modifiedCount, upserted: r.upsertedCount };
    });
  }

  findOneAndUpdate(filter: Filter, update: Update, options: FindOneAndUpdateOptions = {}): Promise<T | null> {
    return this.run(async () => {
      checkSize(this.name, update as Document);
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
      checkSize(this.name, doc);
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

  /**
   * Ordered bulk writes, so each op sees the ones before it (an unordered bulk write may run its
   * ops in any order). An ordered bulk write stops at the first op the server refuses; the write
   * goes on from the op after it, so that op fails alone. An op too large to send fails alone
   * too, before anything is sent; so does one the driver refuses while building the batch (it
   * would refuse the whole call), as the ops are then sent one at a time.
   */
  bulkUpdate(ops: BulkUpdateOp[]): Promise<UpdateResult> {
    return this.run(async () => {
      if (!Array.isArray(ops)) throw new InvalidQueryError('bulkUpdate needs an array');
      const total: UpdateResult = { matched: 0, modified: 0, upserted: 0 };
      const failures: Array<{ index: number; error: StoreError }> = [];
      const pending: Array<{ index: number; model: AnyBulkWriteOperation<Document> }> = [];
      for (let i = 0; i < ops.length; i++) {
        const op = ops[i]!;
        try {
          const upsert = Boolean(op.upsert);
          const update = (upsert ? ensureUpsertId(op.filter, op.update) : op.update) as Document;
          // The statement the driver sends and measures.
          checkSize(this.name, { q: op.filter, u: update, upsert, multi: false });
          pending.push({ index: i, model: { updateOne: { filter: op.filter as Document, update, upsert } } });
        } catch (err) {
          failures.push({ index: i, error: storeErrorOf(err, this.name) });
        }
      }
      for (let from = 0; from < pending.length; ) {
        const part = from === 0 ? pending : pending.slice(from);
        try {
          add(total, await this.coll.bulkWrite(part.map((p) => p.model), { ordered: true }));
          break;
        } catch (err) {
          if (isClientRefusal(err)) {
            // Refused by the driver while it built the batch, before anything was sent: each op
            // on its own, so only the offending one fails.
            await this.updateEach(part, total, failures);
            break;
          }
          const refused = refusedOp(err);
          if (!refused) throw err; // unknown what was applied: the caller retries the whole
          add(total, (err as MongoBulkWriteError).result);
          const at = part[refused.index]!;
          failures.push({ index: at.index, error: mapServerCode(refused.code, refused.errmsg ?? '', this.name, err) ?? storeErrorOf(err, this.name) });
          from += refused.index + 1;
        }
      }
      if (failures.length > 0) {
        failures.sort((a, b) => a.index - b.index);
        throw new BulkUpdateError(this.name, failures, total);
      }
      return total;
    });
  }

  /** Runs bulk ops one at a time, in order, recording each failure. */
  private async updateEach(
    part: Array<{ index: number; model: AnyBulkWriteOperation<Document> }>,
    total: UpdateResult,
    failures: Array<{ index: number; error: StoreError }>,
  ): Promise<void> {
    for (const { index, model } of part) {
      const { filter, update, upsert } = (model as { updateOne: { filter: Document; update: Document; upsert: boolean } }).updateOne;
      try {
        const r = await this.coll.updateOne(filter, update, { upsert });
        total.matched += r.matchedCount;
        total.modified += r.modifiedCount;
        total.upserted += r.upsertedCount;
      } catch (err) {
        const mapped = storeErrorOf(err, this.name);
        if (mapped instanceof StoreUnavailableError) throw err;
        failures.push({ index, error: mapped });
      }
    }
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

/**
 * A Store collection over a driver collection, outside any store: the tests give it a stand-in
 * that answers as the driver does, to go through the paths a server's refusals take.
 */
export function collectionOver<T extends Doc>(name: string, coll: DriverCollection<Document>): Collection<T> {
  return new MongoStoreCollection<T>(name, coll, { track: (fn) => fn() });
}

/** How long close() waits for in-flight operations before closing the pool under them. */
const CLOSE_GRACE_MS = 10_000;

class MongoStore implements Store {
  readonly kind = 'mongodb' as const;
  private readonly collections = new Map<string, MongoStoreCollection<Doc>>();
  private readonly inflight = new InflightOps();
  private closing: Promise<void> | undefined;
  private pinging: Promise<void> | undefined;

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

  /**
   * One ping at a time, answered within PING_TIMEOUT_MS: a ping still waiting for a server after
   * that (operations wait out an election) is left to finish, and the next callers share it.
   */
  ping(): Promise<void> {
    if (this.closed) return Promise.reject(new StoreUnavailableError('store is closed'));
    this.pinging ??= this.db
      .command({ ping: 1 })
      .then(
        () => undefined,
        (err: unknown) => {
          const mapped = mapMongoError(err);
          throw mapped instanceof StoreUnavailableError ? mapped : new StoreUnavailableError(`MongoDB ping failed: ${(err as Error).message}`, { cause: err });
        },
      )
      .finally(() => {
        this.pinging = undefined;
      });
    return withTimeout(this.pinging, PING_TIMEOUT_MS, () => new StoreUnavailableError(`MongoDB did not answer a ping within ${PING_TIMEOUT_MS} ms`));
  }

  /** The server's clock: `localTime` of a `hello` (every MongoDB server reports it). */
  async time(): Promise<number> {
    if (this.closed) throw new StoreUnavailableError('store is closed');
    let reply: { localTime?: unknown };
    try {
      reply = await this.track(() => this.db.command({ hello: 1 }));
    } catch (err) {
      const mapped = mapMongoError(err);
      throw mapped instanceof StoreUnavailableError ? mapped : new StoreUnavailableError(`MongoDB hello failed: ${(err as Error).message}`, { cause: err });
    }
    if (!(reply.localTime instanceof Date)) throw new StoreUnavailableError('the MongoDB server did not report its time (hello.localTime)');
    return reply.localTime.getTime();
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        this.inflight.close(),
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
    return this.inflight.track(fn);
  }

  private get closed(): boolean {
    return this.inflight.closed;
  }
}

/**
 * `p`, or a rejection with `timeout()` once `ms` have passed; `p` is still handled when it
 * settles later (its rejection is not left unhandled).
 */
function withTimeout<T>(p: Promise<T>, ms: number, timeout: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(timeout()), ms);
    timer.unref();
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/**
 * Connects and pings within STARTUP_TIMEOUT_MS (the client's own server selection timeout is
 * longer, for operations to wait out an election; a server that cannot be found at start-up is
 * a configuration problem to report at once).
 */
export async function openMongoStore(opts: { uri: string; dbName?: string; cluster?: { leaseMs: number } }): Promise<Store> {
  const where = redactUri(opts.uri);
  const dbName = opts.dbName || parseMongoUri(opts.uri).dbName || 'steward';
  let client: MongoClient;
  try {
    client = new MongoClient(opts.uri, clientOptions(opts.uri, opts.cluster));
  } catch (err) {
    throw new StoreUnavailableError(`invalid MongoDB URI ${where}: ${(err as Error).message}`, { cause: err });
  }
  const db = client.db(dbName);
  try {
    await withTimeout(
      client.connect().then(() => db.command({ ping: 1 })),
      STARTUP_TIMEOUT_MS,
      () => new Error(`no server answered within ${STARTUP_TIMEOUT_MS} ms`),
    );
    return new MongoStore(client, db);
  } catch (err) {
    await client.close().catch(() => undefined);
    throw new StoreUnavailableError(`cannot connect to MongoDB at ${where} (database ${dbName}): ${(err as Error).message}`, {
      cause: err,
    });
  }
}
