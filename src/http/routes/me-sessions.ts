/** A person's own sessions: list them, end one (docs/identity.md, "Your sessions"). */
import { z } from 'zod';
import { route, type RouteDef } from '../router.js';
import { personOf } from '../auth.js';
import type { PersonSessions } from '../../services/person-sessions.js';

const sessionView = z.object({
  id: z.string(),
  createdAt: z.string(),
  lastUsedAt: z.string(),
  expiresAt: z.string(),
  userAgent: z.string().nullable(),
  address: z.string().nullable(),
  method: z.enum(['login', 'device']).nullable(),
  current: z.boolean(),
});

export function meSessionRoutes({ personSessions }: { personSessions: PersonSessions }): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/api/me/sessions',
      auth: 'user',
      summary: 'Your live sessions (never their tokens), newest first; `current` marks the one of this request',
      tags: ['auth'],
      response: z.object({ sessions: z.array(sessionView) }),
      handler: async (r) => ({ body: { sessions: await personSessions.list(personOf(r)) } }),
    }),
    route({
      method: 'DELETE',
      path: '/api/me/sessions/:id',
      auth: 'user',
      summary: "End one of your sessions server-side (404 when it is not yours)",
      tags: ['auth'],
      params: z.object({ id: z.string().min(1).max(100) }),
      response: z.object({ ok: z.literal(true) }),
      handler: async (r) => {
        await personSessions.end(personOf(r), r.params.id);
        return { body: { ok: true } };
      },
    }),
  ];
}
