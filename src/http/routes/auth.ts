/**
 * Login and logout of people (DESIGN §3): POST /api/auth/challenge, /api/auth/login,
 * /api/auth/logout. See docs/identity.md.
 */
import { z } from 'zod';
import { route, type Cookie, type RouteDef } from '../router.js';
import { AppError, forbidden } from '../../domain/errors.js';
import { isSameOrigin, SESSION_COOKIE, tokenOf } from '../auth.js';
import { isDid } from '../../domain/did.js';
import { actingAs, LoginService, loginUserView, type LoginRefusal } from '../../services/login.js';
import type { AppContext } from '../../server.js';

const SWEEP_EVERY_MS = 10 * 60_000;

const did = z.string().refine(isDid, { message: 'expected a DID (did:<method>:<identifier>)' });

const NEW_CHALLENGE = 'ask for a new challenge (POST /api/auth/challenge) and sign its nonce';

/** What a refused login answers: what is wrong, and what to do (src/services/login.ts says what each may reveal). */
const refusedLogin = (why: LoginRefusal, did: string): AppError => {
  switch (why) {
    case 'invalid_challenge':
      return new AppError(401, why, `this challenge is unknown, used or expired (a challenge lasts 5 minutes and serves one attempt); ${NEW_CHALLENGE}`);
    case 'challenge_mismatch':
      return new AppError(401, why, `this challenge was issued for another DID; ask for a challenge for ${did} and sign its nonce`);
    case 'invalid_signature':
      return new AppError(
        401,
        why,
        `the signature does not verify over steward-login:<nonce> with the key of this DID (the account's key, or the one a did:key carries); this challenge is used up: ${NEW_CHALLENGE} with that key`,
      );
    case 'no_account':
      return new AppError(
        401,
        why,
        `no account holds ${did}: the key is right, but this DID has not claimed an account here. Claim one first with the link or invitation an owner or admin sends you (steward wallet claim), then log in`,
      );
  }
};

const userView = z.object({
  id: z.string(),
  did: z.string().nullable(),
  name: z.string(),
  email: z.string(),
  isOwner: z.boolean(),
  isAdmin: z.boolean(),
  role: z.string(),
  registeredAt: z.string(),
});

export function authRoutes(ctx: AppContext): RouteDef[] {
  const login = new LoginService(ctx.c, ctx.sessions);
  const timer = setInterval(() => {
    login.sweep().catch((err: unknown) => ctx.log.warn({ err }, 'sweeping expired challenges and sessions failed'));
  }, SWEEP_EVERY_MS);
  timer.unref();
  ctx.onClose(() => clearInterval(timer));

  const sessionCookie = (value: string, maxAgeSeconds: number): Cookie => ({
    name: SESSION_COOKIE,
    value,
    maxAgeSeconds,
    httpOnly: true,
    sameSite: 'Lax',
    path: '/',
    secure: ctx.config.publicUrl.startsWith('https:'),
  });

  return [
    route({
      method: 'POST',
      path: '/api/auth/challenge',
      auth: 'public',
      summary: 'Start a DID login: a nonce to sign as `steward-login:<nonce>` (valid 5 minutes, single use)',
      tags: ['auth'],
      body: z.object({ did }),
      limit: { group: 'login', key: ({ body }) => body.did },
      response: z.object({ challengeId: z.string(), nonce: z.string() }),
      handler: async ({ body }) => ({ body: await login.challenge(body.did) }),
    }),
    route({
      method: 'POST',
      path: '/api/auth/login',
      auth: 'public',
      summary: 'Answer a challenge with an Ed25519 signature; sets the session cookie and returns a bearer token',
      tags: ['auth'],
      body: z.object({
        challengeId: z.string().min(1).max(100),
        did,
        signature: z.string().min(1).max(200),
      }),
      limit: { group: 'login', key: ({ body }) => body.did },
      response: z.object({ token: z.string(), user: userView }),
      handler: async ({ body, headers }) => {
        // The answer sets a cookie: a page on another origin must not log a browser in.
        if (headers.origin && !isSameOrigin(headers.origin, ctx.config.publicUrl, headers.host)) {
          throw forbidden('cross-origin login refused', 'cross_origin');
        }
        const result = await login.login(body.challengeId, body.did, body.signature);
        if ('refused' in result) throw refusedLogin(result.refused, body.did);
        const { token, user } = result;
        await ctx.audit.record(actingAs(user), { action: 'auth.login', targetType: 'user', target: user._id });
        return {
          body: { token, user: loginUserView(user) },
          cookies: [sessionCookie(token, Math.floor(ctx.config.sessionTtlMs / 1000))],
        };
      },
    }),
    route({
      method: 'POST',
      path: '/api/auth/logout',
      auth: 'session',
      summary: 'End the session of this request (cookie or bearer token) and clear the cookie',
      tags: ['auth'],
      response: z.object({ ok: z.literal(true) }),
      handler: async (req) => {
        const presented = tokenOf(req);
        if (presented) await ctx.sessions.end(presented.token);
        const p = req.principal!;
        await ctx.audit.record(p, { action: 'auth.logout', targetType: p.kind, target: p.kind === 'user' ? p.userId : p.did });
        return { body: { ok: true }, cookies: [sessionCookie('', 0)] };
      },
    }),
  ];
}

