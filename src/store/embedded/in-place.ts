/**
 * Writes into the stored document itself instead of swapping in a new copy, so a fleet's frequent
 * small updates of long-lived documents leave (almost) no garbage: bulkUpdate's fast paths.
 */
import { intern } from './intern.js';
import { indexKeyValues, updatePathParts } from './paths.js';
import { isPlainObject, own, valuesEqual, type Obj, type StoredDoc } from './values.js';

/** Whether path `inner` is `outer` or lies inside it. */
function isWithin(inner: string, outer: string): boolean {
  return inner.startsWith(outer) && (inner.length === outer.length || inner.charCodeAt(outer.length) === 46); // '.'
}

/** Whether a path and an indexed field overlap (one is the other or lies inside it); allocates nothing. */
function touchesField(path: string, field: string): boolean {
  return path.length >= field.length ? isWithin(path, field) : isWithin(field, path);
}

/** The object holding the last part of a path, when every step down is an own plain-object field. */
function parentIn(doc: Obj, parts: readonly string[]): Obj | undefined {
  let cur: Obj = doc;
  for (let i = 0; i < parts.length - 1; i++) {
    const next = own(cur, parts[i]!);
    if (!isPlainObject(next)) return undefined;
    cur = next;
  }
  return cur;
}

/** A value the in-place path stores as it is: a string (interned), number, boolean or null. */
function isScalar(v: unknown): v is string | number | boolean | null {
  return v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
}

/** The longest string written in place: such writes are not measured against the document limit. */
const IN_PLACE_STRING_MAX = 1024;

/**
 * Whether `updateScalarsInPlace` may apply `update` to `doc`: only `$set` of scalars and `$inc`, on
 * scalar fields the document has, outside `_id`, every index and one another. Allocates nothing.
 */
function inPlaceApplicable(doc: StoredDoc, update: Obj, indexedFields: readonly string[]): boolean {
  let steps = 0;
  for (const op in update) {
    if ((op !== '$set' && op !== '$inc') || !Object.hasOwn(update, op)) return false;
    const arg = update[op];
    if (!isPlainObject(arg)) return false;
    for (const path in arg) {
      if (!Object.hasOwn(arg, path)) return false;
      const value = arg[path];
      if (op === '$inc' ? typeof value !== 'number' : !isScalar(value)) return false;
      if (typeof value === 'string' && value.length > IN_PLACE_STRING_MAX) return false;
      const parts = updatePathParts(path);
      if (parts === undefined || parts[0] === '_id') return false;
      for (const field of indexedFields) if (touchesField(path, field)) return false;
      for (const otherOp in update) {
        for (const other in update[otherOp] as Obj) {
          if ((otherOp !== op || other !== path) && touchesField(path, other)) return false;
        }
      }
      const parent = parentIn(doc, parts);
      const leaf = parts[parts.length - 1]!;
      if (parent === undefined || !Object.hasOwn(parent, leaf)) return false;
      const cur = parent[leaf];
      if (op === '$inc' ? typeof cur !== 'number' : !isScalar(cur)) return false;
      steps++;
    }
  }
  return steps > 0;
}

/**
 * Applies `update` to the stored `doc` itself, straight from the update object, all or nothing:
 * whether a value changed, or undefined (nothing done) when it needs the general path.
 */
export function updateScalarsInPlace(doc: StoredDoc, update: unknown, indexedFields: readonly string[]): boolean | undefined {
  if (!isPlainObject(update) || !inPlaceApplicable(doc, update, indexedFields)) return undefined;
  let changed = false;
  for (const op in update) {
    const arg = update[op] as Obj;
    for (const path in arg) {
      const parts = updatePathParts(path)!;
      const parent = parentIn(doc, parts)!;
      const leaf = parts[parts.length - 1]!;
      const cur = parent[leaf];
      const value = arg[path];
      const next = op === '$inc' ? (cur as number) + (value as number) : typeof value === 'string' ? intern(value) : value;
      if (!valuesEqual(cur, next)) {
        parent[leaf] = next;
        changed = true;
      }
    }
  }
  return changed;
}

/** Whether `a`'s own keys are the first keys of `b`, in the same order. */
function keysPrefix(a: Obj, b: Obj): boolean {
  const ak = Object.keys(a);
  const bk = Object.keys(b);
  if (ak.length > bk.length) return false;
  for (let i = 0; i < ak.length; i++) if (ak[i] !== bk[i]) return false;
  return true;
}

/**
 * Whether `next` may be merged into the stored `old`: no index needs to move it, and `next` only
 * adds keys to `old`'s, in order (so the merged object has `next`'s key order).
 */
export function canMergeInPlace(old: StoredDoc, next: StoredDoc, indexedFields: readonly string[]): boolean {
  if (!keysPrefix(old, next)) return false;
  for (const field of indexedFields) {
    if (!valuesEqual(indexKeyValues(old, field), indexKeyValues(next, field))) return false;
  }
  return true;
}

/**
 * Makes the stored `target` deep-equal to `source` (its updated copy), keeping every part that did
 * not change, nested objects included. `target`'s keys must be a prefix of `source`'s.
 */
export function mergeInPlace(target: Obj, source: Obj): void {
  for (const key of Object.keys(source)) {
    const s = source[key];
    if (!Object.hasOwn(target, key)) {
      target[key] = s;
      continue;
    }
    const t = target[key];
    if (t === s) continue;
    if (isPlainObject(t) && isPlainObject(s) && keysPrefix(t, s)) mergeInPlace(t, s);
    else if (typeof s !== 'object' || s === null || !valuesEqual(t, s)) target[key] = s;
  }
}
