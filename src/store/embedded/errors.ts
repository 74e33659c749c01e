/**
 * The contract's typed errors for what nedb and the store's own checks refuse: unique-index
 * violations (naming the index), document size, invalid documents, and everything else.
 */
import { DocumentTooLargeError, DuplicateKeyError, InvalidQueryError, MAX_DOCUMENT_BYTES, StoreError, StoreUnavailableError } from '../types.js';
import { bsonDocumentSize } from './bson-size.js';
import { nedbIndexes, type NedbStore } from './datastore.js';
import { indexKeyValues } from './paths.js';
import { valuesEqual, type StoredDoc } from './values.js';

export const isUniqueViolation = (err: unknown): boolean =>
  typeof err === 'object' && err !== null && (err as { errorType?: unknown }).errorType === 'uniqueViolated';

/** MongoDB's default index name: `a_1_b_-1`. */
export function defaultIndexName(fields: Array<[string, number]>): string {
  return fields.map(([f, d]) => `${f}_${d}`).join('_');
}

/** Refuses a document larger than MongoDB would store, so both backends refuse the same writes. */
export function checkSize(collection: string, doc: StoredDoc): void {
  const bytes = bsonDocumentSize(doc);
  if (bytes > MAX_DOCUMENT_BYTES) throw new DocumentTooLargeError(collection, bytes);
}

export function failure(collection: string, err: unknown): StoreError {
  if (err instanceof StoreError) return err;
  const message = err instanceof Error ? err.message : String(err);
  // nedb's document checks (field names with "$" or ".").
  if (/^Field names cannot|cannot mix|change a document's _id/i.test(message)) {
    return new InvalidQueryError(message, { cause: err });
  }
  return new StoreUnavailableError(`embedded store failure on ${collection}: ${message}`, { cause: err });
}

/** The error of a failed write of `doc`; `indexNames`: the names given to createIndex, by nedb index key. */
export function writeError(
  ds: NedbStore,
  collection: string,
  indexNames: ReadonlyMap<string, string>,
  err: unknown,
  doc: StoredDoc,
  inserting: boolean,
): StoreError {
  if (isUniqueViolation(err)) return new DuplicateKeyError(collection, violatedIndex(ds, indexNames, doc, inserting), { cause: err });
  return failure(collection, err);
}

/**
 * Best-effort name of the unique index `doc` collides on (nedb's error only carries the key):
 * the first unique index for which another document has an overlapping key.
 */
function violatedIndex(ds: NedbStore, indexNames: ReadonlyMap<string, string>, doc: StoredDoc, inserting: boolean): string | undefined {
  const all = ds.getAllData() as StoredDoc[];
  for (const def of nedbIndexes(ds)) {
    if (!def.unique) continue;
    if (def.key === '_id') {
      // An update keeps its _id (and its stored previous version shares it), so only inserts can clash here.
      if (inserting && all.some((o) => o._id === doc._id)) return '_id_';
      continue;
    }
    const unindexed = (keys: unknown[][]) => def.sparse && keys.every((vs) => vs.length === 1 && vs[0] === undefined);
    const mine = def.fields.map((f) => indexKeyValues(doc, f));
    if (unindexed(mine)) continue;
    const clash = all.some((other) => {
      if (other._id === doc._id) return false;
      const theirs = def.fields.map((f) => indexKeyValues(other, f));
      // A missing field is keyed as null (see nedb-index.ts).
      return !unindexed(theirs) && theirs.every((vs, i) => vs.some((v) => mine[i]!.some((m) => valuesEqual(m ?? null, v ?? null))));
    });
    if (clash) return indexNames.get(def.key) ?? defaultIndexName(def.fields.map((f) => [f, 1]));
  }
  return undefined;
}
