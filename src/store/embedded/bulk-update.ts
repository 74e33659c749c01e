/**
 * bulkUpdate: ops in order, each failing alone. The ops addressed by `_id` (the actor host's, the
 * token roll-up's, lastSeen) are gathered and written together, in place where they allow it.
 */
import { checkObject } from '@seald-io/nedb/lib/model.js';
import { BulkUpdateError, InvalidQueryError, type BulkUpdateOp, type Filter, type StoreError, type UpdateResult } from '../types.js';
import { insertPrepared, internals, nedbIndexes, type NedbStore } from './datastore.js';
import { checkSize, failure, isUniqueViolation } from './errors.js';
import { canMergeInPlace, mergeInPlace, updateScalarsInPlace } from './in-place.js';
import { applyUpdate, buildUpsertDoc, compileUpdate, type UpdatePlan } from './update.js';
import { isPlainObject, valuesEqual, type StoredDoc } from './values.js';

/** What bulkUpdate uses of its collection: the single writes it falls back on. */
export interface BulkTarget {
  readonly name: string;
  updateLocked(ds: NedbStore, filter: Filter, plan: UpdatePlan, opts: { upsert: boolean; multi: boolean }): Promise<{ result: UpdateResult }>;
  replaceLocked(ds: NedbStore, old: StoredDoc, next: StoredDoc): Promise<void>;
  writeError(ds: NedbStore, err: unknown, doc: StoredDoc, inserting: boolean): StoreError;
}

/** The `_id` of a filter that is exactly `{_id: '<string>'}`, else undefined. */
function idOnlyFilter(filter: unknown): string | undefined {
  if (!isPlainObject(filter)) return undefined;
  let id: unknown;
  for (const key in filter) {
    if (key !== '_id' || !Object.hasOwn(filter, key)) return undefined;
    id = filter[key];
  }
  return typeof id === 'string' ? id : undefined;
}

/** A gathered change of one stored document, with the index of the bulkUpdate op that made it. */
interface GatheredChange {
  oldDoc: StoredDoc;
  newDoc: StoredDoc;
  op: number;
}

/**
 * What bulkUpdate has gathered to write at once, each `_id` at most once, each entry with its op so
 * that a failure is reported for it.
 */
class WriteBatch {
  readonly replacements: GatheredChange[] = [];
  readonly merges: GatheredChange[] = [];
  /** Documents `updateScalarsInPlace` changed, and their ops. */
  readonly updated: StoredDoc[] = [];
  readonly updatedOps: number[] = [];
  readonly inserts: StoredDoc[] = [];
  readonly insertOps: number[] = [];
  private readonly ids = new Set<string>();

  touches(id: string): boolean {
    return this.ids.has(id);
  }

  replace(oldDoc: StoredDoc, newDoc: StoredDoc, op: number): void {
    this.ids.add(oldDoc._id);
    this.replacements.push({ oldDoc, newDoc, op });
  }

  merge(oldDoc: StoredDoc, newDoc: StoredDoc, op: number): void {
    this.ids.add(oldDoc._id);
    this.merges.push({ oldDoc, newDoc, op });
  }

  /** A stored document already updated in place (`updateScalarsInPlace`): it only needs writing. */
  changed(doc: StoredDoc, op: number): void {
    this.ids.add(doc._id);
    this.updated.push(doc);
    this.updatedOps.push(op);
  }

  insert(doc: StoredDoc, op: number): void {
    this.ids.add(doc._id);
    this.inserts.push(doc);
    this.insertOps.push(op);
  }

  get empty(): boolean {
    return this.ids.size === 0;
  }

  clear(): void {
    this.ids.clear();
    this.replacements.length = 0;
    this.merges.length = 0;
    this.updated.length = 0;
    this.updatedOps.length = 0;
    this.inserts.length = 0;
    this.insertOps.length = 0;
  }
}

/** The counts and failed ops of a bulkUpdate as it goes; a gathered op counted is taken back out if its write fails. */
class BulkOutcome {
  readonly total: UpdateResult = { matched: 0, modified: 0, upserted: 0 };
  readonly failures: Array<{ index: number; error: StoreError }> = [];

  fail(index: number, error: StoreError, counted?: 'modified' | 'upserted'): void {
    this.failures.push({ index, error });
    if (counted === 'modified') {
      this.total.matched--;
      this.total.modified--;
    } else if (counted === 'upserted') this.total.upserted--;
  }
}

/**
 * Runs the ops in order under the collection's mutex. Any op not gathered (another filter, a second
 * op on a gathered `_id`) first writes what was gathered, so that it sees the ops before it.
 */
export async function bulkUpdateLocked(target: BulkTarget, ds: NedbStore, ops: BulkUpdateOp[]): Promise<UpdateResult> {
  if (!Array.isArray(ops)) throw new InvalidQueryError('bulkUpdate needs an array');
  const out = new BulkOutcome();
  const total = out.total;
  const batch = new WriteBatch();
  const indexedFields = nedbIndexes(ds).flatMap((def) => (def.key === '_id' ? [] : def.fields));
  for (let i = 0; i < ops.length; i++) {
    // An index loop: iterating across the awaits below would allocate an iterator result per op.
    const op = ops[i]!;
    try {
      const id = idOnlyFilter(op.filter);
      if (id !== undefined && !batch.touches(id)) {
        const old = internals(ds).indexes._id.getMatching(id)[0];
        // The common case first, without compiling a plan: scalars set or incremented in place.
        const inPlace = old ? updateScalarsInPlace(old, op.update, indexedFields) : undefined;
        if (inPlace !== undefined) {
          total.matched++;
          if (inPlace) {
            batch.changed(old!, i);
            total.modified++;
          }
          continue;
        }
        const plan = compileUpdate(op.update);
        if (old) {
          const next = applyUpdate(old, plan, false) as StoredDoc;
          if (!valuesEqual(old, next)) {
            checkObject(next);
            checkSize(target.name, next);
            if (canMergeInPlace(old, next, indexedFields)) batch.merge(old, next, i);
            else batch.replace(old, next, i);
            total.modified++;
          }
          total.matched++;
        } else if (op.upsert) {
          const doc = buildUpsertDoc(op.filter, plan);
          checkObject(doc);
          checkSize(target.name, doc);
          batch.insert(doc, i);
          total.upserted++;
        }
        continue;
      }
      const plan = compileUpdate(op.update);
      await applyBatch(target, ds, batch, out);
      const { result } = await target.updateLocked(ds, op.filter, plan, { upsert: Boolean(op.upsert), multi: false });
      total.matched += result.matched;
      total.modified += result.modified;
      total.upserted += result.upserted;
    } catch (err) {
      out.fail(i, failure(target.name, err));
    }
  }
  await applyBatch(target, ds, batch, out);
  if (out.failures.length > 0) {
    out.failures.sort((x, y) => x.index - y.index);
    throw new BulkUpdateError(target.name, out.failures, total);
  }
  return total;
}

/**
 * Writes a gathered batch: one index update and one append, one insert. nedb does each all or
 * nothing, so on a unique index's refusal the documents are written one by one: only the offenders fail.
 */
async function applyBatch(target: BulkTarget, ds: NedbStore, batch: WriteBatch, out: BulkOutcome): Promise<void> {
  if (batch.empty) return;
  const { replacements, merges, updated, updatedOps, inserts, insertOps } = batch;
  if (replacements.length > 0 || merges.length > 0 || updated.length > 0) {
    try {
      await internals(ds).executor.pushAsync(async () => {
        let refused: unknown;
        if (replacements.length > 0) {
          try {
            internals(ds)._updateIndexes(replacements);
          } catch (err) {
            refused = err; // nedb rolled all of them back; the merges cannot clash with anything
          }
        }
        const written = updated.slice();
        for (const { oldDoc, newDoc } of merges) {
          mergeInPlace(oldDoc, newDoc);
          written.push(oldDoc);
        }
        if (refused === undefined) for (const r of replacements) written.push(r.newDoc);
        await internals(ds).persistence.persistNewStateAsync(written);
        if (refused !== undefined) throw refused;
      });
    } catch (err) {
      if (!isUniqueViolation(err)) {
        // The append failed: none of the gathered changes is known to be on disk.
        const error = failure(target.name, err);
        for (const op of updatedOps) out.fail(op, error, 'modified');
        for (const m of merges) out.fail(m.op, error, 'modified');
        for (const r of replacements) out.fail(r.op, error, 'modified');
      } else {
        for (const r of replacements) {
          try {
            await target.replaceLocked(ds, r.oldDoc, r.newDoc);
          } catch (inner) {
            out.fail(r.op, failure(target.name, inner), 'modified');
          }
        }
      }
    }
  }
  if (inserts.length > 0) {
    try {
      await insertPrepared(ds, inserts);
    } catch (err) {
      if (!isUniqueViolation(err)) {
        const error = failure(target.name, err);
        for (const op of insertOps) out.fail(op, error, 'upserted');
      } else {
        for (let k = 0; k < inserts.length; k++) {
          try {
            await insertPrepared(ds, [inserts[k]!]);
          } catch (inner) {
            out.fail(insertOps[k]!, target.writeError(ds, inner, inserts[k]!, true), 'upserted');
          }
        }
      }
    }
  }
  batch.clear();
}
