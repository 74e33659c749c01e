/**
 * Skills (interface §2.11, §4.9): Markdown instructions kept per workspace, per-agent overrides,
 * and the `skills_config` frame that gives every connected agent its effective skill set.
 *
 * - A skill is stored as the raw row of §2.11 (`is_required` 0 or 1, `config` JSON text) and
 *   shown in two forms: the raw row (list-all, create) and camelCase (get, update; get without
 *   `content`). Names are unique per workspace, compared trimmed and case-insensitively.
 * - An override ties one skill to one agent of its workspace: `enabled: false` opts the agent
 *   out, `config` replaces the skill's config for it. A required skill cannot be opted out of;
 *   should a skill become required while opt-outs exist, they stay stored but are ignored.
 * - The effective set of an agent: the skills of every workspace it belongs to, minus the ones
 *   it is opted out of (unless required), each with its overriding config when it has one.
 *   `skills_config` carries that whole set and replaces what the agent had. It goes to every
 *   connected agent of a workspace after a skill there is created, changed or deleted, to one
 *   agent after its override changes, and to each agent once its handshake completes.
 *   Pushes run one after another and read the store when they run, so the last frame an agent
 *   receives always reflects the latest state.
 * - Overrides go with their skill, with their agent (`forgetAgent`), and with the agent's
 *   membership of the workspace (ignored as soon as the membership is gone, removed by
 *   `agentMembershipChanged`); skills and their overrides go with their workspace.
 * - Access inside a workspace: a caller who is neither a member (a person with a role there, or an
 *   agent of it) nor a global admin gets 403 (§7), for an unknown workspace too, with a message
 *   that names the workspace as they gave it: an answer that differed would tell which workspaces
 *   exist. A global admin gets 404 for an unknown one. Reading needs membership, changing needs
 *   the workspace admin role (admin or owner) or global admin. Every change is audited.
 */
import { z } from 'zod';
import { newId } from '../domain/ids.js';
import type { Collections, SkillDoc, SkillOverrideDoc } from '../store/collections.js';
import { DuplicateKeyError } from '../store/types.js';
import { badRequest, conflict, forbidden, notFound } from '../domain/errors.js';
import { atLeast } from '../domain/permissions.js';
import type { Principal, UserPrincipal } from '../domain/principal.js';
import type { WorkspaceRole } from '../domain/roles.js';
import type { WorkspaceDoc } from '../store/collections.js';
import type { CatalogueResult, SkillFile } from '../integrations/skills-library.js';
import { resolveWorkspace } from './lookups.js';
import { memberRole } from './workspaces.js';
import { groupBy } from '../domain/group.js';
import type { AgentLink } from './ports.js';
import { SkillEntry, type SkillsConfigFrame } from '../domain/agent-protocol.js';
import { jsonObject, timestamp } from '../domain/views.js';
import type { SkillsLibrary } from '../integrations/skills-library.js';
import type { Logger } from '../log.js';
import type { ServiceCore } from './core.js';

export type SkillConfig = Record<string, unknown>;

/** Largest skill content (characters). An agent receives its whole skill set in one frame. */
export const MAX_SKILL_CONTENT = 512 * 1024;

/** POST /api/skills/library/install: a library skill and what to set on it (the rest comes from its front matter). */
export interface InstallSkillInput {
  workspaceId: string;
  source: string;
  skillId: string;
  name?: string;
  description?: string | null;
  version?: string | null;
  isRequired?: boolean;
  config?: SkillConfig;
}

/** A workspace as the caller may use it for skills. */
interface Access {
  ws: WorkspaceDoc;
  /** The workspace as the caller named it. */
  ref: string;
  isGlobalAdmin: boolean;
  role: WorkspaceRole | null;
}

// --- views -------------------------------------------------------------------------------------

/** §2.11 raw row, as answered by create. */
export const SkillRow = z
  .strictObject({
    id: z.string(),
    workspace_id: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    version: z.string().nullable(),
    is_required: z.union([z.literal(0), z.literal(1)]),
    config: z.string().meta({ description: 'JSON text' }),
    content: z.string(),
    created_at: timestamp,
  })
  .meta({ id: 'SkillRow' });
export type SkillRow = z.infer<typeof SkillRow>;

/** §2.11 raw row with the workspace name and counters, as answered by list-all. */
export const SkillListRow = SkillRow.extend({
  workspace_name: z.string(),
  agent_count: z.number().int().min(0),
  override_count: z.number().int().min(0),
}).meta({ id: 'SkillListRow' });
export type SkillListRow = z.infer<typeof SkillListRow>;

/** §2.11 camelCase form, as get answers it (no `content`). */
export const SkillView = z
  .strictObject({
    id: z.string(),
    workspaceId: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    version: z.string().nullable(),
    isRequired: z.boolean(),
    config: jsonObject,
    createdAt: timestamp,
  })
  .meta({ id: 'Skill' });
export type SkillView = z.infer<typeof SkillView>;

/** §2.11 camelCase form with `content`, as update answers it. */
export const UpdatedSkillView = SkillView.extend({ content: z.string() }).meta({ id: 'SkillWithContent' });
export type UpdatedSkillView = z.infer<typeof UpdatedSkillView>;

export const OverrideView = z
  .strictObject({
    skillId: z.string(),
    workspaceId: z.string(),
    agentDid: z.string(),
    enabled: z.boolean(),
    config: jsonObject.nullable().meta({ description: "The config that replaces the skill's for this agent; null: the skill's own" }),
    effective: z.boolean().meta({ description: 'False when the override opts out of a skill that is now required (the opt-out is ignored)' }),
    createdAt: timestamp,
    updatedAt: timestamp,
    updatedBy: z.string(),
  })
  .meta({ id: 'SkillOverride' });
export type OverrideView = z.infer<typeof OverrideView>;

/** One skill as an agent receives it in `skills_config` (the frame's entry), strict as every view. */
export const AgentSkillView = SkillEntry.strict().meta({ id: 'AgentSkill' });

export interface CreateSkillInput {
  workspaceId: string;
  name: string;
  description?: string | null;
  version?: string | null;
  isRequired?: boolean;
  config?: SkillConfig;
  content?: string | null;
}

export interface UpdateSkillInput {
  description?: string | null;
  version?: string | null;
  isRequired?: boolean;
  config?: SkillConfig;
  content?: string | null;
}

export const nameKey = (name: string) => name.trim().toLowerCase();

/** JSON text of the store back to an object; a damaged value reads as `{}`. */
export function parseConfig(text: string | null): SkillConfig {
  if (text === null) return {};
  try {
    const v: unknown = JSON.parse(text);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as SkillConfig) : {};
  } catch {
    return {};
  }
}

export function toRow(s: SkillDoc): SkillRow {
  return {
    id: s._id,
    workspace_id: s.workspace_id,
    name: s.name,
    description: s.description,
    version: s.version,
    is_required: s.is_required,
    config: s.config,
    content: s.content,
    created_at: s.created_at,
  };
}

export function toView(s: SkillDoc): SkillView {
  return {
    id: s._id,
    workspaceId: s.workspace_id,
    name: s.name,
    description: s.description,
    version: s.version,
    isRequired: s.is_required === 1,
    config: parseConfig(s.config),
    createdAt: s.created_at,
  };
}

export function toUpdatedView(s: SkillDoc): UpdatedSkillView {
  return { ...toView(s), content: s.content };
}

export function toOverrideView(o: SkillOverrideDoc, skill: SkillDoc): OverrideView {
  return {
    skillId: o.skillId,
    workspaceId: o.workspaceId,
    agentDid: o.agentDid,
    enabled: o.enabled,
    config: o.config === null ? null : parseConfig(o.config),
    effective: o.enabled || skill.is_required === 0,
    createdAt: o.createdAt,
    updatedAt: o.updatedAt,
    updatedBy: o.updatedBy,
  };
}

/** Applies one agent's overrides to skills of workspaces it belongs to (sorted as given). */
export function effectiveSkills(skills: SkillDoc[], overrides: SkillOverrideDoc[]): SkillEntry[] {
  const bySkill = new Map(overrides.map((o) => [o.skillId, o]));
  const out: SkillEntry[] = [];
  for (const s of skills) {
    const o = bySkill.get(s._id);
    if (o && !o.enabled && s.is_required === 0) continue;
    out.push({
      id: s._id,
      workspaceId: s.workspace_id,
      name: s.name,
      description: s.description,
      version: s.version,
      isRequired: s.is_required === 1,
      config: o && o.config !== null ? parseConfig(o.config) : parseConfig(s.config),
      content: s.content,
    });
  }
  return out;
}

const bySkillOrder = (a: SkillDoc, b: SkillDoc) =>
  a.workspace_id === b.workspace_id
    ? a.name_key.localeCompare(b.name_key) || a._id.localeCompare(b._id)
    : a.workspace_id.localeCompare(b.workspace_id);

export class SkillService {
  private readonly c: Collections;
  private readonly log: Logger;
  private readonly agents: AgentLink;
  /** The external skills catalogue and code host. */
  readonly library: SkillsLibrary;
  private chain: Promise<void> = Promise.resolve();
  /** Agents waiting for the next batch of pushAgents, and that batch. */
  private readonly waiting = new Set<string>();
  private batch: Promise<void> | null = null;

  constructor(
    private readonly ctx: ServiceCore,
    deps: { agents: AgentLink; library: SkillsLibrary },
  ) {
    this.c = ctx.c;
    this.log = ctx.log;
    this.agents = deps.agents;
    this.library = deps.library;
  }

  /** For when an agent completes its handshake: it gets its skill set (before its `ready` goes out). */
  agentReady(did: string): Promise<void> {
    return this.pushAgents([did]);
  }

  /** For when a workspace is deleted: its skills and their overrides go. */
  async workspaceDeleted(ws: { _id: string }): Promise<void> {
    const removed = await this.forgetWorkspace(ws._id);
    if (removed.skills > 0 || removed.overrides > 0) this.log.info({ workspaceId: ws._id, ...removed }, 'skills of a deleted workspace removed');
  }

  // --- the routes' operations (access checked, changes audited) ----------------------------------

  /** POST /api/skills: creates a skill in a workspace (by id or slug; 404 unknown, 409 name taken). */
  async createIn(p: Principal, workspaceRef: string, input: Omit<CreateSkillInput, 'workspaceId'>): Promise<SkillDoc> {
    const ws = await this.workspaceOf(workspaceRef);
    const doc = await this.create({ ...input, workspaceId: ws._id });
    await this.ctx.audit.record(p, {
      action: 'skill.create',
      targetType: 'skill',
      target: doc._id,
      details: { workspaceId: ws._id, name: doc.name, isRequired: doc.is_required === 1 },
    });
    return doc;
  }

  /** The library's catalogue (cached; `stale` when a refresh failed). */
  catalogue(): Promise<CatalogueResult> {
    return this.library.catalogue();
  }

  /** A library skill's SKILL.md (front matter taken off) and the URL it was read from. */
  libraryFile(source: string, skillId: string): Promise<SkillFile> {
    return this.library.skillFile(source, skillId);
  }

  /** Installs a library skill into a workspace: reads its SKILL.md and creates the skill. */
  async install(p: Principal, input: InstallSkillInput): Promise<SkillDoc> {
    const ws = await this.workspaceOf(input.workspaceId);
    const file = await this.library.skillFile(input.source, input.skillId);
    if (file.content.length > MAX_SKILL_CONTENT) {
      throw badRequest(`the SKILL.md has ${file.content.length} characters; a skill holds at most ${MAX_SKILL_CONTENT}`, 'content_too_large');
    }
    const fm = file.frontMatter ?? {};
    const text = (v: unknown, max: number): string | undefined => {
      const s = typeof v === 'string' ? v.trim() : typeof v === 'number' ? String(v) : undefined;
      return s ? s.slice(0, max) : undefined;
    };
    const doc = await this.create({
      workspaceId: ws._id,
      name: input.name ?? text(fm.name, 100) ?? input.skillId.split('/').pop()!,
      description: input.description !== undefined ? input.description : (text(fm.description, 2000) ?? null),
      version: input.version !== undefined ? input.version : (text(fm.version, 64) ?? null),
      isRequired: input.isRequired,
      config: input.config,
      content: file.content,
    });
    await this.ctx.audit.record(p, {
      action: 'skill.install',
      targetType: 'skill',
      target: doc._id,
      details: { workspaceId: ws._id, name: doc.name, source: input.source, skillId: input.skillId, url: file.url },
    });
    return doc;
  }

  /** A workspace's skills (any member). */
  async listIn(p: Principal, workspaceRef: string): Promise<SkillDoc[]> {
    const a = await this.memberAccess(p, workspaceRef);
    return this.listWorkspace(a.ws._id);
  }

  /** One skill of a workspace (any member). */
  async getIn(p: Principal, workspaceRef: string, skillId: string): Promise<SkillDoc> {
    return (await this.memberSkill(p, workspaceRef, skillId)).skill;
  }

  /** Edits a skill (workspace admins); answers the updated skill. */
  async updateIn(p: UserPrincipal, workspaceRef: string, skillId: string, patch: UpdateSkillInput): Promise<SkillDoc> {
    const { a, skill } = await this.adminSkill(p, workspaceRef, skillId, 'editing skills');
    const updated = await this.update(skill, patch);
    if (!updated) throw notFound(`no skill ${skillId} in workspace ${a.ws.slug}`);
    await this.ctx.audit.record(p, { action: 'skill.update', targetType: 'skill', target: skill._id, details: { workspaceId: a.ws._id, name: skill.name, changed: Object.keys(patch) } });
    return updated;
  }

  /** Deletes a skill and its overrides (workspace admins). */
  async removeIn(p: UserPrincipal, workspaceRef: string, skillId: string): Promise<void> {
    const { a, skill } = await this.adminSkill(p, workspaceRef, skillId, 'deleting skills');
    if (!(await this.remove(skill))) throw notFound(`no skill ${skillId} in workspace ${a.ws.slug}`);
    await this.ctx.audit.record(p, { action: 'skill.delete', targetType: 'skill', target: skill._id, details: { workspaceId: a.ws._id, name: skill.name } });
  }

  /** The per-agent overrides of a skill (any member), with the skill. */
  async overridesIn(p: Principal, workspaceRef: string, skillId: string): Promise<{ skill: SkillDoc; overrides: SkillOverrideDoc[] }> {
    const { skill } = await this.memberSkill(p, workspaceRef, skillId);
    return { skill, overrides: await this.overridesOf(skill) };
  }

  /** One agent's override of a skill (any member; 404 when it has none), with the skill. */
  async overrideIn(p: Principal, workspaceRef: string, skillId: string, agentDid: string): Promise<{ skill: SkillDoc; override: SkillOverrideDoc }> {
    const { a, skill } = await this.memberSkill(p, workspaceRef, skillId);
    await this.agentIn(a, agentDid);
    const override = await this.c.skillOverrides.findOne({ skillId: skill._id, agentDid });
    if (!override) throw notFound(`${agentDid} has no override of skill ${skill.name}`);
    return { skill, override };
  }

  /**
   * Sets an agent's override of a skill (workspace admins): an opt-out (not of a required skill,
   * 409) and/or a replacing config. `created` is false when an override was replaced.
   */
  async setOverrideIn(
    p: UserPrincipal,
    workspaceRef: string,
    skillId: string,
    agentDid: string,
    value: { enabled?: boolean; config?: SkillConfig | null },
  ): Promise<{ skill: SkillDoc; override: SkillOverrideDoc; created: boolean }> {
    const { a, skill } = await this.adminSkill(p, workspaceRef, skillId, 'changing skill overrides');
    await this.agentIn(a, agentDid);
    const enabled = value.enabled ?? true;
    const config: SkillConfig | null = value.config ?? null;
    if (!enabled && skill.is_required === 1) {
      throw conflict(`skill ${skill.name} is required in workspace ${a.ws.slug}; agents cannot opt out of it (a config override is allowed)`, 'skill_required');
    }
    if (enabled && config === null) {
      throw badRequest('an override either opts the agent out (enabled: false) or gives a config; to drop an override, DELETE it', 'empty_override');
    }
    const { doc, created } = await this.setOverride(skill, agentDid, { enabled, config }, p.did);
    await this.ctx.audit.record(p, {
      action: 'skill.override.set',
      targetType: 'skill',
      target: skill._id,
      details: { workspaceId: a.ws._id, agentDid, enabled, configReplaced: config !== null },
    });
    return { skill, override: doc, created };
  }

  /** Removes an agent's override of a skill (workspace admins; 404 when it has none). */
  async removeOverrideIn(p: UserPrincipal, workspaceRef: string, skillId: string, agentDid: string): Promise<void> {
    const { a, skill } = await this.adminSkill(p, workspaceRef, skillId, 'changing skill overrides');
    if (!(await this.removeOverride(skill, agentDid))) throw notFound(`${agentDid} has no override of skill ${skill.name}`);
    await this.ctx.audit.record(p, { action: 'skill.override.delete', targetType: 'skill', target: skill._id, details: { workspaceId: a.ws._id, agentDid } });
  }

  /** An agent's effective skills in a workspace (any member), as skills_config carries them. */
  async effectiveFor(p: Principal, workspaceRef: string, agentDid: string): Promise<SkillEntry[]> {
    const a = await this.memberAccess(p, workspaceRef);
    await this.agentIn(a, agentDid);
    return this.effectiveIn(a.ws._id, agentDid);
  }

  // --- access ------------------------------------------------------------------------------------

  private async workspaceOf(ref: string): Promise<WorkspaceDoc> {
    const ws = await resolveWorkspace(this.c, ref);
    if (!ws) throw notFound(`workspace ${ref} not found`);
    return ws;
  }

  private async access(p: Principal, ref: string): Promise<Access> {
    const isGlobalAdmin = p.kind === 'user' && p.isAdmin;
    const ws = await resolveWorkspace(this.c, ref);
    if (!ws) throw isGlobalAdmin ? notFound(`workspace ${ref} not found`) : notMember(ref);
    if (p.kind === 'agent') {
      const member = await this.isAgentOf(ws._id, p.did);
      return { ws, ref, isGlobalAdmin: false, role: member ? 'member' : null };
    }
    return { ws, ref, isGlobalAdmin, role: await memberRole(this.c, p.userId, ws._id) };
  }

  /** The workspace when the caller is a member of it (or a global admin); 403 otherwise. */
  private async memberAccess(p: Principal, ref: string): Promise<Access> {
    const a = await this.access(p, ref);
    if (!a.isGlobalAdmin && a.role === null) throw notMember(a.ref);
    return a;
  }

  /** A skill of the workspace, for a member. */
  private async memberSkill(p: Principal, ref: string, skillId: string): Promise<{ a: Access; skill: SkillDoc }> {
    const a = await this.memberAccess(p, ref);
    return { a, skill: await this.skillIn(a, skillId) };
  }

  /** A skill of the workspace, for one who may change it: a workspace admin or a global admin. */
  private async adminSkill(p: Principal, ref: string, skillId: string, what: string): Promise<{ a: Access; skill: SkillDoc }> {
    const a = await this.memberAccess(p, ref);
    if (!a.isGlobalAdmin && !atLeast(a.role, 'admin')) throw forbidden(`${what} needs the admin role in workspace ${a.ws.slug} (or global admin)`);
    return { a, skill: await this.skillIn(a, skillId) };
  }

  private async skillIn(a: Access, skillId: string): Promise<SkillDoc> {
    const s = await this.get(a.ws._id, skillId);
    if (!s) throw notFound(`no skill ${skillId} in workspace ${a.ws.slug}`);
    return s;
  }

  private async agentIn(a: Access, agentDid: string): Promise<void> {
    if (!(await this.isAgentOf(a.ws._id, agentDid))) throw notFound(`${agentDid} is not an agent of workspace ${a.ws.slug}`, 'agent_not_in_workspace');
  }

  // --- skills ------------------------------------------------------------------------------------

  /** Every skill with its workspace name and counters, by workspace name then skill name. */
  async listAll(): Promise<SkillListRow[]> {
    const c = this.c;
    const skills = await c.skills.find({});
    const wsIds = [...new Set(skills.map((s) => s.workspace_id))];
    const [workspaces, members, overrides] = await Promise.all([
      c.workspaces.find({ _id: { $in: wsIds } }, { projection: { name: 1 } }),
      c.workspaceAgents.find({ workspaceId: { $in: wsIds } }, { projection: { workspaceId: 1, agentDid: 1 } }),
      c.skillOverrides.find({ skillId: { $in: skills.map((s) => s._id) } }, { projection: { skillId: 1, agentDid: 1, workspaceId: 1 } }),
    ]);
    const wsName = new Map(workspaces.map((w) => [w._id, w.name]));
    const enrolled = new Set(members.map((m) => `${m.workspaceId}\n${m.agentDid}`));
    const agentCount = new Map<string, number>();
    for (const m of members) agentCount.set(m.workspaceId, (agentCount.get(m.workspaceId) ?? 0) + 1);
    const overrideCount = new Map<string, number>();
    for (const o of overrides) {
      if (enrolled.has(`${o.workspaceId}\n${o.agentDid}`)) overrideCount.set(o.skillId, (overrideCount.get(o.skillId) ?? 0) + 1);
    }
    return skills
      .map((s) => ({
        ...toRow(s),
        workspace_name: wsName.get(s.workspace_id) ?? '',
        agent_count: agentCount.get(s.workspace_id) ?? 0,
        override_count: overrideCount.get(s._id) ?? 0,
      }))
      .sort((a, b) => a.workspace_name.localeCompare(b.workspace_name) || a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
  }

  async listWorkspace(workspaceId: string): Promise<SkillDoc[]> {
    return (await this.c.skills.find({ workspace_id: workspaceId })).sort(bySkillOrder);
  }

  /** A skill of a workspace; null when it does not exist or belongs to another workspace. */
  async get(workspaceId: string, skillId: string): Promise<SkillDoc | null> {
    const s = await this.c.skills.findById(skillId);
    return s && s.workspace_id === workspaceId ? s : null;
  }

  /** Creates a skill (the workspace exists); 409 when the name is taken there. Pushes to the workspace's agents. */
  async create(input: CreateSkillInput): Promise<SkillDoc> {
    const now = new Date().toISOString();
    const doc: SkillDoc = {
      _id: newId(),
      workspace_id: input.workspaceId,
      name: input.name.trim(),
      name_key: nameKey(input.name),
      description: input.description ?? null,
      version: input.version ?? null,
      is_required: input.isRequired ? 1 : 0,
      config: JSON.stringify(input.config ?? {}),
      content: input.content ?? '',
      created_at: now,
      updated_at: now,
    };
    try {
      await this.c.skills.insertOne(doc);
    } catch (err) {
      if (err instanceof DuplicateKeyError) throw conflict(`a skill named '${doc.name}' already exists in this workspace`, 'skill_name_taken');
      throw err;
    }
    await this.pushWorkspace(doc.workspace_id);
    return doc;
  }

  /** Applies a PATCH; `config` replaces the whole object, null `content` removes it. Pushes to the workspace's agents. */
  async update(skill: SkillDoc, patch: UpdateSkillInput): Promise<SkillDoc | null> {
    const set: Partial<SkillDoc> = { updated_at: new Date().toISOString() };
    if (patch.description !== undefined) set.description = patch.description;
    if (patch.version !== undefined) set.version = patch.version;
    if (patch.isRequired !== undefined) set.is_required = patch.isRequired ? 1 : 0;
    if (patch.config !== undefined) set.config = JSON.stringify(patch.config);
    if (patch.content !== undefined) set.content = patch.content ?? '';
    const updated = await this.c.skills.findOneAndUpdate({ _id: skill._id }, { $set: set });
    if (updated) await this.pushWorkspace(updated.workspace_id);
    return updated;
  }

  /** Deletes a skill and its overrides; false when it was already gone. Pushes to the workspace's agents. */
  async remove(skill: SkillDoc): Promise<boolean> {
    const n = await this.c.skills.deleteOne({ _id: skill._id });
    await this.c.skillOverrides.deleteMany({ skillId: skill._id });
    if (n > 0) await this.pushWorkspace(skill.workspace_id);
    return n > 0;
  }

  // --- overrides ---------------------------------------------------------------------------------

  async isAgentOf(workspaceId: string, agentDid: string): Promise<boolean> {
    return (await this.c.workspaceAgents.count({ workspaceId, agentDid })) > 0;
  }

  /** Overrides of a skill held by agents still in its workspace, by agent DID. */
  async overridesOf(skill: SkillDoc): Promise<SkillOverrideDoc[]> {
    const all = await this.c.skillOverrides.find({ skillId: skill._id }, { sort: { agentDid: 1 } });
    if (all.length === 0) return [];
    const members = new Set(
      (await this.c.workspaceAgents.find({ workspaceId: skill.workspace_id, agentDid: { $in: all.map((o) => o.agentDid) } })).map((m) => m.agentDid),
    );
    return all.filter((o) => members.has(o.agentDid));
  }

  async override(skill: SkillDoc, agentDid: string): Promise<SkillOverrideDoc | null> {
    return this.c.skillOverrides.findOne({ skillId: skill._id, agentDid });
  }

  /**
   * Sets (creates or replaces) an agent's override of a skill. The caller has checked that the
   * agent belongs to the workspace and that a required skill is not opted out of. Pushes to the agent.
   */
  async setOverride(skill: SkillDoc, agentDid: string, value: { enabled: boolean; config: SkillConfig | null }, by: string): Promise<{ doc: SkillOverrideDoc; created: boolean }> {
    const now = new Date().toISOString();
    const config = value.config === null ? null : JSON.stringify(value.config);
    const write = () =>
      this.c.skillOverrides.findOneAndUpdate(
        { skillId: skill._id, agentDid },
        {
          $set: { enabled: value.enabled, config, updatedAt: now, updatedBy: by, workspaceId: skill.workspace_id },
          $setOnInsert: { _id: newId(), createdAt: now },
        },
        { upsert: true, returnDocument: 'before' },
      );
    let before: SkillOverrideDoc | null;
    try {
      before = await write();
    } catch (err) {
      if (!(err instanceof DuplicateKeyError)) throw err;
      before = await write(); // a concurrent PUT inserted it first: this one now updates it
    }
    const doc = await this.c.skillOverrides.findOne({ skillId: skill._id, agentDid });
    if (!doc) throw new Error('override vanished after its write');
    await this.pushAgents([agentDid]);
    return { doc, created: before === null };
  }

  /** Removes an agent's override of a skill; false when it had none. Pushes to the agent. */
  async removeOverride(skill: SkillDoc, agentDid: string): Promise<boolean> {
    const n = await this.c.skillOverrides.deleteOne({ skillId: skill._id, agentDid });
    if (n > 0) await this.pushAgents([agentDid]);
    return n > 0;
  }

  /** Removes every override of an agent (for when an agent is deleted). */
  async forgetAgent(agentDid: string): Promise<number> {
    return this.c.skillOverrides.deleteMany({ agentDid });
  }

  /**
   * For when an agent joins or leaves a workspace: drops its overrides there when it is no longer
   * a member, and sends it its new skill set.
   */
  async agentMembershipChanged(workspaceId: string, agentDid: string): Promise<void> {
    if (!(await this.isAgentOf(workspaceId, agentDid))) await this.c.skillOverrides.deleteMany({ workspaceId, agentDid });
    await this.pushAgents([agentDid]);
  }

  /** Removes a deleted workspace's skills and their overrides. */
  async forgetWorkspace(workspaceId: string): Promise<{ skills: number; overrides: number }> {
    const overrides = await this.c.skillOverrides.deleteMany({ workspaceId });
    const skills = await this.c.skills.deleteMany({ workspace_id: workspaceId });
    return { skills, overrides };
  }

  // --- the effective set and skills_config -------------------------------------------------------

  /**
   * The effective skill sets of some agents, from the store, in a fixed number of queries: the
   * skills of every workspace each belongs to, with its overrides applied.
   */
  async effectiveSets(agentDids: string[]): Promise<Map<string, SkillEntry[]>> {
    const c = this.c;
    const out = new Map<string, SkillEntry[]>();
    if (agentDids.length === 0) return out;
    const memberships = await c.workspaceAgents.find({ agentDid: { $in: agentDids } }, { projection: { workspaceId: 1, agentDid: 1 } });
    const wsIds = [...new Set(memberships.map((m) => m.workspaceId))];
    const [skills, overrides] = await Promise.all([
      wsIds.length > 0 ? c.skills.find({ workspace_id: { $in: wsIds } }) : Promise.resolve([]),
      c.skillOverrides.find({ agentDid: { $in: agentDids } }),
    ]);
    skills.sort(bySkillOrder);
    const skillsOf = groupBy(skills, (s) => s.workspace_id);
    const wsOf = groupBy(memberships, (m) => m.agentDid, (m) => m.workspaceId);
    const ovOf = groupBy(overrides, (o) => o.agentDid);
    for (const did of agentDids) {
      const mine = (wsOf.get(did) ?? []).flatMap((w) => skillsOf.get(w) ?? []).sort(bySkillOrder);
      out.set(did, effectiveSkills(mine, ovOf.get(did) ?? []));
    }
    return out;
  }

  async effectiveSet(agentDid: string): Promise<SkillEntry[]> {
    return (await this.effectiveSets([agentDid])).get(agentDid) ?? [];
  }

  /** What an agent gets from one workspace. */
  async effectiveIn(workspaceId: string, agentDid: string): Promise<SkillEntry[]> {
    const [own, overrides] = await Promise.all([this.listWorkspace(workspaceId), this.c.skillOverrides.find({ agentDid, workspaceId })]);
    return effectiveSkills(own, overrides);
  }

  static frame(skills: SkillEntry[]): SkillsConfigFrame {
    return { type: 'skills_config', skills };
  }

  /** Sends `skills_config` to every connected agent of a workspace; resolves once sent. */
  pushWorkspace(workspaceId: string): Promise<void> {
    return this.enqueue(async () => {
      const push = this.agents;
      const dids = (await this.c.workspaceAgents.find({ workspaceId }, { projection: { agentDid: 1 } }))
        .map((m) => m.agentDid)
        .filter((d) => push.isOnline(d));
      await this.send(dids);
    });
  }

  /**
   * Sends `skills_config` to the given agents that are connected; resolves once sent. Agents
   * asked for while an earlier batch waits join it, so a thousand agents finishing their
   * handshake together cost a few queries, not a few per agent.
   */
  pushAgents(agentDids: string[]): Promise<void> {
    for (const d of agentDids) this.waiting.add(d);
    this.batch ??= this.enqueue(async () => {
      this.batch = null;
      const dids = [...this.waiting];
      this.waiting.clear();
      const push = this.agents;
      await this.send(dids.filter((d) => push.isOnline(d)));
    });
    return this.batch;
  }

  private async send(dids: string[]): Promise<void> {
    if (dids.length === 0) return;
    const sets = await this.effectiveSets(dids);
    const push = this.agents;
    let sent = 0;
    for (const [did, skills] of sets) if (push.push(did, SkillService.frame(skills))) sent++;
    this.log.debug({ agents: dids.length, sent }, 'skills_config pushed');
  }

  /** Runs pushes one at a time; a failed push is logged and never fails the request that caused it. */
  private enqueue(fn: () => Promise<void>): Promise<void> {
    const next = this.chain.then(fn).catch((err: unknown) => this.log.error({ err }, 'skills_config push failed'));
    this.chain = next;
    return next;
  }
}

const notMember = (ref: string) => forbidden(`you are not a member of workspace ${ref}`);
