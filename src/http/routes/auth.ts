/**
 * Login and logout of people (DESIGN §3): POST /api/auth/challenge, /api/auth/login,
 * /api/auth/logout. See docs/identity.md.
 */
import { z } from 'zod';
import { route, type RouteDef } from '../router.js';
import { refuseCrossOrigin, sessionCookie, tokenOf } from '../auth.js';
import { isDid } from '../../domain/did.js';
import type { Config } from '../../config.js';
import { LoginAnswer, LoginChallenge, type LoginService } from '../../services/login.js';
import { Ok } from '../answers.js';

const did = z.string().refine(isDid, { message: 'expected a DID (did:<method>:<identifier>)' });

export function authRoutes({ login, config }: { login: LoginService; config: Config }): RouteDef[] {
  return [
    route({
      method: 'POST',
      path: '/api/auth/challenge',
      auth: 'public',
      summary: 'Start a DID login: a nonce to sign as `steward-login:<nonce>` (valid 5 minutes, single use)',
      tags: ['auth'],
      body: z.object({ did }),
      limit: { group: 'login' },
      responses: { 200: LoginChallenge },
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
      limit: { group: 'login' },
      responses: { 200: LoginAnswer },
      handler: async ({ body, headers, remoteAddress }) => {
        // The answer sets a cookie: a page on another origin must not log a browser in.
        refuseCrossOrigin(headers, config.publicUrl);
        const { token, user } = await login.login(body.challengeId, body.did, body.signature, {
          method: 'login',
          userAgent: headers['user-agent'] ?? null,
          address: remoteAddress,
        });
        return { body: { token, user }, cookies: [sessionCookie(config.publicUrl, token, Math.floor(config.sessionTtlMs / 1000))] };
      },
    }),
    route({
      method: 'POST',
      path: '/api/auth/logout',
      auth: 'session',
      summary: 'End the session of this request (cookie or bearer token) and clear the cookie',
      tags: ['auth'],
      responses: { 200: Ok },
      handler: async (req) => {
        await login.logout(req.principal!, tokenOf(req)?.token ?? null);
        return { body: { ok: true }, cookies: [sessionCookie(config.publicUrl, '', 0)] };
      },
    }),
  ];
}

