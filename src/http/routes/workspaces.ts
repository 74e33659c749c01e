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
import { route, type RouteDef } from '../router.js';
import { personOf } from '../auth.js';
import { WORKSPACE_ROLES, type WorkspaceRole } from '../../domain/roles.js';
import { SLUG_RE } from '../../domain/slugs.js';
import {
  COLOR_RE,
  MyWorkspaceView,
  WorkspaceAgentView,
  WorkspaceMemberView,
  WorkspaceView,
  normalizeColor,
  toWorkspaceView,
  type WorkspaceService,
} from '../../services/workspaces.js';
import { Ok } from '../answers.js';

const workspaceAnswer = z.strictObject({ workspace: WorkspaceView });
const memberAnswer = z.strictObject({ member: WorkspaceMemberView });
const agentAnswer = z.strictObject({ agent: WorkspaceAgentView });

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

export function workspaceRoutes({ workspaces }: { workspaces: WorkspaceService }): RouteDef[] {
  return [
    route({
      method: 'POST',
      path: '/api/workspaces',
      auth: 'globalAdmin',
      summary: 'Creates a workspace (slug derived from the name when absent; 409 when taken)',
      tags: ['workspaces'],
      body: z.strictObject({ name, slug: slug.optional(), description: description.optional(), color: color.optional() }),
      responses: { 201: workspaceAnswer },
      handler: async (r) => ({ status: 201, body: { workspace: toWorkspaceView(await workspaces.create(personOf(r), r.body)) } }),
    }),

    route({
      method: 'GET',
      path: '/api/workspaces',
      auth: 'session',
      summary: 'Workspaces the caller may see: all for a global admin, else the ones they belong to',
      tags: ['workspaces'],
      responses: { 200: z.strictObject({ workspaces: z.array(WorkspaceView) }) },
      handler: async (r) => ({ body: { workspaces: (await workspaces.list(r.principal!)).map(toWorkspaceView) } }),
    }),

    route({
      method: 'GET',
      path: '/api/workspaces/:workspace',
      auth: 'session',
      summary: 'One workspace by id or slug (404 when not visible)',
      tags: ['workspaces'],
      params: wsParams,
      responses: { 200: workspaceAnswer },
      handler: async (r) => ({ body: { workspace: toWorkspaceView(await workspaces.get(r.principal!, r.params.workspace)) } }),
    }),

    route({
      method: 'PATCH',
      path: '/api/workspaces/:workspace',
      auth: 'user',
      summary: "Edits a workspace's name, slug, description or colour (workspace admin or global admin)",
      tags: ['workspaces'],
      params: wsParams,
      body: z.strictObject({ name: name.optional(), slug: slug.optional(), description: description.optional(), color: color.optional() }),
      responses: { 200: workspaceAnswer },
      handler: async (r) => ({ body: { workspace: toWorkspaceView(await workspaces.update(personOf(r), r.params.workspace, r.body)) } }),
    }),

    route({
      method: 'DELETE',
      path: '/api/workspaces/:workspace',
      auth: 'user',
      summary: 'Deletes a workspace and its memberships (workspace owner or global admin; never the default one)',
      tags: ['workspaces'],
      params: wsParams,
      responses: { 200: Ok },
      handler: async (r) => {
        await workspaces.remove(personOf(r), r.params.workspace);
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
      responses: { 200: z.strictObject({ members: z.array(WorkspaceMemberView) }) },
      handler: async (r) => ({ body: { members: await workspaces.members(personOf(r), r.params.workspace) } }),
    }),

    route({
      method: 'POST',
      path: '/api/workspaces/:workspace/members',
      auth: 'user',
      summary: 'Adds a person with a role (workspace admin or global admin; owner only by an owner); 409 when already a member',
      tags: ['workspaces'],
      params: wsParams,
      responses: { 201: memberAnswer },
      body: z.strictObject({
        userDid: z.string().min(1).max(512).describe("The user's DID (an unclaimed user: their id)"),
        role,
      }),
      handler: async (r) => ({ status: 201, body: { member: await workspaces.addMember(personOf(r), r.params.workspace, r.body.userDid, r.body.role) } }),
    }),

    route({
      method: 'PATCH',
      path: '/api/workspaces/:workspace/members/:member',
      auth: 'user',
      summary: "Changes a member's role (workspace admin or global admin; the owner role only by an owner)",
      tags: ['workspaces'],
      params: memberParams,
      body: z.strictObject({ role }),
      responses: { 200: memberAnswer },
      handler: async (r) => ({ body: { member: await workspaces.changeRole(personOf(r), r.params.workspace, r.params.member, r.body.role) } }),
    }),

    route({
      method: 'DELETE',
      path: '/api/workspaces/:workspace/members/:member',
      auth: 'user',
      summary: 'Removes a member (workspace admin or global admin, or the member leaving; an owner only by an owner)',
      tags: ['workspaces'],
      params: memberParams,
      responses: { 200: Ok },
      handler: async (r) => {
        await workspaces.removeMember(personOf(r), r.params.workspace, r.params.member);
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
      responses: { 200: z.strictObject({ agents: z.array(WorkspaceAgentView) }) },
      handler: async (r) => ({ body: { agents: await workspaces.agents(r.principal!, r.params.workspace) } }),
    }),

    route({
      method: 'POST',
      path: '/api/workspaces/:workspace/agents',
      auth: 'user',
      summary:
        'Adds an agent (workspace admin or global admin); its first workspace is primary, isPrimary moves the primary here. ' +
        'When the agent is managed elsewhere, the caller must also administer its primary workspace',
      tags: ['workspaces'],
      params: wsParams,
      responses: { 200: agentAnswer, 201: agentAnswer },
      body: z.strictObject({ agentDid: z.string().min(1).max(512), isPrimary: z.boolean().optional() }),
      handler: async (r) => {
        const { agent, created } = await workspaces.addAgent(personOf(r), r.params.workspace, r.body.agentDid, r.body.isPrimary);
        return { status: created ? 201 : 200, body: { agent } };
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
      responses: { 200: Ok },
      handler: async (r) => {
        await workspaces.removeAgent(personOf(r), r.params.workspace, r.params.agentDid, r.query.primary);
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
      responses: { 200: z.strictObject({ workspaces: z.array(MyWorkspaceView) }) },
      handler: async (r) => ({ body: { workspaces: await workspaces.mine(r.principal!) } }),
    }),
  ];
}

