/**
 * The command table: each MongoDB command Steward's MongoStore and the driver send, run on the
 * embedded store engine (src/store/embedded), so both backends share one engine for their
 * semantics. Replies and errors take MongoDB's shapes, codes and names. Each database is an
 * embedded store of its own, in a directory under the stand-in's data directory.
 */
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { BSON, type Document } from 'mongodb';
import { nanoid } from 'nanoid';
import { openEmbeddedStore, type EmbeddedStoreHandle } from '../../src/store/embedded/index.js';
import { Mutex } from '../../src/store/embedded/collection.js';
import {
  DocumentTooLargeError,
  DuplicateKeyError,
  InvalidQueryError,
  MAX_DOCUMENT_BYTES,
  StoreError,
  type Collection,
  type Doc,
  type Filter,
  type FindOptions,
  type Update,
} from '../../src/store/types.js';
import { MAX_MESSAGE_BYTES } from './wire.js';

/** A command's failure, sent as `{ok: 0, errmsg, code, codeName, errorLabels}`. */
export class CommandError extends Error {
  constructor(
    readonly code: number,
    readonly codeName: string,
    message: string,
    readonly errorLabels: string[] = [],
    readonly extra: Document = {},
  ) {
    super(message);
  }

  reply(): Document {
    return {
      ok: 0,
      errmsg: this.message,
      code: this.code,
      codeName: this.codeName,
      ...this.extra,
      ...(this.errorLabels.length > 0 ? { errorLabels: this.errorLabels } : {}),
    };
  }
}

export const REPLICA_SET = 'rs0';
const MAX_BSON_BYTES = MAX_DOCUMENT_BYTES;
/** Documents of a first batch when the client names no batchSize (MongoDB's default). */
const DEFAULT_FIRST_BATCH = 101;
/** A batch stops growing past this many bytes, so a reply stays under the document limit. */
const BATCH_BYTES = MAX_BSON_BYTES - 64 * 1024;
/** Retryable writes remembered (by session and transaction number) for a retry to find. */
const RETRY_MEMORY = 10_000;
const DB_NAME = /^[A-Za-z0-9_-]{1,63}$/;
const WRITE_COMMANDS = new Set(['insert', 'update', 'delete', 'findAndModify']);

export interface CommandContext {
  /** The `host:port` clients reach this server at. */
  address: string;
  connectionId: number;
  /** Tells the person running the stand-in about a gap or a failure. */
  log(line: string): void;
}

interface Cursor {
  ns: string;
  docs: Document[];
  at: number;
}

interface Database {
  store: EmbeddedStoreHandle;
  /** The writes of one database run one at a time, so a command's read-modify-write is atomic. */
  lock: Mutex;
}

type Handler = (body: Document, db: string, ctx: CommandContext) => Promise<Document> | Document;

export class CommandTable {
  private readonly databases = new Map<string, Promise<Database>>();
  private readonly cursors = new Map<bigint, Cursor>();
  private nextCursor = 1n;
  private readonly retried = new Map<string, Document>();
  /** Index specs given to createIndexes, by namespace then name (listIndexes and duplicate-key errors answer from it). */
  private readonly indexes = new Map<string, Map<string, Document>>();
  private readonly electionId = new BSON.ObjectId();
  private readonly handlers: Record<string, Handler>;

  constructor(private readonly dataDir: string) {
    const hello: Handler = (body, _db, ctx) => this.hello(body, ctx);
    const buildInfo: Handler = () => ({ version: '8.0.0', versionArray: [8, 0, 0, 0], gitVersion: 'steward-mongo-standin', bits: 64, maxBsonObjectSize: MAX_BSON_BYTES, ok: 1 });
    this.handlers = {
      hello,
      isMaster: hello,
      ismaster: hello,
      ping: () => ({ ok: 1 }),
      buildInfo,
      buildinfo: buildInfo,
      endSessions: () => ({ ok: 1 }),
      insert: (b, db) => this.insert(b, db),
      update: (b, db) => this.update(b, db),
      delete: (b, db) => this.delete(b, db),
      find: (b, db) => this.find(b, db),
      getMore: (b, db) => this.getMore(b, db),
      killCursors: (b) => this.killCursors(b),
      aggregate: (b, db, ctx) => this.aggregate(b, db, ctx),
      count: async (b, db) => ({ n: await (await this.collection(db, b.count)).count(filterOf(b.query)), ok: 1 }),
      distinct: async (b, db) => ({ values: await (await this.collection(db, b.distinct)).distinct(String(b.key), filterOf(b.query)), ok: 1 }),
      findAndModify: (b, db) => this.findAndModify(b, db),
      createIndexes: (b, db) => this.createIndexes(b, db),
      listIndexes: (b, db) => this.listIndexes(b, db),
      dropDatabase: (_b, db) => this.dropDatabase(db),
    };
  }

  /** Runs one command; failures become MongoDB error replies. */
  async run(name: string, body: Document, ctx: CommandContext): Promise<Document> {
    const handler = Object.hasOwn(this.handlers, name) ? this.handlers[name] : undefined;
    if (!handler) {
      ctx.log(`mongo-standin: unknown command "${name}" (answered CommandNotFound)`);
      return new CommandError(59, 'CommandNotFound', `no such command: '${name}'`).reply();
    }
    const db = String(body.$db ?? 'admin');
    const retryKey = WRITE_COMMANDS.has(name) ? retryKeyOf(body) : undefined;
    if (retryKey) {
      const earlier = this.retried.get(retryKey);
      if (earlier) return earlier; // a retried write: the first attempt's outcome, not a second write
    }
    try {
      if (!DB_NAME.test(db)) throw new CommandError(73, 'InvalidNamespace', `invalid database name '${db}'`);
      const reply = await handler(body, db, ctx);
      if (retryKey) this.remember(retryKey, reply);
      return reply;
    } catch (err) {
      if (err instanceof CommandError) return err.reply();
      if (err instanceof StoreError) return this.storeError(err, db, String(body[name] ?? ''), body).reply();
      ctx.log(`mongo-standin: ${name} failed: ${(err as Error).stack ?? String(err)}`);
      return new CommandError(1, 'InternalError', (err as Error).message ?? String(err)).reply();
    }
  }

  /** Closes every database (and removes nothing). */
  async close(): Promise<void> {
    const dbs = [...this.databases.values()];
    this.databases.clear();
    this.cursors.clear();
    await Promise.allSettled(dbs.map(async (d) => (await d).store.close()));
  }

  private remember(key: string, reply: Document): void {
    this.retried.set(key, reply);
    if (this.retried.size > RETRY_MEMORY) this.retried.delete(this.retried.keys().next().value!);
  }

  // -- handshake ------------------------------------------------------------------------------

  private hello(_body: Document, ctx: CommandContext): Document {
    // No `compression` (OP_COMPRESSED is refused) and no `topologyVersion` (the driver then polls
    // instead of streaming hello replies).
    return {
      helloOk: true,
      ismaster: true,
      isWritablePrimary: true,
      secondary: false,
      setName: REPLICA_SET,
      setVersion: 1,
      hosts: [ctx.address],
      primary: ctx.address,
      me: ctx.address,
      electionId: this.electionId,
      maxBsonObjectSize: MAX_BSON_BYTES,
      maxMessageSizeBytes: MAX_MESSAGE_BYTES,
      maxWriteBatchSize: 100_000,
      localTime: new Date(),
      logicalSessionTimeoutMinutes: 30,
      connectionId: ctx.connectionId,
      minWireVersion: 0,
      maxWireVersion: 25,
      readOnly: false,
      ok: 1,
    };
  }

  // -- databases ------------------------------------------------------------------------------

  private database(name: string): Promise<Database> {
    let db = this.databases.get(name);
    if (!db) {
      db = (async () => {
        const dir = join(this.dataDir, name);
        await mkdir(dir, { recursive: true, mode: 0o700 });
        return { store: await openEmbeddedStore({ dataDir: dir }), lock: new Mutex() };
      })();
      db.catch(() => this.databases.delete(name));
      this.databases.set(name, db);
    }
    return db;
  }

  private async collection(db: string, name: unknown): Promise<Collection<Doc>> {
    if (typeof name !== 'string' || name === '') throw new CommandError(73, 'InvalidNamespace', 'collection name must be a non-empty string');
    try {
      return (await this.database(db)).store.collection<Doc>(name);
    } catch (err) {
      if (err instanceof InvalidQueryError) throw new CommandError(73, 'InvalidNamespace', err.message);
      throw err;
    }
  }

  private async write<R>(db: string, fn: () => Promise<R>): Promise<R> {
    return (await this.database(db)).lock.run(fn);
  }

  private async dropDatabase(name: string): Promise<Document> {
    const db = this.databases.get(name);
    this.databases.delete(name);
    for (const ns of this.indexes.keys()) if (ns.startsWith(`${name}.`)) this.indexes.delete(ns);
    if (db) await (await db).store.close();
    await rm(join(this.dataDir, name), { recursive: true, force: true });
    return { dropped: name, ok: 1 };
  }

  // -- writes ---------------------------------------------------------------------------------

  private async insert(body: Document, db: string): Promise<Document> {
    const coll = await this.collection(db, body.insert);
    const docs = arrayOf(body.documents, 'documents');
    const ordered = body.ordered !== false;
    return this.write(db, async () => {
      const writeErrors: Document[] = [];
      try {
        await coll.insertMany(docs as Doc[]);
        return { n: docs.length, ok: 1 };
      } catch {
        // Some document was refused: one at a time, as MongoDB applies them.
      }
      let n = 0;
      for (let i = 0; i < docs.length; i++) {
        try {
          await coll.insertOne(docs[i] as Doc);
          n++;
        } catch (err) {
          writeErrors.push(this.writeError(err, i, db, coll.name, docs[i]!));
          if (ordered) break;
        }
      }
      return { n, ...(writeErrors.length > 0 ? { writeErrors } : {}), ok: 1 };
    });
  }

  private async update(body: Document, db: string): Promise<Document> {
    const coll = await this.collection(db, body.update);
    const statements = arrayOf(body.updates, 'updates');
    const ordered = body.ordered !== false;
    return this.write(db, async () => {
      let n = 0;
      let nModified = 0;
      const upserted: Document[] = [];
      const writeErrors: Document[] = [];
      for (let i = 0; i < statements.length; i++) {
        const s = statements[i]!;
        try {
          const r = await this.updateStatement(coll, s);
          n += r.matched + r.upserted;
          nModified += r.modified;
          if (r.upsertedId !== undefined) upserted.push({ index: i, _id: r.upsertedId });
        } catch (err) {
          writeErrors.push(this.writeError(err, i, db, coll.name, { ...filterOf(s.q), ...(isPlainObject(s.u) ? s.u.$set : {}) }));
          if (ordered) break;
        }
      }
      return { n, nModified, ...(upserted.length > 0 ? { upserted } : {}), ...(writeErrors.length > 0 ? { writeErrors } : {}), ok: 1 };
    });
  }

  private async updateStatement(coll: Collection<Doc>, s: Document): Promise<{ matched: number; modified: number; upserted: number; upsertedId?: unknown }> {
    const filter = filterOf(s.q);
    const upsert = s.upsert === true;
    if (s.arrayFilters !== undefined) throw new CommandError(2, 'BadValue', 'arrayFilters are not served by the stand-in');
    if (isReplacement(s.u)) {
      if (s.multi === true) throw new CommandError(9, 'FailedToParse', 'multi update is not supported for replacement-style update');
      const doc = { ...(s.u as Document) };
      const upsertId = upsert ? (doc._id ?? pinnedId(filter) ?? nanoid()) : undefined;
      if (upsert && doc._id === undefined) doc._id = upsertId;
      const r = await coll.replaceOne(filter, doc as Doc, { upsert });
      return { ...r, ...(r.upserted > 0 ? { upsertedId: upsertId } : {}) };
    }
    const update = updateOf(s.u);
    if (s.multi === true) {
      const r = await coll.updateMany(filter, update);
      if (r.matched > 0 || !upsert) return r;
    }
    const { update: withId, id } = upsert ? withUpsertId(filter, update) : { update, id: undefined };
    const r = await coll.updateOne(filter, withId, { upsert });
    return { ...r, ...(r.upserted > 0 ? { upsertedId: id } : {}) };
  }

  private async delete(body: Document, db: string): Promise<Document> {
    const coll = await this.collection(db, body.delete);
    const statements = arrayOf(body.deletes, 'deletes');
    const ordered = body.ordered !== false;
    return this.write(db, async () => {
      let n = 0;
      const writeErrors: Document[] = [];
      for (let i = 0; i < statements.length; i++) {
        const s = statements[i]!;
        try {
          n += s.limit === 1 ? await coll.deleteOne(filterOf(s.q)) : await coll.deleteMany(filterOf(s.q));
        } catch (err) {
          writeErrors.push(this.writeError(err, i, db, coll.name, {}));
          if (ordered) break;
        }
      }
      return { n, ...(writeErrors.length > 0 ? { writeErrors } : {}), ok: 1 };
    });
  }

  private async findAndModify(body: Document, db: string): Promise<Document> {
    const coll = await this.collection(db, body.findAndModify);
    const filter = filterOf(body.query);
    const sort = body.sort as FindOptions['sort'];
    if (body.fields !== undefined && Object.keys(body.fields as Document).length > 0) {
      throw new CommandError(2, 'BadValue', 'findAndModify fields (a projection) are not served by the stand-in');
    }
    return this.write(db, async () => {
      if (body.remove === true) {
        const doc = await coll.findOne(filter, sort ? { sort } : {});
        if (doc) await coll.deleteOne({ _id: doc._id });
        return { lastErrorObject: { n: doc ? 1 : 0 }, value: doc, ok: 1 };
      }
      const upsert = body.upsert === true;
      const after = body.new === true;
      if (isReplacement(body.update)) {
        const before = await coll.findOne(filter, sort ? { sort } : {});
        const doc = { ...(body.update as Document) };
        if (before) {
          doc._id = before._id;
          await coll.replaceOne({ _id: before._id }, doc as Doc);
          return { lastErrorObject: { n: 1, updatedExisting: true }, value: after ? await coll.findById(before._id) : before, ok: 1 };
        }
        if (!upsert) return { lastErrorObject: { n: 0, updatedExisting: false }, value: null, ok: 1 };
        doc._id ??= pinnedId(filter) ?? nanoid();
        await coll.insertOne(doc as Doc);
        return { lastErrorObject: { n: 1, updatedExisting: false, upserted: doc._id }, value: after ? await coll.findById(doc._id) : null, ok: 1 };
      }
      const { update, id } = upsert ? withUpsertId(filter, updateOf(body.update)) : { update: updateOf(body.update), id: undefined };
      // The version before tells whether a document was updated or inserted; under the lock the
      // version after is the one this command wrote.
      const before = await coll.findOneAndUpdate(filter, update, { upsert, returnDocument: 'before', ...(sort ? { sort } : {}) });
      if (before) {
        return { lastErrorObject: { n: 1, updatedExisting: true }, value: after ? await coll.findById(before._id) : before, ok: 1 };
      }
      if (!upsert || id === undefined) return { lastErrorObject: { n: 0, updatedExisting: false }, value: null, ok: 1 };
      const inserted = await coll.findById(String(id));
      if (!inserted) return { lastErrorObject: { n: 0, updatedExisting: false }, value: null, ok: 1 };
      return { lastErrorObject: { n: 1, updatedExisting: false, upserted: id }, value: after ? inserted : null, ok: 1 };
    });
  }

  private async createIndexes(body: Document, db: string): Promise<Document> {
    const coll = await this.collection(db, body.createIndexes);
    const specs = arrayOf(body.indexes, 'indexes');
    const ns = `${db}.${coll.name}`;
    return this.write(db, async () => {
      const known = this.indexes.get(ns) ?? new Map<string, Document>();
      const before = known.size + 1;
      for (const spec of specs) {
        if (!isPlainObject(spec.key) || Object.keys(spec.key).length === 0) throw new CommandError(67, 'CannotCreateIndex', 'index key pattern must be a non-empty object');
        const name = typeof spec.name === 'string' ? spec.name : Object.entries(spec.key).map(([f, d]) => `${f}_${d}`).join('_');
        const entry = { v: 2, key: spec.key, name, ...(spec.unique ? { unique: true } : {}), ...(spec.sparse ? { sparse: true } : {}) };
        const existing = known.get(name);
        if (existing) {
          if (JSON.stringify(existing.key) !== JSON.stringify(entry.key)) {
            throw new CommandError(86, 'IndexKeySpecsConflict', `An existing index has the same name as the requested index but different keys: ${name}`);
          }
          if (Boolean(existing.unique) !== Boolean(entry.unique) || Boolean(existing.sparse) !== Boolean(entry.sparse)) {
            throw new CommandError(85, 'IndexOptionsConflict', `An equivalent index already exists with a different name or options: ${name}`);
          }
          continue;
        }
        await coll.createIndex({ fields: spec.key as Record<string, 1 | -1>, unique: Boolean(spec.unique), sparse: Boolean(spec.sparse), name });
        known.set(name, entry);
      }
      this.indexes.set(ns, known);
      return { numIndexesBefore: before, numIndexesAfter: known.size + 1, createdCollectionAutomatically: before === 1, ok: 1 };
    });
  }

  private async listIndexes(body: Document, db: string): Promise<Document> {
    const coll = await this.collection(db, body.listIndexes);
    const known = this.indexes.get(`${db}.${coll.name}`);
    const docs = [{ v: 2, key: { _id: 1 }, name: '_id_' }, ...(known?.values() ?? [])];
    return this.cursorReply(`${db}.${coll.name}`, docs, batchSizeOf(body.cursor));
  }

  // -- reads ----------------------------------------------------------------------------------

  private async find(body: Document, db: string): Promise<Document> {
    const coll = await this.collection(db, body.find);
    const limit = typeof body.limit === 'number' ? body.limit : 0;
    const options: FindOptions = {
      ...(isPlainObject(body.sort) && Object.keys(body.sort).length > 0 ? { sort: body.sort as FindOptions['sort'] } : {}),
      ...(typeof body.skip === 'number' && body.skip > 0 ? { skip: body.skip } : {}),
      ...(limit !== 0 ? { limit: Math.abs(limit) } : {}),
      ...(isPlainObject(body.projection) && Object.keys(body.projection).length > 0 ? { projection: body.projection as FindOptions['projection'] } : {}),
    };
    const docs = await coll.find(filterOf(body.filter), options);
    const single = body.singleBatch === true || limit < 0;
    return this.cursorReply(`${db}.${coll.name}`, docs, single ? Infinity : batchSizeOf(body), single);
  }

  private async aggregate(body: Document, db: string, ctx: CommandContext): Promise<Document> {
    const coll = await this.collection(db, body.aggregate);
    const pipeline = arrayOf(body.pipeline, 'pipeline');
    const ns = `${db}.${coll.name}`;
    let filter: Filter = {};
    const options: FindOptions = {};
    let i = 0;
    if (i < pipeline.length && isPlainObject(pipeline[i]!.$match)) filter = filterOf(pipeline[i++]!.$match);
    if (i < pipeline.length && isPlainObject(pipeline[i]!.$sort)) options.sort = pipeline[i++]!.$sort as FindOptions['sort'];
    if (i < pipeline.length && typeof pipeline[i]!.$skip === 'number') options.skip = pipeline[i++]!.$skip as number;
    if (i < pipeline.length && typeof pipeline[i]!.$limit === 'number') options.limit = pipeline[i++]!.$limit as number;
    const rest = pipeline.slice(i);
    if (rest.length === 0) return this.cursorReply(ns, await coll.find(filter, options), batchSizeOf(body.cursor));
    // The count pipelines (countDocuments: `$group` on a constant with `$sum: 1`; and `$count`).
    const stage = rest[0]!;
    if (rest.length === 1 && (isCountGroup(stage.$group) || typeof stage.$count === 'string')) {
      const n = options.skip || options.limit ? (await coll.find(filter, { ...options, projection: { _id: 1 } })).length : await coll.count(filter);
      if (n === 0) return this.cursorReply(ns, [], Infinity);
      const field = typeof stage.$count === 'string' ? stage.$count : Object.keys(stage.$group as Document).find((k) => k !== '_id')!;
      const out = typeof stage.$count === 'string' ? { [field]: n } : { _id: (stage.$group as Document)._id, [field]: n };
      return this.cursorReply(ns, [out], Infinity);
    }
    ctx.log(`mongo-standin: aggregate pipeline not served: ${JSON.stringify(pipeline).slice(0, 300)}`);
    throw new CommandError(40324, 'Location40324', `Unrecognized pipeline stage name: '${Object.keys(stage)[0]}' (not served by the stand-in)`);
  }

  private getMore(body: Document, db: string): Document {
    const id = toBigInt(body.getMore);
    const cursor = this.cursors.get(id);
    if (!cursor) throw new CommandError(43, 'CursorNotFound', `cursor id ${id} not found`);
    if (cursor.ns !== `${db}.${body.collection}`) throw new CommandError(13, 'Unauthorized', `cursor ${id} belongs to ${cursor.ns}`);
    const batch = this.takeBatch(cursor, batchSizeOf(body, Infinity));
    const done = cursor.at >= cursor.docs.length;
    if (done) this.cursors.delete(id);
    return { cursor: { nextBatch: batch, id: BSON.Long.fromBigInt(done ? 0n : id), ns: cursor.ns }, ok: 1 };
  }

  private killCursors(body: Document): Document {
    const killed: unknown[] = [];
    const notFound: unknown[] = [];
    for (const raw of arrayOf(body.cursors, 'cursors')) {
      const id = toBigInt(raw);
      (this.cursors.delete(id) ? killed : notFound).push(BSON.Long.fromBigInt(id));
    }
    return { cursorsKilled: killed, cursorsNotFound: notFound, cursorsAlive: [], cursorsUnknown: [], ok: 1 };
  }

  private cursorReply(ns: string, docs: Document[], batchSize: number, single = false): Document {
    const cursor: Cursor = { ns, docs, at: 0 };
    const firstBatch = this.takeBatch(cursor, batchSize);
    let id = 0n;
    if (!single && cursor.at < docs.length) {
      id = this.nextCursor++;
      this.cursors.set(id, cursor);
    }
    return { cursor: { firstBatch, id: BSON.Long.fromBigInt(id), ns }, ok: 1 };
  }

  /** One op's write error: MongoDB's code and message, with a duplicate key's pattern and values. */
  private writeError(err: unknown, index: number, db: string, collection: string, doc: Document): Document {
    const e =
      err instanceof StoreError
        ? this.storeError(err, db, collection, doc)
        : err instanceof CommandError
          ? err
          : new CommandError(1, 'InternalError', String((err as Error)?.message ?? err));
    return { index, code: e.code, errmsg: e.message, ...e.extra };
  }

  /** MongoDB's error for a Store error; `doc` gives a duplicate key's values. */
  private storeError(err: StoreError, db: string, collection: string, doc: Document): CommandError {
    if (err instanceof DuplicateKeyError) {
      const index = err.index ?? '_id_';
      const keyPattern = index === '_id_' ? { _id: 1 } : ((this.indexes.get(`${db}.${collection}`)?.get(index)?.key as Document | undefined) ?? patternOf(index));
      const keyValue = Object.fromEntries(Object.keys(keyPattern).map((f) => [f, valueAt(doc, f) ?? null]));
      return new CommandError(
        11000,
        'DuplicateKey',
        `E11000 duplicate key error collection: ${db}.${collection} index: ${index} dup key: ${JSON.stringify(keyValue)}`,
        [],
        { keyPattern, keyValue },
      );
    }
    if (err instanceof DocumentTooLargeError) return new CommandError(10334, 'BSONObjectTooLarge', err.message);
    if (err instanceof InvalidQueryError) return new CommandError(2, 'BadValue', err.message);
    return new CommandError(1, 'InternalError', err.message);
  }

  private takeBatch(cursor: Cursor, size: number): Document[] {
    const batch: Document[] = [];
    let bytes = 0;
    while (cursor.at < cursor.docs.length && batch.length < size) {
      const doc = cursor.docs[cursor.at]!;
      bytes += BSON.calculateObjectSize(doc);
      if (batch.length > 0 && bytes > BATCH_BYTES) break;
      batch.push(doc);
      cursor.at++;
    }
    return batch;
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

function isPlainObject(v: unknown): v is Document {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

function filterOf(v: unknown): Filter {
  if (v === undefined || v === null) return {};
  if (!isPlainObject(v)) throw new CommandError(14, 'TypeMismatch', 'a filter must be an object');
  return v as Filter;
}

function arrayOf(v: unknown, what: string): Document[] {
  if (!Array.isArray(v)) throw new CommandError(14, 'TypeMismatch', `${what} must be an array`);
  return v as Document[];
}

function batchSizeOf(holder: unknown, fallback = DEFAULT_FIRST_BATCH): number {
  const size = isPlainObject(holder) ? holder.batchSize : undefined;
  return typeof size === 'number' && size > 0 ? size : fallback;
}

function toBigInt(v: unknown): bigint {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number') return BigInt(v);
  if (v instanceof BSON.Long) return v.toBigInt();
  throw new CommandError(14, 'TypeMismatch', 'cursor id must be a number');
}

function isCountGroup(g: unknown): boolean {
  if (!isPlainObject(g) || !('_id' in g)) return false;
  const fields = Object.keys(g).filter((k) => k !== '_id');
  return fields.length === 1 && isPlainObject(g[fields[0]!]) && (g[fields[0]!] as Document).$sum === 1 && !isPlainObject(g._id);
}

/** Session id and transaction number: what identifies a retryable write and its retries. */
function retryKeyOf(body: Document): string | undefined {
  const lsid = body.lsid as Document | undefined;
  if (!lsid || body.txnNumber === undefined) return undefined;
  const id = lsid.id instanceof BSON.Binary ? Buffer.from(lsid.id.buffer).toString('hex') : JSON.stringify(lsid.id);
  return `${id}:${String(body.txnNumber)}`;
}

function isReplacement(u: unknown): boolean {
  return isPlainObject(u) && !Object.keys(u).some((k) => k.startsWith('$'));
}

/** The `_id` an upsert with this filter inserts, when the filter fixes it by equality. */
function pinnedId(filter: Filter): unknown {
  const id = filter._id;
  if (id === undefined) return undefined;
  if (isPlainObject(id)) return '$eq' in id ? id.$eq : Object.keys(id).some((k) => k.startsWith('$')) ? undefined : id;
  return id;
}

/** An upsert's update with the `_id` it inserts made known (the server picks one when nothing names it). */
function withUpsertId(filter: Filter, update: Update): { update: Update; id: unknown } {
  const named = pinnedId(filter) ?? update.$set?._id ?? update.$setOnInsert?._id;
  if (named !== undefined) return { update, id: named };
  const id = nanoid();
  return { update: { ...update, $setOnInsert: { ...update.$setOnInsert, _id: id } }, id };
}

/**
 * An update document for the engine: `$currentDate` becomes a `$set` of the server's time, and a
 * pipeline of `$set`/`$unset` stages of literal values (or `$$NOW`) becomes the same operators.
 */
function updateOf(u: unknown): Update {
  const now = new Date();
  if (Array.isArray(u)) {
    const out: Update = {};
    for (const stage of u as Document[]) {
      const [name, arg] = Object.entries(stage)[0] ?? [];
      if ((name === '$set' || name === '$addFields') && isPlainObject(arg)) {
        out.$set = { ...out.$set, ...Object.fromEntries(Object.entries(arg).map(([k, v]) => [k, pipelineValue(v, now)])) };
      } else if (name === '$unset') {
        const fields = Array.isArray(arg) ? arg : [arg];
        out.$unset = { ...out.$unset, ...Object.fromEntries(fields.map((f) => [String(f), 1 as const])) };
      } else {
        throw new CommandError(2, 'BadValue', `pipeline update stage ${name} is not served by the stand-in`);
      }
    }
    return out;
  }
  if (!isPlainObject(u)) throw new CommandError(9, 'FailedToParse', 'update must be an object or a pipeline');
  const { $currentDate, ...rest } = u as Document;
  if ($currentDate === undefined) return rest as Update;
  if (!isPlainObject($currentDate)) throw new CommandError(2, 'BadValue', '$currentDate needs an object');
  const dates = Object.fromEntries(Object.keys($currentDate).map((k) => [k, now]));
  return { ...rest, $set: { ...(rest.$set as Document | undefined), ...dates } } as Update;
}

function pipelineValue(v: unknown, now: Date): unknown {
  if (v === '$$NOW') return now;
  if (typeof v === 'string' && v.startsWith('$')) throw new CommandError(2, 'BadValue', `pipeline expression ${v} is not served by the stand-in`);
  if (isPlainObject(v) && Object.keys(v).some((k) => k.startsWith('$'))) {
    if ('$literal' in v) return v.$literal;
    throw new CommandError(2, 'BadValue', `pipeline expression ${Object.keys(v)[0]} is not served by the stand-in`);
  }
  return v;
}

/** A value at a dotted path of a plain document (for a duplicate key's keyValue). */
function valueAt(doc: Document, path: string): unknown {
  let v: unknown = doc;
  for (const part of path.split('.')) v = isPlainObject(v) ? v[part] : undefined;
  return v;
}

/** The key pattern of an index from its default name (`a_1_b_-1`); `{name: 1}` when the name is not of that form. */
function patternOf(name: string): Document {
  const parts = name.split('_');
  const out: Document = {};
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const d = Number(parts[i + 1]);
    if (d !== 1 && d !== -1) return { [name]: 1 };
    out[parts[i]!] = d;
  }
  return Object.keys(out).length > 0 ? out : { [name]: 1 };
}
