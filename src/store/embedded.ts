/**
 * Embedded Store backend: one nedb datafile per collection under `${dataDir}/store/<name>.db`.
 *
 * nedb is used for what it does well: durable append-only persistence, crash-safe compaction,
 * the `_id` index and single/compound unique indexes (nedb 4 supports compound indexes through an
 * array `fieldName`; indexes are kept in maps instead of nedb's trees, see
 * nedb-index.ts). Query and update *semantics* are implemented here instead, because nedb's
 * differ from MongoDB in ways callers would notice (`{f: null}` does not match a missing field,
 * `$ne`/`$nin` on arrays test "some element", no `$all`/`$options`/`$setOnInsert`, upserts copy
 * operator objects into the new document, ...). Filters are compiled into a predicate and handed
 * to nedb as `$where`; simple equality conjuncts are also passed as-is so nedb can pick candidates
 * from an index (they mean the same thing in both engines, and the predicate re-checks anyway).
 *
 * Every write of a collection runs under a per-collection async mutex, so read-modify-write
 * operations (updates, findOneAndUpdate, upserts, bulkUpdate) are atomic with respect to each
 * other. Reads do not take the mutex; they see the state before or after any single write.
 */
import nedb from '@seald-io/nedb';
import { checkObject, serialize } from '@seald-io/nedb/lib/model.js';
import { installKeyedIndexes } from './nedb-index.js';
import { JsonLineWriter } from './json-lines.js';
import { bsonDocumentSize } from './bson-size.js';
import { constants as fsConstants } from 'node:fs';
import { access, mkdir, open, rename, type FileHandle } from 'node:fs/promises';
import { lockDirectory, type DirectoryLock } from './dir-lock.js';
import { dirname, join, resolve } from 'node:path';
import { nanoid } from 'nanoid';
import {
  BulkUpdateError,
  DocumentTooLargeError,
  DuplicateKeyError,
  InvalidQueryError,
  MAX_DOCUMENT_BYTES,
  StoreError,
  StoreUnavailableError,
  type BulkUpdateOp,
  type Collection,
  type Doc,
  type Filter,
  type FindOneAndUpdateOptions,
  type FindOptions,
  type IndexSpec,
  type SortSpec,
  type Store,
  type Update,
  type UpdateOptions,
  type UpdateResult,
} from './types.js';

type Obj = Record<string, unknown>;
type StoredDoc = Obj & { _id: string };

installKeyedIndexes();

// ---------------------------------------------------------------------------------------------
// Values: cloning, comparison (BSON order), paths
// ---------------------------------------------------------------------------------------------

function isPlainObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date) && !(v instanceof RegExp);
}

/** Own property only: documents are plain data and must never expose Object.prototype members. */
function own(container: Obj | unknown[], key: string): unknown {
  return Object.hasOwn(container, key) ? (container as Obj)[key] : undefined;
}

/**
 * Deep copy with MongoDB's `ignoreUndefined` treatment: undefined object members are dropped,
 * undefined array elements become null. `__proto__` is refused as a field name because assigning
 * it would change an object's prototype instead of storing data. `stored`: the copy is about to be
 * stored, and its strings are interned (see `intern`).
 */
function cloneValue(v: unknown, stored = false): unknown {
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

/**
 * Stored strings are interned: a document's identifiers and timestamps (an agent's DID is in its
 * record, membership, session, certificate, token totals and actor snapshot; a fleet's timestamps
 * repeat by the thousand) otherwise each hold a copy of their own, one per document loaded from a
 * datafile (`JSON.parse` shares only strings of up to 10 characters) and one per code path that
 * built the value. Adding a string as a key of a dictionary-mode object makes V8 internalize it:
 * the string joins V8's (weak) string table in place, or, when an equal one is there already,
 * becomes a reference to that one, which the garbage collector then puts in its place everywhere,
 * also for the holders outside the store (an agent's connection state, its actor). The table is
 * dropped for a new one every 256 strings, so it holds nothing alive for long (deleting each key
 * again made V8 reallocate the table every few calls). The last 8 strings interned are checked
 * first: the values a batch repeats (its timestamp) then cost a comparison and are handed back as
 * the one copy. Strings of 11 to 64 characters only: shorter ones are small (and `JSON.parse`
 * shares them), longer ones (signatures, certificate and snapshot texts) are unique and would only
 * cost the hashing. This changes no value, only how many copies of it the process keeps.
 */
const INTERN_MIN = 11;
const INTERN_MAX = 64;
const INTERN_TABLE_MAX = 256;
const INTERN_RECENT = 8;
let internTable: Record<string, 0> = Object.create(null) as Record<string, 0>;
let internCount = 0;
const internRecent: string[] = new Array<string>(INTERN_RECENT).fill('');
let internNext = 0;
/** Internalizes `s` itself: every holder of this string object then shares the one copy. */
function internalize(s: string): void {
  internTable[s] = 0;
  if (++internCount >= INTERN_TABLE_MAX) {
    internTable = Object.create(null) as Record<string, 0>;
    internCount = 0;
  }
}

/** The one copy of a string about to be stored. */
function intern(s: string): string {
  if (s.length < INTERN_MIN || s.length > INTERN_MAX) return s;
  for (let i = 0; i < INTERN_RECENT; i++) {
    const r = internRecent[i]!;
    if (r === s) return r;
  }
  internalize(s);
  internRecent[internNext] = s;
  internNext = (internNext + 1) % INTERN_RECENT;
  return s;
}

/** cloneValue for a value about to be stored: its strings interned. */
const cloneStored = (v: unknown): unknown => cloneValue(v, true);

/**
 * Interns the strings of a document read from a datafile. The string objects themselves are
 * internalized (not swapped for the one copy), since nedb's indexes already hold them as keys.
 */
function internStrings(v: unknown): void {
  if (typeof v === 'string') {
    if (v.length >= INTERN_MIN && v.length <= INTERN_MAX) internalize(v);
  } else if (Array.isArray(v)) for (const e of v) internStrings(e);
  else if (isPlainObject(v)) for (const k of Object.keys(v)) internStrings(v[k]);
}

/** MongoDB's canonical type order, restricted to what JSON-ish documents contain. */
function typeRank(v: unknown): number {
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
function compareStrings(a: string, b: string): number {
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
function compareValues(a: unknown, b: unknown): number {
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

const valuesEqual = (a: unknown, b: unknown): boolean => compareValues(a, b) === 0;

const isArrayIndex = (part: string): boolean => /^(0|[1-9]\d*)$/.test(part);

function splitPath(path: string): string[] {
  if (typeof path !== 'string' || path === '') throw new InvalidQueryError('field path must be a non-empty string');
  const parts = path.split('.');
  if (parts.some((p) => p === '')) throw new InvalidQueryError(`invalid field path "${path}"`);
  if (parts.includes('__proto__')) throw new InvalidQueryError(`field path "${path}" is not allowed`);
  return parts;
}

/**
 * Update paths additionally may not use positional operators (`$`, `$[]`, `$[id]`). The same
 * paths come back with every write of a kind (`lastSeen`, `days.<today>.promptTokens`), so their
 * parts are kept and shared (read only) instead of split again for every op.
 */
function splitUpdatePath(path: string): readonly string[] {
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
function updatePathParts(path: string): readonly string[] | undefined {
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
function comparePaths(a: readonly string[], b: readonly string[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a[i] === b[i]) continue;
    if (isArrayIndex(a[i]) && isArrayIndex(b[i])) return Number(a[i]) - Number(b[i]);
    return compareStrings(a[i], b[i]);
  }
  return a.length - b.length;
}

const isPathPrefix = (prefix: readonly string[], path: readonly string[]): boolean =>
  prefix.length <= path.length && prefix.every((p, i) => p === path[i]);

/**
 * Collects the values a dotted path reaches, following MongoDB's implicit array traversal: a
 * non-numeric component applied to an array descends into each element that is a document, a
 * numeric component indexes the array. `undefined` marks a branch on which the path is missing.
 */
function collectValues(value: unknown, parts: string[], i: number, out: unknown[]): void {
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
function valuesAt(doc: unknown, parts: string[]): unknown[] {
  const out: unknown[] = [];
  collectValues(doc, parts, 0, out);
  if (out.length === 0) out.push(undefined);
  return out;
}

/** Exact lookup (no array fan-out) used by update operators. */
function getPath(doc: Obj, parts: readonly string[]): unknown {
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

function describe(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

/**
 * The child at `key` of `parent`, made private to the update being built: an object or array the
 * update has not created itself (`fresh`) is still shared with the stored document, so it is
 * copied (shallowly) and put in its place first. Without `fresh` everything is already private.
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
function setPath(doc: Obj, parts: readonly string[], value: unknown, fresh?: Set<object>): void {
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

// ---------------------------------------------------------------------------------------------
// Filters
// ---------------------------------------------------------------------------------------------

type DocPredicate = (doc: unknown) => boolean;
/** A condition on one field, evaluated over the values the field path reaches. */
type ValuesPredicate = (values: unknown[]) => boolean;

/** Equality with MongoDB semantics: whole value or any array element; null also matches missing. */
function matchesEquality(values: unknown[], expected: unknown): boolean {
  for (const x of values) {
    if (x === undefined) {
      if (expected === null) return true;
      continue;
    }
    if (valuesEqual(x, expected)) return true;
    if (Array.isArray(x) && x.some((el) => valuesEqual(el, expected))) return true;
  }
  return false;
}

function matchesRegex(values: unknown[], re: RegExp): boolean {
  const test = (v: unknown) => typeof v === 'string' && re.test(v);
  return values.some((x) => test(x) || (Array.isArray(x) && x.some(test)));
}

type ComparisonOp = '$lt' | '$lte' | '$gt' | '$gte';

/** Range comparison with type bracketing: only values of the operand's type are compared. */
function compareMatches(x: unknown, operand: unknown, op: ComparisonOp): boolean {
  if (x === undefined) {
    if (operand !== null) return false;
    x = null; // {$gte: null} / {$lte: null} match missing fields, like {$eq: null}
  }
  if (typeRank(x) !== typeRank(operand)) return false;
  const c = compareValues(x, operand);
  switch (op) {
    case '$lt':
      return c < 0;
    case '$lte':
      return c <= 0;
    case '$gt':
      return c > 0;
    case '$gte':
      return c >= 0;
  }
}

function matchesComparison(values: unknown[], operand: unknown, op: ComparisonOp): boolean {
  return values.some(
    (x) => compareMatches(x, operand, op) || (Array.isArray(x) && x.some((el) => compareMatches(el, operand, op))),
  );
}

function buildRegex(source: unknown, options: unknown): RegExp {
  if (options !== undefined && typeof options !== 'string') throw new InvalidQueryError('$options has to be a string');
  let src: string;
  let flags: string;
  if (source instanceof RegExp) {
    src = source.source;
    flags = options ?? source.flags.replace(/[^ims]/g, ''); // drop g/y: they make test() stateful
  } else if (typeof source === 'string') {
    src = source;
    flags = options ?? '';
  } else {
    throw new InvalidQueryError('$regex has to be a string');
  }
  for (const f of flags) {
    if (!'ims'.includes(f)) throw new InvalidQueryError(`unsupported regex option "${f}"`);
  }
  try {
    return new RegExp(src, [...new Set(flags)].join(''));
  } catch (err) {
    throw new InvalidQueryError(`invalid regular expression /${src}/: ${(err as Error).message}`, { cause: err });
  }
}

const LOGICAL_OPERATORS = new Set(['$and', '$or', '$nor']);

function firstKey(v: Obj): string | undefined {
  return Object.keys(v).find((k) => v[k] !== undefined);
}

/** A field condition is an operator expression (`{$gt: 1}`) when its first key starts with `$`. */
function isOperatorObject(v: unknown): v is Obj {
  return isPlainObject(v) && (firstKey(v)?.startsWith('$') ?? false);
}

/**
 * Inside $elemMatch and $pull, a document is either conditions on the element itself
 * (`{$gte: 80}`) or a query on an element that is a sub-document (`{name: 'x'}`, `{$or: [...]}`).
 */
function isElementCondition(v: Obj): boolean {
  const first = firstKey(v);
  return first !== undefined && first.startsWith('$') && !LOGICAL_OPERATORS.has(first);
}

export function compileFilter(filter: unknown): DocPredicate {
  if (!isPlainObject(filter)) throw new InvalidQueryError('filter must be an object');
  const preds: DocPredicate[] = [];
  for (const [key, cond] of Object.entries(filter)) {
    if (cond === undefined) continue; // ignoreUndefined, as the MongoDB backend is configured
    if (key.startsWith('$')) {
      if (!LOGICAL_OPERATORS.has(key)) throw new InvalidQueryError(`unknown top level operator: ${key}`);
      if (!Array.isArray(cond) || cond.length === 0) throw new InvalidQueryError(`${key} must be a nonempty array`);
      const subs = cond.map((c) => compileFilter(c));
      if (key === '$and') preds.push((d) => subs.every((p) => p(d)));
      else if (key === '$or') preds.push((d) => subs.some((p) => p(d)));
      else preds.push((d) => !subs.some((p) => p(d)));
    } else {
      const parts = splitPath(key);
      const test = compileCondition(cond);
      preds.push((d) => test(valuesAt(d, parts)));
    }
  }
  if (preds.length === 0) return () => true;
  if (preds.length === 1) return preds[0];
  return (d) => preds.every((p) => p(d));
}

function compileCondition(cond: unknown): ValuesPredicate {
  if (cond instanceof RegExp) {
    const re = buildRegex(cond, undefined);
    return (values) => matchesRegex(values, re);
  }
  if (isOperatorObject(cond)) return compileOperators(cond);
  const expected = cloneValue(cond);
  return (values) => matchesEquality(values, expected);
}

function compileOperators(cond: Obj): ValuesPredicate {
  const preds: ValuesPredicate[] = [];
  let regexSource: unknown;
  let regexOptions: unknown;
  for (const [op, arg] of Object.entries(cond)) {
    if (arg === undefined) continue;
    switch (op) {
      case '$eq':
      case '$ne': {
        const expected = cloneValue(arg);
        preds.push(op === '$eq' ? (vs) => matchesEquality(vs, expected) : (vs) => !matchesEquality(vs, expected));
        break;
      }
      case '$in':
      case '$nin': {
        if (!Array.isArray(arg)) throw new InvalidQueryError(`${op} needs an array`);
        const tests = arg.map((v): ValuesPredicate => {
          if (v instanceof RegExp) {
            const re = buildRegex(v, undefined);
            return (vs) => matchesRegex(vs, re);
          }
          if (isOperatorObject(v)) throw new InvalidQueryError(`cannot nest $ under ${op}`);
          const expected = cloneValue(v);
          return (vs) => matchesEquality(vs, expected);
        });
        const any: ValuesPredicate = (vs) => tests.some((t) => t(vs));
        preds.push(op === '$in' ? any : (vs) => !any(vs));
        break;
      }
      case '$exists': {
        const want = Boolean(arg);
        preds.push((vs) => vs.some((x) => x !== undefined) === want);
        break;
      }
      case '$lt':
      case '$lte':
      case '$gt':
      case '$gte': {
        const operand = cloneValue(arg);
        preds.push((vs) => matchesComparison(vs, operand, op));
        break;
      }
      case '$regex':
        regexSource = arg;
        break;
      case '$options':
        regexOptions = arg;
        break;
      case '$all': {
        if (!Array.isArray(arg)) throw new InvalidQueryError('$all needs an array');
        const tests = arg.map((v): ValuesPredicate => {
          if (isPlainObject(v) && Object.hasOwn(v, '$elemMatch')) return compileOperators({ $elemMatch: v.$elemMatch });
          if (isOperatorObject(v)) throw new InvalidQueryError('no $ expressions in $all');
          return compileCondition(v);
        });
        // MongoDB: an empty $all matches nothing.
        preds.push((vs) => tests.length > 0 && tests.every((t) => t(vs)));
        break;
      }
      case '$elemMatch': {
        if (!isPlainObject(arg)) throw new InvalidQueryError('$elemMatch needs an Object');
        let elementTest: (el: unknown) => boolean;
        if (isElementCondition(arg)) {
          // {$elemMatch: {$gte: 80, $lt: 85}}: all conditions hold for the same element.
          const p = compileOperators(arg);
          elementTest = (el) => p([el]);
        } else {
          // {$elemMatch: {name: 'x', qty: {$gt: 1}}}: the element is a sub-document matching a query.
          const p = compileFilter(arg);
          elementTest = (el) => isPlainObject(el) && p(el);
        }
        preds.push((vs) => vs.some((x) => Array.isArray(x) && x.some(elementTest)));
        break;
      }
      case '$size': {
        if (typeof arg !== 'number' || !Number.isInteger(arg) || arg < 0) {
          throw new InvalidQueryError('$size needs a non-negative integer');
        }
        preds.push((vs) => vs.some((x) => Array.isArray(x) && x.length === arg));
        break;
      }
      case '$not': {
        let inner: ValuesPredicate;
        if (arg instanceof RegExp) inner = compileCondition(arg);
        else if (isOperatorObject(arg)) inner = compileOperators(arg);
        else throw new InvalidQueryError('$not needs a regex or a document of operators');
        preds.push((vs) => !inner(vs));
        break;
      }
      default:
        throw new InvalidQueryError(`unknown operator: ${op}`);
    }
  }
  if (regexSource !== undefined) {
    const re = buildRegex(regexSource, regexOptions);
    preds.push((vs) => matchesRegex(vs, re));
  } else if (regexOptions !== undefined) {
    throw new InvalidQueryError('$options needs a $regex');
  }
  return (vs) => preds.every((p) => p(vs));
}

interface PreparedQuery {
  predicate: DocPredicate;
  /** Conjuncts that nedb evaluates identically and can serve from an index (`{_id: 'x'}` etc.). */
  hints: Obj;
  /** A filter on one field equal to one of these strings: served by that field's index, if it has one, without nedb's index selection. */
  equal?: { field: string; values: readonly string[] };
}

function isHintScalar(v: unknown): v is string | number | boolean {
  return typeof v === 'string' || (typeof v === 'number' && !Number.isNaN(v)) || typeof v === 'boolean';
}

/** The object's one own key; undefined when it has none or several. */
function onlyKey(o: Obj): string | undefined {
  let key: string | undefined;
  for (const k in o) {
    if (!Object.hasOwn(o, k)) continue;
    if (key !== undefined) return undefined;
    key = k;
  }
  return key;
}

/**
 * `{field: 'text'}` and `{field: {$in: ['text', ...]}}`, the shapes of most reads (an agent's
 * certificates, memberships, sessions, skills), prepared without compiling the general predicate,
 * which allocates a list of values per document tested and a few closures per query. Same
 * meaning: the field equals one of the strings or is an array holding one.
 */
function prepareStringEquality(filter: unknown): PreparedQuery | null {
  if (!isPlainObject(filter)) return null;
  const key = onlyKey(filter);
  if (key === undefined || key === '' || key === '__proto__' || key.startsWith('$') || key.includes('.') || isArrayIndex(key)) return null;
  const field = key;
  const cond = (filter as Obj)[field];
  if (typeof cond === 'string') {
    return {
      predicate: (d) => {
        const v = own(d as Obj, field);
        return v === cond || (Array.isArray(v) && v.includes(cond));
      },
      hints: { [field]: cond },
      equal: { field, values: [cond] },
    };
  }
  if (!isPlainObject(cond)) return null;
  const list = onlyKey(cond) === '$in' ? (cond as Obj).$in : undefined;
  if (!Array.isArray(list) || !list.every((x) => typeof x === 'string')) return null;
  const wanted = new Set(list as string[]);
  const values = [...wanted];
  return {
    predicate: (d) => {
      const v = own(d as Obj, field);
      if (typeof v === 'string') return wanted.has(v);
      return Array.isArray(v) && v.some((x) => typeof x === 'string' && wanted.has(x));
    },
    hints: { [field]: { $in: values } },
    equal: { field, values },
  };
}

function prepareQuery(filter: unknown): PreparedQuery {
  const fast = prepareStringEquality(filter);
  if (fast) return fast;
  const predicate = compileFilter(filter ?? {});
  const hints: Obj = {};
  for (const [key, cond] of Object.entries((filter ?? {}) as Obj)) {
    // nedb's own matching agrees with ours for top-level scalar equality and $in of scalars
    // (null, numeric path components and range operators on arrays are where it differs).
    if (key.startsWith('$') || key.split('.').some(isArrayIndex)) continue;
    if (isHintScalar(cond)) {
      hints[key] = cond;
    } else if (isPlainObject(cond)) {
      const keys = Object.keys(cond);
      if (keys.length !== 1) continue;
      if (keys[0] === '$eq' && isHintScalar(cond.$eq)) hints[key] = cond.$eq;
      else if (keys[0] === '$in' && Array.isArray(cond.$in) && cond.$in.every(isHintScalar)) hints[key] = { $in: cond.$in };
    }
  }
  return { predicate, hints };
}

// ---------------------------------------------------------------------------------------------
// Sort, projection, distinct
// ---------------------------------------------------------------------------------------------

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

type SortFn = (docs: StoredDoc[]) => StoredDoc[];

function compileSort(sort: SortSpec | undefined): SortFn | undefined {
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
function compileProjection(projection: Record<string, unknown> | undefined): (doc: Obj) => Obj {
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

function nonNegativeInteger(name: string, v: unknown): number {
  if (v === undefined) return 0;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new InvalidQueryError(`${name} must be a non-negative integer`);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Updates
// ---------------------------------------------------------------------------------------------

type UpdateOperator = '$set' | '$unset' | '$inc' | '$push' | '$pull' | '$addToSet' | '$setOnInsert';
const UPDATE_OPERATORS = new Set<string>(['$set', '$unset', '$inc', '$push', '$pull', '$addToSet', '$setOnInsert']);

interface PushSpec {
  each: unknown[];
  position?: number;
  slice?: number;
  sort?: SortFn | 1 | -1;
}

interface UpdateStep {
  op: UpdateOperator;
  path: string;
  parts: readonly string[];
  value: unknown;
  push?: PushSpec;
  pull?: (el: unknown) => boolean;
}

interface UpdatePlan {
  steps: UpdateStep[];
}

function compileUpdate(update: unknown): UpdatePlan {
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
      if (op === '$push' || op === '$addToSet') step.push = compileEach(op, step.value);
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

function compileEach(op: '$push' | '$addToSet', value: unknown): PushSpec {
  if (!isPlainObject(value) || !Object.hasOwn(value, '$each')) return { each: [value] };
  const spec: PushSpec = { each: [] };
  for (const [mod, arg] of Object.entries(value)) {
    switch (mod) {
      case '$each':
        if (!Array.isArray(arg)) throw new InvalidQueryError('$each requires an array value');
        spec.each = arg;
        break;
      case '$position':
      case '$slice':
        if (op !== '$push') throw new InvalidQueryError(`${mod} is only valid with $push`);
        if (typeof arg !== 'number' || !Number.isInteger(arg)) throw new InvalidQueryError(`${mod} must be an integer`);
        if (mod === '$position') spec.position = arg;
        else spec.slice = arg;
        break;
      case '$sort':
        if (op !== '$push') throw new InvalidQueryError('$sort is only valid with $push');
        if (arg === 1 || arg === -1) spec.sort = arg;
        else if (isPlainObject(arg)) spec.sort = compileSort(arg as SortSpec);
        else throw new InvalidQueryError('$sort must be 1, -1 or a sort document');
        break;
      default:
        throw new InvalidQueryError(`unrecognized ${op} modifier: ${mod}`);
    }
  }
  return spec;
}

/**
 * $pull semantics (MongoDB's PullNode): a document of field conditions is a query that array
 * elements which are documents must match; an operator expression ({$gte: 6}, {$in: [...]}) is a
 * condition on each element; anything else is removed by equality.
 */
function compilePullMatcher(cond: unknown): (el: unknown) => boolean {
  if (cond instanceof RegExp || (isPlainObject(cond) && isElementCondition(cond))) {
    const p = compileCondition(cond);
    return (el) => p([el]);
  }
  if (isPlainObject(cond)) {
    const p = compileFilter(cond);
    return (el) => isPlainObject(el) && p(el);
  }
  const expected = cloneValue(cond);
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
 * Applies a compiled update to a copy of `doc`. `isInsert` enables $setOnInsert (upserts).
 * The `_id` may be set on insert but never changed on an existing document.
 *
 * The copy is made on write: the top-level object and the objects on the updated paths are new,
 * everything else is shared with `doc`. A stored document is never changed except by merging a
 * finished update into it (`mergeInPlace`), and readers copy what they match at once, so sharing
 * is safe, and an update of one field of a large document costs what the field's path costs.
 */
function applyUpdate(doc: Obj, plan: UpdatePlan, isInsert: boolean): Obj {
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
      case '$push': {
        const spec = step.push!;
        let arr = [...(arrayAt(out, step) ?? [])];
        const each = spec.each.map((e) => cloneValue(e));
        if (spec.position === undefined) arr.push(...each);
        else {
          const pos = spec.position < 0 ? Math.max(0, arr.length + spec.position) : Math.min(spec.position, arr.length);
          arr.splice(pos, 0, ...each);
        }
        if (spec.sort === 1 || spec.sort === -1) {
          const dir = spec.sort;
          arr.sort((a, b) => compareValues(a, b) * dir);
        } else if (spec.sort) {
          arr = spec.sort(arr as StoredDoc[]);
        }
        if (spec.slice !== undefined) arr = spec.slice >= 0 ? arr.slice(0, spec.slice) : arr.slice(spec.slice);
        set(step.parts, arr);
        break;
      }
      case '$addToSet': {
        const arr = [...(arrayAt(out, step) ?? [])];
        for (const v of step.push!.each) if (!arr.some((el) => valuesEqual(el, v))) arr.push(cloneValue(v));
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

/**
 * The longest string `updateScalarsInPlace` writes. Its writes are not measured against the
 * document limit, so each can grow a document by a few KiB at most; a longer one goes through
 * the general path, which measures.
 */
const IN_PLACE_STRING_MAX = 1024;

/**
 * Whether an update is one `updateScalarsInPlace` may apply to `doc`: only `$set` and `$inc`, of
 * valid paths (their parts are kept, so a path seen before costs a lookup) that do not overlap one another, `_id`
 * or an indexed field, each naming a field the document already has, through plain objects, holding
 * a scalar (a number, for `$inc`), set to a scalar (a string of at most IN_PLACE_STRING_MAX) or
 * incremented by a number. Allocates nothing.
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
 * Applies an update to a stored document in place when it only sets or increments fields the
 * document already has, to scalar values, outside every index and `_id` (see `inPlaceApplicable`):
 * the common write of a long-lived document (token totals, lastSeen). It works from the update as
 * given: no plan is compiled, nothing is copied, compared beyond the fields named or allocated (a
 * string value is interned). Returns whether a value changed, or undefined (nothing done) when the
 * update needs the general path (a new field, an object or array value, an indexed field, another
 * operator, or an error to report); everything is checked before the first value is written, so it
 * is all or nothing. Safe for the same reasons as `mergeInPlace`: readers copy what they match at once.
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

/** Equality conditions of a filter, which seed the document an upsert inserts (as MongoDB does). */
function collectEqualities(filter: Obj, out: Array<[string, unknown]>): void {
  for (const [key, cond] of Object.entries(filter)) {
    if (cond === undefined) continue;
    if (key === '$and' && Array.isArray(cond)) {
      for (const sub of cond) if (isPlainObject(sub)) collectEqualities(sub, out);
    } else if (key === '$or' && Array.isArray(cond) && cond.length === 1 && isPlainObject(cond[0])) {
      collectEqualities(cond[0], out);
    } else if (key.startsWith('$') || cond instanceof RegExp) {
      continue;
    } else if (isOperatorObject(cond)) {
      if (Object.hasOwn(cond, '$eq')) out.push([key, cond.$eq]);
    } else {
      out.push([key, cond]);
    }
  }
}

function buildUpsertDoc(filter: Filter, plan: UpdatePlan): StoredDoc {
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
function withIdFirst(doc: Obj, id: unknown): StoredDoc {
  if (typeof id !== 'string') throw new InvalidQueryError('documents need a string _id');
  const { _id: _ignored, ...rest } = doc;
  return { _id: id, ...rest };
}

function prepareNewDoc(doc: unknown): StoredDoc {
  if (!isPlainObject(doc)) throw new InvalidQueryError('document must be an object');
  const copy = cloneStored(doc) as Obj;
  return withIdFirst(copy, copy._id);
}

// ---------------------------------------------------------------------------------------------
// nedb plumbing
// ---------------------------------------------------------------------------------------------

// @seald-io/nedb is CommonJS (`module.exports = Datastore`) but its typings say `export default`,
// which NodeNext reads as `module.exports.default`. At runtime the default import is the class.
const Datastore = nedb as unknown as typeof nedb.default;
type NedbStore = InstanceType<typeof Datastore>;

interface IndexDefinition {
  /** nedb's index key: field names sorted and joined with ",". */
  key: string;
  fields: string[];
  unique: boolean;
  sparse: boolean;
}

/**
 * nedb's live index registry (`Datastore#indexes`, documented as protected). It includes indexes
 * restored from the datafile; we read it only to name violated indexes and to detect conflicting
 * re-definitions.
 */
function nedbIndexes(ds: NedbStore): IndexDefinition[] {
  const raw = (ds as unknown as { indexes?: Record<string, { unique?: boolean; sparse?: boolean }> }).indexes ?? {};
  return Object.entries(raw)
    .map(([key, idx]) => ({ key, fields: key.split(','), unique: Boolean(idx.unique), sparse: Boolean(idx.sparse) }))
    .sort((a, b) => (a.key === '_id' ? -1 : b.key === '_id' ? 1 : 0));
}

/**
 * The parts of a nedb Datastore this store uses directly, all documented as protected in nedb 4:
 * the `_id` index, the executor every nedb operation queues on (compaction included), the
 * append-only persistence, the all-or-nothing index updates nedb's own `insert` and `update` run,
 * and its index selection for a query.
 */
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

const internals = (ds: NedbStore): NedbInternals => ds as unknown as NedbInternals;

/**
 * Inserts documents the store has prepared (private copies with their `_id`) the way nedb's own
 * insert does (field names checked, indexes changed for all or none, one append), without its
 * two deep copies: of the documents given, and of the ones it returns (which nobody reads, and
 * which its executor kept alive until the collection's next operation).
 */
function insertPrepared(ds: NedbStore, docs: StoredDoc[]): Promise<void> {
  const nd = internals(ds);
  return nd.executor.pushAsync(async () => {
    for (const doc of docs) checkObject(doc);
    nd._insertInCache(docs.length === 1 ? docs[0]! : docs);
    await nd.persistence.persistNewStateAsync(docs);
  });
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
 * Writes `bulkUpdate` gathers before handing them to nedb at once: replacements of documents
 * found by `_id`, changes merged into stored documents in place (see `mergeInPlace`), documents
 * `updateScalarsInPlace` already changed (they only need writing), and upserted new documents.
 * Each `_id` appears at most once; each entry remembers its op, so a failure is reported for it.
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

/**
 * The outcome of a bulkUpdate as it goes: the counts of the ops applied and the failed ops. A
 * gathered op is counted when it is gathered and taken back out if writing it fails.
 */
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

/** Whether `a`'s own keys are the first keys of `b`, in the same order. */
function keysPrefix(a: Obj, b: Obj): boolean {
  const ak = Object.keys(a);
  const bk = Object.keys(b);
  if (ak.length > bk.length) return false;
  for (let i = 0; i < ak.length; i++) if (ak[i] !== bk[i]) return false;
  return true;
}

/**
 * Whether an update of `old` into `next` may be merged into the stored object in place: no
 * indexed field changes (so no index needs to move the document) and `next` only adds keys to
 * `old`'s, in the same order (so the merged object has exactly `next`'s key order).
 */
function canMergeInPlace(old: StoredDoc, next: StoredDoc, indexedFields: readonly string[]): boolean {
  if (!keysPrefix(old, next)) return false;
  for (const field of indexedFields) {
    if (!valuesEqual(indexKeyValues(old, field), indexKeyValues(next, field))) return false;
  }
  return true;
}

/**
 * Makes the stored `target` deep-equal to `source` (a private copy of it with the update applied),
 * keeping every part that did not change: nested objects are merged the same way when their keys
 * allow it, and an equal string or number is not replaced. Frequent small updates of long-lived
 * documents (an agent's lastSeen, its token totals, an actor's snapshot) then leave almost nothing
 * behind for the garbage collector, where swapping in a new copy made the whole old document
 * garbage in the old generation each time. `target`'s keys must be a prefix of `source`'s.
 */
function mergeInPlace(target: Obj, source: Obj): void {
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

const isUniqueViolation = (err: unknown): boolean =>
  typeof err === 'object' && err !== null && (err as { errorType?: unknown }).errorType === 'uniqueViolated';

/** MongoDB's default index name: `a_1_b_-1`. */
function defaultIndexName(fields: Array<[string, number]>): string {
  return fields.map(([f, d]) => `${f}_${d}`).join('_');
}

/** Values an index keys a document by: array elements individually, missing as undefined (keyed as null). */
function indexKeyValues(doc: Obj, field: string): unknown[] {
  const out: unknown[] = [];
  collectValues(doc, field.split('.'), 0, out);
  const flat = out.flatMap((v) => (Array.isArray(v) && v.length > 0 ? v : [v]));
  return flat.length > 0 ? flat : [undefined];
}

/**
 * Buffers datafile appends are encoded into, shared by all collections: an append takes one (or
 * makes one, when others are in use) and puts it back when written, so a steady stream of writes
 * allocates no buffers. A buffer grown beyond APPEND_BUFFER_KEPT is left to the collector.
 */
/** Datafiles are the owner's alone: they hold sealed secrets, token hashes and everything else. */
const FILE_MODE = 0o600;
const DIR_MODE = 0o700;

const appendBuffers: Buffer[] = [];
const APPEND_BUFFER_MIN = 64 * 1024;
const APPEND_BUFFER_KEPT = 256 * 1024;
const APPEND_BUFFERS_KEPT = 2;

/**
 * The append side of a collection's datafile, kept open. nedb appends every write with
 * `fs.appendFile(path)`: open, write and close, three trips through the thread pool, each of
 * which waits for a turn of the event loop, which under a fleet's load is what a write's latency
 * is made of. This appends the same lines through one handle opened in append mode. A compaction
 * replaces the file (write a copy, rename it over), so the handle is closed before it and the
 * next append opens the new file. nedb runs appends and compactions one at a time on its
 * executor, so they never overlap.
 *
 * The datafile is append-only: every update adds the document's new line and every removal a
 * tombstone, so a collection a fleet rewrites all day (token totals, lastSeen, the token ledger)
 * grows by gigabytes a day while its live documents stay the same. So the log counts what it
 * appends and asks for a compaction (`onOversize`) once the file has reached both twice its size
 * after the last compaction and `compactMinBytes`: the file stays within about twice its live
 * size, and the work of rewriting it is paid for by as many bytes of appends.
 *
 * A compaction while the store runs (`compact`) does not hold the collection's writes while it
 * copies: it takes the live documents at one point between two writes, and from then on every
 * append goes to the datafile as before and is also kept (`tail`), to be written to the copy
 * after the documents. Only the last step holds the writes: the appends the copy has not got
 * yet, its flush to disk (little is left to flush by then), and the rename.
 */
class AppendLog {
  private handle: Promise<FileHandle> | null = null;
  /** Bytes in the datafile: the text of the last compaction and the appends since. */
  private size = 0;
  /** The datafile's size right after the last compaction. */
  private compactedSize = 0;
  private compactionAsked = false;
  /** Starts a compaction on the collection's executor (set once the datastore is loaded). */
  onOversize: (() => Promise<void>) | null = null;
  /** The compaction asked for and not finished (a store closing waits for it). */
  private compaction: Promise<void> | null = null;
  /** While a compaction copies the file: what was appended since it took the documents, in order. */
  private tail: Buffer[] | null = null;

  constructor(
    private readonly filename: string,
    private readonly compactMinBytes: number,
  ) {}

  /**
   * Appends documents, a line each, encoded straight into a buffer kept from the last append (see
   * `appendBuffers` and `JsonLineWriter`): no line is a string first, apart from those of
   * documents holding a Date, which nedb's `serialize` writes (as `{"$$date": ms}`).
   */
  async append(docs: readonly StoredDoc[]): Promise<void> {
    if (docs.length === 0) return;
    const out = new JsonLineWriter(appendBuffers.pop() ?? Buffer.allocUnsafeSlow(APPEND_BUFFER_MIN));
    try {
      for (const doc of docs) writeDocLine(out, doc);
      this.handle ??= open(this.filename, 'a', FILE_MODE);
      let fh: FileHandle;
      try {
        fh = await this.handle;
      } catch (err) {
        this.handle = null; // try to open again next time
        throw err;
      }
      await writeAll(fh, out.buf, out.length);
      this.size += out.length;
      // A copy of the bytes: the buffer goes back to the pool for the next append.
      this.tail?.push(Buffer.from(out.buf.subarray(0, out.length)));
    } finally {
      if (out.buf.length <= APPEND_BUFFER_KEPT && appendBuffers.length < APPEND_BUFFERS_KEPT) appendBuffers.push(out.buf);
    }
    if (!this.compactionAsked && this.onOversize && this.size >= this.compactMinBytes && this.size >= 2 * this.compactedSize) {
      this.compactionAsked = true;
      // Queued behind the writes already waiting; a failure leaves the old file, tried again later.
      this.compaction = this.onOversize()
        .catch(() => undefined)
        .finally(() => {
          this.compaction = null;
        });
    }
  }

  /**
   * Replaces the datafile with these documents and lines, crash-safe as nedb's own compaction:
   * written beside it (`<file>~`), flushed to disk, renamed over it, and the directory flushed. A
   * crash before the rename leaves the old file, which nedb's load prefers to the copy. This is
   * the rewrite at load, on the collection's executor (nothing else runs on the collection yet);
   * see `compact` for one while the store runs.
   */
  async rewrite(docs: readonly StoredDoc[], lines: readonly string[]): Promise<void> {
    await this.close();
    const temp = `${this.filename}~`;
    let written: number;
    try {
      const fh = await open(temp, 'w', FILE_MODE);
      try {
        written = await writeCopy(fh, docs, lines);
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(temp, this.filename);
      await syncDirectory(dirname(this.filename));
    } catch (err) {
      this.compactionFailed();
      throw err;
    }
    this.size = this.compactedSize = written;
    this.compactionAsked = false;
  }

  /**
   * A compaction while the collection is in use. `exclusive` runs a task on the collection's
   * executor (no write runs beside it). The documents and index lines are taken in one such task,
   * which also starts keeping the appends that follow; the copy is written and flushed to disk
   * while writes go on; a second exclusive task writes the appends kept meanwhile, flushes them
   * and renames the copy over the datafile. The documents are not copied when taken: a document
   * changed in place afterwards may be written in its newer state, and the line its change
   * appended, which follows in the copy, says the same.
   */
  async compact(take: () => { docs: readonly StoredDoc[]; lines: readonly string[] }, exclusive: <R>(task: () => Promise<R>) => Promise<R>): Promise<void> {
    const temp = `${this.filename}~`;
    const { docs, lines } = await exclusive(async () => {
      this.tail = [];
      return take();
    });
    try {
      const fh = await open(temp, 'w', FILE_MODE);
      let copyOpen = true;
      try {
        let written = await writeCopy(fh, docs, lines);
        await fh.sync();
        written += await this.writeTail(fh); // what came meanwhile, still without holding the writes
        await exclusive(async () => {
          written += await this.writeTail(fh);
          await fh.sync();
          copyOpen = false;
          await fh.close();
          await this.close(); // the next append opens the new file
          await rename(temp, this.filename);
          this.tail = null;
          this.size = this.compactedSize = written;
        });
      } finally {
        if (copyOpen) await fh.close().catch(() => undefined);
      }
      // After the rename: appends are never forced to disk, so this is for the rename alone.
      await syncDirectory(dirname(this.filename));
    } catch (err) {
      this.tail = null;
      this.compactionFailed();
      throw err;
    }
    this.compactionAsked = false;
  }

  /** Writes the appends kept so far to the copy; returns their bytes. */
  private async writeTail(fh: FileHandle): Promise<number> {
    const chunks = this.tail!.splice(0);
    let written = 0;
    for (const chunk of chunks) written += await writeAll(fh, chunk, chunk.length);
    return written;
  }

  /** The old file is still in place: try again once it has grown as much once more. */
  private compactionFailed(): void {
    this.compactedSize = this.size;
    this.compactionAsked = false;
  }

  /**
   * Compacts now, whatever the file's size: after a migration replaced documents whose old lines
   * must not stay on disk. Waits for a compaction already under way; never runs two at once.
   */
  async compactNow(): Promise<void> {
    while (this.compaction) await this.compaction;
    if (!this.onOversize) return;
    // No await between the check above and these two lines: an append cannot start another one.
    this.compactionAsked = true;
    const run = this.onOversize();
    this.compaction = run
      .catch(() => undefined)
      .finally(() => {
        this.compaction = null;
      });
    await run;
  }

  /** Resolves once no compaction this log asked for is pending. */
  async idle(): Promise<void> {
    while (this.compaction) await this.compaction;
  }

  async close(): Promise<void> {
    const handle = this.handle;
    this.handle = null;
    if (handle) await handle.then((fh) => fh.close()).catch(() => undefined);
  }
}

/** Bytes of a compaction's text encoded before they are written (and the event loop runs again). */
const REWRITE_CHUNK = 256 * 1024;

/** A document's datafile line: nedb's text for one holding a Date (`{"$$date": ms}`), else plain JSON. */
function writeDocLine(out: JsonLineWriter, doc: StoredDoc): void {
  if (holdsDate(doc)) out.raw(serialize(doc) + '\n');
  else out.line(doc);
}

/**
 * Writes the documents' lines and then `lines` to a new file; returns the bytes written. The lines
 * are encoded a chunk at a time, each written before the next is made, so a large collection does
 * not hold the event loop for the whole text.
 */
async function writeCopy(fh: FileHandle, docs: readonly StoredDoc[], lines: readonly string[]): Promise<number> {
  let written = 0;
  const out = new JsonLineWriter(Buffer.allocUnsafeSlow(REWRITE_CHUNK + APPEND_BUFFER_MIN));
  for (let i = 0; i < docs.length; i++) {
    writeDocLine(out, docs[i]!);
    if (out.length >= REWRITE_CHUNK) {
      written += await writeAll(fh, out.buf, out.length);
      out.length = 0;
    }
  }
  for (const line of lines) out.raw(`${line}\n`);
  written += await writeAll(fh, out.buf, out.length);
  return written;
}

/** Writes `length` bytes of `buf` (a write may take fewer than it is given); returns `length`. */
async function writeAll(fh: FileHandle, buf: Buffer, length: number): Promise<number> {
  for (let off = 0; off < length; ) off += (await fh.write(buf, off, length - off)).bytesWritten;
  return length;
}

/** Flushes a directory's entries (a rename in it) to disk; a platform that cannot open a directory skips it, as nedb does. */
async function syncDirectory(dir: string): Promise<void> {
  let fh: FileHandle;
  try {
    fh = await open(dir, 'r');
  } catch {
    return;
  }
  try {
    await fh.sync();
  } catch {
    // some file systems refuse to flush a directory; nedb ignores that too
  } finally {
    await fh.close();
  }
}

/** Whether a value holds a Date anywhere (nedb writes those as `{"$$date": ms}`). */
function holdsDate(v: unknown): boolean {
  if (typeof v !== 'object' || v === null) return false;
  if (v instanceof Date) return true;
  if (Array.isArray(v)) {
    for (const x of v) if (holdsDate(x)) return true;
    return false;
  }
  for (const k in v) if (holdsDate((v as Obj)[k])) return true;
  return false;
}

/**
 * Loads a datafile and routes nedb's appends and compactions through an AppendLog (see there). A
 * compaction writes what nedb's own writes: each document's line, then a line per index other
 * than `_id`, which the next load re-creates.
 */
async function openDatastore(filename: string, log: AppendLog): Promise<NedbStore> {
  const ds = new Datastore({ filename, modes: { fileMode: FILE_MODE, dirMode: DIR_MODE } });
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
  // nedb's version, minus its file open and close per write (and its `await` per document for an
  // afterSerialization hook this store does not use).
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

/** A FIFO async mutex: `run` executes callbacks one at a time in call order. */
class Mutex {
  private tail: Promise<unknown> = Promise.resolve();

  run<R>(fn: () => Promise<R>): Promise<R> {
    const result = this.tail.then(fn);
    this.tail = result.catch(() => undefined);
    return result;
  }

  idle(): Promise<unknown> {
    return this.tail;
  }
}

interface WriteOutcome {
  result: UpdateResult;
  before: StoredDoc | null;
  after: StoredDoc | null;
}

const NO_MATCH: UpdateResult = { matched: 0, modified: 0, upserted: 0 };

class EmbeddedCollection<T extends Doc> implements Collection<T> {
  private readonly mutex = new Mutex();
  private readonly loaded: Promise<NedbStore>;
  private readonly log: AppendLog;
  /** Names given to createIndex, by nedb index key. */
  private readonly indexNames = new Map<string, string>();

  constructor(
    readonly name: string,
    private readonly filename: string,
    private readonly owner: EmbeddedStore,
  ) {
    this.log = new AppendLog(filename, owner.compactMinBytes);
    this.loaded = openDatastore(filename, this.log);
    this.loaded.catch(() => undefined); // reported by whichever operation uses the collection
  }

  // -- reads ----------------------------------------------------------------------------------

  findOne(filter: Filter, options: FindOptions = {}): Promise<T | null> {
    return this.find(filter, { ...options, limit: 1 }).then((docs) => docs[0] ?? null);
  }

  /**
   * A direct look-up in nedb's `_id` index. It does not queue behind the writes waiting in nedb's
   * executor (a cursor does): nedb changes its in-memory documents before it appends them to the
   * file, so this sees every write that has returned, and maybe one still being appended.
   */
  findById(id: string): Promise<T | null> {
    if (typeof id !== 'string') return this.findOne({ _id: id });
    return this.read(async (ds) => {
      const doc = internals(ds).indexes._id.getMatching(id)[0];
      return doc ? (cloneValue(doc) as T) : null;
    });
  }

  find(filter: Filter, options: FindOptions = {}): Promise<T[]> {
    return this.read(async (ds) => {
      const query = prepareQuery(filter);
      const sort = compileSort(options.sort);
      const skip = nonNegativeInteger('skip', options.skip);
      const limit = nonNegativeInteger('limit', options.limit);
      const project = compileProjection(options.projection);
      const end = limit > 0 ? skip + limit : Infinity;
      let docs = scan(ds, query, sort ? Infinity : end);
      if (sort) docs = sort(docs);
      return docs.slice(skip, end).map((d) => project(d) as T);
    });
  }

  count(filter: Filter = {}): Promise<number> {
    return this.read(async (ds) => scan(ds, prepareQuery(filter)).length);
  }

  distinct(field: string, filter: Filter = {}): Promise<unknown[]> {
    return this.read(async (ds) => {
      const parts = splitPath(field);
      const query = prepareQuery(filter);
      const seen = new Map<string, unknown>();
      for (const doc of scan(ds, query)) {
        const raw: unknown[] = [];
        collectValues(doc, parts, 0, raw);
        for (const v of raw.flatMap((x) => (Array.isArray(x) ? x : [x]))) {
          if (v === undefined) continue;
          // typeRank + JSON identifies a value up to MongoDB equality (key order included).
          const key = `${typeRank(v)}:${JSON.stringify(v)}`;
          if (!seen.has(key)) seen.set(key, cloneValue(v));
        }
      }
      return [...seen.values()].sort(compareValues);
    });
  }

  // -- writes ---------------------------------------------------------------------------------

  insertOne(doc: T): Promise<T> {
    return this.write(async (ds) => {
      await this.insertLocked(ds, [prepareNewDoc(doc)]);
      return doc;
    });
  }

  insertMany(docs: T[]): Promise<void> {
    return this.write(async (ds) => {
      if (!Array.isArray(docs)) throw new InvalidQueryError('insertMany needs an array');
      if (docs.length > 0) await this.insertLocked(ds, docs.map(prepareNewDoc));
    });
  }

  updateOne(filter: Filter, update: Update, options: UpdateOptions = {}): Promise<UpdateResult> {
    return this.write(async (ds) => {
      const plan = compileUpdate(update);
      return (await this.updateLocked(ds, filter, plan, { upsert: Boolean(options.upsert), multi: false })).result;
    });
  }

  updateMany(filter: Filter, update: Update): Promise<UpdateResult> {
    return this.write(async (ds) => {
      const plan = compileUpdate(update);
      return (await this.updateLocked(ds, filter, plan, { upsert: false, multi: true })).result;
    });
  }

  findOneAndUpdate(filter: Filter, update: Update, options: FindOneAndUpdateOptions = {}): Promise<T | null> {
    return this.write(async (ds) => {
      const plan = compileUpdate(update);
      const sort = compileSort(options.sort);
      const outcome = await this.updateLocked(ds, filter, plan, { upsert: Boolean(options.upsert), multi: false, sort });
      const doc = options.returnDocument === 'before' ? outcome.before : outcome.after;
      return doc ? (cloneValue(doc) as T) : null;
    });
  }

  replaceOne(filter: Filter, doc: T, options: UpdateOptions = {}): Promise<UpdateResult> {
    return this.write(async (ds) => {
      if (!isPlainObject(doc)) throw new InvalidQueryError('replacement must be an object');
      if (Object.keys(doc).some((k) => k.startsWith('$'))) {
        throw new InvalidQueryError('replacement document must not contain update operators');
      }
      const replacement = cloneStored(doc) as Obj;
      const [target] = scan(ds, prepareQuery(filter), 1);
      if (target === undefined) {
        if (!options.upsert) return NO_MATCH;
        const pairs: Array<[string, unknown]> = [];
        collectEqualities(filter, pairs);
        const filterId = pairs.find(([path]) => path === '_id')?.[1];
        await this.insertLocked(ds, [withIdFirst(replacement, replacement._id ?? filterId ?? nanoid())]);
        return { matched: 0, modified: 0, upserted: 1 };
      }
      if (replacement._id !== undefined && !valuesEqual(replacement._id, target._id)) {
        throw new InvalidQueryError("the (immutable) field '_id' was found to have been altered");
      }
      const next = withIdFirst(replacement, target._id);
      if (valuesEqual(next, target)) return { matched: 1, modified: 0, upserted: 0 };
      this.checkSize(next);
      await this.replaceLocked(ds, target, next);
      return { matched: 1, modified: 1, upserted: 0 };
    });
  }

  deleteOne(filter: Filter): Promise<number> {
    return this.write((ds) => this.removeLocked(ds, filter, false));
  }

  deleteMany(filter: Filter): Promise<number> {
    return this.write((ds) => this.removeLocked(ds, filter, true));
  }

  /**
   * In order, all under one mutex acquisition: each op sees the ones before it. An op that fails
   * fails alone; once every other op is applied, a BulkUpdateError lists the failed ones.
   *
   * Ops whose filter is exactly `{_id}` (what the actor host, the token roll-up and the lastSeen
   * flush send) are gathered and written together: one all-or-nothing index update and one file
   * append for the replacements, one insert for the upserted documents, instead of a nedb call
   * and an append per document. Any other op, or a second op on a gathered `_id`, first writes
   * what was gathered, so every op still sees the effect of the ones before it.
   */
  bulkUpdate(ops: BulkUpdateOp[]): Promise<UpdateResult> {
    return this.write(async (ds) => {
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
                this.checkSize(next);
                if (canMergeInPlace(old, next, indexedFields)) batch.merge(old, next, i);
                else batch.replace(old, next, i);
                total.modified++;
              }
              total.matched++;
            } else if (op.upsert) {
              const doc = buildUpsertDoc(op.filter, plan);
              checkObject(doc);
              this.checkSize(doc);
              batch.insert(doc, i);
              total.upserted++;
            }
            continue;
          }
          const plan = compileUpdate(op.update);
          await this.applyBatch(ds, batch, out);
          const { result } = await this.updateLocked(ds, op.filter, plan, { upsert: Boolean(op.upsert), multi: false });
          total.matched += result.matched;
          total.modified += result.modified;
          total.upserted += result.upserted;
        } catch (err) {
          out.fail(i, this.failure(err));
        }
      }
      await this.applyBatch(ds, batch, out);
      if (out.failures.length > 0) {
        out.failures.sort((x, y) => x.index - y.index);
        throw new BulkUpdateError(this.name, out.failures, total);
      }
      return total;
    });
  }

  /**
   * Writes a gathered batch. nedb changes its indexes for all replacements or for none, and
   * inserts an array all or nothing; when a unique index refuses the batch, the documents are
   * written one by one so only the offending ones fail.
   */
  private async applyBatch(ds: NedbStore, batch: WriteBatch, out: BulkOutcome): Promise<void> {
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
          const error = this.failure(err);
          for (const op of updatedOps) out.fail(op, error, 'modified');
          for (const m of merges) out.fail(m.op, error, 'modified');
          for (const r of replacements) out.fail(r.op, error, 'modified');
        } else {
          for (const r of replacements) {
            try {
              await this.replaceLocked(ds, r.oldDoc, r.newDoc);
            } catch (inner) {
              out.fail(r.op, this.failure(inner), 'modified');
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
          const error = this.failure(err);
          for (const op of insertOps) out.fail(op, error, 'upserted');
        } else {
          for (let k = 0; k < inserts.length; k++) {
            try {
              await insertPrepared(ds, [inserts[k]!]);
            } catch (inner) {
              out.fail(insertOps[k]!, this.writeError(ds, inner, inserts[k]!, true), 'upserted');
            }
          }
        }
      }
    }
    batch.clear();
  }

  createIndex(spec: IndexSpec): Promise<void> {
    return this.write(async (ds) => {
      if (!isPlainObject(spec) || !isPlainObject(spec.fields)) throw new InvalidQueryError('index spec needs fields');
      const entries = Object.entries(spec.fields);
      if (entries.length === 0) throw new InvalidQueryError('index spec needs at least one field');
      for (const [field, dir] of entries) {
        splitPath(field);
        if (field.includes(',')) throw new InvalidQueryError(`index field "${field}" may not contain a comma`);
        if (dir !== 1 && dir !== -1) throw new InvalidQueryError(`index direction for "${field}" must be 1 or -1`);
      }
      const fields = entries.map(([f]) => f);
      const key = [...fields].sort().join(',');
      if (key === '_id') return; // always present and unique
      const name = spec.name ?? defaultIndexName(entries);
      const unique = Boolean(spec.unique);
      const sparse = Boolean(spec.sparse);
      for (const [otherKey, otherName] of this.indexNames) {
        if (otherName === name && otherKey !== key) throw new InvalidQueryError(`index name ${name} is already used for other fields`);
      }
      const existing = nedbIndexes(ds).find((d) => d.key === key);
      if (existing) {
        // MongoDB refuses to redefine an index with other options (IndexOptionsConflict).
        const knownName = this.indexNames.get(key);
        if (existing.unique !== unique || existing.sparse !== sparse || (knownName !== undefined && knownName !== name)) {
          throw new InvalidQueryError(`an index on ${key} already exists with different options`);
        }
        this.indexNames.set(key, name);
        return;
      }
      try {
        await ds.ensureIndexAsync({ fieldName: fields.length === 1 ? fields[0] : fields, unique, sparse });
      } catch (err) {
        if (isUniqueViolation(err)) throw new DuplicateKeyError(this.name, name, { cause: err });
        throw this.failure(err);
      }
      this.indexNames.set(key, name);
    });
  }

  // -- internals ------------------------------------------------------------------------------

  /** Resolves once no compaction of this collection is under way. */
  compactionIdle(): Promise<void> {
    return this.log.idle();
  }

  /** Rewrites the datafile now (Store.compact). */
  compactNow(): Promise<void> {
    return this.owner.track(async () => {
      await this.datastore();
      await this.log.compactNow();
    });
  }

  /** Waits for the collection's load, writes and compaction, then closes its datafile. */
  async settle(): Promise<void> {
    await this.loaded.catch(() => undefined);
    await this.mutex.idle();
    await this.log.idle();
    await this.log.close();
  }

  private async datastore(): Promise<NedbStore> {
    try {
      return await this.loaded;
    } catch (err) {
      throw new StoreUnavailableError(`cannot load collection ${this.name} from ${this.filename}: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  private read<R>(fn: (ds: NedbStore) => Promise<R>): Promise<R> {
    return this.owner.track(async () => fn(await this.datastore()));
  }

  private write<R>(fn: (ds: NedbStore) => Promise<R>): Promise<R> {
    return this.owner.track(async () => {
      const ds = await this.datastore();
      return this.mutex.run(() => fn(ds));
    });
  }

  private async updateLocked(
    ds: NedbStore,
    filter: Filter,
    plan: UpdatePlan,
    opts: { upsert: boolean; multi: boolean; sort?: SortFn },
  ): Promise<WriteOutcome> {
    let targets = scan(ds, prepareQuery(filter), opts.multi || opts.sort ? Infinity : 1);
    if (opts.sort) targets = opts.sort(targets).slice(0, 1);
    if (targets.length === 0) {
      if (!opts.upsert) return { result: NO_MATCH, before: null, after: null };
      const doc = buildUpsertDoc(filter, plan);
      await this.insertLocked(ds, [doc]);
      return { result: { matched: 0, modified: 0, upserted: 1 }, before: null, after: doc };
    }
    let modified = 0;
    let after: StoredDoc | null = null;
    for (const old of targets) {
      const next = applyUpdate(old, plan, false) as StoredDoc;
      if (!valuesEqual(old, next)) {
        this.checkSize(next);
        await this.replaceLocked(ds, old, next);
        modified++;
      }
      after ??= next;
    }
    return { result: { matched: targets.length, modified, upserted: 0 }, before: targets[0], after };
  }

  private async insertLocked(ds: NedbStore, docs: StoredDoc[]): Promise<void> {
    const tooLarge = docs.findIndex((doc) => bsonDocumentSize(doc) > MAX_DOCUMENT_BYTES);
    if (tooLarge >= 0) {
      // Like MongoDB's ordered insertMany: the documents before the offending one are inserted.
      if (tooLarge > 0) await this.insertLocked(ds, docs.slice(0, tooLarge));
      this.checkSize(docs[tooLarge]!);
    }
    try {
      // One nedb call (one append) for the whole batch; nedb rolls the batch back on a violation.
      await insertPrepared(ds, docs);
    } catch (err) {
      if (docs.length === 1 || !isUniqueViolation(err)) throw this.writeError(ds, err, docs[0], true);
      // Reproduce MongoDB's ordered insertMany: documents before the offending one stay inserted.
      for (const doc of docs) {
        try {
          await insertPrepared(ds, [doc]);
        } catch (inner) {
          throw this.writeError(ds, inner, doc, true);
        }
      }
    }
  }

  private async replaceLocked(ds: NedbStore, old: StoredDoc, next: StoredDoc): Promise<void> {
    try {
      await ds.updateAsync({ _id: old._id }, next, {});
    } catch (err) {
      throw this.writeError(ds, err, next, false);
    }
  }

  private async removeLocked(ds: NedbStore, filter: Filter, multi: boolean): Promise<number> {
    const query = prepareQuery(filter);
    try {
      return await ds.removeAsync(
        {
          ...query.hints,
          $where(this: Obj) {
            return query.predicate(this);
          },
        },
        { multi },
      );
    } catch (err) {
      throw this.failure(err);
    }
  }

  /** Refuses a document larger than MongoDB would store, so both backends refuse the same writes. */
  private checkSize(doc: StoredDoc): void {
    const bytes = bsonDocumentSize(doc);
    if (bytes > MAX_DOCUMENT_BYTES) throw new DocumentTooLargeError(this.name, bytes);
  }

  private writeError(ds: NedbStore, err: unknown, doc: StoredDoc, inserting: boolean): StoreError {
    if (isUniqueViolation(err)) return new DuplicateKeyError(this.name, this.violatedIndex(ds, doc, inserting), { cause: err });
    return this.failure(err);
  }

  private failure(err: unknown): StoreError {
    if (err instanceof StoreError) return err;
    const message = err instanceof Error ? err.message : String(err);
    // nedb's document checks (field names with "$" or ".").
    if (/^Field names cannot|cannot mix|change a document's _id/i.test(message)) {
      return new InvalidQueryError(message, { cause: err });
    }
    return new StoreUnavailableError(`embedded store failure on ${this.name}: ${message}`, { cause: err });
  }

  /**
   * Best-effort name of the unique index `doc` collides on (nedb's error only carries the key):
   * the first unique index for which another document has an overlapping key.
   */
  private violatedIndex(ds: NedbStore, doc: StoredDoc, inserting: boolean): string | undefined {
    const all = ds.getAllData() as StoredDoc[];
    for (const def of nedbIndexes(ds)) {
      if (!def.unique) continue;
      if (def.key === '_id') {
        // An update keeps its _id (and its stored previous version shares it), so only inserts can clash here.
        if (inserting && all.some((o) => o._id === doc._id)) return '_id_';
        continue;
      }
      const unindexed = (keys: unknown[][]) => def.sparse && keys.every((vs) => vs.length === 1 && vs[0] === undefined);
      const mine = def.fields.map((f) => indexKeyValues(doc, f));
      if (unindexed(mine)) continue;
      const clash = all.some((other) => {
        if (other._id === doc._id) return false;
        const theirs = def.fields.map((f) => indexKeyValues(other, f));
        // A missing field is keyed as null (see nedb-index.ts).
        return !unindexed(theirs) && theirs.every((vs, i) => vs.some((v) => mine[i]!.some((m) => valuesEqual(m ?? null, v ?? null))));
      });
      if (clash) return this.indexNames.get(def.key) ?? defaultIndexName(def.fields.map((f) => [f, 1]));
    }
    return undefined;
  }
}

/**
 * Matching stored documents, in nedb's candidate order (the `_id` index's, which is insertion
 * order (src/store/nedb-index.ts), unless an index hint narrows it). Synchronous: the candidates
 * come straight from nedb's indexes (its own `_getRawCandidates`; this store defines no TTL
 * index, the one thing nedb's asynchronous wrapper adds) and the predicate runs on them at once,
 * so no write can land between matching a document and the caller copying it. Like `findById`,
 * a read therefore does not queue behind the writes waiting in nedb's executor: it sees every
 * write that has returned, and maybe one still being appended. The documents are the stored
 * objects: callers copy what they hand out before they next await.
 */
function scan(ds: NedbStore, query: PreparedQuery, stopAfter = Infinity): StoredDoc[] {
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
 * The documents to test for a query. A filter on one indexed field equal to one of some strings
 * (most reads) asks that index directly, value by value: what nedb's own selection would pick,
 * without the arrays and closures it makes to choose an index, or the object keyed by `_id` it
 * builds to merge several values' documents (a Set of the documents here: each once, value by
 * value). Anything else goes through nedb's selection.
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

// ---------------------------------------------------------------------------------------------
// Store
// ---------------------------------------------------------------------------------------------

const COLLECTION_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,119}$/;

/** Store directories open in this process: two nedb instances on one file would corrupt it. */
const openDirectories = new Set<string>();

/** The embedded store, with what only it has. */
export interface EmbeddedStoreHandle extends Store {
  /** Resolves once no collection has a compaction under way (tests wait on it between writes). */
  compactionsIdle(): Promise<void>;
}

class EmbeddedStore implements EmbeddedStoreHandle {
  readonly kind = 'embedded' as const;
  private readonly collections = new Map<string, EmbeddedCollection<Doc>>();
  private readonly inflight = new Set<Promise<unknown>>();
  private closed = false;
  private closing: Promise<void> | undefined;

  constructor(
    private readonly dir: string,
    readonly compactMinBytes: number,
    private readonly lock: DirectoryLock,
  ) {}

  collection<T extends Doc>(name: string): Collection<T> {
    if (this.closed) throw new StoreUnavailableError('store is closed');
    if (typeof name !== 'string' || !COLLECTION_NAME.test(name)) {
      throw new InvalidQueryError(`invalid collection name "${name}"`);
    }
    let coll = this.collections.get(name);
    if (!coll) {
      coll = new EmbeddedCollection<Doc>(name, join(this.dir, `${name}.db`), this);
      this.collections.set(name, coll);
    }
    return coll as unknown as Collection<T>;
  }

  compact(name: string): Promise<void> {
    return (this.collection(name) as unknown as EmbeddedCollection<Doc>).compactNow();
  }

  async compactionsIdle(): Promise<void> {
    await Promise.all([...this.collections.values()].map((c) => c.compactionIdle()));
  }

  async ping(): Promise<void> {
    if (this.closed) throw new StoreUnavailableError('store is closed');
    try {
      await access(this.dir, fsConstants.R_OK | fsConstants.W_OK);
    } catch (err) {
      throw new StoreUnavailableError(`store directory ${this.dir} is not accessible`, { cause: err });
    }
  }

  /** Waits for every started operation (and so every pending write) to finish, then detaches. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.closed = true;
      await Promise.allSettled([...this.inflight]);
      await Promise.allSettled([...this.collections.values()].map((c) => c.settle()));
      this.collections.clear();
      await this.lock.release();
      openDirectories.delete(this.dir);
    })();
    return this.closing;
  }

  /** Registers an operation so close() can wait for it; refuses new ones once closing. */
  track<R>(fn: () => Promise<R>): Promise<R> {
    if (this.closed) return Promise.reject(new StoreUnavailableError('store is closed'));
    const p = fn();
    this.inflight.add(p);
    const done = () => this.inflight.delete(p);
    p.then(done, done);
    return p;
  }
}

/** A datafile is compacted once it has reached twice its size after the last compaction and this (the default; the server passes STORE_COMPACT_MIN_MB). */
const COMPACT_MIN_BYTES = 16 * 1024 * 1024;

export async function openEmbeddedStore(opts: { dataDir: string; compactMinBytes?: number }): Promise<EmbeddedStoreHandle> {
  const root = resolve(opts.dataDir);
  const dir = join(root, 'store');
  if (openDirectories.has(dir)) throw new StoreUnavailableError(`embedded store at ${dir} is already open in this process`);
  await ensurePrivateDirectory(root, `DATA_DIR ${root}`);
  await ensurePrivateDirectory(dir, `store directory ${dir}`);
  if (openDirectories.has(dir)) throw new StoreUnavailableError(`embedded store at ${dir} is already open in this process`);
  openDirectories.add(dir);
  let lock: DirectoryLock;
  try {
    lock = await lockDirectory(dir, `DATA_DIR ${root}`);
  } catch (err) {
    openDirectories.delete(dir);
    throw err;
  }
  return new EmbeddedStore(dir, opts.compactMinBytes ?? COMPACT_MIN_BYTES, lock);
}

/** A directory only its owner may enter (created so when missing); a clear error when the path is a file. */
async function ensurePrivateDirectory(path: string, what: string): Promise<void> {
  try {
    await mkdir(path, { recursive: true, mode: DIR_MODE });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' || code === 'ENOTDIR') {
      throw new StoreUnavailableError(`${what} is not a directory (a file is in the way); point DATA_DIR at a directory, which is created when missing`, { cause: err });
    }
    throw new StoreUnavailableError(`cannot create ${what}: ${(err as Error).message}`, { cause: err });
  }
}
