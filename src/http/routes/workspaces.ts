/**
 * Workspaces, their members and their agents (interface §2.15, §4.11, §5), and the caller's own
 * list (GET /api/me/workspaces, §4.6).
 *
 * `{workspace}` is an id or a slug. A workspace the caller may not see (§5.7) answers 404, as an
 * unknown one does; one they see but may not change answers 403. Who may do what comes from the
 * permissions module (`can`): members and agents need `manageWorkspaceUsers` /
 * `manageWorkspaceAgents`, deletion `deleteWorkspace`, creation is a global setting.
 *
 * Routes of later areas under /api/workspaces/{workspace}/... must name that parameter
 * `:workspace` too (the router refuses two names for one position).
 */
import { z } from 'zod';
import { nanoid } from 'nanoid';
import { route, type RouteDef } from '../router.js';
import { badRequest, conflict, forbidden, notFound } from '../../domain/errors.js';
import type { RouteContext } from './context.js';
import type { Principal } from '../../domain/principal.js';
import { atLeast, can, MIN_ROLE, type WorkspaceAction } from '../../domain/permissions.js';
import type { WorkspaceAgentDoc, WorkspaceDoc, WorkspaceMemberDoc } from '../../store/collections.js';
import { WORKSPACE_ROLES, type WorkspaceRole } from '../../domain/roles.js';
import { DuplicateKeyError } from '../../store/types.js';
import {
  addAgentToWorkspace,
  addMember,
  agentWorkspaceIds,
  COLOR_RE,
  normalizeColor,
  defaultColor,
  memberRole,
  primaryWorkspaceOf,
  removeMember,
  resolveWorkspace,
  setAgentPrimary,
  toWorkspaceView,
  visibleWorkspaceIds,
} from '../../services/workspaces.js';
import { SLUG_RE, slugify } from '../../domain/slugs.js';
import { findUserByRef } from '../../services/users.js';
import { personOf } from './users.js';

const slug = z.string().max(64).regex(SLUG_RE, { message: 'lowercase letters and digits, words joined by single hyphens' });
const color = z
  .string()
  .regex(COLOR_RE, { message: 'a hex colour, #rrggbb or #rgb' })
  .transform(normalizeColor);
const name = z.string().trim().min(1).max(100);
const description = z.string().max(1000);
const role = z.enum(WORKSPACE_ROLES as [WorkspaceRole, ...WorkspaceRole[]]);

const wsParams = z.object({ workspace: z.string().min(1).max(200) });
const memberParams = wsParams.extend({
  member: z.string().min(1).max(512).describe("The member's DID, or their user id"),
});
const agentParams = wsParams.extend({ agentDid: z.string().min(1).max(512) });

interface Access {
  ws: WorkspaceDoc;
  /** For `can()`: the caller's role there (null: no member, e.g. a global admin; `member` for an agent of it). */
  who: { isGlobalAdmin: boolean; workspaceRole: WorkspaceRole | null };
}

const isGlobalAdmin = (p: Principal) => p.kind === 'user' && p.isAdmin;
const roleName = (action: WorkspaceAction) => MIN_ROLE[action] ?? 'global admin';

export function workspaceRoutes(ctx: RouteContext): RouteDef[] {
  const { c } = ctx;

  /** The workspace as the caller may see it; 404 when it does not exist or is not visible. */
  const access = async (p: Principal, ref: string): Promise<Access> => {
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
    return { ws, who: { isGlobalAdmin: isGlobalAdmin(p), workspaceRole: role } };
  };

  const need = (a: Access, action: WorkspaceAction, what: string) => {
    if (!can(a.who, action)) throw forbidden(`${what} needs the ${roleName(action)} role in workspace ${a.ws.slug} (or global admin)`);
  };

  /** Granting, changing or removing the owner role is for owners (and global admins). */
  const needOwnerFor = (a: Access, what: string) => {
    if (!a.who.isGlobalAdmin && !atLeast(a.who.workspaceRole, 'owner')) throw forbidden(`${what} needs the owner role in workspace ${a.ws.slug} (or global admin)`);
  };

  const memberView = async (m: WorkspaceMemberDoc) => {
    const u = await c.users.findById(m.userId);
    return memberViewOf(m, u);
  };

  const agentView = (m: WorkspaceAgentDoc, agentName: string | null) => ({
    id: m.agentDid,
    name: agentName,
    isPrimary: m.isPrimary,
    joinedAt: m.joinedAt,
  });

  const findMember = async (ws: WorkspaceDoc, ref: string): Promise<WorkspaceMemberDoc> => {
    const user = await findUserByRef(c, ref);
    const m = user ? await c.workspaceMembers.findOne({ workspaceId: ws._id, userId: user._id }) : null;
    if (!m) throw notFound(`${ref} is not a member of workspace ${ws.slug}`);
    return m;
  };

  const slugTaken = (err: unknown, s: string) => {
    if (err instanceof DuplicateKeyError) return conflict(`the slug '${s}' is already taken`, 'slug_taken');
    return err;
  };

  return [
    route({
      method: 'POST',
      path: '/api/workspaces',
      auth: 'globalAdmin',
      summary: 'Creates a workspace (slug derived from the name when absent; 409 when taken)',
      tags: ['workspaces'],
      successStatus: 201,
      body: z.strictObject({ name, slug: slug.optional(), description: description.optional(), color: color.optional() }),
      handler: async (r) => {
        const p = personOf(r);
        const s = r.body.slug ?? slugify(r.body.name);
        if (!s) throw badRequest(`no slug can be derived from the name '${r.body.name}'; give one`, 'slug_required');
        const now = new Date().toISOString();
        const ws: WorkspaceDoc = {
          _id: nanoid(),
          name: r.body.name,
          slug: s,
          color: r.body.color ?? defaultColor(s),
          description: r.body.description ?? '',
          isDefault: false,
          createdAt: now,
          updatedAt: now,
          createdBy: p.did,
        };
        try {
          await c.workspaces.insertOne(ws);
        } catch (err) {
          throw slugTaken(err, s);
        }
        await ctx.audit.record(p, { action: 'workspace.create', targetType: 'workspace', target: ws._id, details: { name: ws.name, slug: ws.slug } });
        return { status: 201, body: { workspace: toWorkspaceView(ws) } };
      },
    }),

    route({
      method: 'GET',
      path: '/api/workspaces',
      auth: 'session',
      summary: 'Workspaces the caller may see: all for a global admin, else the ones they belong to',
      tags: ['workspaces'],
      handler: async (r) => {
        const ids = await visibleWorkspaceIds(c, r.principal);
        const list = await c.workspaces.find(ids === 'all' ? {} : { _id: { $in: ids } }, { sort: { name: 1, _id: 1 } });
        return { body: { workspaces: list.map(toWorkspaceView) } };
      },
    }),

    route({
      method: 'GET',
      path: '/api/workspaces/:workspace',
      auth: 'session',
      summary: 'One workspace by id or slug (404 when not visible)',
      tags: ['workspaces'],
      params: wsParams,
      handler: async (r) => ({ body: { workspace: toWorkspaceView((await access(r.principal!, r.params.workspace)).ws) } }),
    }),

    route({
      method: 'PATCH',
      path: '/api/workspaces/:workspace',
      auth: 'user',
      summary: "Edits a workspace's name, slug, description or colour (workspace admin or global admin)",
      tags: ['workspaces'],
      params: wsParams,
      body: z.strictObject({ name: name.optional(), slug: slug.optional(), description: description.optional(), color: color.optional() }),
      handler: async (r) => {
        const p = personOf(r);
        const a = await access(p, r.params.workspace);
        if (!a.who.isGlobalAdmin && !atLeast(a.who.workspaceRole, 'admin')) {
          throw forbidden(`editing workspace ${a.ws.slug} needs the admin role there (or global admin)`);
        }
        const set: Partial<WorkspaceDoc> = { ...r.body, updatedAt: new Date().toISOString() };
        let updated: WorkspaceDoc | null;
        try {
          updated = await c.workspaces.findOneAndUpdate({ _id: a.ws._id }, { $set: set });
        } catch (err) {
          throw slugTaken(err, r.body.slug ?? '');
        }
        if (!updated) throw notFound(`workspace ${r.params.workspace} not found`);
        await ctx.audit.record(p, { action: 'workspace.update', targetType: 'workspace', target: a.ws._id, details: { changes: r.body } });
        return { body: { workspace: toWorkspaceView(updated) } };
      },
    }),

    route({
      method: 'DELETE',
      path: '/api/workspaces/:workspace',
      auth: 'user',
      summary: 'Deletes a workspace and its memberships (workspace owner or global admin; never the default one)',
      tags: ['workspaces'],
      params: wsParams,
      handler: async (r) => {
        const p = personOf(r);
        const a = await access(p, r.params.workspace);
        need(a, 'deleteWorkspace', 'deleting a workspace');
        if (a.ws.isDefault) {
          throw badRequest('the default workspace cannot be deleted; it can be renamed and recoloured', 'default_workspace');
        }
        const removed = await ctx.workspaceService.delete(a.ws);
        await ctx.audit.record(p, {
          action: 'workspace.delete',
          targetType: 'workspace',
          target: a.ws._id,
          details: { name: a.ws.name, slug: a.ws.slug, ...removed },
        });
        return { body: { ok: true } };
      },
    }),

    // --- members -----------------------------------------------------------------------------

    route({
      method: 'GET',
      path: '/api/workspaces/:workspace/members',
      auth: 'user',
      summary: 'The people of a workspace with their roles',
      tags: ['workspaces'],
      params: wsParams,
      handler: async (r) => {
        const { ws } = await access(personOf(r), r.params.workspace);
        const members = await c.workspaceMembers.find({ workspaceId: ws._id }, { sort: { joinedAt: 1, _id: 1 } });
        const users = await c.users.find({ _id: { $in: members.map((m) => m.userId) } });
        const byId = new Map(users.map((u) => [u._id, u]));
        return { body: { members: members.map((m) => memberViewOf(m, byId.get(m.userId) ?? null)) } };
      },
    }),

    route({
      method: 'POST',
      path: '/api/workspaces/:workspace/members',
      auth: 'user',
      summary: 'Adds a person with a role (workspace admin or global admin; owner only by an owner); 409 when already a member',
      tags: ['workspaces'],
      successStatus: 201,
      params: wsParams,
      body: z.strictObject({
        userDid: z.string().min(1).max(512).describe("The user's DID (an unclaimed user: their id)"),
        role,
      }),
      handler: async (r) => {
        const p = personOf(r);
        const a = await access(p, r.params.workspace);
        need(a, 'manageWorkspaceUsers', 'adding members');
        if (r.body.role === 'owner') needOwnerFor(a, 'granting the owner role');
        const user = await findUserByRef(c, r.body.userDid);
        if (!user) throw notFound(`no user ${r.body.userDid}`);
        let m: WorkspaceMemberDoc;
        try {
          m = await addMember(c, a.ws._id, user._id, r.body.role);
        } catch (err) {
          if (err instanceof DuplicateKeyError) {
            throw conflict(`${r.body.userDid} is already a member of workspace ${a.ws.slug}; change the role with PATCH`, 'already_member');
          }
          throw err;
        }
        await ctx.audit.record(p, {
          action: 'workspace.member.add',
          targetType: 'workspace',
          target: a.ws._id,
          details: { userId: user._id, did: user.did, role: m.role },
        });
        return { status: 201, body: { member: memberViewOf(m, user) } };
      },
    }),

    route({
      method: 'PATCH',
      path: '/api/workspaces/:workspace/members/:member',
      auth: 'user',
      summary: "Changes a member's role (workspace admin or global admin; the owner role only by an owner)",
      tags: ['workspaces'],
      params: memberParams,
      body: z.strictObject({ role }),
      handler: async (r) => {
        const p = personOf(r);
        const a = await access(p, r.params.workspace);
        need(a, 'manageWorkspaceUsers', 'changing member roles');
        const m = await findMember(a.ws, r.params.member);
        if (m.role === 'owner' || r.body.role === 'owner') needOwnerFor(a, "granting or taking away the owner role");
        const updated = (await c.workspaceMembers.findOneAndUpdate({ _id: m._id }, { $set: { role: r.body.role } })) ?? m;
        await ctx.audit.record(p, {
          action: 'workspace.member.update',
          targetType: 'workspace',
          target: a.ws._id,
          details: { userId: m.userId, from: m.role, to: updated.role },
        });
        return { body: { member: await memberView(updated) } };
      },
    }),

    route({
      method: 'DELETE',
      path: '/api/workspaces/:workspace/members/:member',
      auth: 'user',
      summary: 'Removes a member (workspace admin or global admin, or the member leaving; an owner only by an owner)',
      tags: ['workspaces'],
      params: memberParams,
      handler: async (r) => {
        const p = personOf(r);
        const a = await access(p, r.params.workspace);
        const m = await findMember(a.ws, r.params.member);
        if (m.userId !== p.userId) {
          need(a, 'manageWorkspaceUsers', 'removing members');
          if (m.role === 'owner') needOwnerFor(a, 'removing an owner');
        }
        await removeMember(c, m);
        await ctx.audit.record(p, {
          action: 'workspace.member.remove',
          targetType: 'workspace',
          target: a.ws._id,
          details: { userId: m.userId, role: m.role },
        });
        await ctx.workspaceService.memberRemoved(a.ws._id, m.userId);
        return { body: { ok: true } };
      },
    }),

    // --- agents ------------------------------------------------------------------------------

    route({
      method: 'GET',
      path: '/api/workspaces/:workspace/agents',
      auth: 'session',
      summary: 'The agents of a workspace (DID, name, whether it is their primary workspace)',
      tags: ['workspaces'],
      params: wsParams,
      handler: async (r) => {
        const a = await access(r.principal!, r.params.workspace);
        need(a, 'viewAgents', 'viewing agents');
        const ms = await c.workspaceAgents.find({ workspaceId: a.ws._id }, { sort: { joinedAt: 1, _id: 1 } });
        const agents = await c.agents.find({ _id: { $in: ms.map((m) => m.agentDid) } }, { projection: { name: 1 } });
        const names = new Map(agents.map((ag) => [ag._id, ag.name]));
        return { body: { agents: ms.map((m) => agentView(m, names.get(m.agentDid) ?? null)) } };
      },
    }),

    route({
      method: 'POST',
      path: '/api/workspaces/:workspace/agents',
      auth: 'user',
      summary:
        'Adds an agent (workspace admin or global admin); its first workspace is primary, isPrimary moves the primary here. ' +
        'When the agent is managed elsewhere, the caller must also administer its primary workspace',
      tags: ['workspaces'],
      successStatus: 201,
      params: wsParams,
      body: z.strictObject({ agentDid: z.string().min(1).max(512), isPrimary: z.boolean().optional() }),
      handler: async (r) => {
        const p = personOf(r);
        const a = await access(p, r.params.workspace);
        need(a, 'manageWorkspaceAgents', 'adding agents');
        const { agentDid } = r.body;
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
        if (existing && !(r.body.isPrimary && !existing.isPrimary)) {
          throw conflict(`agent ${agentDid} is already in workspace ${a.ws.slug}`, 'already_member');
        }
        if (existing) await setAgentPrimary(c, agentDid, a.ws._id);
        else await addAgentToWorkspace(c, agentDid, a.ws._id, r.body.isPrimary ?? false);
        const m = (await c.workspaceAgents.findOne({ workspaceId: a.ws._id, agentDid }))!;
        await ctx.audit.record(p, {
          action: existing ? 'workspace.agent.primary' : 'workspace.agent.add',
          targetType: 'workspace',
          target: a.ws._id,
          details: { agentDid, isPrimary: m.isPrimary, previousPrimary: primary?._id ?? null },
        });
        await ctx.workspaceService.agentMembershipChanged(a.ws._id, agentDid);
        return { status: existing ? 200 : 201, body: { agent: agentView(m, agent.name) } };
      },
    }),

    route({
      method: 'DELETE',
      path: '/api/workspaces/:workspace/agents/:agentDid',
      auth: 'user',
      summary:
        "Removes an agent from a workspace (workspace admin or global admin). Its primary membership goes only with " +
        '?primary=<workspace> naming another of its workspaces; the last one never',
      tags: ['workspaces'],
      params: agentParams,
      query: z.object({ primary: z.string().min(1).max(200).optional().describe('Id or slug of the workspace that becomes primary') }),
      handler: async (r) => {
        const p = personOf(r);
        const a = await access(p, r.params.workspace);
        need(a, 'manageWorkspaceAgents', 'removing agents');
        const { agentDid } = r.params;
        const m = await c.workspaceAgents.findOne({ workspaceId: a.ws._id, agentDid });
        if (!m) throw notFound(`agent ${agentDid} is not in workspace ${a.ws.slug}`);
        let newPrimary: WorkspaceDoc | null = null;
        if (m.isPrimary) {
          const others = await c.workspaceAgents.count({ agentDid, workspaceId: { $ne: a.ws._id } });
          if (others === 0) {
            throw badRequest(`workspace ${a.ws.slug} is the only workspace of agent ${agentDid}; add it to another one first`, 'last_workspace');
          }
          if (!r.query.primary) {
            throw badRequest(`workspace ${a.ws.slug} is the primary workspace of agent ${agentDid}; name the new one with ?primary=`, 'primary_required');
          }
          newPrimary = await resolveWorkspace(c, r.query.primary);
          // A workspace the caller cannot see is answered like one the agent is not in.
          const seen = newPrimary && (a.who.isGlobalAdmin || (await memberRole(c, p.userId, newPrimary._id)) !== null);
          const ok = seen && newPrimary!._id !== a.ws._id && (await c.workspaceAgents.count({ agentDid, workspaceId: newPrimary!._id })) > 0;
          if (!ok) throw badRequest(`primary: agent ${agentDid} is not in workspace ${r.query.primary}`, 'invalid_primary');
          await setAgentPrimary(c, agentDid, newPrimary!._id);
        }
        await c.workspaceAgents.deleteOne({ _id: m._id });
        await ctx.audit.record(p, {
          action: 'workspace.agent.remove',
          targetType: 'workspace',
          target: a.ws._id,
          details: { agentDid, wasPrimary: m.isPrimary, newPrimary: newPrimary?._id ?? null },
        });
        await ctx.workspaceService.agentMembershipChanged(a.ws._id, agentDid);
        return { body: { ok: true } };
      },
    }),

    // --- the caller's own list ----------------------------------------------------------------

    route({
      method: 'GET',
      path: '/api/me/workspaces',
      auth: 'session',
      summary:
        "The caller's workspaces (all of them for a global admin) with isPrimary and isAdmin; for an agent's session, the workspaces the agent belongs to (isAdmin false)",
      tags: ['workspaces'],
      handler: async (r) => {
        const p = r.principal!;
        const [ids, mine] = await Promise.all([
          visibleWorkspaceIds(c, p),
          p.kind === 'user'
            ? c.workspaceMembers
                .find({ userId: p.userId })
                .then((ms) => ms.map((m) => ({ workspaceId: m.workspaceId, isPrimary: m.isPrimary, admin: atLeast(m.role, 'admin') })))
            : c.workspaceAgents
                .find({ agentDid: p.did })
                .then((ms) => ms.map((m) => ({ workspaceId: m.workspaceId, isPrimary: m.isPrimary, admin: false }))),
        ]);
        const list = await c.workspaces.find(ids === 'all' ? {} : { _id: { $in: ids } }, { sort: { name: 1, _id: 1 } });
        const membership = new Map(mine.map((m) => [m.workspaceId, m]));
        const globalAdmin = p.kind === 'user' && p.isAdmin;
        const items = list.map((ws) => {
          const m = membership.get(ws._id);
          return {
            id: ws._id,
            name: ws.name,
            slug: ws.slug,
            isPrimary: m?.isPrimary ?? false,
            isAdmin: globalAdmin || (m?.admin ?? false),
          };
        });
        items.sort((x, y) => Number(y.isPrimary) - Number(x.isPrimary));
        return { body: { workspaces: items } };
      },
    }),
  ];
}

function memberViewOf(m: WorkspaceMemberDoc, u: { _id: string; did: string | null; name: string; email: string } | null) {
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
