/**
 * Authentication and the auth levels of the route table.
 *
 * A request authenticates with `Authorization: Bearer <token>` or the `steward_session` cookie.
 * State-changing requests authenticated by the cookie are refused (403) when their Origin header
 * names another origin than PUBLIC_URL or the Host they were sent to (a cross-site request
 * forgery guard; bearer tokens are not sent by browsers on their own, so they need no check).
 */
import type { AuthLevel, AuthPolicy, RequestContext } from './router.js';
import { forbidden, unauthorized } from './errors.js';
import type { Principal, UserPrincipal } from '../domain/principal.js';
import type { Collections } from '../store/collections.js';
import type { Sessions } from '../services/sessions.js';

export const SESSION_COOKIE = 'steward_session';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export interface AgentLookup {
  (did: string): Promise<{ name: string } | null>;
}

export function tokenOf(ctx: Pick<RequestContext, 'headers' | 'cookies'>): { token: string; via: 'bearer' | 'cookie' } | null {
  const auth = ctx.headers.authorization;
  if (auth) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    return m ? { token: m[1]!, via: 'bearer' } : null;
  }
  const cookie = ctx.cookies[SESSION_COOKIE];
  return cookie ? { token: cookie, via: 'cookie' } : null;
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

export function createAuthPolicy(deps: {
  c: Collections;
  sessions: Sessions;
  publicUrl: () => string;
  /** Resolves an agent's name for agent sessions; set by the fleet. */
  agent: () => AgentLookup;
}): AuthPolicy {
  return {
    async authenticate(ctx) {
      const presented = tokenOf(ctx);
      if (!presented) return null;
      if (presented.via === 'cookie' && !SAFE_METHODS.has(ctx.method)) {
        const origin = ctx.headers.origin;
        if (origin && !isSameOrigin(origin, deps.publicUrl(), ctx.headers.host)) {
          throw forbidden('cross-origin request with a session cookie refused', 'cross_origin');
        }
      }
      const session = await deps.sessions.resolve(presented.token);
      if (!session) return null;
      if (session.kind === 'user') {
        const user = await deps.c.users.findById(session.subject);
        if (!user || !user.did) return null;
        return {
          kind: 'user',
          userId: user._id,
          did: user.did,
          name: user.name,
          isOwner: user.isOwner,
          isAdmin: user.isAdmin,
          role: user.role,
          sessionId: session._id,
          via: presented.via,
        };
      }
      const agent = await deps.agent()(session.subject);
      if (!agent) return null;
      return { kind: 'agent', did: session.subject, name: agent.name, sessionId: session._id, via: presented.via };
    },

    authorize(level: AuthLevel, p: Principal | null) {
      if (level === 'public' || level === 'optional') return;
      if (!p) throw unauthorized();
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

export const isAdminLike = (p: UserPrincipal) => p.isAdmin || p.isOwner || p.role === 'owner' || p.role === 'admin';
export const isOwnerLike = (p: UserPrincipal) => p.isOwner || p.role === 'owner';
