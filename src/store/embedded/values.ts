/**
 * Values as the store holds them: private copies (MongoDB's ignoreUndefined), and MongoDB's order
 * and equality of values, which filters, sorts and updates share.
 */
import { InvalidQueryError } from '../types.js';
import { intern } from './intern.js';

export type Obj = Record<string, unknown>;
export type StoredDoc = Obj & { _id: string };

export function isPlainObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date) && !(v instanceof RegExp);
}

/** Own property only: documents are plain data and must never expose Object.prototype members. */
export function own(container: Obj | unknown[], key: string): unknown {
  return Object.hasOwn(container, key) ? (container as Obj)[key] : undefined;
}

/**
 * Deep copy with MongoDB's `ignoreUndefined` (undefined members dropped, undefined array elements
 * null); `__proto__` is refused, as assigning it would change a prototype. `stored`: strings interned.
 */
export function cloneValue(v: unknown, stored = false): unknown {
  if (typeof v === 'string') return stored ? intern(v) : v;
  if (Array.isArray(v)) return v.map((e) => (e === undefined ? null : cloneValue(e, stored)));
  if (v instanceof Date) return new Date(v.getTime());
  if (isPlainObject(v)) {
    const out: Obj = {};
    for (const k of Object.keys(v)) {
      const x = (v as Obj)[k];
      if (x === undefined) continue;
      if (k === '__proto__') throw new InvalidQueryError('field name "__proto__" is not allowed');
      out[k] = cloneValue(x, stored);
    }
    return out;
  }
  return v;
}

/** cloneValue for a value about to be stored: its strings interned. */
export const cloneStored = (v: unknown): unknown => cloneValue(v, true);

/** MongoDB's canonical type order, restricted to what JSON-ish documents contain. */
export function typeRank(v: unknown): number {
  if (v === undefined || v === null) return 1;
  if (typeof v === 'number') return 2;
  if (typeof v === 'string') return 3;
  if (Array.isArray(v)) return 5;
  if (typeof v === 'boolean') return 6;
  if (v instanceof Date) return 7;
  if (typeof v === 'object') return 4;
  return 8;
}

/**
 * Code point order (what MongoDB gets by comparing UTF-8 bytes). Plain UTF-16 comparison differs
 * only when a surrogate meets a unit in U+E000..U+FFFF, so surrogates are shifted above that range.
 */
export function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) < codePointRank(y) ? -1 : 1;
  }
  return a.length < b.length ? -1 : 1;
}
function codePointRank(unit: number): number {
  if (unit >= 0xd800 && unit <= 0xdfff) return unit + 0x2000;
  if (unit >= 0xe000) return unit - 0x800;
  return unit;
}

function compareNumbers(a: number, b: number): number {
  if (Number.isNaN(a)) return Number.isNaN(b) ? 0 : -1; // MongoDB: NaN sorts below every number
  if (Number.isNaN(b)) return 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Total order over values as MongoDB sorts and compares BSON (missing counts as null). */
export function compareValues(a: unknown, b: unknown): number {
  if (a === b && typeof a === 'object') return 0; // the same object (an update shares what it does not change)
  const ra = typeRank(a);
  const rb = typeRank(b);
  if (ra !== rb) return ra < rb ? -1 : 1;
  switch (ra) {
    case 1:
      return 0;
    case 2:
      return compareNumbers(a as number, b as number);
    case 3:
      return compareStrings(a as string, b as string);
    case 4:
      return compareObjects(a as Obj, b as Obj);
    case 5:
      return compareArrays(a as unknown[], b as unknown[]);
    case 6:
      return a === b ? 0 : a ? 1 : -1;
    case 7:
      return compareNumbers((a as Date).getTime(), (b as Date).getTime());
    default:
      return 0;
  }
}

/** Field by field, in order: value type, then field name, then value (so equality is order-sensitive, as in BSON). */
function compareObjects(a: Obj, b: Obj): number {
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  const n = Math.min(ka.length, kb.length);
  for (let i = 0; i < n; i++) {
    const va = a[ka[i]];
    const vb = b[kb[i]];
    const byType = typeRank(va) - typeRank(vb);
    if (byType !== 0) return byType < 0 ? -1 : 1;
    const byName = compareStrings(ka[i], kb[i]);
    if (byName !== 0) return byName;
    const byValue = compareValues(va, vb);
    if (byValue !== 0) return byValue;
  }
  return ka.length === kb.length ? 0 : ka.length < kb.length ? -1 : 1;
}

function compareArrays(a: unknown[], b: unknown[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const c = compareValues(a[i], b[i]);
    if (c !== 0) return c;
  }
  return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
}

export const valuesEqual = (a: unknown, b: unknown): boolean => compareValues(a, b) === 0;

export function describe(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}
