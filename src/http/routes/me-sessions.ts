/** A person's own sessions: list them, end one (docs/identity.md, "Your sessions"). */
import { z } from 'zod';
import { route, type RouteDef } from '../router.js';
import { personOf } from '../auth.js';
import { SessionView, type PersonSessions } from '../../services/person-sessions.js';
import { Ok } from '../answers.js';

export function meSessionRoutes({ personSessions }: { personSessions: PersonSessions }): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/api/me/sessions',
      auth: 'user',
      summary: 'Your live sessions (never their tokens), newest first; `current` marks the one of this request',
      tags: ['auth'],
      responses: { 200: z.strictObject({ sessions: z.array(SessionView) }) },
      handler: async (r) => ({ body: { sessions: await personSessions.list(personOf(r)) } }),
    }),
    route({
      method: 'DELETE',
      path: '/api/me/sessions/:id',
      auth: 'user',
      summary: "End one of your sessions server-side (404 when it is not yours)",
      tags: ['auth'],
      params: z.object({ id: z.string().min(1).max(100) }),
      responses: { 200: Ok },
      handler: async (r) => {
        await personSessions.end(personOf(r), r.params.id);
        return { body: { ok: true } };
      },
    }),
  ];
}
