/**
 * Authentication and the auth levels of the route table.
 *
 * A request authenticates with `Authorization: Bearer <token>` or the `steward_session` cookie.
 * State-changing requests authenticated by the cookie are refused (403) when their Origin header
 * is missing or names another origin than PUBLIC_URL or the Host they were sent to (a cross-site
 * request forgery guard; bearer tokens are not sent by browsers on their own, so they need no check).
 *
 * A route that needs a session and gets none says why, and what to do: no token (`unauthorized`),
 * a token that cannot be one (`malformed_token`), one that is not a live session
 * (`invalid_session`: never issued, ended by logout or removal), one that expired
 * (`session_expired`). Only the holder of a token learns anything about it.
 */
import type { AuthLevel, AuthPolicy, Cookie, RequestContext } from './router.js';
import { AppError, forbidden, unauthorized } from '../domain/errors.js';
import type { Principal, UserPrincipal } from '../domain/principal.js';
import { isAdminLike, isOwnerLike } from '../domain/permissions.js';
import type { Sessions } from '../services/sessions.js';

export const SESSION_COOKIE = 'steward_session';

/** The session cookie as every route that signs a browser in or out sets it (`maxAgeSeconds` 0 clears it). */
export function sessionCookie(publicUrl: string, value: string, maxAgeSeconds: number): Cookie {
  return { name: SESSION_COOKIE, value, maxAgeSeconds, httpOnly: true, sameSite: 'Lax', path: '/', secure: publicUrl.startsWith('https:') };
}

/** Refuses (403 `cross_origin`) a request whose Origin names another origin than PUBLIC_URL or its Host: a page elsewhere must not sign a browser in. */
export function refuseCrossOrigin(headers: Record<string, string>, publicUrl: string): void {
  if (headers.origin && !isSameOrigin(headers.origin, publicUrl, headers.host)) throw forbidden('cross-origin sign-in refused', 'cross_origin');
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export function tokenOf(ctx: Pick<RequestContext, 'headers' | 'cookies'>): { token: string; via: 'bearer' | 'cookie' } | null {
  const auth = ctx.headers.authorization;
  if (auth) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    return m ? { token: m[1]!, via: 'bearer' } : null;
  }
  const cookie = ctx.cookies[SESSION_COOKIE];
  return cookie ? { token: cookie, via: 'cookie' } : null;
}

/** A session token: 32 random bytes, base64url (src/services/sessions.ts). */
const SESSION_TOKEN = /^[A-Za-z0-9_-]{43}$/;

type Refusal = { kind: 'malformed'; what: 'header' | 'token' } | { kind: 'unknown' } | { kind: 'expired'; at: string };

/** Why a request that presented a token authenticated as nobody (read by `authorize`). */
const refusals = new WeakMap<object, Refusal>();

function refusalError(r: Refusal | undefined): AppError {
  const login = 'log in again (POST /api/auth/challenge, then POST /api/auth/login)';
  if (!r) {
    return unauthorized(
      'this route needs a session: send `Authorization: Bearer <token>` or the steward_session cookie (log in with POST /api/auth/challenge, then POST /api/auth/login)',
    );
  }
  switch (r.kind) {
    case 'malformed':
      return unauthorized(
        r.what === 'header'
          ? 'the Authorization header must be `Bearer <token>`, with the token from POST /api/auth/login'
          : `this is not a session token (a session token is 43 base64url characters); ${login}`,
        'malformed_token',
      );
    case 'unknown':
      return unauthorized(`this session is not valid: it was ended (logout, or its account or agent was removed) or never issued; ${login}`, 'invalid_session');
    case 'expired':
      return unauthorized(`your session expired at ${r.at}; ${login}`, 'session_expired');
  }
}

export function isSameOrigin(origin: string, publicUrl: string, host: string | undefined): boolean {
  let o: URL;
  try {
    o = new URL(origin);
  } catch {
    return false;
  }
  if (o.origin === new URL(publicUrl).origin) return true;
  return host !== undefined && o.host === host;
}

export function createAuthPolicy(deps: { sessions: Sessions; publicUrl: () => string }): AuthPolicy {
  return {
    async authenticate(ctx) {
      const presented = tokenOf(ctx);
      if (!presented) {
        if (ctx.headers.authorization) refusals.set(ctx, { kind: 'malformed', what: 'header' });
        return null;
      }
      if (presented.via === 'cookie' && !SAFE_METHODS.has(ctx.method)) {
        // Browsers send Origin with every such request: one without it did not come from a page of this site.
        const origin = ctx.headers.origin;
        if (!origin || !isSameOrigin(origin, deps.publicUrl(), ctx.headers.host)) {
          throw forbidden(
            origin ? 'cross-origin request with a session cookie refused' : 'a request with a session cookie must carry the Origin header (scripts: send Authorization: Bearer <token>)',
            'cross_origin',
          );
        }
      }
      if (!SESSION_TOKEN.test(presented.token)) {
        refusals.set(ctx, { kind: 'malformed', what: 'token' });
        return null;
      }
      const checked = await deps.sessions.check(presented.token);
      if (!('session' in checked)) {
        refusals.set(ctx, checked.refused === 'expired' ? { kind: 'expired', at: checked.expiredAt } : { kind: 'unknown' });
        return null;
      }
      // A session whose person or agent is gone is no session (it is ended with them anyway).
      const principal = await deps.sessions.principalOf(checked.session, presented.via);
      if (principal) refusals.delete(ctx);
      else refusals.set(ctx, { kind: 'unknown' });
      return principal;
    },

    authorize(level: AuthLevel, p: Principal | null, ctx: RequestContext) {
      if (level === 'public' || level === 'optional') return;
      if (!p) throw refusalError(refusals.get(ctx));
      if (level === 'session') return;
      if (p.kind !== 'user') throw forbidden('this endpoint is for people, not agents');
      if (level === 'user') return;
      if (level === 'admin' && isAdminLike(p)) return;
      if (level === 'globalAdmin' && p.isAdmin) return;
      if (level === 'owner' && isOwnerLike(p)) return;
      throw forbidden(`this endpoint needs the ${level === 'globalAdmin' ? 'global admin' : level} level`);
    },
  };
}

/** The caller of a route whose auth level admits only people. */
export const personOf = (ctx: Pick<RequestContext, 'principal'>): UserPrincipal => ctx.principal as UserPrincipal;

