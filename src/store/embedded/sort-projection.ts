/**
 * Find options: sort (MongoDB's order, arrays by their smallest or largest element), inclusion
 * projection, skip and limit.
 */
import { InvalidQueryError, type SortSpec } from '../types.js';
import { collectValues, splitPath } from './paths.js';
import { cloneValue, compareValues, isPlainObject, type Obj, type StoredDoc } from './values.js';

/** An empty array sorts below null/missing in both directions (MongoDB). */
const EMPTY_ARRAY = Symbol('empty array');

function compareSortValues(a: unknown, b: unknown): number {
  if (a === EMPTY_ARRAY) return b === EMPTY_ARRAY ? 0 : -1;
  if (b === EMPTY_ARRAY) return 1;
  return compareValues(a, b);
}

/** Sort key of one field: arrays sort by their smallest element ascending, largest descending. */
function sortKey(doc: Obj, parts: string[], dir: 1 | -1): unknown {
  const raw: unknown[] = [];
  collectValues(doc, parts, 0, raw);
  const candidates: unknown[] = [];
  for (const x of raw) {
    if (Array.isArray(x)) {
      if (x.length === 0) candidates.push(EMPTY_ARRAY);
      else candidates.push(...x);
    } else {
      candidates.push(x === undefined ? null : x);
    }
  }
  if (candidates.length === 0) return null;
  let best = candidates[0];
  for (const c of candidates) if (compareSortValues(c, best) * dir < 0) best = c;
  return best;
}

export type SortFn = (docs: StoredDoc[]) => StoredDoc[];

export function compileSort(sort: SortSpec | undefined): SortFn | undefined {
  if (sort === undefined) return undefined;
  if (!isPlainObject(sort)) throw new InvalidQueryError('sort must be an object');
  const keys = Object.entries(sort).map(([path, dir]) => {
    if (dir !== 1 && dir !== -1) throw new InvalidQueryError(`sort direction for "${path}" must be 1 or -1`);
    return { parts: splitPath(path), dir };
  });
  if (keys.length === 0) return undefined;
  return (docs) =>
    docs
      .map((d) => ({ d, k: keys.map((key) => sortKey(d, key.parts, key.dir)) }))
      .sort((a, b) => {
        for (let i = 0; i < keys.length; i++) {
          const c = compareSortValues(a.k[i], b.k[i]);
          if (c !== 0) return c * keys[i].dir;
        }
        return 0;
      })
      .map((x) => x.d);
}

type ProjectionTree = Map<string, true | ProjectionTree>;

/** Inclusion projection; `_id` always comes back. Returns a function producing a fresh copy. */
export function compileProjection(projection: Record<string, unknown> | undefined): (doc: Obj) => Obj {
  if (projection === undefined || projection === null) return (d) => cloneValue(d) as Obj;
  if (!isPlainObject(projection)) throw new InvalidQueryError('projection must be an object');
  if (Object.keys(projection).length === 0) return (d) => cloneValue(d) as Obj;
  const tree: ProjectionTree = new Map([['_id', true]]);
  for (const [path, flag] of Object.entries(projection)) {
    if (flag !== 1 && flag !== true) throw new InvalidQueryError(`only inclusion projections are supported ("${path}")`);
    const parts = splitPath(path);
    let node = tree;
    for (let i = 0; i < parts.length; i++) {
      const existing = node.get(parts[i]);
      if (existing === true) break; // a parent path is already included whole
      if (i === parts.length - 1) {
        node.set(parts[i], true);
      } else {
        const child: ProjectionTree = existing ?? new Map();
        node.set(parts[i], child);
        node = child;
      }
    }
  }
  return (d) => projectObject(d, tree);
}

function projectObject(src: Obj, tree: ProjectionTree): Obj {
  const out: Obj = {};
  for (const [k, v] of Object.entries(src)) {
    const sub = tree.get(k);
    if (sub === undefined) continue;
    if (sub === true) {
      out[k] = cloneValue(v);
    } else {
      const projected = projectNested(v, sub);
      if (projected !== undefined) out[k] = projected;
    }
  }
  return out;
}

/** Nested projection through arrays keeps sub-documents (projected) and drops scalars, like MongoDB. */
function projectNested(v: unknown, tree: ProjectionTree): unknown {
  if (isPlainObject(v)) return projectObject(v, tree);
  if (Array.isArray(v)) {
    return v.filter((el) => isPlainObject(el) || Array.isArray(el)).map((el) => projectNested(el, tree));
  }
  return undefined;
}

export function nonNegativeInteger(name: string, v: unknown): number {
  if (v === undefined) return 0;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new InvalidQueryError(`${name} must be a non-negative integer`);
  return v;
}
