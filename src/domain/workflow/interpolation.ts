/**
 * `{{...}}` interpolation in step params (interface §4.10 rule 2).
 *
 * An expression is a root followed by a path:
 *
 *   {{variables.<name>}}                 the run's variables (the definition's, overridden by params)
 *   {{params.<name>}}                    the run's params
 *   {{steps.<id>.output}}                a finished step's output (also `.status` and `.error`)
 *   {{steps.a.output.items[0].name}}     nested access: `.field`, `[index]`, `["key"]` or `['key']`
 *
 * Spaces inside the braces are ignored. A string that is exactly one expression is replaced by
 * the value with its type kept (a number stays a number, an object an object); an expression
 * inside a longer string is written into it (strings as they are, anything else as JSON).
 * Interpolation walks objects and arrays; keys are never interpolated.
 */

import { isTruncatedOutput } from './output-limit.js';

export type Root = 'variables' | 'params' | 'steps';
export type PathSegment = string | number;

export interface Reference {
  root: Root;
  /** After the root; for `steps`: the step id, then output/status/error, then the nested path. */
  path: PathSegment[];
  /** The expression as written, without the braces. */
  source: string;
}

type Part = { text: string } | { ref: Reference };

export class InterpolationError extends Error {
  override name = 'InterpolationError';
}

export interface Scope {
  variables: Record<string, unknown>;
  params: Record<string, unknown>;
  steps: Record<string, { status: string; output: unknown; error: string | null }>;
}

const NAME = /[A-Za-z0-9_-]/;
const STEP_FIELDS = new Set(['output', 'status', 'error']);
/** Parsed templates by source text; definitions are re-read at every step start. */
const cache = new Map<string, Part[]>();
const CACHE_MAX = 5000;

/** Parses one expression (the text between the braces). Throws InterpolationError. */
export function parseExpression(raw: string): Reference {
  const src = raw.trim();
  if (src === '') throw new InterpolationError('{{}} is empty');
  const segs: PathSegment[] = [];
  let i = 0;
  const name = (): string => {
    const start = i;
    while (i < src.length && NAME.test(src[i]!)) i++;
    if (i === start) throw new InterpolationError(`{{${src}}}: expected a name at position ${start + 1}`);
    return src.slice(start, i);
  };
  segs.push(name());
  while (i < src.length) {
    const ch = src[i]!;
    if (ch === '.') {
      i++;
      segs.push(name());
    } else if (ch === '[') {
      i++;
      const q = src[i];
      if (q === '"' || q === "'") {
        const end = src.indexOf(q, i + 1);
        if (end < 0) throw new InterpolationError(`{{${src}}}: unterminated string in [...]`);
        segs.push(src.slice(i + 1, end));
        i = end + 1;
      } else {
        const m = /^\d+/.exec(src.slice(i));
        if (!m) throw new InterpolationError(`{{${src}}}: [...] takes an index (a whole number) or a quoted key`);
        segs.push(Number(m[0]));
        i += m[0].length;
      }
      if (src[i] !== ']') throw new InterpolationError(`{{${src}}}: expected ']' at position ${i + 1}`);
      i++;
    } else {
      throw new InterpolationError(`{{${src}}}: unexpected '${ch}' at position ${i + 1}`);
    }
  }
  const [root, ...path] = segs;
  if (root !== 'variables' && root !== 'params' && root !== 'steps') {
    throw new InterpolationError(`{{${src}}}: an expression starts with variables, params or steps`);
  }
  if (path.length === 0) throw new InterpolationError(`{{${src}}}: name a ${root === 'steps' ? 'step' : 'value'} after '${root}'`);
  if (root === 'steps') {
    if (typeof path[0] !== 'string') throw new InterpolationError(`{{${src}}}: expected a step id after 'steps'`);
    if (typeof path[1] !== 'string' || !STEP_FIELDS.has(path[1])) {
      throw new InterpolationError(`{{${src}}}: expected .output, .status or .error after the step id`);
    }
  }
  return { root, path, source: src };
}

/** Splits a string into text and expressions. Throws InterpolationError for a malformed one. */
export function parseTemplate(s: string): Part[] {
  const hit = cache.get(s);
  if (hit) return hit;
  const parts: Part[] = [];
  let i = 0;
  while (i < s.length) {
    const open = s.indexOf('{{', i);
    if (open < 0) {
      parts.push({ text: s.slice(i) });
      break;
    }
    if (open > i) parts.push({ text: s.slice(i, open) });
    const close = s.indexOf('}}', open + 2);
    if (close < 0) throw new InterpolationError(`'{{' at position ${open + 1} is not closed with '}}'`);
    parts.push({ ref: parseExpression(s.slice(open + 2, close)) });
    i = close + 2;
  }
  if (cache.size >= CACHE_MAX) cache.clear();
  cache.set(s, parts);
  return parts;
}

/**
 * Every expression inside a value (strings of objects and arrays, at any depth), with the path of
 * the string that holds it (`params.items.0`). Throws InterpolationError naming that path.
 */
export function findReferences(value: unknown, where = 'params'): Array<{ where: string; ref: Reference }> {
  const out: Array<{ where: string; ref: Reference }> = [];
  walkStrings(value, where, (s, at) => {
    try {
      for (const p of parseTemplate(s)) if ('ref' in p) out.push({ where: at, ref: p.ref });
    } catch (err) {
      if (err instanceof InterpolationError) throw new InterpolationError(`${at}: ${err.message}`);
      throw err;
    }
  });
  return out;
}

function walkStrings(value: unknown, at: string, fn: (s: string, at: string) => void): void {
  if (typeof value === 'string') fn(value, at);
  else if (Array.isArray(value)) value.forEach((v, i) => walkStrings(v, `${at}.${i}`, fn));
  else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) walkStrings(v, `${at}.${k}`, fn);
  }
}

const own = (o: object, k: string) => Object.prototype.hasOwnProperty.call(o, k);

/** A step's output (or part of one) that was too large to keep cannot be passed on: say so. */
function refuseTruncated(ref: Reference, v: unknown): void {
  if (ref.root === 'steps' && ref.path[1] === 'output' && isTruncatedOutput(v)) {
    throw new InterpolationError(
      `{{${ref.source}}}: the output of step '${String(ref.path[0])}' was too large to keep (${v.bytes} bytes, over the limit of ${v.limit}) and is truncated`,
    );
  }
}

/** The value an expression names; InterpolationError when it names nothing. */
export function resolveReference(ref: Reference, scope: Scope): unknown {
  let cur: unknown = scope[ref.root];
  for (const seg of ref.path) {
    refuseTruncated(ref, cur);
    if (typeof seg === 'number' && Array.isArray(cur) && seg < cur.length) cur = cur[seg];
    else if (typeof seg === 'string' && cur !== null && typeof cur === 'object' && !Array.isArray(cur) && own(cur, seg)) {
      cur = (cur as Record<string, unknown>)[seg];
    } else {
      throw new InterpolationError(`{{${ref.source}}} refers to nothing`);
    }
  }
  refuseTruncated(ref, cur);
  return cur;
}

/** Interpolates every string inside `value` (a deep copy is returned). Throws InterpolationError. */
export function interpolate(value: unknown, scope: Scope, where = 'params'): unknown {
  if (typeof value === 'string') {
    try {
      return interpolateString(value, scope);
    } catch (err) {
      if (err instanceof InterpolationError) throw new InterpolationError(`${where}: ${err.message}`);
      throw err;
    }
  }
  if (Array.isArray(value)) return value.map((v, i) => interpolate(v, scope, `${where}.${i}`));
  if (value !== null && typeof value === 'object') {
    // fromEntries defines keys as data properties, so a `__proto__` key stays a key.
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolate(v, scope, `${where}.${k}`)]));
  }
  return value;
}

function interpolateString(s: string, scope: Scope): unknown {
  if (!s.includes('{{')) return s;
  const parts = parseTemplate(s);
  const only = parts.length === 1 ? parts[0]! : undefined;
  if (only && 'ref' in only) return structuredClone(resolveReference(only.ref, scope));
  let out = '';
  for (const p of parts) {
    if ('text' in p) out += p.text;
    else {
      const v = resolveReference(p.ref, scope);
      out += typeof v === 'string' ? v : JSON.stringify(v ?? null);
    }
  }
  return out;
}
