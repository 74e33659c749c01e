/**
 * Skills (interface §2.11, §4.9, §7): the global list and create, a workspace's skills, per-agent
 * overrides, and the external skills library (catalogue, SKILL.md content, one-call install).
 * docs/skills.md describes every route, status and decision.
 *
 * Access inside a workspace: a caller who is neither a member (a person with a role there, or an
 * agent of it) nor a global admin gets 403 (§7), for an unknown workspace too, with a message that
 * names the workspace as they gave it: an answer that differed would tell which workspaces exist.
 * A global admin gets 404 for an unknown one. Reading needs membership, changing needs the
 * workspace admin role (admin or owner) or global admin.
 */
import { z } from 'zod';
import { route, type RouteDef, type RequestContext } from '../router.js';
import { badRequest, conflict, forbidden, notFound } from '../../domain/errors.js';
import type { RouteContext } from './context.js';
import type { Principal } from '../../domain/principal.js';
import { atLeast } from '../../domain/permissions.js';
import type { SkillDoc, WorkspaceDoc } from '../../store/collections.js';
import type { WorkspaceRole } from '../../domain/roles.js';
import { memberRole, resolveWorkspace } from '../../services/workspaces.js';
import { toOverrideView, toRow, toView, type SkillConfig } from '../../services/skills.js';
import { skillIdSchema, sourceSchema } from '../../integrations/skills-library.js';

/** Largest skill content (characters). An agent receives its whole skill set in one frame. */
export const MAX_SKILL_CONTENT = 512 * 1024;

const required = (what: string) => ({ message: `required: ${what}` });
const configSchema = z.record(z.string(), z.unknown(), { message: 'expected a JSON object' });
const skillName = z.string(required('the skill name')).trim().min(1, { message: 'must not be blank' }).max(100);
const description = z.string().max(2000);
const version = z.string().trim().min(1, { message: 'must not be blank (use null to clear it)' }).max(64);
const content = z.string().max(MAX_SKILL_CONTENT, { message: `at most ${MAX_SKILL_CONTENT} characters` });
const workspaceId = z.string(required('the workspace id')).trim().min(1, { message: 'required: the workspace id' }).max(200);

const wsParams = z.object({ workspace: z.string().min(1).max(200) });
const skillParams = wsParams.extend({ skillId: z.string().min(1).max(200) });
const overrideParams = skillParams.extend({ agentDid: z.string().min(1).max(512).describe("The agent's DID, percent-encoded") });
const agentParams = wsParams.extend({ agentDid: z.string().min(1).max(512) });

interface Access {
  ws: WorkspaceDoc;
  /** The workspace as the caller named it. */
  ref: string;
  isGlobalAdmin: boolean;
  role: WorkspaceRole | null;
}

const skillRowShape = z.object({
  id: z.string(),
  workspace_id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  version: z.string().nullable(),
  is_required: z.union([z.literal(0), z.literal(1)]),
  config: z.string().describe('JSON text'),
  content: z.string(),
  created_at: z.string(),
});
const skillViewShape = z.object({
  id: z.string(),
  workspaceId: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  version: z.string().nullable(),
  isRequired: z.boolean(),
  config: z.record(z.string(), z.unknown()),
  createdAt: z.string(),
});

export function skillRoutes(ctx: RouteContext): RouteDef[] {
  const { c } = ctx;
  const skills = ctx.skills;

  const workspaceOf = async (ref: string): Promise<WorkspaceDoc> => {
    const ws = await resolveWorkspace(c, ref);
    if (!ws) throw notFound(`workspace ${ref} not found`);
    return ws;
  };

  const notMember = (ref: string) => forbidden(`you are not a member of workspace ${ref}`);

  const access = async (p: Principal, ref: string): Promise<Access> => {
    const isGlobalAdmin = p.kind === 'user' && p.isAdmin;
    const ws = await resolveWorkspace(c, ref);
    if (!ws) throw isGlobalAdmin ? notFound(`workspace ${ref} not found`) : notMember(ref);
    if (p.kind === 'agent') {
      const member = await skills.isAgentOf(ws._id, p.did);
      return { ws, ref, isGlobalAdmin: false, role: member ? 'member' : null };
    }
    return { ws, ref, isGlobalAdmin, role: await memberRole(c, p.userId, ws._id) };
  };

  const needMember = (a: Access) => {
    if (!a.isGlobalAdmin && a.role === null) throw notMember(a.ref);
  };
  const needAdmin = (a: Access, what: string) => {
    needMember(a);
    if (!a.isGlobalAdmin && !atLeast(a.role, 'admin')) {
      throw forbidden(`${what} needs the admin role in workspace ${a.ws.slug} (or global admin)`);
    }
  };

  const skillIn = async (a: Access, skillId: string): Promise<SkillDoc> => {
    const s = await skills.get(a.ws._id, skillId);
    if (!s) throw notFound(`no skill ${skillId} in workspace ${a.ws.slug}`);
    return s;
  };

  const agentIn = async (a: Access, agentDid: string) => {
    if (!(await skills.isAgentOf(a.ws._id, agentDid))) throw notFound(`${agentDid} is not an agent of workspace ${a.ws.slug}`, 'agent_not_in_workspace');
  };

  const principalOf = (r: RequestContext) => r.principal!;

  return [
    // --- global list and create (§4.9) -----------------------------------------------------------

    route({
      method: 'GET',
      path: '/api/skills',
      auth: 'globalAdmin',
      summary: 'Every skill as a raw row with workspace_name, agent_count and override_count',
      tags: ['skills'],
      response: z.array(skillRowShape.extend({ workspace_name: z.string(), agent_count: z.number(), override_count: z.number() })),
      handler: async () => ({ body: await skills.listAll() }),
    }),

    route({
      method: 'POST',
      path: '/api/skills',
      auth: 'globalAdmin',
      summary: 'Creates a skill in a workspace (400 no workspaceId or blank name, 404 unknown workspace, 409 name taken)',
      tags: ['skills'],
      successStatus: 201,
      response: skillRowShape,
      body: z.strictObject({
        workspaceId,
        name: skillName,
        description: description.nullable().optional(),
        version: version.nullable().optional(),
        isRequired: z.boolean().optional(),
        config: configSchema.optional(),
        content: content.nullable().optional(),
      }),
      handler: async (r) => {
        const p = principalOf(r);
        const ws = await workspaceOf(r.body.workspaceId);
        const doc = await skills.create({ ...r.body, workspaceId: ws._id });
        await ctx.audit.record(p, {
          action: 'skill.create',
          targetType: 'skill',
          target: doc._id,
          details: { workspaceId: ws._id, name: doc.name, isRequired: doc.is_required === 1 },
        });
        return { status: 201, body: toRow(doc) };
      },
    }),

    // --- the library -----------------------------------------------------------------------------

    route({
      method: 'GET',
      path: '/api/skills/library',
      auth: 'globalAdmin',
      summary: 'Catalogue entries of the external skills library (cached 1 hour; X-Skills-Library-Stale: true when a refresh failed)',
      tags: ['skills'],
      handler: async () => {
        const cat = await skills.library.catalogue();
        const headers: Record<string, string> = { 'x-skills-library-fetched-at': cat.fetchedAt };
        if (cat.stale) headers['x-skills-library-stale'] = 'true';
        return { body: cat.entries, headers };
      },
    }),

    route({
      method: 'GET',
      path: '/api/skills/library/content',
      auth: 'globalAdmin',
      summary: "A library skill's SKILL.md without its front matter, and the URL it was read from (404 when none of the paths exists)",
      tags: ['skills'],
      query: z.object({ source: sourceSchema, skillId: skillIdSchema }),
      response: z.object({ content: z.string(), url: z.string() }),
      handler: async (r) => {
        const file = await skills.library.skillFile(r.query.source, r.query.skillId);
        return { body: { content: file.content, url: file.url } };
      },
    }),

    route({
      method: 'POST',
      path: '/api/skills/library/install',
      auth: 'globalAdmin',
      summary: 'Installs a library skill into a workspace in one call: reads its SKILL.md and creates the skill (201 raw row)',
      tags: ['skills'],
      successStatus: 201,
      response: skillRowShape,
      body: z.strictObject({
        workspaceId,
        source: sourceSchema,
        skillId: skillIdSchema,
        name: skillName.optional(),
        description: description.nullable().optional(),
        version: version.nullable().optional(),
        isRequired: z.boolean().optional(),
        config: configSchema.optional(),
      }),
      handler: async (r) => {
        const p = principalOf(r);
        const ws = await workspaceOf(r.body.workspaceId);
        const file = await skills.library.skillFile(r.body.source, r.body.skillId);
        if (file.content.length > MAX_SKILL_CONTENT) {
          throw badRequest(`the SKILL.md has ${file.content.length} characters; a skill holds at most ${MAX_SKILL_CONTENT}`, 'content_too_large');
        }
        const fm = file.frontMatter ?? {};
        const text = (v: unknown, max: number): string | undefined => {
          const s = typeof v === 'string' ? v.trim() : typeof v === 'number' ? String(v) : undefined;
          return s ? s.slice(0, max) : undefined;
        };
        const name = r.body.name ?? text(fm.name, 100) ?? r.body.skillId.split('/').pop()!;
        const doc = await skills.create({
          workspaceId: ws._id,
          name,
          description: r.body.description !== undefined ? r.body.description : (text(fm.description, 2000) ?? null),
          version: r.body.version !== undefined ? r.body.version : (text(fm.version, 64) ?? null),
          isRequired: r.body.isRequired,
          config: r.body.config,
          content: file.content,
        });
        await ctx.audit.record(p, {
          action: 'skill.install',
          targetType: 'skill',
          target: doc._id,
          details: { workspaceId: ws._id, name: doc.name, source: r.body.source, skillId: r.body.skillId, url: file.url },
        });
        return { status: 201, body: toRow(doc) };
      },
    }),

    // --- a workspace's skills --------------------------------------------------------------------

    route({
      method: 'GET',
      path: '/api/workspaces/:workspace/skills',
      auth: 'session',
      summary: "A workspace's skills in camelCase, without content (any member)",
      tags: ['skills'],
      params: wsParams,
      handler: async (r) => {
        const a = await access(principalOf(r), r.params.workspace);
        needMember(a);
        return { body: { skills: (await skills.listWorkspace(a.ws._id)).map((s) => toView(s, false)) } };
      },
    }),

    route({
      method: 'GET',
      path: '/api/workspaces/:workspace/skills/:skillId',
      auth: 'session',
      summary: 'One skill in camelCase, without content (any member; 403 non-member; 404 missing or in another workspace)',
      tags: ['skills'],
      params: skillParams,
      response: z.object({ skill: skillViewShape }),
      handler: async (r) => {
        const a = await access(principalOf(r), r.params.workspace);
        needMember(a);
        return { body: { skill: toView(await skillIn(a, r.params.skillId), false) } };
      },
    }),

    route({
      method: 'PATCH',
      path: '/api/workspaces/:workspace/skills/:skillId',
      auth: 'user',
      summary: 'Edits a skill (workspace admin or global admin); answers the updated skill in camelCase with content',
      tags: ['skills'],
      params: skillParams,
      response: skillViewShape.extend({ content: z.string() }),
      body: z.strictObject({
        description: description.nullable().optional(),
        version: version.nullable().optional(),
        isRequired: z.boolean().optional(),
        config: configSchema.optional(),
        content: content.nullable().optional(),
      }),
      handler: async (r) => {
        const p = principalOf(r);
        const a = await access(p, r.params.workspace);
        needAdmin(a, 'editing skills');
        const s = await skillIn(a, r.params.skillId);
        const updated = await skills.update(s, r.body);
        if (!updated) throw notFound(`no skill ${r.params.skillId} in workspace ${a.ws.slug}`);
        const changed = Object.keys(r.body);
        await ctx.audit.record(p, { action: 'skill.update', targetType: 'skill', target: s._id, details: { workspaceId: a.ws._id, name: s.name, changed } });
        return { body: toView(updated, true) };
      },
    }),

    route({
      method: 'DELETE',
      path: '/api/workspaces/:workspace/skills/:skillId',
      auth: 'user',
      summary: 'Deletes a skill and its overrides (workspace admin or global admin; 403 others; 404 missing)',
      tags: ['skills'],
      params: skillParams,
      handler: async (r) => {
        const p = principalOf(r);
        const a = await access(p, r.params.workspace);
        needAdmin(a, 'deleting skills');
        const s = await skillIn(a, r.params.skillId);
        if (!(await skills.remove(s))) throw notFound(`no skill ${r.params.skillId} in workspace ${a.ws.slug}`);
        await ctx.audit.record(p, { action: 'skill.delete', targetType: 'skill', target: s._id, details: { workspaceId: a.ws._id, name: s.name } });
        return { body: { ok: true } };
      },
    }),

    // --- per-agent overrides ---------------------------------------------------------------------

    route({
      method: 'GET',
      path: '/api/workspaces/:workspace/skills/:skillId/overrides',
      auth: 'session',
      summary: "The per-agent overrides of a skill (any member)",
      tags: ['skills'],
      params: skillParams,
      handler: async (r) => {
        const a = await access(principalOf(r), r.params.workspace);
        needMember(a);
        const s = await skillIn(a, r.params.skillId);
        return { body: { overrides: (await skills.overridesOf(s)).map((o) => toOverrideView(o, s)) } };
      },
    }),

    route({
      method: 'GET',
      path: '/api/workspaces/:workspace/skills/:skillId/overrides/:agentDid',
      auth: 'session',
      summary: "One agent's override of a skill (any member; 404 when the agent has none)",
      tags: ['skills'],
      params: overrideParams,
      handler: async (r) => {
        const a = await access(principalOf(r), r.params.workspace);
        needMember(a);
        const s = await skillIn(a, r.params.skillId);
        await agentIn(a, r.params.agentDid);
        const o = await skills.override(s, r.params.agentDid);
        if (!o) throw notFound(`${r.params.agentDid} has no override of skill ${s.name}`);
        return { body: { override: toOverrideView(o, s) } };
      },
    }),

    route({
      method: 'PUT',
      path: '/api/workspaces/:workspace/skills/:skillId/overrides/:agentDid',
      auth: 'user',
      summary: "Sets an agent's override of a skill: opt out (enabled false) and/or a replacing config (workspace admin or global admin; 409 opting out of a required skill)",
      tags: ['skills'],
      params: overrideParams,
      body: z.strictObject({
        enabled: z.boolean().optional(),
        config: configSchema.nullable().optional(),
      }),
      handler: async (r) => {
        const p = principalOf(r);
        const a = await access(p, r.params.workspace);
        needAdmin(a, 'changing skill overrides');
        const s = await skillIn(a, r.params.skillId);
        await agentIn(a, r.params.agentDid);
        const enabled = r.body.enabled ?? true;
        const config: SkillConfig | null = r.body.config ?? null;
        if (!enabled && s.is_required === 1) {
          throw conflict(`skill ${s.name} is required in workspace ${a.ws.slug}; agents cannot opt out of it (a config override is allowed)`, 'skill_required');
        }
        if (enabled && config === null) {
          throw badRequest('an override either opts the agent out (enabled: false) or gives a config; to drop an override, DELETE it', 'empty_override');
        }
        const { doc, created } = await skills.setOverride(s, r.params.agentDid, { enabled, config }, p.did);
        await ctx.audit.record(p, {
          action: 'skill.override.set',
          targetType: 'skill',
          target: s._id,
          details: { workspaceId: a.ws._id, agentDid: r.params.agentDid, enabled, configReplaced: config !== null },
        });
        return { status: created ? 201 : 200, body: { override: toOverrideView(doc, s) } };
      },
    }),

    route({
      method: 'DELETE',
      path: '/api/workspaces/:workspace/skills/:skillId/overrides/:agentDid',
      auth: 'user',
      summary: "Removes an agent's override of a skill (workspace admin or global admin; 404 when it has none)",
      tags: ['skills'],
      params: overrideParams,
      handler: async (r) => {
        const p = principalOf(r);
        const a = await access(p, r.params.workspace);
        needAdmin(a, 'changing skill overrides');
        const s = await skillIn(a, r.params.skillId);
        if (!(await skills.removeOverride(s, r.params.agentDid))) throw notFound(`${r.params.agentDid} has no override of skill ${s.name}`);
        await ctx.audit.record(p, {
          action: 'skill.override.delete',
          targetType: 'skill',
          target: s._id,
          details: { workspaceId: a.ws._id, agentDid: r.params.agentDid },
        });
        return { body: { ok: true } };
      },
    }),

    route({
      method: 'GET',
      path: '/api/workspaces/:workspace/agents/:agentDid/skills',
      auth: 'session',
      summary: "An agent's effective skills in this workspace (overrides applied, content included), as skills_config carries them",
      tags: ['skills'],
      params: agentParams,
      handler: async (r) => {
        const a = await access(principalOf(r), r.params.workspace);
        needMember(a);
        await agentIn(a, r.params.agentDid);
        return { body: { skills: await skills.effectiveIn(a.ws._id, r.params.agentDid) } };
      },
    }),
  ];
}
