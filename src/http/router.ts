/**
 * The route table and the in-process dispatcher.
 *
 * A route is declared once — method, path, auth level, zod schemas for path parameters, query
 * and body, the zod schema of its answer per success status, and a handler whose answer must be
 * of those types — and `dispatch` does the rest:
 * matching (404 for unknown paths, 405 for a known path with another method, HEAD answered as
 * GET without the body), percent-decoding of path segments, rate limits (429), JSON parsing (400
 * on invalid or too deeply nested JSON), validation (400 naming the field), authentication and
 * the one error shape. The uWS adapter (adapter.ts) only moves bytes; tests and tools can call
 * `dispatch` directly.
 */
import { z } from 'zod';
import { AppError, badRequest, unauthorized } from '../domain/errors.js';
import { errorBody, errorHeaders, HttpError, toHttpError } from './errors.js';
import { jsonText } from './json-text.js';
import type { Principal } from '../domain/principal.js';
import { parseJsonBody } from '../domain/json-depth.js';
import { LIMIT_GROUPS, retryAfterSeconds, type LimitGroup, type RateLimits } from '../services/rate-limits.js';
import { addressKey } from './client-address.js';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * Auth levels (see docs/api.md):
 * - public: no authentication;
 * - optional: a session is used when present;
 * - session: any authenticated principal, person or agent;
 * - user: an authenticated person;
 * - admin: a person with the admin flag or the owner/admin role ("Admin" in the interface);
 * - globalAdmin: a person with the isAdmin flag;
 * - owner: the installation owner.
 * Workspace and channel roles are checked inside handlers by the permissions module.
 */
export type AuthLevel = 'public' | 'optional' | 'session' | 'user' | 'admin' | 'globalAdmin' | 'owner';

export interface RawRequest {
  method: string;
  /** Path without the query string, still percent-encoded. */
  path: string;
  /** Query string without the leading `?`. */
  query: string;
  /** Header names in lower case. */
  headers: Record<string, string>;
  body: Buffer;
  /** The client's address (the peer's, or the one a trusted proxy forwarded). */
  remoteAddress: string;
}

export interface Cookie {
  name: string;
  value: string;
  maxAgeSeconds?: number;
  httpOnly?: boolean;
  secure?: boolean;
  sameSite?: 'Lax' | 'Strict' | 'None';
  path?: string;
}

export interface RequestContext<P = unknown, Q = unknown, B = unknown> {
  method: Method;
  path: string;
  params: P;
  query: Q;
  body: B;
  /** The body bytes exactly as received (for signatures over the raw body). */
  rawBody: Buffer;
  headers: Record<string, string>;
  cookies: Record<string, string>;
  remoteAddress: string;
  principal: Principal | null;
  /** The route pattern, e.g. `/api/users/:did` (metrics label). */
  route: string;
}

/** A non-JSON answer (an SVG image, Prometheus text): described by its media type. */
export interface RawResponse {
  readonly contentType: string;
  readonly description: string;
  /** The JSON Schema of the body in the OpenAPI document (default: a string). */
  readonly schema: Readonly<Record<string, unknown>>;
}

/** Declares a non-JSON answer of a route; `contentType` is its media type (parameters such as charset allowed). */
export function rawResponse(contentType: string, description: string, schema: Record<string, unknown> = { type: 'string' }): RawResponse {
  return { contentType, description, schema };
}

export const isRawResponse = (r: z.ZodType | RawResponse): r is RawResponse => !(r instanceof z.ZodType);

/**
 * What a route answers on success, per status: the zod schema of its JSON body, or a raw answer.
 * Error answers are not listed: every one has the error shape (src/http/errors.ts).
 */
export type Responses = Readonly<Record<number, z.ZodType | RawResponse>>;

interface ResultExtras {
  headers?: Record<string, string>;
  cookies?: Cookie[];
}

/**
 * A body as a handler writes it: the schema's type with its literals widened (`true` as boolean,
 * `'ready'` as string), since TypeScript widens a handler's literals while it infers the route's
 * types. The literals, the exact fields and which status goes with which body are checked on real
 * answers under STEWARD_CHECK_RESPONSES.
 */
type Widened<T> = T extends string
  ? string
  : T extends number
    ? number
    : T extends boolean
      ? boolean
      : T extends bigint
        ? bigint
        : T extends readonly (infer E)[]
          ? Widened<E>[]
          : T extends object
            ? { [K in keyof T]: Widened<T[K]> }
            : T;

/** A handler's answer of one declared kind; `status` defaults to 200. */
type ResultFor<R> = (R extends z.ZodType
  ? { body: Widened<z.input<R>>; raw?: never }
  : { raw: { contentType: string; data: string | Buffer }; body?: never }) & { status?: number } & ResultExtras;

/** What a handler answers: a body of one of the schemas its route declares (or a raw answer where it declares one). */
export type RouteResult<R extends Responses = Responses> = { [S in keyof R]: ResultFor<R[S]> }[keyof R];

/** What the dispatcher reads of any handler's answer. */
interface AnyResult extends ResultExtras {
  status?: number;
  body?: unknown;
  raw?: { contentType: string; data: string | Buffer };
}

export interface RouteDef<
  P extends z.ZodType = z.ZodType,
  Q extends z.ZodType = z.ZodType,
  B extends z.ZodType = z.ZodType,
  R extends Responses = Responses,
> {
  method: Method;
  path: string;
  auth: AuthLevel;
  summary: string;
  tags?: string[];
  params?: P;
  query?: Q;
  body?: B;
  /**
   * Every success status the route answers with the shape of its body (the OpenAPI document's
   * responses; checked against real answers under STEWARD_CHECK_RESPONSES).
   */
  responses: R;
  /**
   * The rate limits of the route: its group's limit per source address, checked first, and the
   * group's limit per the key `key` returns (a DID, a token), checked once the request is valid.
   */
  limit?: { group: LimitGroup; key?: (ctx: RequestContext<z.output<P>, z.output<Q>, z.output<B>>) => string | undefined };
  // NoInfer: R comes from `responses` alone.
  handler: (ctx: RequestContext<z.output<P>, z.output<Q>, z.output<B>>) => NoInfer<Promise<RouteResult<R>> | RouteResult<R>>;
}

/** Declares a route with its types inferred from the schemas: the handler must answer what `responses` declares. */
export function route<
  P extends z.ZodType = z.ZodObject<{}>,
  Q extends z.ZodType = z.ZodObject<{}>,
  B extends z.ZodType = z.ZodUnknown,
  R extends Responses = Responses,
>(def: RouteDef<P, Q, B, R>): RouteDef {
  return def as unknown as RouteDef;
}

export interface AuthPolicy {
  /** Finds the principal of a request (session cookie, bearer token); null when none. */
  authenticate(ctx: RequestContext): Promise<Principal | null>;
  /** Throws AppError 401/403 when the principal may not use a route of this level. */
  authorize(level: AuthLevel, principal: Principal | null, ctx: RequestContext): void;
}

export interface ResponseOut {
  status: number;
  headers: Record<string, string>;
  cookies: Cookie[];
  body: string | Buffer;
  contentType: string;
  /** An answer to HEAD: the body is empty and this is the length the GET body would have had. */
  headOf?: number;
}

export interface DispatchObserver {
  (info: { method: string; route: string; status: number; seconds: number; error?: unknown }): void;
}

interface Node {
  statics: Map<string, Node>;
  param?: { name: string; node: Node };
  routes: Map<Method, RouteDef>;
}

const newNode = (): Node => ({ statics: new Map(), routes: new Map() });

export interface RouterOptions {
  /** Who a request comes from and whether they may use a route (without one: public routes only). */
  auth?: AuthPolicy;
  observe?: DispatchObserver;
  /** The rate limits routes name in `limit`; without them no route is limited. */
  limits?: RateLimits;
  /** Told of each refusal by a rate limit (the root logs a limit's trip once per window). */
  limited?: (refusal: { group: LimitGroup; per: 'address' | 'key'; key: string; address: string; waitMs: number }) => void;
  /**
   * For tests (STEWARD_CHECK_RESPONSES): every answer is checked against its route's declared
   * responses, and one that does not match becomes a 500 `response_schema_violation` naming the
   * route and the field; this is told each violation (it is also kept in `violations`).
   */
  checkResponses?: (violation: ResponseViolation) => void;
}

/** An answer that did not match what its route declares. */
export interface ResponseViolation {
  method: string;
  route: string;
  status: number;
  /** What is wrong, naming the field (`agents.0.lastSeen: Invalid input: expected string, received null`). */
  problem: string;
}

export class Router {
  private readonly root = newNode();
  private readonly all: RouteDef[] = [];
  private readonly policy: AuthPolicy;
  private readonly observe: DispatchObserver | undefined;
  private readonly limits: RateLimits | undefined;
  private readonly limited: RouterOptions['limited'];
  private readonly checkResponses: ((violation: ResponseViolation) => void) | undefined;
  /** The answers that did not match their route's declared responses (only under `checkResponses`). */
  readonly violations: ResponseViolation[] = [];

  constructor(options: RouterOptions = {}) {
    this.policy = options.auth ?? {
      authenticate: async () => null,
      authorize: (level, principal) => {
        if (level !== 'public' && level !== 'optional' && !principal) throw unauthorized();
      },
    };
    this.observe = options.observe;
    this.limits = options.limits;
    this.limited = options.limited;
    this.checkResponses = options.checkResponses;
  }

  add(...defs: RouteDef[]): this {
    for (const def of defs) {
      let node = this.root;
      for (const seg of splitPath(def.path)) {
        if (seg.startsWith(':')) {
          const name = seg.slice(1);
          if (node.param && node.param.name !== name) {
            throw new Error(`route ${def.method} ${def.path}: parameter :${name} conflicts with :${node.param.name}`);
          }
          node.param ??= { name, node: newNode() };
          node = node.param.node;
        } else {
          let next = node.statics.get(seg);
          if (!next) node.statics.set(seg, (next = newNode()));
          node = next;
        }
      }
      if (node.routes.has(def.method)) throw new Error(`route ${def.method} ${def.path} declared twice`);
      node.routes.set(def.method, def);
      this.all.push(def);
    }
    return this;
  }

  routes(): readonly RouteDef[] {
    return this.all;
  }

  /** Finds the node of a path; static segments win over parameters, with backtracking. */
  private match(segments: string[]): { node: Node; params: Record<string, string> } | null {
    const params: Record<string, string> = {};
    const walk = (node: Node, i: number): Node | null => {
      if (i === segments.length) return node.routes.size > 0 ? node : null;
      const seg = segments[i]!;
      const stat = node.statics.get(seg);
      if (stat) {
        const found = walk(stat, i + 1);
        if (found) return found;
      }
      if (node.param && seg !== '') {
        const found = walk(node.param.node, i + 1);
        if (found) {
          params[node.param.name] = seg;
          return found;
        }
      }
      return null;
    };
    const node = walk(this.root, 0);
    return node ? { node, params } : null;
  }

  async dispatch(req: RawRequest): Promise<ResponseOut> {
    const started = process.hrtime.bigint();
    let routeLabel = 'unmatched';
    let out: ResponseOut;
    let thrown: unknown;
    try {
      const r = await this.handle(req, (label) => (routeLabel = label));
      out = r;
    } catch (err) {
      thrown = err;
      const { error, unexpected } = toHttpError(err);
      out = jsonOut(error.status, errorBody(error.code, error.message), errorHeaders(error));
      if (!unexpected) thrown = undefined;
    }
    // HEAD is answered as GET (errors too), without the body.
    if (req.method.toUpperCase() === 'HEAD') out = { ...out, body: '', headOf: Buffer.byteLength(out.body) };
    this.observe?.({
      method: req.method,
      route: routeLabel,
      status: out.status,
      seconds: Number(process.hrtime.bigint() - started) / 1e9,
      error: thrown,
    });
    return out;
  }

  private async handle(req: RawRequest, setLabel: (l: string) => void): Promise<ResponseOut> {
    let segments: string[];
    try {
      segments = splitPath(req.path).map((s) => decodeURIComponent(s));
    } catch {
      throw badRequest('the path is not valid percent-encoding', 'invalid_path');
    }
    const found = this.match(segments);
    if (!found) throw new AppError(404, 'not_found', `no route for ${req.path}`);
    const requested = req.method.toUpperCase();
    const method = (requested === 'HEAD' ? 'GET' : requested) as Method;
    const def = found.node.routes.get(method);
    if (!def) {
      const methods = [...found.node.routes.keys()];
      const allow = (methods.includes('GET') ? [...methods, 'HEAD'] : methods).join(', ');
      throw new HttpError(405, 'method_not_allowed', `${requested} is not allowed here; allowed: ${allow}`, { allow });
    }
    setLabel(def.path);
    const address = addressKey(req.remoteAddress);
    if (def.limit) await this.take(def.limit.group, 'address', address, address);

    const ctx: RequestContext = {
      method,
      path: req.path,
      params: found.params,
      query: parseQuery(req.query),
      body: undefined,
      rawBody: req.body,
      headers: req.headers,
      cookies: parseCookies(req.headers.cookie),
      remoteAddress: req.remoteAddress,
      principal: null,
      route: def.path,
    };

    if (def.auth !== 'public') ctx.principal = await this.policy.authenticate(ctx);
    this.policy.authorize(def.auth, ctx.principal, ctx);

    ctx.params = validate('path', def.params, ctx.params);
    ctx.query = validate('query', def.query, ctx.query);
    if (def.body) ctx.body = validate('body', def.body, (req.body.length > 0 ? parseJsonBody(req.body) : undefined) ?? {});
    const key = def.limit?.key?.(ctx as never);
    if (key !== undefined) await this.take(def.limit!.group, 'key', key, address);

    const result: AnyResult = (await def.handler(ctx as never)) as AnyResult;
    const status = result.status ?? 200;
    const out: ResponseOut = result.raw
      ? { status, headers: result.headers ?? {}, cookies: result.cookies ?? [], body: result.raw.data, contentType: result.raw.contentType }
      : { ...jsonOut(status, result.body ?? {}, result.headers), cookies: result.cookies ?? [] };
    if (this.checkResponses) this.check(def, out, result.raw !== undefined);
    return out;
  }

  /** Throws 500 `response_schema_violation` when an answer is not what its route declares (tests only: see RouterOptions). */
  private check(def: RouteDef, out: ResponseOut, raw: boolean): void {
    const declared = def.responses[out.status];
    let problem: string | null = null;
    if (!declared) {
      problem = `status ${out.status}, which it does not declare (it declares ${Object.keys(def.responses).join(', ')})`;
    } else if (isRawResponse(declared)) {
      if (mediaType(out.contentType) !== mediaType(declared.contentType)) problem = `${out.status} as ${out.contentType}, where it declares ${declared.contentType}`;
    } else if (raw) {
      problem = `${out.status} as ${out.contentType}, where it declares a JSON body`;
    } else {
      // The JSON the client receives (undefined fields gone, bigints as numbers), not the object before it was written.
      const r = declared.safeParse(JSON.parse(out.body.toString()));
      if (!r.success) {
        const issues = r.error.issues.slice(0, 3).map((i) => `${i.path.length > 0 ? i.path.map(String).join('.') : '(the body)'}: ${i.message}`);
        problem = `${out.status} with a body its schema refuses: ${issues.join('; ')}`;
      }
    }
    if (problem === null) return;
    const violation: ResponseViolation = { method: def.method, route: def.path, status: out.status, problem };
    this.violations.push(violation);
    this.checkResponses!(violation);
    throw new AppError(500, 'response_schema_violation', `${def.method} ${def.path} answered ${problem}`);
  }

  /** Counts the request against a limit of its group; 429 with Retry-After when it is over. */
  private async take(group: LimitGroup, per: 'address' | 'key', key: string, address: string): Promise<void> {
    const waitMs = await this.limits?.[group][per].take(key);
    if (waitMs === null || waitMs === undefined) return;
    this.limited?.({ group, per, key, address, waitMs });
    const seconds = retryAfterSeconds(waitMs);
    const { what, keyName } = LIMIT_GROUPS[group];
    const from = per === 'address' ? 'from this address' : `for this ${keyName}`;
    throw new AppError(429, 'rate_limited', `too many ${what} ${from}; retry in ${seconds} s`, seconds);
  }
}

function jsonOut(status: number, body: unknown, headers?: Record<string, string>): ResponseOut {
  return { status, headers: headers ?? {}, cookies: [], body: jsonText(body), contentType: 'application/json; charset=utf-8' };
}

/** `text/plain; charset=utf-8` → `text/plain`. */
const mediaType = (contentType: string): string => contentType.split(';')[0]!.trim().toLowerCase();

function splitPath(path: string): string[] {
  const trimmed = path.replace(/^\/+/, '').replace(/\/+$/, '');
  return trimmed === '' ? [] : trimmed.split('/');
}

function parseQuery(qs: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  if (!qs) return out;
  for (const [k, v] of new URLSearchParams(qs)) {
    const prev = out[k];
    if (prev === undefined) out[k] = v;
    else out[k] = Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

export function parseCookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!header) return out;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    if (!name || name in out) continue;
    try {
      out[name] = decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      out[name] = part.slice(eq + 1).trim();
    }
  }
  return out;
}

function validate(where: 'path' | 'query' | 'body', schema: z.ZodType | undefined, value: unknown): unknown {
  if (!schema) return value;
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const field = issue.path.length > 0 ? issue.path.map(String).join('.') : null;
  const message = field ? `${where} field '${field}': ${issue.message}` : `${where}: ${issue.message}`;
  throw new AppError(400, 'validation_failed', message);
}

/** Query helpers: query values arrive as strings. */
export const q = {
  bool: () =>
    z.enum(['true', 'false', '1', '0'], { message: 'expected true or false' }).transform((v) => v === 'true' || v === '1'),
  int: (min = 0, max = Number.MAX_SAFE_INTEGER) =>
    z
      .string()
      .regex(/^-?\d+$/, { message: 'expected a whole number' })
      .transform(Number)
      .pipe(z.number().int().min(min).max(max)),
};

const INSTANT = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(Z|[+-]\d{2}(?::?\d{2})?))?$/i;

/**
 * A point in time written in ISO 8601, as UTC text (`toISOString`): a date-time with a zone (`Z`,
 * `±hh:mm`, `±hhmm` or `±hh`; seconds and fractions optional), or a calendar date alone, meaning
 * 00:00 UTC that day. A date-time without a zone is refused (its meaning depends on where it was
 * written), as is a date or time that does not exist (February 30th, 25:00).
 */
export function instant(): z.ZodType<string, string> {
  return z
    .string()
    .max(64)
    .transform((text, ctx) => {
      const at = parseInstant(text);
      if (at === null) {
        ctx.addIssue({ code: 'custom', message: 'expected an ISO 8601 date-time with a zone (2030-01-31T12:00:00Z, …+02:00) or a date (2030-01-31, meaning 00:00 UTC)' });
        return z.NEVER;
      }
      return at;
    });
}

/** The UTC text of an ISO 8601 instant as `instant()` takes it; null when it is not one. */
export function parseInstant(text: string): string | null {
  const m = INSTANT.exec(text);
  if (!m) return null;
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  if (h !== undefined && zone === undefined) return null;
  const year = Number(y);
  const month = Number(mo) - 1;
  const day = Number(d);
  const hour = Number(h ?? 0);
  const minute = Number(mi ?? 0);
  const second = Number(s ?? 0);
  if (hour > 23 || minute > 59 || second > 59) return null;
  // setUTCFullYear takes every year as given (Date.UTC would read 0–99 as 1900–1999); a day the
  // month does not have rolls over, which the comparison below catches.
  const date = new Date(0);
  date.setUTCFullYear(year, month, day);
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month || date.getUTCDate() !== day) return null;
  let offsetMinutes = 0;
  if (zone !== undefined && zone.toUpperCase() !== 'Z') {
    const digits = zone.slice(1).replace(':', '');
    const oh = Number(digits.slice(0, 2));
    const om = Number(digits.slice(2) || 0);
    if (oh > 23 || om > 59) return null;
    offsetMinutes = (zone[0] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  date.setUTCHours(hour, minute - offsetMinutes, second, frac ? Math.floor(Number(`0${frac}`) * 1000) : 0);
  return Number.isNaN(date.getTime()) ? null : date.toISOString();
}
