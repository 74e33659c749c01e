/**
 * nedb's indexes kept in maps instead of its AVL trees, which cost several times the heap per entry
 * (docs/store.md, "Indexes"). Same meaning as nedb's (key equality by its `compareThings`, its unique
 * errors, range look-ups in key order), but a missing field is keyed as null, as MongoDB does.
 */
import Index from '@seald-io/nedb/lib/indexes.js';
import { compareThings, getDotValues } from '@seald-io/nedb/lib/model.js';

type IndexedDoc = object;
/** One document, or the documents sharing a key (documents are objects, never arrays). */
type Slot = IndexedDoc | IndexedDoc[];

interface RangeQuery {
  $lt?: unknown;
  $lte?: unknown;
  $gt?: unknown;
  $gte?: unknown;
}

const isPrimitiveKey = (key: unknown): boolean =>
  key === null || key === undefined || typeof key === 'string' || typeof key === 'number' || typeof key === 'boolean';

/** The key MongoDB indexes: a missing field (undefined) is null, also inside a compound key. */
function asIndexed(key: unknown): unknown {
  if (key === undefined) return null;
  if (typeof key !== 'object' || key === null || Array.isArray(key) || key instanceof Date) return key;
  let out: Record<string, unknown> | undefined;
  for (const field in key) {
    if ((key as Record<string, unknown>)[field] === undefined) (out ??= { ...(key as Record<string, unknown>) })[field] = null;
  }
  return out ?? key;
}

function uniqueViolation(key: unknown): Error {
  const err = new Error(`Can't insert key ${JSON.stringify(key)}, it violates the unique constraint`) as Error & {
    key: unknown;
    errorType: string;
  };
  err.key = key;
  err.errorType = 'uniqueViolated';
  return err;
}

/**
 * The tree interface nedb's `Index` uses, over maps: a key holds its document, or an array when
 * several share it. A full walk (`all()`, for `Index#getAll`) goes in insertion order.
 */
export class KeyedTree {
  /**
   * Strings, numbers, booleans, null and undefined (Map's SameValueZero is compareThings' equality
   * for these). For a compound index: compound keys of such values, one map level per field.
   */
  private readonly plain = new Map<unknown, unknown>();
  /** Dates, by their time. */
  private readonly dates = new Map<number, { key: Date; slot: Slot }>();
  /** Arrays and objects (an indexed field holding a sub-document): compared with compareThings. */
  private readonly deep: Array<{ key: unknown; slot: Slot }> = [];

  /** `fields`: a compound index's fields, in the order of nedb's key objects. */
  constructor(
    readonly unique: boolean,
    private readonly fields?: readonly string[],
  ) {}

  /** A compound key's values, in field order, when all are primitives (kept in nested maps); else null. */
  compoundParts(key: unknown): unknown[] | null {
    const fields = this.fields;
    if (fields === undefined || typeof key !== 'object' || key === null || Array.isArray(key) || key instanceof Date) return null;
    const k = key as Record<string, unknown>;
    if (Object.keys(k).length !== fields.length) return null;
    const parts: unknown[] = [];
    for (const field of fields) {
      if (!Object.hasOwn(k, field)) return null;
      const v = k[field];
      if (!isPrimitiveKey(v)) return null;
      parts.push(v);
    }
    return parts;
  }

  insert(rawKey: unknown, doc: IndexedDoc): void {
    const key = asIndexed(rawKey);
    const cur = this.get(key);
    if (cur === undefined) return this.set(key, doc);
    if (this.unique) throw uniqueViolation(key);
    if (Array.isArray(cur)) cur.push(doc);
    else this.set(key, [cur, doc]);
  }

  delete(rawKey: unknown, doc: IndexedDoc): void {
    const key = asIndexed(rawKey);
    const cur = this.get(key);
    if (cur === undefined) return;
    if (!Array.isArray(cur)) {
      if (cur === doc) this.unset(key);
      return;
    }
    // A new array, as nedb's tree does: an array handed out by search() stays as it was.
    const rest = cur.filter((d) => d !== doc);
    if (rest.length === cur.length) return;
    if (rest.length === 0) this.unset(key);
    else this.set(key, rest.length === 1 ? rest[0]! : rest);
  }

  /** Swaps `oldDoc` for `newDoc` under `key`, in place; false when `oldDoc` is not there. */
  replace(rawKey: unknown, oldDoc: IndexedDoc, newDoc: IndexedDoc): boolean {
    const key = asIndexed(rawKey);
    const cur = this.get(key);
    if (cur === oldDoc) {
      this.set(key, newDoc);
      return true;
    }
    if (!Array.isArray(cur)) return false;
    const i = cur.indexOf(oldDoc);
    if (i < 0) return false;
    const next = cur.slice();
    next[i] = newDoc;
    this.set(key, next);
    return true;
  }

  search(rawKey: unknown): IndexedDoc[] {
    const cur = this.get(asIndexed(rawKey));
    if (cur === undefined) return [];
    return Array.isArray(cur) ? cur : [cur];
  }

  /** Documents whose key lies within the bounds, in key order (as nedb's tree returns them). */
  betweenBounds(query: RangeQuery): IndexedDoc[] {
    const inRange = (k: unknown): boolean =>
      (!('$gt' in query) || compareThings(k, query.$gt) > 0) &&
      (!('$gte' in query) || compareThings(k, query.$gte) >= 0) &&
      (!('$lt' in query) || compareThings(k, query.$lt) < 0) &&
      (!('$lte' in query) || compareThings(k, query.$lte) <= 0);
    const hits = this.entries().filter(([k]) => inRange(k));
    hits.sort((a, b) => compareThings(a[0], b[0]));
    return hits.flatMap(([, slot]) => (Array.isArray(slot) ? slot : [slot]));
  }

  /** Every document, in insertion order of its key. */
  all(): IndexedDoc[] {
    const out: IndexedDoc[] = [];
    const add = (slot: Slot) => {
      if (Array.isArray(slot)) for (const d of slot) out.push(d);
      else out.push(slot);
    };
    if (this.fields === undefined) for (const slot of this.plain.values()) add(slot as Slot);
    else this.walk(this.plain, [], (_, slot) => add(slot));
    for (const e of this.dates.values()) add(e.slot);
    for (const e of this.deep) add(e.slot);
    return out;
  }

  private entries(): Array<[unknown, Slot]> {
    const out: Array<[unknown, Slot]> = [];
    if (this.fields === undefined) for (const [k, slot] of this.plain) out.push([k, slot as Slot]);
    else {
      const fields = this.fields;
      this.walk(this.plain, [], (parts, slot) => out.push([Object.fromEntries(fields.map((f, i) => [f, parts[i]])), slot]));
    }
    for (const e of this.dates.values()) out.push([e.key, e.slot]);
    for (const e of this.deep) out.push([e.key, e.slot]);
    return out;
  }

  /** Visits a compound index's nested maps: each key's values in field order, and its slot. */
  private walk(level: Map<unknown, unknown>, parts: unknown[], visit: (parts: unknown[], slot: Slot) => void): void {
    const leaf = parts.length === this.fields!.length - 1;
    for (const [k, v] of level) {
      if (leaf) visit([...parts, k], v as Slot);
      else this.walk(v as Map<unknown, unknown>, [...parts, k], visit);
    }
  }

  /** The map holding a compound key's last value (created on the way when `create`). */
  private leafMap(parts: unknown[], create: boolean): Map<unknown, unknown> | undefined {
    let level = this.plain;
    for (let i = 0; i < parts.length - 1; i++) {
      let next = level.get(parts[i]) as Map<unknown, unknown> | undefined;
      if (next === undefined) {
        if (!create) return undefined;
        level.set(parts[i], (next = new Map()));
      }
      level = next;
    }
    return level;
  }

  private get(key: unknown): Slot | undefined {
    if (this.fields !== undefined) {
      const parts = this.compoundParts(key);
      if (parts) return this.leafMap(parts, false)?.get(parts[parts.length - 1]) as Slot | undefined;
    } else if (isPrimitiveKey(key)) return this.plain.get(key) as Slot | undefined;
    if (key instanceof Date) return this.dates.get(key.getTime())?.slot;
    return this.deep.find((e) => compareThings(e.key, key) === 0)?.slot;
  }

  private set(key: unknown, slot: Slot): void {
    const parts = this.compoundParts(key);
    if (parts) {
      this.leafMap(parts, true)!.set(parts[parts.length - 1], slot);
    } else if (this.fields === undefined && isPrimitiveKey(key)) {
      this.plain.set(key, slot);
    } else if (key instanceof Date) {
      const e = this.dates.get(key.getTime());
      if (e) e.slot = slot;
      else this.dates.set(key.getTime(), { key, slot });
    } else {
      const e = this.deep.find((x) => compareThings(x.key, key) === 0);
      if (e) e.slot = slot;
      else this.deep.push({ key, slot });
    }
  }

  private unset(key: unknown): void {
    const parts = this.compoundParts(key);
    if (parts) {
      // Delete the entry, then every level it leaves empty.
      const levels = [this.plain];
      for (let i = 0; i < parts.length - 1; i++) {
        const next = levels[i]!.get(parts[i]) as Map<unknown, unknown> | undefined;
        if (next === undefined) return;
        levels.push(next);
      }
      levels[parts.length - 1]!.delete(parts[parts.length - 1]);
      for (let i = parts.length - 1; i > 0 && levels[i]!.size === 0; i--) levels[i - 1]!.delete(parts[i - 1]);
    } else if (this.fields === undefined && isPrimitiveKey(key)) this.plain.delete(key);
    else if (key instanceof Date) this.dates.delete(key.getTime());
    else {
      const i = this.deep.findIndex((x) => compareThings(x.key, key) === 0);
      if (i >= 0) this.deep.splice(i, 1);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Installation on nedb's Index

interface NedbIndex {
  _fields: string[];
  unique: boolean;
  sparse: boolean;
  tree: unknown;
  update(oldDoc: unknown, newDoc?: unknown): void;
  getAll(): IndexedDoc[];
}
interface Pair {
  oldDoc: IndexedDoc;
  newDoc: IndexedDoc;
}

const proto = (Index as unknown as { prototype: NedbIndex }).prototype;
const TREE = Symbol('tree');
type WithTree = NedbIndex & { [TREE]?: unknown };

/** The index's key of `doc` when an update can keep the document in place, else a marker. */
const MOVES = Symbol('moves');
function stableKey(index: NedbIndex, tree: KeyedTree, oldDoc: IndexedDoc, newDoc: IndexedDoc): unknown {
  const a = getDotValues(oldDoc, index._fields);
  const b = getDotValues(newDoc, index._fields);
  if (isPrimitiveKey(a)) return a === b ? a : MOVES;
  const pa = tree.compoundParts(a);
  const pb = pa && tree.compoundParts(b);
  return pa && pb && pa.every((v, i) => v === pb[i]) ? a : MOVES;
}

/** A key nedb leaves out of a sparse index: a missing field, or a compound key of missing fields. */
const unindexed = (key: unknown): boolean =>
  key === undefined || (typeof key === 'object' && key !== null && Object.values(key).every((v) => v === undefined));

/** Keeps a document in place when its key is unchanged; false when it must be moved. */
function updateInPlace(index: NedbIndex, tree: KeyedTree, pair: Pair): boolean {
  const key = stableKey(index, tree, pair.oldDoc, pair.newDoc);
  if (key === MOVES) return false;
  if (index.sparse && unindexed(key)) return true; // not indexed before or after
  return tree.replace(key, pair.oldDoc, pair.newDoc);
}

let installed = false;

/**
 * Makes nedb's indexes KeyedTrees (idempotent): nedb's `Index` assigns `this.tree` in its
 * constructor and `reset`, and an accessor on its prototype keeps a KeyedTree instead (nedb is pinned).
 */
export function installKeyedIndexes(): void {
  if (installed) return;
  installed = true;
  const originalUpdate = proto.update;
  const originalGetAll = proto.getAll;
  Object.defineProperty(proto, 'tree', {
    configurable: true,
    get(this: WithTree) {
      return this[TREE];
    },
    // nedb's AVL tree, assigned here, is replaced.
    set(this: WithTree) {
      this[TREE] = new KeyedTree(this.unique, this._fields.length > 1 ? this._fields : undefined);
    },
  });
  proto.getAll = function (this: NedbIndex): IndexedDoc[] {
    const tree = this.tree;
    return tree instanceof KeyedTree ? tree.all() : originalGetAll.call(this);
  };
  // nedb updates an index by removing the old document and inserting the new one (with a rollback
  // when a unique key collides). A document whose key did not change is swapped in place instead:
  // it cannot collide, and it keeps its place in the walk order.
  proto.update = function (this: NedbIndex, oldDoc: unknown, newDoc?: unknown): void {
    const tree = this.tree;
    if (!(tree instanceof KeyedTree)) return originalUpdate.call(this, oldDoc, newDoc);
    if (!Array.isArray(oldDoc)) {
      if (updateInPlace(this, tree, { oldDoc: oldDoc as IndexedDoc, newDoc: newDoc as IndexedDoc })) return;
      return originalUpdate.call(this, oldDoc, newDoc);
    }
    // Several documents: those whose key moves go through nedb's all-or-nothing update first;
    // the in-place swaps cannot fail, so they follow once that has succeeded.
    const pairs = oldDoc as Pair[];
    const moving: Pair[] = [];
    const staying: Array<{ key: unknown; pair: Pair }> = [];
    for (const pair of pairs) {
      const key = stableKey(this, tree, pair.oldDoc, pair.newDoc);
      if (key === MOVES || tree.search(key).indexOf(pair.oldDoc) < 0) moving.push(pair);
      else staying.push({ key, pair });
    }
    if (moving.length > 0) originalUpdate.call(this, moving);
    for (const { key, pair } of staying) tree.replace(key, pair.oldDoc, pair.newDoc);
  };
}
