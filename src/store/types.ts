/**
 * The Store contract. Every backend (embedded nedb, MongoDB) satisfies it, and
 * test/store-contract.ts runs the same cases against each.
 *
 * Conventions shared by all backends:
 * - Every document has a string `_id` chosen by the caller (nanoid, or a UUID where the
 *   interface document says UUID). Backends never invent ids.
 * - Timestamps are stored as ISO 8601 strings, so they sort the same way everywhere.
 * - Values are plain JSON (no Date, no Buffer, no undefined inside arrays).
 */

export interface Doc {
  _id: string;
}

/** A condition on one field. A plain value means equality (or "array contains" for array fields). */
export interface FieldOps {
  $eq?: unknown;
  $ne?: unknown;
  $in?: unknown[];
  $nin?: unknown[];
  $exists?: boolean;
  $lt?: unknown;
  $lte?: unknown;
  $gt?: unknown;
  $gte?: unknown;
  /** A regular expression source; `$options: "i"` makes it case-insensitive. */
  $regex?: string;
  $options?: 'i' | '';
  /** Array field: every listed value is present. */
  $all?: unknown[];
  /** Array of sub-documents: one element matches all conditions. */
  $elemMatch?: Record<string, unknown>;
}

/** Field paths may use dots for nested fields (`"limits.maxTokensPerDay"`). */
export type Filter = {
  $or?: Filter[];
  $and?: Filter[];
  [field: string]: unknown;
};

export type SortSpec = Record<string, 1 | -1>;

export interface FindOptions {
  sort?: SortSpec;
  skip?: number;
  limit?: number;
  /** Inclusion projection (`{name: 1}`); `_id` always comes back. */
  projection?: Record<string, 1>;
}

export interface Update {
  $set?: Record<string, unknown>;
  $unset?: Record<string, true | 1 | ''>;
  $inc?: Record<string, number>;
  /** Sets each field to the value given when that is greater than the stored one (or nothing is stored), in MongoDB's order of values. */
  $max?: Record<string, unknown>;
  $push?: Record<string, unknown>;
  /** Removes array elements equal to the value (or matching a field-condition object). */
  $pull?: Record<string, unknown>;
  $addToSet?: Record<string, unknown>;
  /** Only applied when an upsert inserts a new document. */
  $setOnInsert?: Record<string, unknown>;
}

export interface UpdateOptions {
  upsert?: boolean;
}

export interface FindOneAndUpdateOptions extends UpdateOptions {
  /** Which version of the document to return. Default `after`. */
  returnDocument?: 'before' | 'after';
  sort?: SortSpec;
}

export interface UpdateResult {
  matched: number;
  modified: number;
  upserted: number;
}

export interface BulkUpdateOp {
  filter: Filter;
  update: Update;
  upsert?: boolean;
}

export interface IndexSpec {
  /** Field paths with their order. */
  fields: Record<string, 1 | -1>;
  /**
   * No two documents share a key. A missing field counts as null, so a document without the
   * field and one holding null collide (unless `sparse` leaves the first out).
   */
  unique?: boolean;
  /**
   * MongoDB's sparse index: a document is left out only when it has none of the index's fields
   * (so documents without any of them never collide). A document with some of the fields of a
   * compound index is indexed, its missing fields counting as null; a field holding null is
   * present.
   */
  sparse?: boolean;
  name?: string;
}

export interface Collection<T extends Doc> {
  readonly name: string;
  insertOne(doc: T): Promise<T>;
  insertMany(docs: T[]): Promise<void>;
  findOne(filter: Filter, options?: FindOptions): Promise<T | null>;
  findById(id: string): Promise<T | null>;
  find(filter: Filter, options?: FindOptions): Promise<T[]>;
  count(filter?: Filter): Promise<number>;
  /** Atomic update of the first matching document. */
  updateOne(filter: Filter, update: Update, options?: UpdateOptions): Promise<UpdateResult>;
  updateMany(filter: Filter, update: Update): Promise<UpdateResult>;
  /** Atomic read-modify-write of one document; null when nothing matched and no upsert. */
  findOneAndUpdate(filter: Filter, update: Update, options?: FindOneAndUpdateOptions): Promise<T | null>;
  /** Replaces the whole document with the same `_id` (inserting it when `upsert`). */
  replaceOne(filter: Filter, doc: T, options?: UpdateOptions): Promise<UpdateResult>;
  deleteOne(filter: Filter): Promise<number>;
  deleteMany(filter: Filter): Promise<number>;
  /**
   * Many single-document updates in one round trip (one disk append or one bulkWrite), in order:
   * each op sees the effect of every op before it. An op that fails fails alone: the others are
   * applied, and then a BulkUpdateError lists the failed ops. Any other error (the store
   * unavailable, a malformed call) means the ops may have been applied in part.
   */
  bulkUpdate(ops: BulkUpdateOp[]): Promise<UpdateResult>;
  /** Distinct values of a field among matching documents. */
  distinct(field: string, filter?: Filter): Promise<unknown[]>;
  createIndex(spec: IndexSpec): Promise<void>;
}

export interface Store {
  readonly kind: 'embedded' | 'mongodb';
  collection<T extends Doc>(name: string): Collection<T>;
  /** Resolves when the backend answers; rejects otherwise (used by /readyz). */
  ping(): Promise<void>;
  /**
   * The store's clock (ms since the Unix epoch), which a cluster judges its leases by
   * (src/cluster/store-clock.ts). Absent: the store's clock is this process's (the embedded store).
   */
  time?(): Promise<number>;
  close(): Promise<void>;
  /**
   * Rewrites a collection's storage now, without the old versions of its documents: the embedded
   * store's datafiles are append-only, so a replaced or deleted document's lines stay until a
   * compaction. Absent where the backend keeps no such history of its own (MongoDB).
   */
  compact?(collection: string): Promise<void>;
}

/** Typed store errors; the HTTP layer turns them into statuses at one boundary. */
export class StoreError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A unique index rejected a write. `index` names the index when the backend says which. */
export class DuplicateKeyError extends StoreError {
  constructor(
    readonly collection: string,
    readonly index?: string,
    options?: { cause?: unknown },
  ) {
    super(`duplicate key in ${collection}${index ? ` (${index})` : ''}`, options);
  }
}

/** A filter or update the backend cannot run (bad operator, bad regex, bad path). */
export class InvalidQueryError extends StoreError {}

/** The backend could not be reached or failed. */
export class StoreUnavailableError extends StoreError {}

/** The largest document a collection holds: MongoDB's BSON document limit, kept by every backend. */
export const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;

/** A write would make a document larger than MAX_DOCUMENT_BYTES (as BSON); nothing of it is applied. */
export class DocumentTooLargeError extends StoreError {
  constructor(
    readonly collection: string,
    /** The document's size in bytes as BSON, when known. */
    readonly bytes?: number,
    options?: { cause?: unknown },
  ) {
    super(`a document in ${collection} would exceed ${MAX_DOCUMENT_BYTES} bytes${bytes !== undefined ? ` (${bytes})` : ''}`, options);
  }
}

/** Some ops of a bulkUpdate failed; every other op was applied. */
export class BulkUpdateError extends StoreError {
  constructor(
    readonly collection: string,
    /** The failed ops by their index in the call, in order, each with its typed error. */
    readonly failures: ReadonlyArray<{ index: number; error: StoreError }>,
    /** What the applied ops did. */
    readonly result: UpdateResult,
  ) {
    super(`${failures.length} update(s) of a bulk update of ${collection} failed; the first (op ${failures[0]?.index}): ${failures[0]?.error.message}`, {
      cause: failures[0]?.error,
    });
  }

  /** The first failure's error: what a single update would have thrown. */
  get first(): StoreError {
    return this.failures[0]!.error;
  }
}
