/**
 * Policies (interface §4.4), global admins only:
 *
 *   POST   /api/policies        201 {policy, sentTo}
 *   GET    /api/policies        {policies}   agentDid, workspaceId (id or slug), includeExpired (default false)
 *   GET    /api/policies/:id    {policy}
 *   DELETE /api/policies/:id    {ok: true, sentTo}
 *
 * `sentTo` lists the connected agents that received update_capabilities and a fresh
 * certificate_offer because their effective policy changed.
 */
import { z } from 'zod';
import { instant, q, route, type RouteDef } from '../router.js';
import { CAPABILITIES } from '../../domain/capabilities.js';
import { PolicyView, toPolicyView, type PolicyService } from '../../services/policies.js';

const sentToField = z.array(z.string()).meta({ description: 'The connected agents re-certified at once (update_capabilities and a new certificate_offer)' });
const policyAnswer = z.strictObject({ policy: PolicyView });

const HOSTNAME = /^(?=.{1,253}$)(\*\.)?([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i;

const resourceLimits = z.strictObject({
  maxTokensPerDay: z.number().int().positive().optional(),
  maxRequestsPerHour: z.number().int().positive().optional(),
  allowedDomains: z
    .array(z.string().regex(HOSTNAME, { message: 'expected a hostname such as api.example.com (a leading *. is allowed)' }))
    .max(1000)
    .optional(),
});

const policyBody = z.strictObject({
  agentDid: z.string().min(1).max(512).optional(),
  workspaceId: z.string().min(1).max(200).optional().describe('Workspace id (or slug)'),
  capabilities: z.array(z.enum(CAPABILITIES)).min(1).max(CAPABILITIES.length * 2),
  resourceLimits: resourceLimits.nullable().optional(),
  expiresAt: instant().nullable().optional().describe('ISO 8601 in the future; absent or null: no expiry'),
});

export function policyRoutes({ policies }: { policies: PolicyService }): RouteDef[] {
  return [
    route({
      method: 'POST',
      path: '/api/policies',
      auth: 'globalAdmin',
      summary: 'Creates a policy for an agent or a workspace; connected agents whose effective policy changes are re-certified at once',
      tags: ['policies'],
      body: policyBody,
      responses: { 201: z.strictObject({ policy: PolicyView, sentTo: sentToField }) },
      handler: async (r) => {
        const { policy, sentTo } = await policies.create(r.body, r.principal!);
        return { status: 201, body: { policy: toPolicyView(policy), sentTo } };
      },
    }),
    route({
      method: 'GET',
      path: '/api/policies',
      auth: 'globalAdmin',
      summary: 'Policies, newest first; expired ones only with includeExpired=true',
      tags: ['policies'],
      query: z.object({
        agentDid: z.string().min(1).max(512).optional(),
        workspaceId: z.string().min(1).max(200).optional(),
        includeExpired: q.bool().default(false),
      }),
      responses: { 200: z.strictObject({ policies: z.array(PolicyView) }) },
      handler: async (r) => ({ body: { policies: (await policies.list(r.query)).map(toPolicyView) } }),
    }),
    route({
      method: 'GET',
      path: '/api/policies/:id',
      auth: 'globalAdmin',
      summary: 'One policy (expired or not)',
      tags: ['policies'],
      params: z.object({ id: z.string().min(1).max(100) }),
      responses: { 200: policyAnswer },
      handler: async (r) => ({ body: { policy: toPolicyView(await policies.get(r.params.id)) } }),
    }),
    route({
      method: 'DELETE',
      path: '/api/policies/:id',
      auth: 'globalAdmin',
      summary: 'Deletes a policy; connected agents it applied to are re-certified without it',
      tags: ['policies'],
      params: z.object({ id: z.string().min(1).max(100) }),
      responses: { 200: z.strictObject({ ok: z.literal(true), sentTo: sentToField }) },
      handler: async (r) => {
        const { sentTo } = await policies.remove(r.params.id, r.principal!);
        return { body: { ok: true, sentTo } };
      },
    }),
  ];
}
