/**
 * Fleet-wide reading for global admins:
 *
 *   GET /api/stats/tokens          {allTime, daily, monthly}, each {promptTokens, completionTokens} (§4.13)
 *   GET /api/admin/actors          live actors: {actors: [{kind, id, state, status, since}], total, page,
 *                                  pageSize, totalPages, kinds: [{kind, count}]}; ?kind= ?state= ?prefix=
 *   GET /api/admin/actors/kinds/:kind/definition
 *                                  {kind, definition}: the kind's machine (XState's `machine.toJSON()`)
 *   GET /api/admin/actors/:id      one actor's state, context (secrets left out), since and recent
 *                                  history. `id` is `<kind>:<id>` (e.g. `agent:did:key:z6Mk...`,
 *                                  percent-encoded), or the bare actor id with ?kind=agent. An actor
 *                                  that is not in memory is read from its stored snapshot (`live: false`).
 */
import { z } from 'zod';
import { q, route, type RouteDef } from '../router.js';
import { notFound } from '../../domain/errors.js';
import { actorDefinitionView, actorDetailView, actorListView, type ActorInspector } from '../../services/actor-inspector.js';
import { TokenStats, type TokenUsage } from '../../services/token-usage.js';

export function fleetAdminRoutes({ tokens, inspector }: { tokens: TokenUsage; inspector: ActorInspector }): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/api/stats/tokens',
      auth: 'globalAdmin',
      summary: "Fleet token usage: all time, today's UTC bucket, this month's (offline agents included)",
      tags: ['stats'],
      responses: { 200: TokenStats },
      handler: async () => ({ body: await tokens.totals() }),
    }),
    route({
      method: 'GET',
      path: '/api/admin/actors',
      auth: 'globalAdmin',
      summary: 'Live (in-memory) actors with their kind, id, state value and since when, filtered by kind, state (a path such as `active.connection.online`, a leading part, or the last parts) and id prefix, a page at a time; with the count of live actors per kind',
      tags: ['actors'],
      query: z.object({
        kind: z.string().min(1).max(50).optional(),
        state: z.string().min(1).max(200).optional(),
        prefix: z.string().min(1).max(600).optional(),
        page: q.int(1, 1_000_000).default(1),
        pageSize: q.int(1, 100).default(20),
      }),
      responses: { 200: actorListView },
      handler: (r) => ({ body: inspector.list(r.query) }),
    }),
    route({
      method: 'GET',
      path: '/api/admin/actors/kinds/:kind/definition',
      auth: 'globalAdmin',
      summary: "An actor kind's state machine as XState serialises it (states, transitions with their events, initial state), for drawing its state chart",
      tags: ['actors'],
      params: z.object({ kind: z.string().min(1).max(50) }),
      responses: { 200: actorDefinitionView },
      handler: (r) => ({ body: inspector.definition(r.params.kind) }),
    }),
    route({
      method: 'GET',
      path: '/api/admin/actors/:id',
      auth: 'globalAdmin',
      summary: 'One actor: state, status, context (secrets left out), since when it is in its state, and its transitions since it was first inspected (kept for a while after each inspection); id is `<kind>:<id>` or the bare id with ?kind=',
      tags: ['actors'],
      params: z.object({ id: z.string().min(1).max(600) }),
      query: z.object({ kind: z.string().min(1).max(50).optional() }),
      responses: { 200: actorDetailView },
      handler: async (r) => {
        let kind = r.query.kind;
        let id = r.params.id;
        if (kind === undefined) {
          const colon = id.indexOf(':');
          if (colon <= 0) throw notFound(`name the actor as <kind>:<id> or pass ?kind=`);
          kind = id.slice(0, colon);
          id = id.slice(colon + 1);
        }
        return { body: { actor: await inspector.inspect(kind, id) } };
      },
    }),
  ];
}
