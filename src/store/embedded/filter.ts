/**
 * Filters with MongoDB's meaning, which nedb's own matching lacks (`{f: null}` on a missing field,
 * `$ne` on arrays): compiled into a predicate, with what an index can serve picked out as hints.
 */
import { InvalidQueryError } from '../types.js';
import { isArrayIndex, splitPath, valuesAt } from './paths.js';
import { cloneValue, compareValues, isPlainObject, own, typeRank, valuesEqual, type Obj } from './values.js';

export type DocPredicate = (doc: unknown) => boolean;
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
  if (typeof source !== 'string') throw new InvalidQueryError('$regex has to be a string');
  if (options !== undefined && options !== '' && options !== 'i') throw new InvalidQueryError('$options has to be "i" or ""');
  try {
    return new RegExp(source, options ?? '');
  } catch (err) {
    throw new InvalidQueryError(`invalid regular expression /${source}/: ${(err as Error).message}`, { cause: err });
  }
}

/** A value a filter compares with, copied; a RegExp is refused (a pattern is given as `$regex`). */
export function operand(v: unknown): unknown {
  if (v instanceof RegExp) throw new InvalidQueryError('a regular expression is given as {$regex: "<pattern>"}');
  return cloneValue(v);
}

const LOGICAL_OPERATORS = new Set(['$and', '$or']);

function firstKey(v: Obj): string | undefined {
  return Object.keys(v).find((k) => v[k] !== undefined);
}

/** A field condition is an operator expression (`{$gt: 1}`) when its first key starts with `$`. */
export function isOperatorObject(v: unknown): v is Obj {
  return isPlainObject(v) && (firstKey(v)?.startsWith('$') ?? false);
}

/**
 * Inside $elemMatch and $pull, a document is either conditions on the element itself
 * (`{$gte: 80}`) or a query on an element that is a sub-document (`{name: 'x'}`, `{$or: [...]}`).
 */
export function isElementCondition(v: Obj): boolean {
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
      else preds.push((d) => subs.some((p) => p(d)));
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

export function compileCondition(cond: unknown): ValuesPredicate {
  if (isOperatorObject(cond)) return compileOperators(cond);
  const expected = operand(cond);
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
        const expected = operand(arg);
        preds.push(op === '$eq' ? (vs) => matchesEquality(vs, expected) : (vs) => !matchesEquality(vs, expected));
        break;
      }
      case '$in':
      case '$nin': {
        if (!Array.isArray(arg)) throw new InvalidQueryError(`${op} needs an array`);
        const tests = arg.map((v): ValuesPredicate => {
          if (isOperatorObject(v)) throw new InvalidQueryError(`cannot nest $ under ${op}`);
          const expected = operand(v);
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
        const bound = operand(arg);
        preds.push((vs) => matchesComparison(vs, bound, op));
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

export interface PreparedQuery {
  predicate: DocPredicate;
  /** Conjuncts that nedb evaluates identically and can serve from an index (`{_id: 'x'}` etc.). */
  hints: Obj;
  /** A filter of one field equal to one of these strings: its index, if any, is asked directly. */
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
 * `{field: 'text'}` and `{field: {$in: ['text', ...]}}`, most reads, without the general predicate
 * (which allocates a list of values per document tested): the same meaning, at less cost.
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

export function prepareQuery(filter: unknown): PreparedQuery {
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

/** Equality conditions of a filter, which seed the document an upsert inserts (as MongoDB does). */
export function collectEqualities(filter: Obj, out: Array<[string, unknown]>): void {
  for (const [key, cond] of Object.entries(filter)) {
    if (cond === undefined) continue;
    if (key === '$and' && Array.isArray(cond)) {
      for (const sub of cond) if (isPlainObject(sub)) collectEqualities(sub, out);
    } else if (key === '$or' && Array.isArray(cond) && cond.length === 1 && isPlainObject(cond[0])) {
      collectEqualities(cond[0], out);
    } else if (key.startsWith('$')) {
      continue;
    } else if (isOperatorObject(cond)) {
      if (Object.hasOwn(cond, '$eq')) out.push([key, cond.$eq]);
    } else {
      out.push([key, cond]);
    }
  }
}
