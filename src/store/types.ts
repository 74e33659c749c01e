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
  unique?: boolean;
  /** Unique only among documents that have the fields (documents without them do not collide). */
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
  /** Many single-document updates in one round trip (one disk append or one bulkWrite). */
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
