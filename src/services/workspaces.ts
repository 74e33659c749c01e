/**
 * Workspaces, their people and their agents (interface §2.15, §4.11, §5).
 *
 * Rules kept here, transport-free:
 * - `{workspace}` in a path is an id or a slug (`resolveWorkspace`).
 * - Visibility (§5.7): a global admin sees every workspace; anyone else the ones they belong to
 *   (whatever their role there); an agent the ones it is a member of; nobody else any.
 * - A person's first membership is their primary one; so is an agent's. An agent has exactly
 *   one primary workspace, which decides who manages it; other memberships extend visibility.
 * - The default workspace is never deleted. Deleting another removes its memberships; people and
 *   agents whose primary it was get their earliest remaining membership as primary, and an agent
 *   left with none goes to the default workspace (where unplaced agents live, §4.11). Later areas
 *   (channels, skills, workflows, model keys) subscribe with `onWorkspaceDeleted`.
 * - A workspace the caller may not see answers 404, as an unknown one does; one they see but may
 *   not change answers 403. Who may do what comes from the permissions module (`can`): members and
 *   agents need `manageWorkspaceUsers` / `manageWorkspaceAgents`, deletion `deleteWorkspace`;
 *   granting, changing or removing the owner role is for owners (and global admins); creation is
 *   for global admins (the route's level).
 *
 * The plain functions take the collections so the fleet can call them without a service.
 */
import { z } from 'zod';
import { timestamp, workspaceRole } from '../domain/views.js';
import { newId } from '../domain/ids.js';
import type { Collections, UserDoc, WorkspaceAgentDoc, WorkspaceDoc, WorkspaceMemberDoc } from '../store/collections.js';
import type { WorkspaceRole } from '../domain/roles.js';
import { DuplicateKeyError, type Collection } from '../store/types.js';
import type { Principal, UserPrincipal } from '../domain/principal.js';
import { groupBy } from '../domain/group.js';
import { atLeast, can, MIN_ROLE, type WorkspaceAction } from '../domain/permissions.js';
import { badRequest, conflict, forbidden, notFound } from '../domain/errors.js';
import { slugify } from '../domain/slugs.js';
import type { Logger } from '../log.js';
import type { ServiceCore } from './core.js';
import { findUserByRef, resolveWorkspace } from './lookups.js';

export { resolveWorkspace } from './lookups.js';

/** A workspace (interface §2.15). */
export const WorkspaceView = z
  .strictObject({
    id: z.string(),
    name: z.string(),
    slug: z.string(),
    color: z.string().meta({ description: 'Hex colour, #rrggbb' }),
    description: z.string(),
    isDefault: z.boolean(),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'Workspace' });
export type WorkspaceView = z.infer<typeof WorkspaceView>;

export function toWorkspaceView(ws: WorkspaceDoc): WorkspaceView {
  return {
    id: ws._id,
    name: ws.name,
    slug: ws.slug,
    color: ws.color,
    description: ws.description,
    isDefault: ws.isDefault,
    createdAt: ws.createdAt,
    updatedAt: ws.updatedAt,
  };
}

/** A hex colour, `#rrggbb` or the short `#rgb`. */
export const COLOR_RE = /^#(?:[0-9a-fA-F]{3}){1,2}$/;

/** A colour matching COLOR_RE as it is stored: `#rrggbb`, lower case (`#AbC` → `#aabbcc`). */
export function normalizeColor(v: string): string {
  const hex = v.slice(1).toLowerCase();
  return `#${hex.length === 3 ? [...hex].map((d) => d + d).join('') : hex}`;
}

const PALETTE = ['#4f46e5', '#0891b2', '#059669', '#65a30d', '#d97706', '#dc2626', '#db2777', '#7c3aed', '#2563eb', '#0d9488'];

/** The colour a workspace gets when none is given: picked from a palette by its slug. */
export function defaultColor(slug: string): string {
  let h = 0;
  for (const ch of slug) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return PALETTE[h % PALETTE.length]!;
}

export async function memberRole(c: Collections, userId: string, workspaceId: string): Promise<WorkspaceRole | null> {
  return (await c.workspaceMembers.findOne({ workspaceId, userId }))?.role ?? null;
}

export async function userWorkspaceIds(c: Collections, userId: string): Promise<string[]> {
  return (await c.workspaceMembers.find({ userId }, { projection: { workspaceId: 1 } })).map((m) => m.workspaceId);
}

export async function agentWorkspaceIds(c: Collections, agentDid: string): Promise<string[]> {
  return (await c.workspaceAgents.find({ agentDid }, { projection: { workspaceId: 1 } })).map((m) => m.workspaceId);
}

/** The workspace whose admins manage an agent; null when it belongs to none. */
export async function primaryWorkspaceOf(c: Collections, agentDid: string): Promise<WorkspaceDoc | null> {
  const m = await primaryAgentMembership(c, agentDid);
  return m ? c.workspaces.findById(m.workspaceId) : null;
}

async function primaryAgentMembership(c: Collections, agentDid: string): Promise<WorkspaceAgentDoc | null> {
  const all = await c.workspaceAgents.find({ agentDid }, { sort: { joinedAt: 1, _id: 1 } });
  // Exactly one is primary; should a race have left none flagged, the earliest stands in.
  return all.find((m) => m.isPrimary) ?? all[0] ?? null;
}

/**
 * Puts an agent in a workspace (nothing happens when it is already there). Its first membership
 * becomes primary; `isPrimary` moves the primary here.
 */
export async function addAgentToWorkspace(c: Collections, agentDid: string, workspaceId: string, isPrimary: boolean): Promise<void> {
  const existing = await c.workspaceAgents.find({ agentDid });
  const here = existing.find((m) => m.workspaceId === workspaceId);
  const makePrimary = isPrimary || !existing.some((m) => m.isPrimary);
  if (!here) {
    try {
      await c.workspaceAgents.insertOne({
        _id: newId(),
        workspaceId,
        agentDid,
        isPrimary: makePrimary,
        joinedAt: new Date().toISOString(),
      });
    } catch (err) {
      if (!(err instanceof DuplicateKeyError)) throw err; // added concurrently: same outcome
    }
  }
  if (makePrimary && !here?.isPrimary) await setAgentPrimary(c, agentDid, workspaceId);
}

/** Makes the agent's membership of `workspaceId` its only primary one. */
export async function setAgentPrimary(c: Collections, agentDid: string, workspaceId: string): Promise<void> {
  await c.workspaceAgents.updateOne({ agentDid, workspaceId }, { $set: { isPrimary: true } });
  await c.workspaceAgents.updateMany({ agentDid, workspaceId: { $ne: workspaceId }, isPrimary: true }, { $set: { isPrimary: false } });
}

/** Ids of the workspaces a principal may see (§5.7), or 'all' for a global admin. */
export async function visibleWorkspaceIds(c: Collections, principal: Principal | null): Promise<string[] | 'all'> {
  if (!principal) return [];
  if (principal.kind === 'agent') return agentWorkspaceIds(c, principal.did);
  if (principal.isAdmin) return 'all';
  return userWorkspaceIds(c, principal.userId);
}

/** Adds a person to a workspace; their first membership is primary. DuplicateKeyError when already in. */
export async function addMember(c: Collections, workspaceId: string, userId: string, role: WorkspaceRole): Promise<WorkspaceMemberDoc> {
  const hasPrimary = (await c.workspaceMembers.count({ userId, isPrimary: true })) > 0;
  const doc: WorkspaceMemberDoc = {
    _id: newId(),
    workspaceId,
    userId,
    role,
    isPrimary: !hasPrimary,
    joinedAt: new Date().toISOString(),
  };
  await c.workspaceMembers.insertOne(doc);
  return doc;
}

/** Removes a person's membership; when it was their primary one, their earliest other one takes over. */
export async function removeMember(c: Collections, member: WorkspaceMemberDoc): Promise<void> {
  await c.workspaceMembers.deleteOne({ _id: member._id });
  if (member.isPrimary) await promoteEarliest(c.workspaceMembers, 'userId', [member.userId]);
}

/**
 * For each owner (a user id or an agent DID) left without a primary membership, flags its
 * earliest remaining membership primary. Returns the owners that have no membership at all.
 */
async function promoteEarliest<T extends WorkspaceMemberDoc | WorkspaceAgentDoc>(
  coll: Collection<T>,
  key: 'userId' | 'agentDid',
  owners: string[],
): Promise<string[]> {
  if (owners.length === 0) return [];
  const rest = await coll.find({ [key]: { $in: owners } }, { sort: { joinedAt: 1, _id: 1 } });
  const byOwner = groupBy(rest, (m) => (m as unknown as Record<string, string>)[key]!);
  const ids = [...byOwner.values()].filter((ms) => !ms.some((m) => m.isPrimary)).map((ms) => ms[0]!._id);
  if (ids.length > 0) await coll.updateMany({ _id: { $in: ids } }, { $set: { isPrimary: true } });
  return owners.filter((o) => !byOwner.has(o));
}

export type WorkspaceDeletedHook = (workspace: WorkspaceDoc) => Promise<void> | void;
/** A person left a workspace (removed, or the workspace was deleted). */
export type MemberRemovedHook = (workspaceId: string, userId: string) => Promise<void> | void;
/** An agent joined or left a workspace (or its primary moved); `workspaceId` is the one that changed. */
export type AgentMembershipHook = (workspaceId: string, agentDid: string) => Promise<void> | void;

/** A person's membership as the interface shows it. */
export const WorkspaceMemberView = z
  .strictObject({
    userId: z.string(),
    did: z.string().nullable(),
    name: z.string().nullable(),
    email: z.string().nullable(),
    role: workspaceRole,
    isPrimary: z.boolean(),
    joinedAt: timestamp,
  })
  .meta({ id: 'WorkspaceMember' });
export type WorkspaceMemberView = z.infer<typeof WorkspaceMemberView>;

export function toWorkspaceMemberView(m: WorkspaceMemberDoc, u: Pick<UserDoc, 'did' | 'name' | 'email'> | null): WorkspaceMemberView {
  return {
    userId: m.userId,
    did: u?.did ?? null,
    name: u?.name ?? null,
    email: u?.email ?? null,
    role: m.role,
    isPrimary: m.isPrimary,
    joinedAt: m.joinedAt,
  };
}

/** An agent's membership as the interface shows it. */
export const WorkspaceAgentView = z
  .strictObject({ id: z.string().meta({ description: "The agent's DID" }), name: z.string().nullable(), isPrimary: z.boolean(), joinedAt: timestamp })
  .meta({ id: 'WorkspaceAgent' });
export type WorkspaceAgentView = z.infer<typeof WorkspaceAgentView>;

export function toWorkspaceAgentView(m: WorkspaceAgentDoc, agentName: string | null): WorkspaceAgentView {
  return { id: m.agentDid, name: agentName, isPrimary: m.isPrimary, joinedAt: m.joinedAt };
}

/** One of the caller's workspaces (GET /api/me/workspaces). */
export const MyWorkspaceView = z.strictObject({ id: z.string(), name: z.string(), slug: z.string(), isPrimary: z.boolean(), isAdmin: z.boolean() });
export type MyWorkspaceView = z.infer<typeof MyWorkspaceView>;

export interface NewWorkspace {
  name: string;
  slug?: string;
  description?: string;
  color?: string;
}

export type WorkspacePatch = Partial<Pick<WorkspaceDoc, 'name' | 'slug' | 'description' | 'color'>>;

/** A workspace as the caller may see it, with what they may do there. */
interface Access {
  ws: WorkspaceDoc;
  /** For `can()`: the caller's role there (null: no member, e.g. a global admin; `member` for an agent of it). */
  who: { isGlobalAdmin: boolean; workspaceRole: WorkspaceRole | null };
}

const roleName = (action: WorkspaceAction) => MIN_ROLE[action] ?? 'global admin';

/** Workspaces, their people and agents; deletion and the hooks later areas hang their own clean-up on. */
export class WorkspaceService {
  private readonly c: Collections;
  private readonly log: Logger;
  private readonly deletedHooks: WorkspaceDeletedHook[] = [];
  private readonly agentHooks: AgentMembershipHook[] = [];
  private readonly memberHooks: MemberRemovedHook[] = [];
  private readonly agentRemovedHooks: AgentMembershipHook[] = [];

  constructor(private readonly ctx: ServiceCore) {
    this.c = ctx.c;
    this.log = ctx.log;
  }

  /**
   * Runs `fn` after a workspace is deleted (its memberships are already gone). Channels, skills,
   * workflows and model keys of the workspace subscribe here. A failing hook is logged; the
   * deletion stands.
   */
  onWorkspaceDeleted(fn: WorkspaceDeletedHook): void {
    this.deletedHooks.push(fn);
  }

  /**
   * Runs `fn` after an agent joins or leaves a workspace, or its primary workspace moves (skills
   * and model access re-send the agent its state). Failures are logged.
   */
  onAgentMembershipChanged(fn: AgentMembershipHook): void {
    this.agentHooks.push(fn);
  }

  /**
   * Runs `fn` after a person leaves a workspace or is removed from it, or the workspace is deleted
   * (their channels of it go; the live feed re-checks what they may read).
   */
  onMemberRemoved(fn: MemberRemovedHook): void {
    this.memberHooks.push(fn);
  }

  /** Runs `fn` after an agent is removed from a workspace (before the membership-changed hooks). */
  onAgentRemoved(fn: AgentMembershipHook): void {
    this.agentRemovedHooks.push(fn);
  }

  // --- workspaces --------------------------------------------------------------------------------

  /** Creates a workspace (the slug derived from the name when absent; 409 when taken). */
  async create(p: UserPrincipal, input: NewWorkspace): Promise<WorkspaceDoc> {
    const s = input.slug ?? slugify(input.name);
    if (!s) throw badRequest(`no slug can be derived from the name '${input.name}'; give one`, 'slug_required');
    const now = new Date().toISOString();
    const ws: WorkspaceDoc = {
      _id: newId(),
      name: input.name,
      slug: s,
      color: input.color ?? defaultColor(s),
      description: input.description ?? '',
      isDefault: false,
      createdAt: now,
      updatedAt: now,
      createdBy: p.did,
    };
    try {
      await this.c.workspaces.insertOne(ws);
    } catch (err) {
      throw slugTaken(err, s);
    }
    await this.ctx.audit.record(p, { action: 'workspace.create', targetType: 'workspace', target: ws._id, details: { name: ws.name, slug: ws.slug } });
    return ws;
  }

  /** The workspaces the caller may see: all for a global admin, else the ones they belong to. */
  async list(p: Principal): Promise<WorkspaceDoc[]> {
    const ids = await visibleWorkspaceIds(this.c, p);
    return this.c.workspaces.find(ids === 'all' ? {} : { _id: { $in: ids } }, { sort: { name: 1, _id: 1 } });
  }

  /** A workspace by id or slug; 404 when it does not exist or the caller may not see it. */
  async get(p: Principal, ref: string): Promise<WorkspaceDoc> {
    return (await this.access(p, ref)).ws;
  }

  /** Edits a workspace (its admins, or a global admin). */
  async update(p: UserPrincipal, ref: string, patch: WorkspacePatch): Promise<WorkspaceDoc> {
    const a = await this.access(p, ref);
    if (!a.who.isGlobalAdmin && !atLeast(a.who.workspaceRole, 'admin')) {
      throw forbidden(`editing workspace ${a.ws.slug} needs the admin role there (or global admin)`);
    }
    const set: Partial<WorkspaceDoc> = { ...patch, updatedAt: new Date().toISOString() };
    let updated: WorkspaceDoc | null;
    try {
      updated = await this.c.workspaces.findOneAndUpdate({ _id: a.ws._id }, { $set: set });
    } catch (err) {
      throw slugTaken(err, patch.slug ?? '');
    }
    if (!updated) throw notFound(`workspace ${ref} not found`);
    await this.ctx.audit.record(p, { action: 'workspace.update', targetType: 'workspace', target: a.ws._id, details: { changes: patch } });
    return updated;
  }

  /** Deletes a workspace and its memberships (its owners, or a global admin; never the default one). */
  async remove(p: UserPrincipal, ref: string): Promise<void> {
    const a = await this.access(p, ref);
    this.need(a, 'deleteWorkspace', 'deleting a workspace');
    if (a.ws.isDefault) throw badRequest('the default workspace cannot be deleted; it can be renamed and recoloured', 'default_workspace');
    const removed = await this.delete(a.ws);
    await this.ctx.audit.record(p, {
      action: 'workspace.delete',
      targetType: 'workspace',
      target: a.ws._id,
      details: { name: a.ws.name, slug: a.ws.slug, ...removed },
    });
  }

  /**
   * Deletes a workspace that is not the default one, with its memberships; people and agents whose
   * primary it was get their earliest remaining membership as primary, and an agent left with
   * none goes to the default workspace. Then the hooks run.
   */
  private async delete(ws: WorkspaceDoc): Promise<{ members: number; agents: number }> {
    const c = this.c;
    await c.workspaces.deleteOne({ _id: ws._id });
    const members = await c.workspaceMembers.find({ workspaceId: ws._id });
    const agents = await c.workspaceAgents.find({ workspaceId: ws._id });
    await c.workspaceMembers.deleteMany({ workspaceId: ws._id });
    await c.workspaceAgents.deleteMany({ workspaceId: ws._id });
    await promoteEarliest(c.workspaceMembers, 'userId', members.filter((m) => m.isPrimary).map((m) => m.userId));
    const homeless = await promoteEarliest(c.workspaceAgents, 'agentDid', agents.filter((m) => m.isPrimary).map((m) => m.agentDid));
    if (homeless.length > 0) {
      const fallback = await c.workspaces.findOne({ isDefault: true });
      if (fallback) for (const did of homeless) await addAgentToWorkspace(c, did, fallback._id, true);
    }
    for (const fn of this.deletedHooks) {
      try {
        await fn(ws);
      } catch (err) {
        this.log.error({ err, workspaceId: ws._id }, 'workspace-deleted hook failed');
      }
    }
    for (const m of agents) await this.agentMembershipChanged(ws._id, m.agentDid);
    for (const m of members) await this.memberRemoved(ws._id, m.userId);
    return { members: members.length, agents: agents.length };
  }

  /**
   * The caller's workspaces (all of them for a global admin) with isPrimary and isAdmin, primary
   * first; for an agent's session, the workspaces the agent belongs to (isAdmin false).
   */
  async mine(p: Principal): Promise<MyWorkspaceView[]> {
    const c = this.c;
    const [ids, mine] = await Promise.all([
      visibleWorkspaceIds(c, p),
      p.kind === 'user'
        ? c.workspaceMembers
            .find({ userId: p.userId })
            .then((ms) => ms.map((m) => ({ workspaceId: m.workspaceId, isPrimary: m.isPrimary, admin: atLeast(m.role, 'admin') })))
        : c.workspaceAgents.find({ agentDid: p.did }).then((ms) => ms.map((m) => ({ workspaceId: m.workspaceId, isPrimary: m.isPrimary, admin: false }))),
    ]);
    const list = await c.workspaces.find(ids === 'all' ? {} : { _id: { $in: ids } }, { sort: { name: 1, _id: 1 } });
    const membership = new Map(mine.map((m) => [m.workspaceId, m]));
    const globalAdmin = p.kind === 'user' && p.isAdmin;
    const items = list.map((ws) => {
      const m = membership.get(ws._id);
      return { id: ws._id, name: ws.name, slug: ws.slug, isPrimary: m?.isPrimary ?? false, isAdmin: globalAdmin || (m?.admin ?? false) };
    });
    return items.sort((x, y) => Number(y.isPrimary) - Number(x.isPrimary));
  }

  // --- people ------------------------------------------------------------------------------------

  /** The people of a workspace with their roles, oldest membership first. */
  async members(p: UserPrincipal, ref: string): Promise<WorkspaceMemberView[]> {
    const { ws } = await this.access(p, ref);
    const members = await this.c.workspaceMembers.find({ workspaceId: ws._id }, { sort: { joinedAt: 1, _id: 1 } });
    const users = await this.c.users.find({ _id: { $in: members.map((m) => m.userId) } });
    const byId = new Map(users.map((u) => [u._id, u]));
    return members.map((m) => toWorkspaceMemberView(m, byId.get(m.userId) ?? null));
  }

  /** Adds a person with a role (workspace admins; the owner role only by an owner); 409 when already a member. */
  async addMember(p: UserPrincipal, ref: string, userRef: string, role: WorkspaceRole): Promise<WorkspaceMemberView> {
    const a = await this.access(p, ref);
    this.need(a, 'manageWorkspaceUsers', 'adding members');
    if (role === 'owner') this.needOwnerFor(a, 'granting the owner role');
    const user = await findUserByRef(this.c, userRef);
    if (!user) throw notFound(`no user ${userRef}`);
    let m: WorkspaceMemberDoc;
    try {
      m = await addMember(this.c, a.ws._id, user._id, role);
    } catch (err) {
      if (err instanceof DuplicateKeyError) throw conflict(`${userRef} is already a member of workspace ${a.ws.slug}; change the role with PATCH`, 'already_member');
      throw err;
    }
    await this.ctx.audit.record(p, {
      action: 'workspace.member.add',
      targetType: 'workspace',
      target: a.ws._id,
      details: { userId: user._id, did: user.did, role: m.role },
    });
    return toWorkspaceMemberView(m, user);
  }

  /** Changes a member's role (workspace admins; the owner role given or taken only by an owner). */
  async changeRole(p: UserPrincipal, ref: string, memberRef: string, role: WorkspaceRole): Promise<WorkspaceMemberView> {
    const a = await this.access(p, ref);
    this.need(a, 'manageWorkspaceUsers', 'changing member roles');
    const m = await this.findMember(a.ws, memberRef);
    if (m.role === 'owner' || role === 'owner') this.needOwnerFor(a, 'granting or taking away the owner role');
    const updated = (await this.c.workspaceMembers.findOneAndUpdate({ _id: m._id }, { $set: { role } })) ?? m;
    await this.ctx.audit.record(p, {
      action: 'workspace.member.update',
      targetType: 'workspace',
      target: a.ws._id,
      details: { userId: m.userId, from: m.role, to: updated.role },
    });
    return toWorkspaceMemberView(updated, await this.c.users.findById(updated.userId));
  }

  /** Removes a member (workspace admins, or the member leaving; an owner only by an owner). */
  async removeMember(p: UserPrincipal, ref: string, memberRef: string): Promise<void> {
    const a = await this.access(p, ref);
    const m = await this.findMember(a.ws, memberRef);
    if (m.userId !== p.userId) {
      this.need(a, 'manageWorkspaceUsers', 'removing members');
      if (m.role === 'owner') this.needOwnerFor(a, 'removing an owner');
    }
    await removeMember(this.c, m);
    await this.ctx.audit.record(p, {
      action: 'workspace.member.remove',
      targetType: 'workspace',
      target: a.ws._id,
      details: { userId: m.userId, role: m.role },
    });
    await this.memberRemoved(a.ws._id, m.userId);
  }

  // --- agents ------------------------------------------------------------------------------------

  /** The agents of a workspace (any member, an agent of it included). */
  async agents(p: Principal, ref: string): Promise<WorkspaceAgentView[]> {
    const a = await this.access(p, ref);
    this.need(a, 'viewAgents', 'viewing agents');
    const ms = await this.c.workspaceAgents.find({ workspaceId: a.ws._id }, { sort: { joinedAt: 1, _id: 1 } });
    const agents = await this.c.agents.find({ _id: { $in: ms.map((m) => m.agentDid) } }, { projection: { name: 1 } });
    const names = new Map(agents.map((ag) => [ag._id, ag.name]));
    return ms.map((m) => toWorkspaceAgentView(m, names.get(m.agentDid) ?? null));
  }

  /**
   * Adds an approved agent (workspace admins); its first workspace is primary, `isPrimary` moves
   * the primary here. When the agent is managed elsewhere, the caller must also administer its
   * primary workspace. `created` is false when only the primary moved.
   */
  async addAgent(p: UserPrincipal, ref: string, agentDid: string, isPrimary: boolean | undefined): Promise<{ agent: WorkspaceAgentView; created: boolean }> {
    const c = this.c;
    const a = await this.access(p, ref);
    this.need(a, 'manageWorkspaceAgents', 'adding agents');
    const agent = await c.agents.findById(agentDid);
    // A registration becomes an agent at its approval, which also gives it its primary
    // workspace: before that (or once rejected) no workspace admin may claim it.
    if (!agent || agent.status !== 'active') throw notFound(`no approved agent ${agentDid}`);
    // An agent outside every workspace of the caller answers as an unknown one (docs/api.md);
    // one they see shows its primary workspace in the agents list already.
    if (!a.who.isGlobalAdmin && (await c.workspaceMembers.count({ userId: p.userId, workspaceId: { $in: await agentWorkspaceIds(c, agentDid) } })) === 0) {
      throw notFound(`no approved agent ${agentDid}`);
    }
    const primary = await primaryWorkspaceOf(c, agentDid);
    if (primary && primary._id !== a.ws._id && !a.who.isGlobalAdmin) {
      const there = await memberRole(c, p.userId, primary._id);
      if (!can({ isGlobalAdmin: false, workspaceRole: there }, 'manageWorkspaceAgents')) {
        throw forbidden(`agent ${agentDid} is managed in workspace ${primary.slug}; adding it elsewhere needs the admin role there too`);
      }
    }
    const existing = await c.workspaceAgents.findOne({ workspaceId: a.ws._id, agentDid });
    if (existing && !(isPrimary && !existing.isPrimary)) throw conflict(`agent ${agentDid} is already in workspace ${a.ws.slug}`, 'already_member');
    if (existing) await setAgentPrimary(c, agentDid, a.ws._id);
    else await addAgentToWorkspace(c, agentDid, a.ws._id, isPrimary ?? false);
    const m = (await c.workspaceAgents.findOne({ workspaceId: a.ws._id, agentDid }))!;
    await this.ctx.audit.record(p, {
      action: existing ? 'workspace.agent.primary' : 'workspace.agent.add',
      targetType: 'workspace',
      target: a.ws._id,
      details: { agentDid, isPrimary: m.isPrimary, previousPrimary: primary?._id ?? null },
    });
    await this.agentMembershipChanged(a.ws._id, agentDid);
    return { agent: toWorkspaceAgentView(m, agent.name), created: !existing };
  }

  /**
   * Removes an agent from a workspace (workspace admins). Its primary membership goes only with
   * `primaryRef` naming another of its workspaces (which becomes primary); the last one never.
   */
  async removeAgent(p: UserPrincipal, ref: string, agentDid: string, primaryRef: string | undefined): Promise<void> {
    const c = this.c;
    const a = await this.access(p, ref);
    this.need(a, 'manageWorkspaceAgents', 'removing agents');
    const m = await c.workspaceAgents.findOne({ workspaceId: a.ws._id, agentDid });
    if (!m) throw notFound(`agent ${agentDid} is not in workspace ${a.ws.slug}`);
    let newPrimary: WorkspaceDoc | null = null;
    if (m.isPrimary) {
      const others = await c.workspaceAgents.count({ agentDid, workspaceId: { $ne: a.ws._id } });
      if (others === 0) throw badRequest(`workspace ${a.ws.slug} is the only workspace of agent ${agentDid}; add it to another one first`, 'last_workspace');
      if (!primaryRef) throw badRequest(`workspace ${a.ws.slug} is the primary workspace of agent ${agentDid}; name the new one with ?primary=`, 'primary_required');
      newPrimary = await resolveWorkspace(c, primaryRef);
      // A workspace the caller cannot see is answered like one the agent is not in.
      const seen = newPrimary && (a.who.isGlobalAdmin || (await memberRole(c, p.userId, newPrimary._id)) !== null);
      const ok = seen && newPrimary!._id !== a.ws._id && (await c.workspaceAgents.count({ agentDid, workspaceId: newPrimary!._id })) > 0;
      if (!ok) throw badRequest(`primary: agent ${agentDid} is not in workspace ${primaryRef}`, 'invalid_primary');
      await setAgentPrimary(c, agentDid, newPrimary!._id);
    }
    await c.workspaceAgents.deleteOne({ _id: m._id });
    await this.ctx.audit.record(p, {
      action: 'workspace.agent.remove',
      targetType: 'workspace',
      target: a.ws._id,
      details: { agentDid, wasPrimary: m.isPrimary, newPrimary: newPrimary?._id ?? null },
    });
    for (const fn of this.agentRemovedHooks) {
      try {
        await fn(a.ws._id, agentDid);
      } catch (err) {
        this.log.error({ err, workspaceId: a.ws._id, agentDid }, 'agent-removed hook failed');
      }
    }
    await this.agentMembershipChanged(a.ws._id, agentDid);
  }

  // --- hooks -------------------------------------------------------------------------------------

  private async memberRemoved(workspaceId: string, userId: string): Promise<void> {
    for (const fn of this.memberHooks) {
      try {
        await fn(workspaceId, userId);
      } catch (err) {
        this.log.error({ err, workspaceId }, 'member-removed hook failed');
      }
    }
  }

  /** Tells the subscribers that an agent's membership of a workspace changed. */
  async agentMembershipChanged(workspaceId: string, agentDid: string): Promise<void> {
    for (const fn of this.agentHooks) {
      try {
        await fn(workspaceId, agentDid);
      } catch (err) {
        this.log.error({ err, workspaceId, agentDid }, 'agent-membership hook failed');
      }
    }
  }

  // --- access ------------------------------------------------------------------------------------

  /** The workspace as the caller may see it; 404 when it does not exist or is not visible. */
  private async access(p: Principal, ref: string): Promise<Access> {
    const c = this.c;
    const ws = await resolveWorkspace(c, ref);
    let role: WorkspaceRole | null = null;
    let visible = false;
    if (ws) {
      if (p.kind === 'agent') {
        // An agent of the workspace counts as a member: it may look, and no route lets it change anything.
        visible = (await c.workspaceAgents.count({ workspaceId: ws._id, agentDid: p.did })) > 0;
        role = visible ? 'member' : null;
      } else {
        role = await memberRole(c, p.userId, ws._id);
        visible = p.isAdmin || role !== null;
      }
    }
    if (!ws || !visible) throw notFound(`workspace ${ref} not found`);
    return { ws, who: { isGlobalAdmin: p.kind === 'user' && p.isAdmin, workspaceRole: role } };
  }

  private need(a: Access, action: WorkspaceAction, what: string): void {
    if (!can(a.who, action)) throw forbidden(`${what} needs the ${roleName(action)} role in workspace ${a.ws.slug} (or global admin)`);
  }

  /** Granting, changing or removing the owner role is for owners (and global admins). */
  private needOwnerFor(a: Access, what: string): void {
    if (!a.who.isGlobalAdmin && !atLeast(a.who.workspaceRole, 'owner')) throw forbidden(`${what} needs the owner role in workspace ${a.ws.slug} (or global admin)`);
  }

  private async findMember(ws: WorkspaceDoc, ref: string): Promise<WorkspaceMemberDoc> {
    const user = await findUserByRef(this.c, ref);
    const m = user ? await this.c.workspaceMembers.findOne({ workspaceId: ws._id, userId: user._id }) : null;
    if (!m) throw notFound(`${ref} is not a member of workspace ${ws.slug}`);
    return m;
  }
}

function slugTaken(err: unknown, slug: string): unknown {
  if (err instanceof DuplicateKeyError) return conflict(`the slug '${slug}' is already taken`, 'slug_taken');
  return err;
}
