/**
 * Agents and registrations (interface §4.5, §3) and intents (§5.6; the route is this server's
 * design, docs/fleet.md):
 *
 *   GET  /api/agents                          user         list (filters, paging, visibility)
 *   GET  /api/agents/search?q=                user         {agents: [{did, name, capabilities}]}
 *   GET  /api/agents/:id                      user         detail
 *   DELETE /api/agents/:id                    user         {ok: true}: decommissions the agent (global
 *                                                          admin, or admin of its primary workspace)
 *   POST /api/agents/register                 optional     201 {agentId, message}; 429 past the pending-registration limits
 *   POST /api/agents/:did/intents             user         200 intent_result
 *   GET  /api/registrations                   globalAdmin  pending registrations, oldest first, one page at a time
 *   POST /api/registrations/:id/approve       globalAdmin  {success, agentId}
 *   POST /api/registrations/:id/reject        globalAdmin  {success}
 */
import { z } from 'zod';
import { q, route, type RequestContext, type RouteDef } from '../router.js';
import { AppError, forbidden, notFound } from '../../domain/errors.js';
import { can } from '../../domain/permissions.js';
import { agentWorkspaceIds, memberRole, primaryWorkspaceOf } from '../../services/workspaces.js';
import type { AppContext } from '../../server.js';
import type { Fleet } from '../../services/fleet-module.js';
import type { UserPrincipal } from '../../domain/principal.js';
import { CAPABILITIES, type Capability } from '../../domain/capabilities.js';
import { AVAILABLE_CAPABILITIES } from '../../domain/agent-protocol.js';
import { toPendingRegistrationView } from '../../services/registrations.js';
import { sourceOf } from '../../services/registration-limits.js';
import { AGENTS_PAGE_SIZE_DEFAULT, AGENTS_PAGE_SIZE_MAX } from '../../services/agent-views.js';

const capability = z.enum(CAPABILITIES);
const did = z.string().min(1).max(512);
const personOf = (r: RequestContext): UserPrincipal => r.principal as UserPrincipal;

const listQuery = z.object({
  q: z.string().max(200).optional(),
  online: q.bool().optional(),
  workspace: z.string().min(1).max(200).optional(),
  capabilities: z
    .string()
    .max(500)
    .transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean))
    .pipe(z.array(capability))
    .optional(),
  page: q.int(1, 1_000_000).default(1),
  pageSize: q.int(1, AGENTS_PAGE_SIZE_MAX).default(AGENTS_PAGE_SIZE_DEFAULT),
  sortBy: z.enum(['name', 'registeredAt', 'lastSeen']).default('name'),
  sortDir: z.enum(['asc', 'desc']).default('asc'),
});

/** A page of the registration queue stays small (a pending registration is about 300 bytes of JSON). */
export const REGISTRATIONS_PAGE_SIZE_DEFAULT = 100;
export const REGISTRATIONS_PAGE_SIZE_MAX = 1000;

export function agentRoutes(ctx: AppContext, fleet: Fleet): RouteDef[] {

  return [
    route({
      method: 'GET',
      path: '/api/agents',
      auth: 'session',
      summary: `Agents the caller may see; pageSize default ${AGENTS_PAGE_SIZE_DEFAULT}, max ${AGENTS_PAGE_SIZE_MAX}; online counts the online agents among all matching ones`,
      tags: ['agents'],
      query: listQuery,
      handler: async (r) => ({ body: await fleet.views.list(r.principal!, r.query) }),
    }),

    route({
      method: 'GET',
      path: '/api/agents/search',
      auth: 'session',
      summary: 'Agents whose name or DID contains q (case-insensitive), at most 20',
      tags: ['agents'],
      query: z.object({ q: z.string().max(200).optional() }),
      handler: async (r) => ({ body: await fleet.views.search(r.principal!, r.query.q) }),
    }),

    route({
      method: 'GET',
      path: '/api/agents/:id',
      auth: 'session',
      summary: 'Agent detail: the list fields plus llmSystemPrompt, publicKey, workspaces, effective policy, current certificate, token usage',
      tags: ['agents'],
      params: z.object({ id: did }),
      handler: async (r) => ({ body: { agent: await fleet.views.detail(r.principal!, r.params.id) } }),
    }),

    route({
      method: 'DELETE',
      path: '/api/agents/:id',
      auth: 'user',
      summary:
        'Decommissions an agent (any status, a rejected registration included): closes its socket (4403), ends its session, deletes its records; global admin or admin of its primary workspace',
      tags: ['agents'],
      params: z.object({ id: did }),
      handler: async (r) => {
        const person = personOf(r);
        const agent = await ctx.c.agents.findById(r.params.id);
        if (!agent) throw notFound(`no agent ${r.params.id}`);
        if (!person.isAdmin) {
          // One the caller cannot see answers as an unknown one (docs/api.md).
          const theirs = await ctx.c.workspaceMembers.count({ userId: person.userId, workspaceId: { $in: await agentWorkspaceIds(ctx.c, agent._id) } });
          if (theirs === 0) throw notFound(`no agent ${r.params.id}`);
          const primary = await primaryWorkspaceOf(ctx.c, agent._id);
          const role = primary ? await memberRole(ctx.c, person.userId, primary._id) : null;
          if (!can({ isGlobalAdmin: false, workspaceRole: role }, 'manageWorkspaceAgents')) {
            throw forbidden("deleting an agent needs the admin role in the agent's primary workspace (or global admin)");
          }
        }
        await fleet.service.deleteAgent(agent._id, person);
        return { body: { ok: true } };
      },
    }),

    route({
      method: 'POST',
      path: '/api/agents/register',
      auth: 'optional',
      limit: { group: 'agent' },
      summary: 'Registers an agent; it awaits approval by a global admin. agentId is its DID (did:key of publicKey when no did is given)',
      tags: ['agents'],
      successStatus: 201,
      body: z.strictObject({
        name: z.string().trim().min(1).max(200),
        version: z.string().trim().min(1).max(64),
        capabilities: z.array(capability).max(CAPABILITIES.length * 2),
        publicKey: z.string().min(1).max(100),
        did: did.optional(),
        workspace: z.string().min(1).max(200).optional(),
      }),
      handler: async (r) => {
        const { agent, created } = await fleet.service.register(r.body, { via: 'http', source: sourceOf(r.remoteAddress) });
        if (created) {
          await ctx.audit.record(r.principal ?? 'system', {
            action: 'agent.register',
            targetType: 'agent',
            target: agent._id,
            details: { name: agent.name, requestedCapabilities: agent.requestedCapabilities, via: 'http' },
          });
        }
        return {
          status: 201,
          body: { agentId: agent._id, message: created ? 'registration received; the agent awaits admin approval' : 'the agent already awaits admin approval' },
        };
      },
    }),

    route({
      method: 'POST',
      path: '/api/agents/:id/intents',
      auth: 'user',
      summary: `Sends an intent to a connected agent and answers with its intent_result; timeoutMs default ${ctx.config.intentTimeoutMs}, max ${ctx.config.intentMaxTimeoutMs}`,
      tags: ['agents'],
      params: z.object({ id: did }),
      body: z.strictObject({
        action: capability,
        params: z.record(z.string(), z.unknown()).default({}),
        timeoutMs: z.number().int().min(100).max(ctx.config.intentMaxTimeoutMs).optional(),
      }),
      handler: async (r) => {
        const answer = await fleet.intents.send(personOf(r), r.params.id, {
          action: r.body.action,
          params: r.body.params,
          timeoutMs: r.body.timeoutMs,
        });
        return { body: answer };
      },
    }),

    route({
      method: 'GET',
      path: '/api/registrations',
      auth: 'globalAdmin',
      summary: `Pending registrations, oldest first, one page at a time (pageSize default ${REGISTRATIONS_PAGE_SIZE_DEFAULT}, max ${REGISTRATIONS_PAGE_SIZE_MAX}), and the capabilities an admin may approve`,
      tags: ['agents'],
      query: z.object({
        page: q.int(1, 1_000_000).default(1),
        pageSize: q.int(1, REGISTRATIONS_PAGE_SIZE_MAX).default(REGISTRATIONS_PAGE_SIZE_DEFAULT),
      }),
      handler: async (r) => {
        const { page, pageSize } = r.query;
        const filter = { status: 'pending' };
        const [total, pending] = await Promise.all([
          ctx.c.registrations.count(filter),
          ctx.c.registrations.find(filter, { sort: { requestedAt: 1, _id: 1 }, skip: (page - 1) * pageSize, limit: pageSize }),
        ]);
        return {
          body: {
            registrations: pending.map(toPendingRegistrationView),
            availableCapabilities: [...AVAILABLE_CAPABILITIES],
            total,
            page,
            pageSize,
            totalPages: Math.ceil(total / pageSize),
          },
        };
      },
    }),

    route({
      method: 'POST',
      path: '/api/registrations/:id/approve',
      auth: 'globalAdmin',
      summary: 'Approves a pending registration with a subset of the requested capabilities (400 otherwise, 409 when already decided)',
      tags: ['agents'],
      params: z.object({ id: z.string().min(1).max(100) }),
      body: z.strictObject({ capabilities: z.array(capability).max(CAPABILITIES.length * 2) }),
      handler: async (r) => {
        const { agentId } = await fleet.service.approve(r.params.id, r.body.capabilities as Capability[], r.principal!);
        return { body: { success: true, agentId } };
      },
    }),

    route({
      method: 'POST',
      path: '/api/registrations/:id/reject',
      auth: 'globalAdmin',
      summary: 'Rejects a pending registration; the reason is stored and sent to a waiting agent (409 when already decided)',
      tags: ['agents'],
      params: z.object({ id: z.string().min(1).max(100) }),
      body: z.strictObject({ reason: z.string().trim().min(1).max(2000) }),
      handler: async (r) => {
        await fleet.service.reject(r.params.id, r.body.reason, r.principal!);
        return { body: { success: true } };
      },
    }),
  ];
}
