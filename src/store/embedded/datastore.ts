/**
 * The nedb Datastore under a collection, and what the store uses of it directly: its indexes (read
 * without queueing on its executor), its executor, and its persistence, routed to an AppendLog.
 */
import nedb from '@seald-io/nedb';
import { checkObject, serialize } from '@seald-io/nedb/lib/model.js';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../data-dir.js';
import type { AppendLog } from './append-log.js';
import type { PreparedQuery } from './filter.js';
import { internStrings } from './intern.js';
import { installKeyedIndexes } from './nedb-index.js';
import type { Obj, StoredDoc } from './values.js';

installKeyedIndexes();

// @seald-io/nedb is CommonJS (`module.exports = Datastore`) but its typings say `export default`,
// which NodeNext reads as `module.exports.default`. At runtime the default import is the class.
const Datastore = nedb as unknown as typeof nedb.default;
export type NedbStore = InstanceType<typeof Datastore>;

export interface IndexDefinition {
  /** nedb's index key: field names sorted and joined with ",". */
  key: string;
  fields: string[];
  unique: boolean;
  sparse: boolean;
}

/** nedb's indexes (those restored from the datafile too), `_id` first, as definitions. */
export function nedbIndexes(ds: NedbStore): IndexDefinition[] {
  const raw = (ds as unknown as { indexes?: Record<string, { unique?: boolean; sparse?: boolean }> }).indexes ?? {};
  return Object.entries(raw)
    .map(([key, idx]) => ({ key, fields: key.split(','), unique: Boolean(idx.unique), sparse: Boolean(idx.sparse) }))
    .sort((a, b) => (a.key === '_id' ? -1 : b.key === '_id' ? 1 : 0));
}

/** The parts of a nedb Datastore the store uses directly, all documented as protected in nedb 4. */
interface NedbIndex {
  getMatching(value: string): StoredDoc[];
  /** The indexed field, or the fields of a compound index. */
  fieldName: string | string[];
  unique: boolean;
  sparse: boolean;
}
interface NedbInternals {
  /** Indexes by name: a single-field index is named by its field, a compound one `a,b`; `_id` always exists. */
  indexes: { _id: NedbIndex } & Record<string, NedbIndex | undefined>;
  executor: { pushAsync<R>(task: () => Promise<R>): Promise<R> };
  persistence: {
    persistNewStateAsync(docs: StoredDoc[]): Promise<void>;
    persistCachedDatabaseAsync(): Promise<void>;
  };
  _updateIndexes(modifications: Array<{ oldDoc: StoredDoc; newDoc: StoredDoc }>): void;
  /** Adds documents to every index, all or none (an array is rolled back whole on a violation). */
  _insertInCache(docs: StoredDoc | StoredDoc[]): void;
  /** The documents the first usable index gives for a query's top-level conditions (all documents if none). */
  _getRawCandidates(query: Obj): StoredDoc[];
}

export const internals = (ds: NedbStore): NedbInternals => ds as unknown as NedbInternals;

/**
 * Inserts prepared documents (private copies) as nedb's insert does (names checked, indexes all or
 * none, one append), without its deep copies of the documents given and of those it returns.
 */
export function insertPrepared(ds: NedbStore, docs: StoredDoc[]): Promise<void> {
  const nd = internals(ds);
  return nd.executor.pushAsync(async () => {
    for (const doc of docs) checkObject(doc);
    nd._insertInCache(docs.length === 1 ? docs[0]! : docs);
    await nd.persistence.persistNewStateAsync(docs);
  });
}

/**
 * Loads a datafile, its appends and compactions routed through `log`. A compaction writes what
 * nedb's would: each document's line, then a line per index but `_id`, which a load re-creates.
 */
export async function openDatastore(filename: string, log: AppendLog): Promise<NedbStore> {
  const ds = new Datastore({ filename, modes: { fileMode: PRIVATE_FILE_MODE, dirMode: PRIVATE_DIR_MODE } });
  const nd = internals(ds);
  const indexLines = (): string[] => {
    const lines: string[] = [];
    for (const [name, index] of Object.entries(nd.indexes)) {
      if (name === '_id' || !index) continue;
      lines.push(serialize({ $$indexCreated: { fieldName: index.fieldName, unique: index.unique, sparse: index.sparse } }));
    }
    return lines;
  };
  nd.persistence.persistCachedDatabaseAsync = () => log.rewrite(ds.getAllData() as StoredDoc[], indexLines());
  // nedb's version opens and closes the file for every write.
  nd.persistence.persistNewStateAsync = (docs) => log.append(docs);
  await ds.loadDatabaseAsync();
  for (const doc of ds.getAllData()) internStrings(doc);
  // nedb 4 already rewrites the file at the end of a load; compacting explicitly keeps that
  // guarantee independent of the nedb version (and gives the log its size).
  await ds.compactDatafileAsync();
  log.onOversize = () =>
    log.compact(
      () => ({ docs: ds.getAllData() as StoredDoc[], lines: indexLines() }),
      (task) => nd.executor.pushAsync(task),
    );
  return ds;
}

/**
 * The stored documents matching `query`, in candidate order, found synchronously so that no write
 * lands before the caller copies them (which it does before it next awaits).
 */
export function scan(ds: NedbStore, query: PreparedQuery, stopAfter = Infinity): StoredDoc[] {
  const hits: StoredDoc[] = [];
  if (stopAfter <= 0) return hits;
  for (const doc of candidates(ds, query)) {
    if (query.predicate(doc)) {
      hits.push(doc);
      if (hits.length >= stopAfter) break;
    }
  }
  return hits;
}

/**
 * The documents to test: for a filter of one indexed field equal to strings, that index's, asked
 * directly (nedb's selection allocates per query); else nedb's selection from the hints.
 */
function candidates(ds: NedbStore, query: PreparedQuery): Iterable<StoredDoc> {
  const nedb = internals(ds);
  const equal = query.equal;
  const index = equal && Object.hasOwn(nedb.indexes, equal.field) ? nedb.indexes[equal.field] : undefined;
  if (!index) return nedb._getRawCandidates(query.hints);
  const values = equal!.values;
  if (values.length === 1) return index.getMatching(values[0]!);
  const docs = new Set<StoredDoc>();
  for (const v of values) for (const d of index.getMatching(v)) docs.add(d);
  return docs;
}
