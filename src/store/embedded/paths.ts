/**
 * Dotted field paths: splitting and checking them, and the values a path reaches in a document
 * (MongoDB's traversal of arrays), for filters, sorts, updates and index keys.
 */
import { InvalidQueryError } from '../types.js';
import { compareStrings, isPlainObject, own, type Obj } from './values.js';

export const isArrayIndex = (part: string): boolean => /^(0|[1-9]\d*)$/.test(part);

export function splitPath(path: string): string[] {
  if (typeof path !== 'string' || path === '') throw new InvalidQueryError('field path must be a non-empty string');
  const parts = path.split('.');
  if (parts.some((p) => p === '')) throw new InvalidQueryError(`invalid field path "${path}"`);
  if (parts.includes('__proto__')) throw new InvalidQueryError(`field path "${path}" is not allowed`);
  return parts;
}

/**
 * An update path, which may not be positional (`$`, `$[]`). A kind's writes repeat the same paths,
 * so their parts are kept (shared, read only) instead of split again for every op.
 */
export function splitUpdatePath(path: string): readonly string[] {
  let parts = updatePaths.get(path);
  if (parts) return parts;
  parts = splitPath(path);
  if (parts.some((p) => p.startsWith('$'))) {
    throw new InvalidQueryError(`positional or $-prefixed update paths are not supported ("${path}")`);
  }
  if (updatePaths.size >= UPDATE_PATHS_KEPT) updatePaths.clear();
  updatePaths.set(path, parts);
  return parts;
}
/** The parts of a valid update path (kept like splitUpdatePath's), or undefined for an invalid one. */
export function updatePathParts(path: string): readonly string[] | undefined {
  const parts = updatePaths.get(path);
  if (parts !== undefined) return parts;
  try {
    return splitUpdatePath(path);
  } catch {
    return undefined;
  }
}
const UPDATE_PATHS_KEPT = 10_000;
const updatePaths = new Map<string, readonly string[]>();

/** Component-wise path order; numeric components compare as numbers (MongoDB 5+ update order). */
export function comparePaths(a: readonly string[], b: readonly string[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a[i] === b[i]) continue;
    if (isArrayIndex(a[i]) && isArrayIndex(b[i])) return Number(a[i]) - Number(b[i]);
    return compareStrings(a[i], b[i]);
  }
  return a.length - b.length;
}

export const isPathPrefix = (prefix: readonly string[], path: readonly string[]): boolean =>
  prefix.length <= path.length && prefix.every((p, i) => p === path[i]);

/**
 * The values a dotted path reaches, through arrays as MongoDB goes: a numeric part indexes one, any
 * other part descends into each element that is a document. `undefined` marks a missing branch.
 */
export function collectValues(value: unknown, parts: string[], i: number, out: unknown[]): void {
  if (i === parts.length) {
    out.push(value);
    return;
  }
  const part = parts[i];
  if (Array.isArray(value)) {
    if (isArrayIndex(part)) {
      collectValues(own(value, part), parts, i + 1, out);
    } else {
      for (const el of value) if (isPlainObject(el)) collectValues(own(el, part), parts, i + 1, out);
    }
  } else if (isPlainObject(value)) {
    collectValues(own(value, part), parts, i + 1, out);
  } else {
    out.push(undefined);
  }
}

/** Values at `parts` for filtering; an empty result means "missing". */
export function valuesAt(doc: unknown, parts: string[]): unknown[] {
  const out: unknown[] = [];
  collectValues(doc, parts, 0, out);
  if (out.length === 0) out.push(undefined);
  return out;
}

/** Exact lookup (no array fan-out) used by update operators. */
export function getPath(doc: Obj, parts: readonly string[]): unknown {
  let cur: unknown = doc;
  for (const part of parts) {
    if (Array.isArray(cur)) {
      if (!isArrayIndex(part)) return undefined;
      cur = own(cur, part);
    } else if (isPlainObject(cur)) {
      cur = own(cur, part);
    } else {
      return undefined;
    }
  }
  return cur;
}

/** Values an index keys a document by: array elements individually, missing as undefined (keyed as null). */
export function indexKeyValues(doc: Obj, field: string): unknown[] {
  const out: unknown[] = [];
  collectValues(doc, field.split('.'), 0, out);
  const flat = out.flatMap((v) => (Array.isArray(v) && v.length > 0 ? v : [v]));
  return flat.length > 0 ? flat : [undefined];
}
