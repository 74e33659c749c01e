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
import { q, route, type RouteDef } from '../router.js';
import { personOf } from '../auth.js';
import type { Config } from '../../config.js';
import type { FleetService } from '../../services/fleet.js';
import { AGENTS_PAGE_SIZE_DEFAULT, AGENTS_PAGE_SIZE_MAX, AgentDetail, AgentPage, AgentSearch, type AgentViews } from '../../services/agent-views.js';
import { IntentAnswer, type IntentService } from '../../services/intents.js';
import { CAPABILITIES, type Capability } from '../../domain/capabilities.js';
import { AVAILABLE_CAPABILITIES } from '../../domain/agent-protocol.js';
import { capabilityList } from '../../domain/views.js';
import { sourceOf } from '../../services/registration-limits.js';
import { PendingRegistrationPage } from '../../services/registrations.js';
import { Ok, Success } from '../answers.js';

const capability = z.enum(CAPABILITIES);
const did = z.string().min(1).max(512);

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

export function agentRoutes({ fleet, views, intents, config }: { fleet: FleetService; views: AgentViews; intents: IntentService; config: Config }): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/api/agents',
      auth: 'session',
      summary: `Agents the caller may see; pageSize default ${AGENTS_PAGE_SIZE_DEFAULT}, max ${AGENTS_PAGE_SIZE_MAX}; online counts the online agents among all matching ones`,
      tags: ['agents'],
      query: listQuery,
      responses: { 200: AgentPage },
      handler: async (r) => ({ body: await views.list(r.principal!, r.query) }),
    }),

    route({
      method: 'GET',
      path: '/api/agents/search',
      auth: 'session',
      summary: 'Agents whose name or DID contains q (case-insensitive), at most 20',
      tags: ['agents'],
      query: z.object({ q: z.string().max(200).optional() }),
      responses: { 200: AgentSearch },
      handler: async (r) => ({ body: await views.search(r.principal!, r.query.q) }),
    }),

    route({
      method: 'GET',
      path: '/api/agents/:id',
      auth: 'session',
      summary: 'Agent detail: the list fields plus llmSystemPrompt, publicKey, workspaces, effective policy, current certificate, token usage',
      tags: ['agents'],
      params: z.object({ id: did }),
      responses: { 200: z.strictObject({ agent: AgentDetail }) },
      handler: async (r) => ({ body: { agent: await views.detail(r.principal!, r.params.id) } }),
    }),

    route({
      method: 'DELETE',
      path: '/api/agents/:id',
      auth: 'user',
      summary:
        'Decommissions an agent (any status, a rejected registration included): closes its socket (4403), ends its session, deletes its records; global admin or admin of its primary workspace',
      tags: ['agents'],
      params: z.object({ id: did }),
      responses: { 200: Ok },
      handler: async (r) => {
        await fleet.decommission(personOf(r), r.params.id);
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
      responses: { 201: z.strictObject({ agentId: z.string().meta({ description: "The agent's DID" }), message: z.string() }) },
      body: z.strictObject({
        name: z.string().trim().min(1).max(200),
        version: z.string().trim().min(1).max(64),
        capabilities: z.array(capability).max(CAPABILITIES.length * 2),
        publicKey: z.string().min(1).max(100),
        did: did.optional(),
        workspace: z.string().min(1).max(200).optional(),
      }),
      handler: async (r) => {
        const { agent, created } = await fleet.register(r.body, { via: 'http', source: sourceOf(r.remoteAddress) }, r.principal ?? 'system');
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
      summary: `Sends an intent to a connected agent and answers with its intent_result; timeoutMs default ${config.intentTimeoutMs}, max ${config.intentMaxTimeoutMs}`,
      tags: ['agents'],
      params: z.object({ id: did }),
      body: z.strictObject({
        action: capability,
        params: z.record(z.string(), z.unknown()).default({}),
        timeoutMs: z.number().int().min(100).max(config.intentMaxTimeoutMs).optional(),
      }),
      responses: { 200: IntentAnswer },
      handler: async (r) => {
        const answer = await intents.send(personOf(r), r.params.id, {
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
      responses: {
        200: PendingRegistrationPage.extend({
          availableCapabilities: capabilityList.meta({ description: 'The capabilities an admin may approve: the first eight (interface §2.1)' }),
        }),
      },
      handler: async (r) => {
        const { registrations, ...page } = await fleet.pendingRegistrations(r.query.page, r.query.pageSize);
        return { body: { registrations, availableCapabilities: [...AVAILABLE_CAPABILITIES], ...page } };
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
      responses: { 200: z.strictObject({ success: z.literal(true), agentId: z.string() }) },
      handler: async (r) => {
        const { agentId } = await fleet.approve(r.params.id, r.body.capabilities as Capability[], r.principal!);
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
      responses: { 200: Success },
      handler: async (r) => {
        await fleet.reject(r.params.id, r.body.reason, r.principal!);
        return { body: { success: true } };
      },
    }),
  ];
}
