/**
 * Capability grants (interface §2.14, §4.11, §4.12). Issuing is for global admins, reading and
 * revoking for admins. A grant needs a claimed user (§4.12 rule 1), known capabilities, an
 * existing agent or null (all agents), and an expiry in the future or null (no end). A revoked
 * grant is gone from the store, and grants are read at every check, so it stops working at once.
 */
import { z } from 'zod';
import { instant, route, type RouteDef } from '../router.js';
import { badRequest, notFound } from '../../domain/errors.js';
import type { RouteContext } from './context.js';
import type { UserPrincipal } from '../../domain/principal.js';
import { CAPABILITIES, unknownCapability, type Capability } from '../../domain/capabilities.js';
import { createGrant, grantsOf, toGrantView } from '../../services/grants.js';
import { personOf, userByRef } from './users.js';

const grantFields = {
  agentDid: z.string().min(1).max(512).nullable().describe('The agent, or null for all agents (required: say null explicitly)'),
  capabilities: z.array(z.string().max(64)).min(1).max(CAPABILITIES.length * 2),
  expiresAt: instant()
    .nullable()
    .optional()
    .describe('ISO 8601 in the future; null or absent: no end'),
};

const didParams = z.object({ did: z.string().min(1).max(512) });

type GrantInput = { agentDid: string | null; capabilities: string[]; expiresAt?: string | null };

export function grantRoutes(ctx: RouteContext): RouteDef[] {
  const { c } = ctx;

  const issue = async (p: UserPrincipal, userRef: string, input: GrantInput) => {
    const user = await userByRef(c, userRef);
    if (!user.did) throw badRequest(`user ${userRef} has not claimed their account yet; grants need a user with a DID`, 'unclaimed_user');
    const bad = unknownCapability(input.capabilities);
    if (bad !== null) throw badRequest(`unknown capability '${bad}'; expected one of ${CAPABILITIES.join(', ')}`, 'unknown_capability');
    let expiresAt: string | null = null;
    if (input.expiresAt) {
      const t = Date.parse(input.expiresAt);
      if (t <= Date.now()) throw badRequest(`expiresAt ${input.expiresAt} is not in the future`, 'expired');
      expiresAt = new Date(t).toISOString();
    }
    if (input.agentDid !== null) {
      // A grant may be made for an agent still awaiting approval, not for a rejected one.
      const agent = await c.agents.findById(input.agentDid);
      if (!agent || agent.status === 'rejected') throw notFound(`no agent ${input.agentDid}`);
    }
    const grant = await createGrant(
      c,
      { ...user, did: user.did },
      { agentDid: input.agentDid, capabilities: input.capabilities as Capability[], expiresAt },
      p.did,
    );
    await ctx.audit.record(p, {
      action: 'grant.create',
      targetType: 'grant',
      target: grant._id,
      details: { userId: user._id, userDid: user.did, agentDid: grant.agentDid, capabilities: grant.capabilities, expiresAt },
    });
    return { status: 201, body: { grant: toGrantView(grant) } };
  };

  return [
    route({
      method: 'POST',
      path: '/api/grants',
      auth: 'globalAdmin',
      summary: 'Grants a claimed user capabilities on one agent or on all agents (agentDid null)',
      tags: ['grants'],
      successStatus: 201,
      body: z.strictObject({ userDid: z.string().min(1).max(512), ...grantFields }),
      handler: async (r) => issue(personOf(r), r.body.userDid, r.body),
    }),

    route({
      method: 'POST',
      path: '/api/users/:did/grants',
      auth: 'globalAdmin',
      summary: 'Grants this user capabilities on one agent or on all agents (agentDid null)',
      tags: ['grants'],
      successStatus: 201,
      params: didParams,
      body: z.strictObject(grantFields),
      handler: async (r) => issue(personOf(r), r.params.did, r.body),
    }),

    route({
      method: 'GET',
      path: '/api/users/:did/grants',
      auth: 'admin',
      summary: "A user's grants, newest first (expired ones included)",
      tags: ['grants'],
      params: didParams,
      handler: async (r) => {
        const user = await userByRef(c, r.params.did);
        return { body: { grants: (await grantsOf(c, user._id)).map(toGrantView) } };
      },
    }),

    route({
      method: 'DELETE',
      path: '/api/users/:did/grants/:grantId',
      auth: 'admin',
      summary: 'Revokes a grant; it stops working at once',
      tags: ['grants'],
      params: didParams.extend({ grantId: z.string().min(1).max(100) }),
      handler: async (r) => {
        const p = personOf(r);
        const user = await userByRef(c, r.params.did);
        const grant = await c.grants.findOne({ _id: r.params.grantId, userId: user._id });
        if (!grant) throw notFound(`user ${r.params.did} has no grant ${r.params.grantId}`);
        await c.grants.deleteOne({ _id: grant._id });
        await ctx.audit.record(p, {
          action: 'grant.revoke',
          targetType: 'grant',
          target: grant._id,
          details: { userId: user._id, userDid: grant.userDid, agentDid: grant.agentDid, capabilities: grant.capabilities },
        });
        return { body: { ok: true } };
      },
    }),
  ];
}
