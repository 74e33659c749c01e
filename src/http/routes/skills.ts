/**
 * Skills (interface §2.11, §4.9, §7): the global list and create, a workspace's skills, per-agent
 * overrides, and the external skills library (catalogue, SKILL.md content, one-call install).
 * docs/skills.md describes every route, status and decision.
 *
 * Access (membership to read, the workspace admin role to change) and auditing are the skill
 * service's (src/services/skills.ts).
 */
import { z } from 'zod';
import { route, type RouteDef } from '../router.js';
import { personOf } from '../auth.js';
import {
  AgentSkillView,
  MAX_SKILL_CONTENT,
  OverrideView,
  SkillListRow,
  SkillRow,
  SkillView,
  UpdatedSkillView,
  toOverrideView,
  toRow,
  toUpdatedView,
  toView,
  type SkillService,
} from '../../services/skills.js';
import { CatalogueEntry, skillIdSchema, sourceSchema } from '../../integrations/skills-library.js';
import { Ok } from '../answers.js';

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

const overrideAnswer = z.strictObject({ override: OverrideView });

export function skillRoutes({ skills }: { skills: SkillService }): RouteDef[] {
  return [
    // --- global list and create (§4.9) -----------------------------------------------------------

    route({
      method: 'GET',
      path: '/api/skills',
      auth: 'globalAdmin',
      summary: 'Every skill as a raw row with workspace_name, agent_count and override_count',
      tags: ['skills'],
      responses: { 200: z.array(SkillListRow) },
      handler: async () => ({ body: await skills.listAll() }),
    }),

    route({
      method: 'POST',
      path: '/api/skills',
      auth: 'globalAdmin',
      summary: 'Creates a skill in a workspace (400 no workspaceId or blank name, 404 unknown workspace, 409 name taken)',
      tags: ['skills'],
      responses: { 201: SkillRow },
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
        const { workspaceId, ...input } = r.body;
        return { status: 201, body: toRow(await skills.createIn(r.principal!, workspaceId, input)) };
      },
    }),

    // --- the library -----------------------------------------------------------------------------

    route({
      method: 'GET',
      path: '/api/skills/library',
      auth: 'globalAdmin',
      summary: 'Catalogue entries of the external skills library (cached 1 hour; X-Skills-Library-Stale: true when a refresh failed)',
      tags: ['skills'],
      responses: { 200: z.array(CatalogueEntry) },
      handler: async () => {
        const cat = await skills.catalogue();
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
      responses: { 200: z.strictObject({ content: z.string(), url: z.string() }) },
      handler: async (r) => {
        const file = await skills.libraryFile(r.query.source, r.query.skillId);
        return { body: { content: file.content, url: file.url } };
      },
    }),

    route({
      method: 'POST',
      path: '/api/skills/library/install',
      auth: 'globalAdmin',
      summary: 'Installs a library skill into a workspace in one call: reads its SKILL.md and creates the skill (201 raw row)',
      tags: ['skills'],
      responses: { 201: SkillRow },
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
      handler: async (r) => ({ status: 201, body: toRow(await skills.install(r.principal!, r.body)) }),
    }),

    // --- a workspace's skills --------------------------------------------------------------------

    route({
      method: 'GET',
      path: '/api/workspaces/:workspace/skills',
      auth: 'session',
      summary: "A workspace's skills in camelCase, without content (any member)",
      tags: ['skills'],
      params: wsParams,
      responses: { 200: z.strictObject({ skills: z.array(SkillView) }) },
      handler: async (r) => ({ body: { skills: (await skills.listIn(r.principal!, r.params.workspace)).map(toView) } }),
    }),

    route({
      method: 'GET',
      path: '/api/workspaces/:workspace/skills/:skillId',
      auth: 'session',
      summary: 'One skill in camelCase, without content (any member; 403 non-member; 404 missing or in another workspace)',
      tags: ['skills'],
      params: skillParams,
      responses: { 200: z.strictObject({ skill: SkillView }) },
      handler: async (r) => ({ body: { skill: toView(await skills.getIn(r.principal!, r.params.workspace, r.params.skillId)) } }),
    }),

    route({
      method: 'PATCH',
      path: '/api/workspaces/:workspace/skills/:skillId',
      auth: 'user',
      summary: 'Edits a skill (workspace admin or global admin); answers the updated skill in camelCase with content',
      tags: ['skills'],
      params: skillParams,
      responses: { 200: UpdatedSkillView },
      body: z.strictObject({
        description: description.nullable().optional(),
        version: version.nullable().optional(),
        isRequired: z.boolean().optional(),
        config: configSchema.optional(),
        content: content.nullable().optional(),
      }),
      handler: async (r) => ({ body: toUpdatedView(await skills.updateIn(personOf(r), r.params.workspace, r.params.skillId, r.body)) }),
    }),

    route({
      method: 'DELETE',
      path: '/api/workspaces/:workspace/skills/:skillId',
      auth: 'user',
      summary: 'Deletes a skill and its overrides (workspace admin or global admin; 403 others; 404 missing)',
      tags: ['skills'],
      params: skillParams,
      responses: { 200: Ok },
      handler: async (r) => {
        await skills.removeIn(personOf(r), r.params.workspace, r.params.skillId);
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
      responses: { 200: z.strictObject({ overrides: z.array(OverrideView) }) },
      handler: async (r) => {
        const { skill, overrides } = await skills.overridesIn(r.principal!, r.params.workspace, r.params.skillId);
        return { body: { overrides: overrides.map((o) => toOverrideView(o, skill)) } };
      },
    }),

    route({
      method: 'GET',
      path: '/api/workspaces/:workspace/skills/:skillId/overrides/:agentDid',
      auth: 'session',
      summary: "One agent's override of a skill (any member; 404 when the agent has none)",
      tags: ['skills'],
      params: overrideParams,
      responses: { 200: overrideAnswer },
      handler: async (r) => {
        const { skill, override } = await skills.overrideIn(r.principal!, r.params.workspace, r.params.skillId, r.params.agentDid);
        return { body: { override: toOverrideView(override, skill) } };
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
      responses: { 200: overrideAnswer, 201: overrideAnswer },
      handler: async (r) => {
        const { skill, override, created } = await skills.setOverrideIn(personOf(r), r.params.workspace, r.params.skillId, r.params.agentDid, r.body);
        return { status: created ? 201 : 200, body: { override: toOverrideView(override, skill) } };
      },
    }),

    route({
      method: 'DELETE',
      path: '/api/workspaces/:workspace/skills/:skillId/overrides/:agentDid',
      auth: 'user',
      summary: "Removes an agent's override of a skill (workspace admin or global admin; 404 when it has none)",
      tags: ['skills'],
      params: overrideParams,
      responses: { 200: Ok },
      handler: async (r) => {
        await skills.removeOverrideIn(personOf(r), r.params.workspace, r.params.skillId, r.params.agentDid);
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
      responses: { 200: z.strictObject({ skills: z.array(AgentSkillView) }) },
      handler: async (r) => ({ body: { skills: await skills.effectiveFor(r.principal!, r.params.workspace, r.params.agentDid) } }),
    }),
  ];
}
