/**
 * The epoch fence: a write of an owned actor's document carries the owner's `{shard, epoch}`, and
 * the store refuses it when the document was already written (or claimed) under a higher epoch,
 * so an owner that lost its shard without knowing (a long pause, a partition) cannot overwrite
 * what the new owner wrote.
 *
 * How: the document keeps the fence of its last writer in `fence`; a fenced write's filter adds
 * "no fence yet, or fence.epoch ≤ mine" and its update sets `fence` to mine. It is one
 * single-document conditional write, so it means the same on the embedded store and on MongoDB,
 * and inside a bulkUpdate each op is checked on its own. A fenced write is an upsert keyed by
 * `_id`: when the condition fails the upsert tries to insert that `_id` again and fails alone
 * with DuplicateKeyError, which `fencedUpdateOne` and `fenceFailures` turn into StaleEpochError
 * after reading the stored fence (so a real duplicate on another unique index is never mistaken).
 *
 * A new owner must read an actor's document through `claimDocument` before acting on it: that
 * read stamps the document with the new epoch, after which every write of the old owner fails.
 * Epochs come from one cluster-wide counter (shards.ts), so they compare across shards, and a
 * change of the shard count does not turn new owners' writes into stale ones.
 */
import {
  DuplicateKeyError,
  StoreError,
  type BulkUpdateError,
  type BulkUpdateOp,
  type Collection,
  type Doc,
  type Filter,
  type Update,
  type UpdateResult,
} from '../store/types.js';

export interface Fence {
  shard: number;
  epoch: number;
}

/** The field a fenced document keeps its last writer's fence in. */
export const FENCE_FIELD = 'fence';

export interface FencedDoc extends Doc {
  fence?: Fence;
}

/** A write under an older epoch than the document's: the writer no longer owns the actor. */
export class StaleEpochError extends StoreError {
  constructor(
    readonly collection: string,
    readonly id: string,
    readonly fence: Fence,
    /** The epoch the document was written or claimed under. */
    readonly storedEpoch: number,
  ) {
    super(`${collection}/${id}: written under epoch ${storedEpoch}; a write under epoch ${fence.epoch} (shard ${fence.shard}) is refused`);
  }
}

/** The condition a fenced write adds: never fenced, or last fenced at this epoch or lower. */
export function fenceCondition(fence: Fence): Filter {
  checkFence(fence);
  return { $or: [{ [`${FENCE_FIELD}.epoch`]: { $exists: false } }, { [`${FENCE_FIELD}.epoch`]: { $lte: fence.epoch } }] };
}

/** `filter` with the fence condition added. */
export function fencedFilter(filter: Filter, fence: Fence): Filter {
  const condition = fenceCondition(fence);
  return filter.$or === undefined ? { ...filter, ...condition } : { $and: [filter, condition] };
}

/** `update` that also records the fence. */
export function fencedUpdate(update: Update, fence: Fence): Update {
  checkFence(fence);
  return { ...update, $set: { ...update.$set, [FENCE_FIELD]: { shard: fence.shard, epoch: fence.epoch } } };
}

/**
 * A bulkUpdate op fenced: `op` must be an upsert whose filter fixes `_id` (so a refusal fails the
 * op alone, visibly). After a BulkUpdateError, `fenceFailures` tells the stale ops apart.
 */
export function fencedOp(op: BulkUpdateOp, fence: Fence): BulkUpdateOp {
  if (!op.upsert || typeof op.filter._id !== 'string') throw new Error('a fenced bulk op must be an upsert whose filter fixes a string _id');
  return { filter: fencedFilter(op.filter, fence), update: fencedUpdate(op.update, fence), upsert: true };
}

/**
 * One fenced update of the document `id` (`filter` may add conditions). Throws StaleEpochError when
 * the document carries a higher epoch; otherwise as updateOne (without upsert, a document that is
 * missing or fails `filter` is `matched: 0`).
 */
export async function fencedUpdateOne<T extends FencedDoc>(
  col: Collection<T>,
  id: string,
  update: Update,
  fence: Fence,
  options: { filter?: Filter; upsert?: boolean } = {},
): Promise<UpdateResult> {
  const filter = fencedFilter({ ...options.filter, _id: id }, fence);
  let result: UpdateResult;
  try {
    result = await col.updateOne(filter, fencedUpdate(update, fence), { upsert: Boolean(options.upsert) });
  } catch (err) {
    if (err instanceof DuplicateKeyError && options.upsert) await throwIfStale(col, id, fence);
    throw err;
  }
  if (result.matched === 0 && result.upserted === 0) await throwIfStale(col, id, fence);
  return result;
}

/**
 * Reads the document `id` for a new owner and stamps it with its fence in the same atomic step:
 * from then on, writes under a lower epoch fail. Returns the document as stored now, or null when
 * there is none. With `stampMissing`, a missing document is stamped too (a stub `{_id, fence}` is
 * inserted, and null returned), so even the first write of an old owner fails; leave it off where
 * readers would trip over such a stub. Throws StaleEpochError when the document already carries
 * a higher epoch: this node's ownership is already over.
 */
export async function claimDocument<T extends FencedDoc>(col: Collection<T>, id: string, fence: Fence, options: { stampMissing?: boolean } = {}): Promise<T | null> {
  const filter = fencedFilter({ _id: id }, fence);
  const stamp = fencedUpdate({}, fence);
  const stamped = (before: T): T => ({ ...before, [FENCE_FIELD]: { shard: fence.shard, epoch: fence.epoch } });
  try {
    // `before`: null then means "nothing was stored" when the upsert inserted the stub.
    const before = await col.findOneAndUpdate(filter, stamp, { upsert: Boolean(options.stampMissing), returnDocument: 'before' });
    if (before) return stamped(before);
    if (options.stampMissing) return null;
  } catch (err) {
    if (!(err instanceof DuplicateKeyError)) throw err;
    await throwIfStale(col, id, fence);
    // Lost an insert race with a writer at the same or a lower epoch: stamp what is there now.
    const before = await col.findOneAndUpdate(filter, stamp, { returnDocument: 'before' });
    if (before) return stamped(before);
  }
  await throwIfStale(col, id, fence);
  return null;
}

/**
 * Sorts the failures of a bulkUpdate of fenced ops: `stale` are the ops refused because the
 * document carries a higher epoch (each as a StaleEpochError), `other` the rest, as reported.
 */
export async function fenceFailures<T extends FencedDoc>(
  col: Collection<T>,
  ops: readonly BulkUpdateOp[],
  err: BulkUpdateError,
): Promise<{ stale: Array<{ index: number; error: StaleEpochError }>; other: Array<{ index: number; error: StoreError }> }> {
  const stale: Array<{ index: number; error: StaleEpochError }> = [];
  const other: Array<{ index: number; error: StoreError }> = [];
  const suspects = err.failures.filter((f) => f.error instanceof DuplicateKeyError && opFence(ops[f.index]) !== undefined);
  const ids = [...new Set(suspects.map((f) => opId(ops[f.index]!)).filter((id): id is string => id !== undefined))];
  const stored = new Map<string, number | undefined>();
  if (ids.length > 0) for (const d of await col.find({ _id: { $in: ids } }, { projection: { [FENCE_FIELD]: 1 } })) stored.set(d._id, d.fence?.epoch);
  for (const f of err.failures) {
    const op = ops[f.index];
    const fence = op ? opFence(op) : undefined;
    const id = op ? opId(op) : undefined;
    const storedEpoch = id !== undefined ? stored.get(id) : undefined;
    if (f.error instanceof DuplicateKeyError && fence && id !== undefined && storedEpoch !== undefined && storedEpoch > fence.epoch) {
      stale.push({ index: f.index, error: new StaleEpochError(col.name, id, fence, storedEpoch) });
    } else other.push(f);
  }
  return { stale, other };
}

async function throwIfStale<T extends FencedDoc>(col: Collection<T>, id: string, fence: Fence): Promise<void> {
  const doc = await col.findOne({ _id: id }, { projection: { [FENCE_FIELD]: 1 } });
  const storedEpoch = doc?.fence?.epoch;
  if (typeof storedEpoch === 'number' && storedEpoch > fence.epoch) throw new StaleEpochError(col.name, id, fence, storedEpoch);
}

function opFence(op: BulkUpdateOp | undefined): Fence | undefined {
  const f = op?.update.$set?.[FENCE_FIELD] as Fence | undefined;
  return f && typeof f.epoch === 'number' ? f : undefined;
}

/** The `_id` a fenced op's filter fixes (it may sit inside the `$and` fencedFilter built). */
function opId(op: BulkUpdateOp): string | undefined {
  if (typeof op.filter._id === 'string') return op.filter._id;
  const first = Array.isArray(op.filter.$and) ? (op.filter.$and[0] as Filter | undefined) : undefined;
  return typeof first?._id === 'string' ? first._id : undefined;
}

function checkFence(fence: Fence): void {
  if (!Number.isSafeInteger(fence.epoch) || fence.epoch < 1 || !Number.isInteger(fence.shard) || fence.shard < 0) {
    throw new Error(`not a fence: ${JSON.stringify(fence)}`);
  }
}
