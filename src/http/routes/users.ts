/**
 * People (interface §4.12): the caller's own profile, the directory, profile edits and deletion,
 * and the records of unclaimed users. Grants of a user live in routes/grants.ts; invitations
 * (/api/users/invite...) in the claims area. `{did}` is a percent-encoded DID, or the user's id.
 */
import { z } from 'zod';
import { GLOBAL_ROLES } from '../../domain/roles.js';
import { q, route, type RouteDef } from '../router.js';
import { personOf } from '../auth.js';
import { MeView, UserPage, UserView, type UserService } from '../../services/users.js';
import { Ok } from '../answers.js';
import { MAX_LOOKUP_DIDS, namesSchema } from '../../services/name-lookup.js';

const userAnswer = z.strictObject({ user: UserView });

const didParams = z.object({ did: z.string().min(1).max(512) });
const idParams = z.object({ id: z.string().min(1).max(200) });

const listQuery = z.object({
  q: z.string().trim().max(200).optional().describe('Case-insensitive substring of the name, email or DID'),
  role: z.enum(GLOBAL_ROLES).optional(),
  workspace: z.string().min(1).max(200).optional().describe('Workspace id or slug: only its members'),
  isAdmin: q.bool().optional(),
  hasAccount: q.bool().optional().describe('true: claimed users; false: unclaimed ones'),
  page: q.int(1).default(1),
  pageSize: q.int(1, 100).default(20).describe('1 to 100; more is refused with 400'),
  sortBy: z.enum(['name', 'email', 'registeredAt']).default('name'),
  sortDir: z.enum(['asc', 'desc']).default('asc'),
});

const patchBody = z.strictObject({
  name: z.string().trim().min(1).max(200).optional(),
  email: z.email().max(320).optional(),
  role: z.enum(GLOBAL_ROLES).optional(),
  reportsTo: z.string().min(1).max(200).nullable().optional().describe("Another user's id, or null"),
  description: z.string().max(2000).nullable().optional(),
});

export function userRoutes({ users }: { users: UserService }): RouteDef[] {
  return [
    route({
      method: 'POST',
      path: '/api/lookup/names',
      auth: 'session',
      summary: 'Display names of people and agents by DID; only those the caller may see are answered, the others are absent',
      tags: ['users'],
      body: z.strictObject({ dids: z.array(z.string().min(1).max(512)).min(1).max(MAX_LOOKUP_DIDS) }),
      responses: { 200: namesSchema },
      handler: async (r) => ({ body: await users.names(r.principal!, r.body.dids) }),
    }),
    route({
      method: 'GET',
      path: '/api/users/me',
      auth: 'user',
      summary: "The caller's profile, workspaces (with their role there) and grants",
      tags: ['users'],
      responses: { 200: MeView },
      handler: async (r) => ({ body: await users.me(personOf(r)) }),
    }),

    route({
      method: 'GET',
      path: '/api/users',
      auth: 'admin',
      summary: 'The user directory: filtered, sorted, one page at a time',
      tags: ['users'],
      query: listQuery,
      responses: { 200: UserPage },
      handler: async (r) => ({ body: await users.list({ ...r.query, q: r.query.q || undefined }) }),
    }),

    route({
      method: 'GET',
      path: '/api/users/unclaimed/:id',
      auth: 'admin',
      summary: 'An unclaimed user with their workspaces (404 when missing or already claimed)',
      tags: ['users'],
      params: idParams,
      responses: { 200: userAnswer },
      handler: async (r) => ({ body: { user: await users.getUnclaimed(r.params.id) } }),
    }),

    route({
      method: 'PATCH',
      path: '/api/users/unclaimed/:id',
      auth: 'admin',
      summary: 'Edits an unclaimed user (reportsTo is taken as given); answers the updated user',
      tags: ['users'],
      params: idParams,
      body: patchBody,
      responses: { 200: userAnswer },
      handler: async (r) => ({ body: { user: await users.updateUnclaimed(personOf(r), r.params.id, r.body) } }),
    }),

    route({
      method: 'DELETE',
      path: '/api/users/unclaimed/:id',
      auth: 'admin',
      summary: 'Removes a provisioned, unclaimed user (a later directory sync may add it again)',
      tags: ['users'],
      params: idParams,
      responses: { 200: Ok },
      handler: async (r) => {
        await users.removeUnclaimed(personOf(r), r.params.id);
        return { body: { ok: true } };
      },
    }),

    route({
      method: 'GET',
      path: '/api/users/:did',
      auth: 'admin',
      summary: "A user's full profile with workspaces and grants",
      tags: ['users'],
      params: didParams,
      responses: { 200: userAnswer },
      handler: async (r) => ({ body: { user: await users.get(r.params.did) } }),
    }),

    route({
      method: 'PATCH',
      path: '/api/users/:did',
      auth: 'owner',
      summary: "Edits a user's name, email, role, reportsTo or description; answers the updated user",
      tags: ['users'],
      params: didParams,
      body: patchBody,
      responses: { 200: userAnswer },
      handler: async (r) => ({ body: { user: await users.update(personOf(r), r.params.did, r.body) } }),
    }),

    route({
      method: 'DELETE',
      path: '/api/users/:did',
      auth: 'owner',
      summary: 'Deletes a user with their memberships, grants and sessions (not yourself, not the owner)',
      tags: ['users'],
      params: didParams,
      responses: { 200: Ok },
      handler: async (r) => {
        await users.remove(personOf(r), r.params.did);
        return { body: { ok: true } };
      },
    }),
  ];
}
