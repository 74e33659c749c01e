/**
 * Capability grants (interface §2.14, §4.11, §4.12). Issuing is for global admins, reading and
 * revoking for admins. A grant needs a claimed user (§4.12 rule 1), known capabilities, an
 * existing agent or null (all agents), and an expiry in the future or null (no end). A revoked
 * grant is gone from the store, and grants are read at every check, so it stops working at once.
 */
import { z } from 'zod';
import { instant, route, type RouteDef } from '../router.js';
import { personOf } from '../auth.js';
import { CAPABILITIES } from '../../domain/capabilities.js';
import { GrantView, toGrantView, type GrantService } from '../../services/grants.js';
import { Ok } from '../answers.js';

const grantAnswer = z.strictObject({ grant: GrantView });

const grantFields = {
  agentDid: z.string().min(1).max(512).nullable().describe('The agent, or null for all agents (required: say null explicitly)'),
  capabilities: z.array(z.string().max(64)).min(1).max(CAPABILITIES.length * 2),
  expiresAt: instant()
    .nullable()
    .optional()
    .describe('ISO 8601 in the future; null or absent: no end'),
};

const didParams = z.object({ did: z.string().min(1).max(512) });

export function grantRoutes({ grants }: { grants: GrantService }): RouteDef[] {
  return [
    route({
      method: 'POST',
      path: '/api/grants',
      auth: 'globalAdmin',
      summary: 'Grants a claimed user capabilities on one agent or on all agents (agentDid null)',
      tags: ['grants'],
      body: z.strictObject({ userDid: z.string().min(1).max(512), ...grantFields }),
      responses: { 201: grantAnswer },
      handler: async (r) => ({ status: 201, body: { grant: toGrantView(await grants.issue(personOf(r), r.body.userDid, r.body)) } }),
    }),

    route({
      method: 'POST',
      path: '/api/users/:did/grants',
      auth: 'globalAdmin',
      summary: 'Grants this user capabilities on one agent or on all agents (agentDid null)',
      tags: ['grants'],
      params: didParams,
      body: z.strictObject(grantFields),
      responses: { 201: grantAnswer },
      handler: async (r) => ({ status: 201, body: { grant: toGrantView(await grants.issue(personOf(r), r.params.did, r.body)) } }),
    }),

    route({
      method: 'GET',
      path: '/api/users/:did/grants',
      auth: 'admin',
      summary: "A user's grants, newest first (expired ones included)",
      tags: ['grants'],
      params: didParams,
      responses: { 200: z.strictObject({ grants: z.array(GrantView) }) },
      handler: async (r) => ({ body: { grants: (await grants.list(r.params.did)).map(toGrantView) } }),
    }),

    route({
      method: 'DELETE',
      path: '/api/users/:did/grants/:grantId',
      auth: 'admin',
      summary: 'Revokes a grant; it stops working at once',
      tags: ['grants'],
      params: didParams.extend({ grantId: z.string().min(1).max(100) }),
      responses: { 200: Ok },
      handler: async (r) => {
        await grants.revoke(personOf(r), r.params.did, r.params.grantId);
        return { body: { ok: true } };
      },
    }),
  ];
}
