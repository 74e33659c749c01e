/**
 * Fleet-wide reading for global admins:
 *
 *   GET /api/stats/tokens          {allTime, daily, monthly}, each {promptTokens, completionTokens} (§4.13)
 *   GET /api/admin/actors          live actors: [{kind, id, state, status}] (optional ?kind=); in a
 *                                  cluster every node's, each with its `node` (`missingNodes`: the
 *                                  nodes that did not answer in time)
 *   GET /api/admin/actors/:id      one actor's state and context (secrets left out). `id` is
 *                                  `<kind>:<id>` (e.g. `agent:did:key:z6Mk...`, percent-encoded),
 *                                  or the bare actor id with ?kind=agent. An actor that is not in
 *                                  memory is read from its stored snapshot (`live: false`).
 */
import { z } from 'zod';
import { route, type RouteDef } from '../router.js';
import { notFound } from '../../domain/errors.js';
import type { ActorDirectory } from '../../services/actor-directory.js';
import type { TokenUsage } from '../../services/token-usage.js';

export function fleetAdminRoutes({ tokens, actors }: { tokens: TokenUsage; actors: Pick<ActorDirectory, 'kindNames' | 'list' | 'inspect'> }): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/api/stats/tokens',
      auth: 'globalAdmin',
      summary: "Fleet token usage: all time, today's UTC bucket, this month's (offline agents included)",
      tags: ['stats'],
      handler: async () => ({ body: await tokens.totals() }),
    }),
    route({
      method: 'GET',
      path: '/api/admin/actors',
      auth: 'globalAdmin',
      summary: 'Live (in-memory) actors with their kind, id and state value',
      tags: ['actors'],
      query: z.object({ kind: z.string().min(1).max(50).optional() }),
      handler: async (r) => ({ body: await actors.list(r.query.kind) }),
    }),
    route({
      method: 'GET',
      path: '/api/admin/actors/:id',
      auth: 'globalAdmin',
      summary: 'One actor: state, status and context (secrets left out); id is `<kind>:<id>` or the bare id with ?kind=',
      tags: ['actors'],
      params: z.object({ id: z.string().min(1).max(600) }),
      query: z.object({ kind: z.string().min(1).max(50).optional() }),
      handler: async (r) => {
        let kind = r.query.kind;
        let id = r.params.id;
        if (kind === undefined) {
          const colon = id.indexOf(':');
          if (colon <= 0) throw notFound(`name the actor as <kind>:<id> or pass ?kind=`);
          kind = id.slice(0, colon);
          id = id.slice(colon + 1);
        }
        const found = actors.kindNames().includes(kind) ? await actors.inspect(kind, id) : null;
        if (!found) throw notFound(`no actor ${kind}:${id}`);
        return { body: { actor: found } };
      },
    }),
  ];
}
