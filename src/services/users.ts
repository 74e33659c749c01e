/**
 * People as the interface shows them (§2.13, §4.12): the User shape, the directory listing, edits
 * and deletion.
 *
 * - A user is addressed by DID, or by their id (UUID) — the only handle an unclaimed user has.
 * - Lists and profiles are assembled in batches: one query each for the page of users, their
 *   memberships, those workspaces and their grants, whatever the page size.
 * - Deleting a user removes the user, their DID reservation, memberships, grants, sessions, open
 *   invitations and pending claim sessions (which then fail), and clears `reportsTo` of people
 *   who reported to them. Later areas (channel memberships, ...) subscribe with `onUserDeleted`.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { newId } from '../domain/ids.js';
import type { Collections, UserDoc } from '../store/collections.js';
import type { WorkspaceRole } from '../domain/roles.js';
import type { GlobalRole } from '../domain/roles.js';
import { groupBy } from '../domain/group.js';
import type { Filter } from '../store/types.js';
import type { Principal, UserPrincipal } from '../domain/principal.js';
import { lookupNames, type NamesView } from './name-lookup.js';
import { escapeRegex } from '../domain/regex.js';
import { isOwnerLike } from '../domain/permissions.js';
import { badRequest, conflict, forbidden, notFound } from '../domain/errors.js';
import type { ServiceCore } from './core.js';
import { GrantView, toGrantView } from './grants.js';
import { globalRole, pageFields, timestamp, workspaceRole } from '../domain/views.js';
import { resolveWorkspace, userByRef } from './lookups.js';

export { findUserByRef } from './lookups.js';

/** A person's own fields, as a login answers them and every fuller view begins. */
export const UserSummary = z
  .strictObject({
    id: z.string(),
    did: z.string().nullable().meta({ description: 'null for an unclaimed user' }),
    name: z.string(),
    email: z.string(),
    isOwner: z.boolean(),
    isAdmin: z.boolean(),
    role: globalRole,
    registeredAt: timestamp,
  })
  .meta({ id: 'UserSummary' });
export type UserSummary = z.infer<typeof UserSummary>;

export const toUserSummary = (u: UserDoc): UserSummary => ({
  id: u._id,
  did: u.did,
  name: u.name,
  email: u.email,
  isOwner: u.isOwner,
  isAdmin: u.isAdmin,
  role: u.role,
  registeredAt: u.registeredAt,
});

/** The User of interface §2.13. */
export const UserView = UserSummary.extend({
  directoryId: z.string().nullable(),
  claimedAt: timestamp.nullable(),
  reportsTo: z.string().nullable(),
  description: z.string().nullable(),
  workspaces: z.array(z.strictObject({ id: z.string(), name: z.string(), slug: z.string(), color: z.string(), isPrimary: z.boolean() })),
  grants: z.array(GrantView),
}).meta({ id: 'User' });
export type UserView = z.infer<typeof UserView>;

/** GET /api/users/me: the caller, their workspaces with their role there, their grants. */
export const MeView = z.strictObject({
  user: UserSummary.pick({ id: true, did: true, name: true, email: true, isAdmin: true, registeredAt: true }),
  workspaces: z.array(z.strictObject({ id: z.string(), name: z.string(), slug: z.string(), color: z.string(), role: workspaceRole })),
  grants: z.array(GrantView),
});
export type MeView = z.infer<typeof MeView>;

/** Memberships (primary first, then oldest first) with their workspaces, and grants, of many users at once. */
async function relationsOf(c: Collections, userIds: string[]) {
  const [memberships, grants] = await Promise.all([
    c.workspaceMembers.find({ userId: { $in: userIds } }, { sort: { joinedAt: 1, _id: 1 } }),
    c.grants.find({ userId: { $in: userIds } }, { sort: { createdAt: -1, _id: 1 } }),
  ]);
  const workspaces = await c.workspaces.find({ _id: { $in: [...new Set(memberships.map((m) => m.workspaceId))] } });
  const wsById = new Map(workspaces.map((w) => [w._id, w]));
  const byUser = groupBy(memberships, (m) => m.userId);
  const grantsByUser = groupBy(grants, (g) => g.userId);
  const membershipsOf = (userId: string) =>
    (byUser.get(userId) ?? [])
      .filter((m) => wsById.has(m.workspaceId))
      .sort((a, b) => Number(b.isPrimary) - Number(a.isPrimary))
      .map((m) => ({ m, ws: wsById.get(m.workspaceId)! }));
  const grantsOf = (userId: string) => (grantsByUser.get(userId) ?? []).map(toGrantView);
  return { membershipsOf, grantsOf };
}

/** The full User shape of §2.13 for each user, in the given order. */
export async function userViews(c: Collections, users: UserDoc[]): Promise<UserView[]> {
  if (users.length === 0) return [];
  const rel = await relationsOf(c, users.map((u) => u._id));
  return users.map((u) => ({
    ...toUserSummary(u),
    directoryId: u.directoryId,
    claimedAt: u.claimedAt,
    reportsTo: u.reportsTo,
    description: u.description,
    workspaces: rel.membershipsOf(u._id).map(({ m, ws }) => ({
      id: ws._id,
      name: ws.name,
      slug: ws.slug,
      color: ws.color,
      isPrimary: m.isPrimary,
    })),
    grants: rel.grantsOf(u._id),
  }));
}

export async function userView(c: Collections, user: UserDoc): Promise<UserView> {
  return (await userViews(c, [user]))[0]!;
}

/** GET /api/users/me: workspaces carry the caller's role instead of isPrimary. */
export async function meView(c: Collections, u: UserDoc): Promise<MeView> {
  const rel = await relationsOf(c, [u._id]);
  return {
    user: { id: u._id, did: u.did, name: u.name, email: u.email, isAdmin: u.isAdmin, registeredAt: u.registeredAt },
    workspaces: rel.membershipsOf(u._id).map(({ m, ws }) => ({ id: ws._id, name: ws.name, slug: ws.slug, color: ws.color, role: m.role })),
    grants: rel.grantsOf(u._id),
  };
}

export type UserSortBy = 'name' | 'email' | 'registeredAt';

export interface ListUsersQuery {
  q?: string;
  role?: GlobalRole;
  /** Only members of this workspace (already resolved from an id or slug). */
  workspaceId?: string;
  isAdmin?: boolean;
  /** true: claimed users; false: unclaimed ones. */
  hasAccount?: boolean;
  page: number;
  pageSize: number;
  sortBy: UserSortBy;
  sortDir: 'asc' | 'desc';
}

const collator = new Intl.Collator('en', { sensitivity: 'base', numeric: true });
const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * One page of the user directory and the number of matches.
 *
 * Sorting happens here rather than in the store because the store has no collation, and a
 * directory sorted by name is expected to put "alice" beside "Alice". Only the sort keys of the
 * matches are read for that (a projection); the page itself is then fetched and assembled in
 * one batch. Ties are broken by id, so paging is stable.
 */
export async function listUsers(c: Collections, query: ListUsersQuery): Promise<{ users: UserView[]; total: number }> {
  const and: Filter[] = [];
  if (query.q) {
    const re = { $regex: escapeRegex(query.q), $options: 'i' };
    and.push({ $or: [{ name: re }, { email: re }, { did: re }] });
  }
  if (query.role) and.push({ role: query.role });
  if (query.isAdmin !== undefined) and.push({ isAdmin: query.isAdmin });
  if (query.hasAccount !== undefined) and.push({ did: query.hasAccount ? { $ne: null } : null });
  if (query.workspaceId !== undefined) {
    const members = await c.workspaceMembers.find({ workspaceId: query.workspaceId }, { projection: { userId: 1 } });
    and.push({ _id: { $in: members.map((m) => m.userId) } });
  }
  const keys = await c.users.find(and.length > 0 ? { $and: and } : {}, { projection: { name: 1, emailLower: 1, registeredAt: 1 } });
  const field = query.sortBy === 'email' ? 'emailLower' : query.sortBy;
  const dir = query.sortDir === 'desc' ? -1 : 1;
  const compare = field === 'registeredAt' ? byCodePoint : collator.compare;
  keys.sort((a, b) => (compare(a[field] ?? '', b[field] ?? '') || byCodePoint(a._id, b._id)) * dir);
  const start = (query.page - 1) * query.pageSize;
  const pageIds = keys.slice(start, start + query.pageSize).map((k) => k._id);
  const docs = pageIds.length > 0 ? await c.users.find({ _id: { $in: pageIds } }) : [];
  const byId = new Map(docs.map((d) => [d._id, d]));
  const ordered = pageIds.map((id) => byId.get(id)).filter((d): d is UserDoc => d !== undefined);
  return { users: await userViews(c, ordered), total: keys.length };
}

export interface UserPatch {
  name?: string;
  email?: string;
  role?: GlobalRole;
  reportsTo?: string | null;
  description?: string | null;
}

/**
 * Why `reportsTo` may not be set on `user` (it must name another existing user, and not one who
 * reports, directly or further up, to `user`), or null when it may.
 */
export async function reportsToProblem(c: Collections, user: UserDoc, reportsTo: string): Promise<string | null> {
  if (reportsTo === user._id) return 'a user cannot report to themselves';
  let next: string | null = reportsTo;
  for (let depth = 0; next !== null && depth < 100; depth++) {
    const boss: UserDoc | null = await c.users.findById(next);
    if (!boss) return depth === 0 ? `reportsTo names no user (${reportsTo})` : null;
    if (boss.reportsTo === user._id) return 'reportsTo would make a reporting cycle';
    next = boss.reportsTo;
  }
  return null;
}

/** Whether another user already uses this email address (case-insensitively). */
export async function emailTaken(c: Collections, email: string, exceptUserId: string): Promise<boolean> {
  return (await c.users.count({ emailLower: email.toLowerCase(), _id: { $ne: exceptUserId } })) > 0;
}

/** Applies a patch (already checked) and returns the stored user. */
export async function updateUser(c: Collections, user: UserDoc, patch: UserPatch): Promise<UserDoc> {
  const set: Partial<UserDoc> = {};
  if (patch.name !== undefined) set.name = patch.name;
  if (patch.email !== undefined) {
    set.email = patch.email;
    set.emailLower = patch.email.toLowerCase();
  }
  if (patch.role !== undefined) set.role = patch.role;
  if (patch.reportsTo !== undefined) set.reportsTo = patch.reportsTo;
  if (patch.description !== undefined) set.description = patch.description;
  if (Object.keys(set).length === 0) return user;
  return (await c.users.findOneAndUpdate({ _id: user._id }, { $set: set })) ?? { ...user, ...set };
}

export interface NewUser {
  /** Default: a new UUID. */
  id?: string;
  name: string;
  email?: string;
  role: GlobalRole;
  isOwner?: boolean;
  isAdmin?: boolean;
  /** A claimed user: its DID (already reserved in user_dids by the caller) and raw public key. */
  did?: string | null;
  publicKey?: string | null;
  /** The workspace the user joins as its primary one, with its role there. */
  workspace: { id: string; role: WorkspaceRole };
  at?: string;
}

/** Stores a new user with its primary workspace membership; the one way users are created. */
export async function createUser(c: Collections, n: NewUser): Promise<UserDoc> {
  const at = n.at ?? new Date().toISOString();
  const email = n.email ?? '';
  const user: UserDoc = {
    _id: n.id ?? randomUUID(),
    did: n.did ?? null,
    publicKey: n.publicKey ?? null,
    name: n.name,
    email,
    emailLower: email.toLowerCase(),
    isOwner: n.isOwner ?? false,
    isAdmin: n.isAdmin ?? false,
    role: n.role,
    registeredAt: at,
    directoryId: null,
    claimedAt: n.did ? at : null,
    reportsTo: null,
    description: null,
  };
  await c.users.insertOne(user);
  await c.workspaceMembers.insertOne({ _id: newId(), workspaceId: n.workspace.id, userId: user._id, role: n.workspace.role, isPrimary: true, joinedAt: at });
  return user;
}

export type UserDeletedHook = (user: UserDoc) => Promise<void> | void;

/** GET /api/users: a page of the directory with its count. */
export const UserPage = z.strictObject({ users: z.array(UserView), ...pageFields });
export type UserPage = z.infer<typeof UserPage>;

/**
 * People (interface §4.12): the caller's own profile, the directory, profile edits and deletion,
 * and the records of unclaimed users (addressed by id, the only handle they have).
 */
export class UserService {
  private readonly c: Collections;
  private readonly deletedHooks: UserDeletedHook[] = [];
  private readonly roleHooks: UserDeletedHook[] = [];

  constructor(private readonly ctx: ServiceCore) {
    this.c = ctx.c;
  }

  /** Runs `fn` after a user is deleted. A failing hook is logged; the deletion stands. */
  onUserDeleted(fn: UserDeletedHook): void {
    this.deletedHooks.push(fn);
  }

  /** POST /api/lookup/names: display names of the DIDs the caller may see (src/services/name-lookup.ts). */
  async names(p: Principal, dids: readonly string[]): Promise<NamesView> {
    return lookupNames(this.c, p, dids);
  }

  /** Runs `fn` after a person's global role changed (`user` as it is now). A failing hook is logged; the change stands. */
  onRoleChanged(fn: (user: UserDoc) => Promise<void> | void): void {
    this.roleHooks.push(fn);
  }

  /** GET /api/users/me. */
  async me(p: UserPrincipal): Promise<MeView> {
    const me = await this.c.users.findById(p.userId);
    if (!me) throw notFound('your user record no longer exists');
    return meView(this.c, me);
  }

  /** One page of the directory; `workspace` (id or slug) must name a workspace (404). */
  async list(query: Omit<ListUsersQuery, 'workspaceId'> & { workspace?: string }): Promise<UserPage> {
    const { workspace, ...rest } = query;
    let workspaceId: string | undefined;
    if (workspace !== undefined) {
      const ws = await resolveWorkspace(this.c, workspace);
      if (!ws) throw notFound(`workspace ${workspace} not found`);
      workspaceId = ws._id;
    }
    const { users, total } = await listUsers(this.c, { ...rest, workspaceId });
    return { users, total, page: query.page, pageSize: query.pageSize, totalPages: Math.ceil(total / query.pageSize) };
  }

  /** A user's full profile by DID or id. */
  async get(ref: string): Promise<UserView> {
    return userView(this.c, await userByRef(this.c, ref));
  }

  /** An unclaimed user's profile by id (404 when missing or already claimed). */
  async getUnclaimed(id: string): Promise<UserView> {
    return userView(this.c, await this.unclaimedById(id));
  }

  /** Edits a user (by DID or id); reportsTo must name another user and make no cycle. */
  async update(p: UserPrincipal, ref: string, patch: UserPatch): Promise<UserView> {
    return this.patch(p, await userByRef(this.c, ref), patch, true);
  }

  /** Edits an unclaimed user; reportsTo is taken as given. */
  async updateUnclaimed(p: UserPrincipal, id: string, patch: UserPatch): Promise<UserView> {
    return this.patch(p, await this.unclaimedById(id), patch, false);
  }

  /** Deletes a user (by DID or id): not yourself, not the installation owner. */
  async remove(p: UserPrincipal, ref: string): Promise<void> {
    await this.removeUser(p, await userByRef(this.c, ref));
  }

  /** Removes a provisioned, unclaimed user. */
  async removeUnclaimed(p: UserPrincipal, id: string): Promise<void> {
    await this.removeUser(p, await this.unclaimedById(id));
  }

  private async unclaimedById(id: string): Promise<UserDoc> {
    const user = await this.c.users.findById(id);
    if (!user || user.did !== null) throw notFound(`no unclaimed user ${id}`);
    return user;
  }

  private async patch(p: UserPrincipal, user: UserDoc, patch: UserPatch, checkReportsTo: boolean): Promise<UserView> {
    const c = this.c;
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
    const updated = await updateUser(c, user, patch);
    await this.ctx.audit.record(p, {
      action: 'user.update',
      targetType: 'user',
      target: user._id,
      details: { did: user.did, unclaimed: user.did === null, changes: patch },
    });
    if (updated.role !== user.role) {
      for (const fn of this.roleHooks) {
        try {
          await fn(updated);
        } catch (err) {
          this.ctx.log.error({ err, userId: user._id }, 'role-changed hook failed');
        }
      }
    }
    return userView(c, updated);
  }

  private async removeUser(p: UserPrincipal, user: UserDoc): Promise<void> {
    if (user._id === p.userId) throw forbidden('you cannot delete your own account', 'cannot_delete_self');
    if (user.isOwner) throw forbidden('the installation owner cannot be deleted', 'cannot_delete_owner');
    await this.delete(user);
    await this.ctx.audit.record(p, {
      action: 'user.delete',
      targetType: 'user',
      target: user._id,
      details: { did: user.did, name: user.name, email: user.email, unclaimed: user.did === null },
    });
  }

  /**
   * Removes the user, their DID reservation, memberships, grants, sessions, open invitations and
   * pending claim sessions (which then fail), and clears `reportsTo` of people who reported to
   * them; then the hooks run.
   */
  private async delete(user: UserDoc): Promise<void> {
    const c = this.c;
    // Sessions first and the user next: from then on no request authenticates as them.
    await this.ctx.sessions.endAllOf(user._id, 'the account was deleted');
    await c.users.deleteOne({ _id: user._id });
    await Promise.all([
      c.userDids.deleteMany({ userId: user._id }),
      c.workspaceMembers.deleteMany({ userId: user._id }),
      c.grants.deleteMany({ userId: user._id }),
      c.invitations.deleteMany({ userId: user._id }),
      c.claimSessions.updateMany({ userId: user._id, status: -1 }, { $set: { status: -2, failure: 'user deleted' } }),
      c.users.updateMany({ reportsTo: user._id }, { $set: { reportsTo: null } }),
    ]);
    for (const fn of this.deletedHooks) {
      try {
        await fn(user);
      } catch (err) {
        this.ctx.log.error({ err, userId: user._id }, 'user-deleted hook failed');
      }
    }
  }
}
