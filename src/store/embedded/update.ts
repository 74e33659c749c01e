/**
 * Update operators with MongoDB's meaning: an update compiled into steps in path order and applied
 * copy-on-write, and the documents an insert or an upsert stores.
 */
import { nanoid } from 'nanoid';
import { InvalidQueryError, type Filter } from '../types.js';
import { collectEqualities, compileCondition, compileFilter, isElementCondition, operand } from './filter.js';
import { comparePaths, getPath, isArrayIndex, isPathPrefix, splitPath, splitUpdatePath } from './paths.js';
import { cloneStored, cloneValue, compareValues, describe, isPlainObject, own, valuesEqual, type Obj, type StoredDoc } from './values.js';

/**
 * The child at `key`, private to the update being built: one the update did not create (not in
 * `fresh`) is still the stored document's, so a shallow copy takes its place first.
 */
function ownChild(parent: Obj | unknown[], key: string | number, child: unknown, fresh: Set<object> | undefined): unknown {
  if (!fresh || typeof child !== 'object' || child === null || fresh.has(child)) return child;
  let copy: Obj | unknown[];
  if (Array.isArray(child)) copy = child.slice();
  else if (isPlainObject(child)) copy = { ...child };
  else return child;
  fresh.add(copy);
  (parent as Obj)[key as string] = copy;
  return copy;
}

/**
 * `$set` semantics: creates missing intermediate documents, pads arrays with null. With `fresh`
 * (see `applyUpdate`), the objects on the path are copied before they change.
 */
export function setPath(doc: Obj, parts: readonly string[], value: unknown, fresh?: Set<object>): void {
  let cur: Obj | unknown[] = doc;
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i];
    const last = i === parts.length - 1;
    if (Array.isArray(cur)) {
      if (!isArrayIndex(part)) {
        throw new InvalidQueryError(`Cannot create field '${part}' in element {${parts[i - 1]}: ${describe(cur)}}`);
      }
      const idx = Number(part);
      while (cur.length < idx) cur.push(null);
      if (last) {
        cur[idx] = value;
        return;
      }
      let next = ownChild(cur, idx, cur[idx], fresh);
      if (next === undefined) {
        const created = {};
        fresh?.add(created);
        next = cur[idx] = created;
      }
      if (!isPlainObject(next) && !Array.isArray(next)) {
        throw new InvalidQueryError(`Cannot create field '${parts[i + 1]}' in element {${part}: ${describe(next)}}`);
      }
      cur = next as Obj | unknown[];
    } else {
      if (last) {
        cur[part] = value;
        return;
      }
      let next = ownChild(cur, part, own(cur, part), fresh);
      if (next === undefined) {
        const created = {};
        fresh?.add(created);
        next = cur[part] = created;
      }
      if (!isPlainObject(next) && !Array.isArray(next)) {
        throw new InvalidQueryError(`Cannot create field '${parts[i + 1]}' in element {${part}: ${describe(next)}}`);
      }
      cur = next as Obj | unknown[];
    }
  }
}

/** `$unset` semantics: no-op when missing; an array element is set to null rather than removed. */
function unsetPath(doc: Obj, parts: readonly string[], fresh?: Set<object>): void {
  if (fresh && getPath(doc, parts) === undefined) return; // nothing to copy for
  let cur: unknown = doc;
  for (let i = 0; i < parts.length - 1; i++) {
    const parent = cur;
    cur = Array.isArray(cur) ? (isArrayIndex(parts[i]) ? own(cur, parts[i]) : undefined) : isPlainObject(cur) ? own(cur, parts[i]) : undefined;
    if (cur === undefined) return;
    cur = ownChild(parent as Obj, parts[i], cur, fresh);
  }
  const last = parts[parts.length - 1];
  if (Array.isArray(cur)) {
    if (isArrayIndex(last) && Number(last) < cur.length) cur[Number(last)] = null;
  } else if (isPlainObject(cur)) {
    delete cur[last];
  }
}

type UpdateOperator = '$set' | '$unset' | '$inc' | '$max' | '$push' | '$pull' | '$addToSet' | '$setOnInsert';
const UPDATE_OPERATORS = new Set<string>(['$set', '$unset', '$inc', '$max', '$push', '$pull', '$addToSet', '$setOnInsert']);

interface UpdateStep {
  op: UpdateOperator;
  path: string;
  parts: readonly string[];
  value: unknown;
  /** The values `$push` or `$addToSet` adds. */
  each?: unknown[];
  pull?: (el: unknown) => boolean;
}

export interface UpdatePlan {
  steps: UpdateStep[];
}

export function compileUpdate(update: unknown): UpdatePlan {
  if (!isPlainObject(update)) throw new InvalidQueryError('update must be an object');
  const steps: UpdateStep[] = [];
  const operators = Object.keys(update).filter((k) => update[k] !== undefined);
  if (operators.length === 0) throw new InvalidQueryError('update document requires update operators');
  for (const op of operators) {
    if (!op.startsWith('$')) {
      throw new InvalidQueryError('update document requires update operators (use replaceOne to replace a document)');
    }
    if (!UPDATE_OPERATORS.has(op)) throw new InvalidQueryError(`unknown update operator: ${op}`);
    const arg = update[op];
    if (!isPlainObject(arg)) throw new InvalidQueryError(`${op} needs an object`);
    for (const path of Object.keys(arg)) {
      const raw = arg[path];
      if (raw === undefined) continue;
      const step: UpdateStep = { op: op as UpdateOperator, path, parts: splitUpdatePath(path), value: cloneStored(raw) };
      if (op === '$inc' && typeof raw !== 'number') {
        throw new InvalidQueryError(`Cannot increment with non-numeric argument: {${path}: ${describe(raw)}}`);
      }
      if (op === '$push' || op === '$addToSet') step.each = valuesToAdd(op, step.value);
      if (op === '$pull') step.pull = compilePullMatcher(raw);
      steps.push(step);
    }
  }
  // MongoDB applies fields in path order and refuses two operations on the same or nested paths.
  // An update has a handful of paths: an insertion sort, in place, allocates nothing.
  for (let i = 1; i < steps.length; i++) {
    const step = steps[i]!;
    let j = i - 1;
    while (j >= 0 && comparePaths(steps[j]!.parts, step.parts) > 0) {
      steps[j + 1] = steps[j]!;
      j--;
    }
    steps[j + 1] = step;
  }
  for (let i = 1; i < steps.length; i++) {
    if (isPathPrefix(steps[i - 1].parts, steps[i].parts)) {
      throw new InvalidQueryError(`Updating the path '${steps[i].path}' would create a conflict at '${steps[i - 1].path}'`);
    }
  }
  return { steps };
}

/** What `$push` or `$addToSet` adds: the value, or the values of `{$each: [...]}` (its one modifier). */
function valuesToAdd(op: '$push' | '$addToSet', value: unknown): unknown[] {
  if (!isPlainObject(value) || !Object.hasOwn(value, '$each')) return [value];
  for (const mod of Object.keys(value)) if (mod !== '$each') throw new InvalidQueryError(`unrecognized ${op} modifier: ${mod}`);
  if (!Array.isArray(value.$each)) throw new InvalidQueryError('$each requires an array value');
  return value.$each;
}

/**
 * $pull as MongoDB's PullNode: a document of field conditions is a query on document elements, an
 * operator expression (`{$gte: 6}`) a condition on each element, anything else equality.
 */
function compilePullMatcher(cond: unknown): (el: unknown) => boolean {
  if (isPlainObject(cond) && isElementCondition(cond)) {
    const p = compileCondition(cond);
    return (el) => p([el]);
  }
  if (isPlainObject(cond)) {
    const p = compileFilter(cond);
    return (el) => isPlainObject(el) && p(el);
  }
  const expected = operand(cond);
  return (el) => valuesEqual(el, expected);
}

function arrayAt(doc: Obj, step: UpdateStep): unknown[] | undefined {
  const cur = getPath(doc, step.parts);
  if (cur === undefined) return undefined;
  if (!Array.isArray(cur)) {
    throw new InvalidQueryError(`The field '${step.path}' must be an array but is of type ${describe(cur)} for ${step.op}`);
  }
  return cur;
}

/**
 * `doc` with the update applied, copied on write: the objects on the updated paths are new, the
 * rest is shared with `doc`. `isInsert`: an upsert's new document ($setOnInsert, `_id` settable).
 */
export function applyUpdate(doc: Obj, plan: UpdatePlan, isInsert: boolean): Obj {
  const out: Obj = { ...doc };
  const fresh = new Set<object>([out]);
  const set = (parts: readonly string[], value: unknown) => setPath(out, parts, value, fresh);
  for (const step of plan.steps) {
    switch (step.op) {
      case '$setOnInsert':
        if (isInsert) set(step.parts, cloneValue(step.value));
        break;
      case '$set':
        set(step.parts, cloneValue(step.value));
        break;
      case '$unset':
        unsetPath(out, step.parts, fresh);
        break;
      case '$inc': {
        const cur = getPath(out, step.parts);
        if (cur !== undefined && typeof cur !== 'number') {
          throw new InvalidQueryError(`Cannot apply $inc to a value of non-numeric type (${step.path}: ${describe(cur)})`);
        }
        set(step.parts, (cur ?? 0) + (step.value as number));
        break;
      }
      case '$max': {
        const cur = getPath(out, step.parts);
        if (cur === undefined || compareValues(step.value, cur) > 0) set(step.parts, cloneValue(step.value));
        break;
      }
      case '$push': {
        const arr = [...(arrayAt(out, step) ?? [])];
        for (const v of step.each!) arr.push(cloneValue(v));
        set(step.parts, arr);
        break;
      }
      case '$addToSet': {
        const arr = [...(arrayAt(out, step) ?? [])];
        for (const v of step.each!) if (!arr.some((el) => valuesEqual(el, v))) arr.push(cloneValue(v));
        set(step.parts, arr);
        break;
      }
      case '$pull': {
        const arr = arrayAt(out, step);
        if (arr === undefined) break;
        const kept = arr.filter((el) => !step.pull!(el));
        if (kept.length !== arr.length) set(step.parts, kept);
        break;
      }
    }
  }
  if (!isInsert && !valuesEqual(out._id, doc._id)) {
    throw new InvalidQueryError("Performing an update on the path '_id' would modify the immutable field '_id'");
  }
  return out;
}

export function buildUpsertDoc(filter: Filter, plan: UpdatePlan): StoredDoc {
  const pairs: Array<[string, unknown]> = [];
  collectEqualities(filter, pairs);
  const seeds = pairs.map(([path, value]) => ({ path, parts: splitPath(path), value }));
  seeds.sort((a, b) => comparePaths(a.parts, b.parts));
  for (let i = 1; i < seeds.length; i++) {
    if (isPathPrefix(seeds[i - 1].parts, seeds[i].parts)) {
      throw new InvalidQueryError(`cannot infer query fields to set, path '${seeds[i].path}' is matched twice`);
    }
  }
  const seed: Obj = {};
  for (const s of seeds) setPath(seed, s.parts, cloneStored(s.value));
  const doc = applyUpdate(seed, plan, true);
  if (seed._id !== undefined && !valuesEqual(seed._id, doc._id)) {
    throw new InvalidQueryError("Performing an update on the path '_id' would modify the immutable field '_id'");
  }
  // The contract keeps `_id` a string. When neither the filter nor the update names one (upsert by
  // a natural key), generate one here instead of letting an engine invent a non-string id.
  return withIdFirst(doc, doc._id === undefined ? nanoid() : doc._id);
}

/** MongoDB stores `_id` as the first field. */
export function withIdFirst(doc: Obj, id: unknown): StoredDoc {
  if (typeof id !== 'string') throw new InvalidQueryError('documents need a string _id');
  const { _id: _ignored, ...rest } = doc;
  return { _id: id, ...rest };
}

export function prepareNewDoc(doc: unknown): StoredDoc {
  if (!isPlainObject(doc)) throw new InvalidQueryError('document must be an object');
  const copy = cloneStored(doc) as Obj;
  return withIdFirst(copy, copy._id);
}
