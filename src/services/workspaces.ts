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
 *
 * The plain functions take the collections so the fleet can call them without a service.
 */
import { nanoid } from 'nanoid';
import type { Collections, WorkspaceAgentDoc, WorkspaceDoc, WorkspaceMemberDoc } from '../store/collections.js';
import type { WorkspaceRole } from '../domain/roles.js';
import { DuplicateKeyError, type Collection } from '../store/types.js';
import type { Principal } from '../domain/principal.js';
import { groupBy } from '../domain/group.js';
import type { Logger } from '../log.js';

export interface WorkspaceView {
  id: string;
  name: string;
  slug: string;
  color: string;
  description: string;
  isDefault: boolean;
  createdAt: string;
  updatedAt: string;
}

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

/** A workspace by id or by slug; null when neither names one. */
export async function resolveWorkspace(c: Collections, idOrSlug: string): Promise<WorkspaceDoc | null> {
  return (await c.workspaces.findById(idOrSlug)) ?? (await c.workspaces.findOne({ slug: idOrSlug.toLowerCase() }));
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
        _id: nanoid(),
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
    _id: nanoid(),
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
/** An agent joined or left a workspace (or its primary moved); `workspaceId` is the one that changed. */
/** A person left a workspace (removed, or the workspace was deleted). */
export type MemberRemovedHook = (workspaceId: string, userId: string) => Promise<void> | void;
export type AgentMembershipHook = (workspaceId: string, agentDid: string) => Promise<void> | void;

/** Workspace deletion and the hooks later areas hang their own clean-up on. */
export class WorkspaceService {
  private readonly deletedHooks: WorkspaceDeletedHook[] = [];
  private readonly agentHooks: AgentMembershipHook[] = [];
  private readonly memberHooks: MemberRemovedHook[] = [];

  constructor(
    private readonly c: Collections,
    private readonly log: Logger,
  ) {}

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

  /** Runs `fn` after a person leaves a workspace (the live feed re-checks what they may read). */
  onMemberRemoved(fn: MemberRemovedHook): void {
    this.memberHooks.push(fn);
  }

  async memberRemoved(workspaceId: string, userId: string): Promise<void> {
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

  /** Deletes a workspace that is not the default one (the caller checks that). */
  async delete(ws: WorkspaceDoc): Promise<{ members: number; agents: number }> {
    const c = this.c;
    if (ws.isDefault) throw new Error('the default workspace cannot be deleted');
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
}
