/**
 * People (interface §4.12): the caller's own profile, the directory, profile edits and deletion,
 * and the records of unclaimed users. Grants of a user live in routes/grants.ts; invitations
 * (/api/users/invite...) in the claims area. `{did}` is a percent-encoded DID, or the user's id.
 */
import { z } from 'zod';
import { GLOBAL_ROLES } from '../../domain/roles.js';
import { q, route, type RequestContext, type RouteDef } from '../router.js';
import { badRequest, conflict, forbidden, notFound } from '../../domain/errors.js';
import { isOwnerLike } from '../../domain/permissions.js';
import type { RouteContext } from './context.js';
import type { UserPrincipal } from '../../domain/principal.js';
import type { Collections, UserDoc } from '../../store/collections.js';
import { resolveWorkspace } from '../../services/workspaces.js';
import {
  emailTaken,
  findUserByRef,
  listUsers,
  meView,
  reportsToProblem,
  updateUser,
  userView,
  type UserPatch,
} from '../../services/users.js';


/** The caller of a route whose auth level admits only people. */
export const personOf = (ctx: RequestContext): UserPrincipal => ctx.principal as UserPrincipal;

/** A user by DID or id; 404 when there is none. */
export async function userByRef(c: Collections, ref: string): Promise<UserDoc> {
  const user = await findUserByRef(c, ref);
  if (!user) throw notFound(`no user ${ref}`);
  return user;
}

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

export function userRoutes(ctx: RouteContext): RouteDef[] {
  const { c } = ctx;

  const unclaimedById = async (id: string): Promise<UserDoc> => {
    const user = await c.users.findById(id);
    if (!user || user.did !== null) throw notFound(`no unclaimed user ${id}`);
    return user;
  };

  /** Checks a patch against the rules both PATCH routes share; reportsTo only when `checkReportsTo`. */
  const checkPatch = async (p: UserPrincipal, user: UserDoc, patch: UserPatch, checkReportsTo: boolean) => {
    if (patch.role !== undefined && patch.role !== user.role) {
      if (user.isOwner) throw badRequest("the installation owner's role is always owner", 'owner_role');
      if (patch.role === 'owner' && !isOwnerLike(p)) throw forbidden('only an owner may give the owner role');
    }
    if (patch.email !== undefined && (await emailTaken(c, patch.email, user._id))) {
      throw conflict(`another user already has the email ${patch.email}`, 'email_taken');
    }
    if (checkReportsTo && typeof patch.reportsTo === 'string') {
      const problem = await reportsToProblem(c, user, patch.reportsTo);
      if (problem) throw badRequest(problem, 'invalid_reports_to');
    }
  };

  const patchUser = async (p: UserPrincipal, user: UserDoc, patch: UserPatch, checkReportsTo: boolean) => {
    await checkPatch(p, user, patch, checkReportsTo);
    const updated = await updateUser(c, user, patch);
    await ctx.audit.record(p, {
      action: 'user.update',
      targetType: 'user',
      target: user._id,
      details: { did: user.did, unclaimed: user.did === null, changes: patch },
    });
    return { body: { user: await userView(c, updated) } };
  };

  const deleteUser = async (p: UserPrincipal, user: UserDoc) => {
    if (user._id === p.userId) throw forbidden('you cannot delete your own account', 'cannot_delete_self');
    if (user.isOwner) throw forbidden('the installation owner cannot be deleted', 'cannot_delete_owner');
    await ctx.userService.delete(user);
    await ctx.audit.record(p, {
      action: 'user.delete',
      targetType: 'user',
      target: user._id,
      details: { did: user.did, name: user.name, email: user.email, unclaimed: user.did === null },
    });
    return { body: { ok: true } };
  };

  return [
    route({
      method: 'GET',
      path: '/api/users/me',
      auth: 'user',
      summary: "The caller's profile, workspaces (with their role there) and grants",
      tags: ['users'],
      handler: async (r) => {
        const me = await c.users.findById(personOf(r).userId);
        if (!me) throw notFound('your user record no longer exists');
        return { body: await meView(c, me) };
      },
    }),

    route({
      method: 'GET',
      path: '/api/users',
      auth: 'admin',
      summary: 'The user directory: filtered, sorted, one page at a time',
      tags: ['users'],
      query: listQuery,
      handler: async (r) => {
        const qy = r.query;
        let workspaceId: string | undefined;
        if (qy.workspace !== undefined) {
          const ws = await resolveWorkspace(c, qy.workspace);
          if (!ws) throw notFound(`workspace ${qy.workspace} not found`);
          workspaceId = ws._id;
        }
        const { users, total } = await listUsers(c, {
          q: qy.q || undefined,
          role: qy.role,
          workspaceId,
          isAdmin: qy.isAdmin,
          hasAccount: qy.hasAccount,
          page: qy.page,
          pageSize: qy.pageSize,
          sortBy: qy.sortBy,
          sortDir: qy.sortDir,
        });
        return { body: { users, total, page: qy.page, pageSize: qy.pageSize, totalPages: Math.ceil(total / qy.pageSize) } };
      },
    }),

    route({
      method: 'GET',
      path: '/api/users/unclaimed/:id',
      auth: 'admin',
      summary: 'An unclaimed user with their workspaces (404 when missing or already claimed)',
      tags: ['users'],
      params: idParams,
      handler: async (r) => ({ body: { user: await userView(c, await unclaimedById(r.params.id)) } }),
    }),

    route({
      method: 'PATCH',
      path: '/api/users/unclaimed/:id',
      auth: 'admin',
      summary: 'Edits an unclaimed user (reportsTo is taken as given); answers the updated user',
      tags: ['users'],
      params: idParams,
      body: patchBody,
      handler: async (r) => patchUser(personOf(r), await unclaimedById(r.params.id), r.body, false),
    }),

    route({
      method: 'DELETE',
      path: '/api/users/unclaimed/:id',
      auth: 'admin',
      summary: 'Removes a provisioned, unclaimed user (a later directory sync may add it again)',
      tags: ['users'],
      params: idParams,
      handler: async (r) => deleteUser(personOf(r), await unclaimedById(r.params.id)),
    }),

    route({
      method: 'GET',
      path: '/api/users/:did',
      auth: 'admin',
      summary: "A user's full profile with workspaces and grants",
      tags: ['users'],
      params: didParams,
      handler: async (r) => ({ body: { user: await userView(c, await userByRef(c, r.params.did)) } }),
    }),

    route({
      method: 'PATCH',
      path: '/api/users/:did',
      auth: 'owner',
      summary: "Edits a user's name, email, role, reportsTo or description; answers the updated user",
      tags: ['users'],
      params: didParams,
      body: patchBody,
      handler: async (r) => patchUser(personOf(r), await userByRef(c, r.params.did), r.body, true),
    }),

    route({
      method: 'DELETE',
      path: '/api/users/:did',
      auth: 'owner',
      summary: 'Deletes a user with their memberships, grants and sessions (not yourself, not the owner)',
      tags: ['users'],
      params: didParams,
      handler: async (r) => deleteUser(personOf(r), await userByRef(c, r.params.did)),
    }),
  ];
}
