/**
 * Email invitations over HTTP (interface §4.12): invite, look up, turn into a claim session,
 * delete. See docs/identity.md.
 */
import { z } from 'zod';
import { GLOBAL_ROLES } from '../../domain/roles.js';
import { globalRole } from '../../domain/views.js';
import { q, route, type RouteDef } from '../router.js';
import { personOf } from '../auth.js';
import { invitationPageSchema, type InvitationService } from '../../services/invitations.js';
import type { ClaimService } from '../../services/claims.js';
import type { ServerIdentity } from '../../services/server-identity.js';
import { Success } from '../answers.js';

const tokenParam = z.object({ token: z.string().min(1).max(100) });

export function invitationRoutes({ invitations, claims, identity }: { invitations: InvitationService; claims: ClaimService; identity: ServerIdentity }): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/api/invitations',
      auth: 'user',
      summary: 'Pending invitations, newest first, one page at a time (admins; never the token)',
      tags: ['invitations'],
      query: z.object({ page: q.int(1).default(1), pageSize: q.int(1, 100).default(20) }),
      responses: { 200: invitationPageSchema },
      handler: async (r) => ({ body: await invitations.list(personOf(r), r.query) }),
    }),
    route({
      method: 'DELETE',
      path: '/api/invitations/id/:id',
      auth: 'user',
      summary: 'Revokes a pending invitation by its id (admins); 404 when there is none',
      tags: ['invitations'],
      params: z.object({ id: z.string().min(1).max(100) }),
      responses: { 200: Success },
      handler: async (r) => {
        await invitations.revoke(personOf(r), r.params.id);
        return { body: { success: true } };
      },
    }),
    route({
      method: 'POST',
      path: '/api/users/invite/email',
      auth: 'owner',
      summary: 'Invite an email address: an unclaimed user and a 7-day invitation (replaces an earlier one)',
      tags: ['invitations'],
      body: z.object({
        email: z.email().max(320),
        name: z.string().trim().min(1).max(200),
        role: z.enum(GLOBAL_ROLES),
      }),
      responses: { 200: z.strictObject({ token: z.string(), userId: z.string() }) },
      handler: async (r) => {
        const { token, userId } = await invitations.invite(personOf(r), r.body);
        return { body: { token, userId } };
      },
    }),
    route({
      method: 'GET',
      path: '/api/invitations/:token',
      auth: 'public',
      summary: 'An active invitation (404 when unknown or 7 days old)',
      tags: ['invitations'],
      params: tokenParam,
      limit: { group: 'claim', key: ({ params }) => params.token },
      responses: { 200: z.strictObject({ email: z.string(), name: z.string(), role: globalRole }) },
      handler: async ({ params }) => {
        const inv = await invitations.get(params.token);
        return { body: { email: inv.email, name: inv.name, role: inv.role } };
      },
    }),
    route({
      method: 'POST',
      path: '/api/users/invite/from-email',
      auth: 'public',
      summary: 'Turn an invitation into a claim session for the wallet (404 when unknown or expired)',
      tags: ['invitations'],
      body: z.object({ token: z.string().min(1).max(100) }),
      limit: { group: 'claim', key: ({ body }) => body.token },
      responses: { 200: z.strictObject({ qrUrl: z.string(), connectionString: z.string(), inviteToken: z.string(), serverDid: z.string() }) },
      handler: async ({ body }) => {
        const { token } = await invitations.openClaim(body.token);
        return {
          body: {
            qrUrl: claims.qrUrl(token),
            connectionString: claims.connectionString(token),
            inviteToken: token,
            serverDid: identity.did,
          },
        };
      },
    }),
    route({
      method: 'POST',
      path: '/api/invitations/:token/delete',
      auth: 'public',
      summary: 'Delete (decline) an invitation; idempotent: an unknown token also answers success',
      tags: ['invitations'],
      params: tokenParam,
      limit: { group: 'claim', key: ({ params }) => params.token },
      responses: { 200: Success },
      handler: async ({ params }) => {
        await invitations.remove(params.token);
        return { body: { success: true } };
      },
    }),
  ];
}
