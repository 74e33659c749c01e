/**
 * Agent LLM configuration (interface §2.3, §4.3):
 *
 *   GET    /api/agents/:id/llm-config     session  {config: {provider, baseUrl, model, apiKeySet}}
 *   PUT    /api/agents/:id/llm-config     user     {ok, pushed, config: {provider, model, apiKeySet}}
 *   DELETE /api/agents/:id/llm-config     user     {ok, pushed}
 *   GET    /api/agents/:id/workspace-llm  session  {proxyConfigured, proxyBaseUrl, workspaces}
 *
 * `:id` is the agent's DID (the fleet's routes name that position `:id`). Reading needs sight of
 * the agent: a global admin, a member of one of its workspaces, or the agent itself. Changing
 * needs the admin role in the agent's primary workspace (which manages it), or global admin.
 * An agent the caller cannot see answers 404, like one that does not exist.
 */
import { z } from 'zod';
import { route, type RequestContext, type RouteDef } from '../router.js';
import { badRequest, forbidden, notFound } from '../../domain/errors.js';
import { isAdminLike } from '../../domain/permissions.js';
import type { RouteContext } from './context.js';
import type { Principal, UserPrincipal } from '../../domain/principal.js';
import { atLeast } from '../../domain/permissions.js';
import type { AgentDoc } from '../../store/collections.js';
import { agentWorkspaceIds, memberRole, primaryWorkspaceOf } from '../../services/workspaces.js';
import type { AgentLlmInput, ModelService } from '../../services/models.js';
import { apiKeySchema, baseUrlSchema, providerSchema } from './models.js';

const params = z.object({ id: z.string().min(1).max(512).describe("The agent's DID, percent-encoded") });

const putBody = z
  .strictObject({
    workspaceId: z.string().min(1).max(200).optional().describe('Workspace routing: the workspace (id or slug) whose virtual key the agent uses'),
    workspaceModelId: z.string().min(1).max(100).optional().describe('Workspace routing: a registry model granted to that workspace'),
    registryModelId: z.string().min(1).max(100).optional().describe("Registry shortcut: the model, with its stored API key"),
    provider: providerSchema.optional().describe('Manual'),
    model: z.string().trim().min(1).max(200).optional().describe('Manual'),
    baseUrl: baseUrlSchema.optional().describe('Manual (required for openai-compatible)'),
    apiKey: apiKeySchema.optional().describe('Manual: the provider key; stored encrypted, never returned'),
    systemPrompt: z.string().max(100_000).optional().describe('Any mode: the system prompt; left out keeps the current one'),
  })
  .transform((b, ctx): AgentLlmInput => {
    const workspaceFields = b.workspaceId !== undefined || b.workspaceModelId !== undefined;
    const registryFields = b.registryModelId !== undefined;
    const manualFields = b.provider !== undefined || b.model !== undefined || b.baseUrl !== undefined || b.apiKey !== undefined;
    const modes = [workspaceFields, registryFields, manualFields].filter(Boolean).length;
    const fail = (path: string | null, message: string) => {
      ctx.addIssue({ code: 'custom', path: path ? [path] : [], message });
      return z.NEVER;
    };
    if (modes === 0) {
      return fail(null, 'give workspaceId and workspaceModelId (workspace routing), registryModelId (registry shortcut), or provider and model (manual)');
    }
    if (modes > 1) {
      return fail(null, 'one mode at a time: workspaceId + workspaceModelId, or registryModelId, or provider + model + baseUrl');
    }
    const systemPrompt = b.systemPrompt;
    if (workspaceFields) {
      if (b.workspaceId === undefined) return fail('workspaceId', 'required with workspaceModelId');
      if (b.workspaceModelId === undefined) return fail('workspaceModelId', 'required with workspaceId');
      return { mode: 'workspace', workspace: b.workspaceId, workspaceModelId: b.workspaceModelId, systemPrompt };
    }
    if (registryFields) return { mode: 'registry', registryModelId: b.registryModelId!, systemPrompt };
    if (b.provider === undefined) return fail('provider', 'required in manual mode');
    if (b.model === undefined) return fail('model', 'required in manual mode');
    return { mode: 'manual', provider: b.provider, model: b.model, baseUrl: b.baseUrl, apiKey: b.apiKey, systemPrompt };
  });

export function llmConfigRoutes(ctx: RouteContext, models: ModelService): RouteDef[] {
  const { c } = ctx;

  /** The agent when the caller may see it; 404 otherwise. */
  const visibleAgent = async (p: Principal, did: string): Promise<AgentDoc> => {
    const agent = await c.agents.findById(did);
    if (!agent) throw notFound(`no agent ${did}`);
    if (p.kind === 'agent') {
      if (p.did !== did) throw notFound(`no agent ${did}`);
      return agent;
    }
    if (p.isAdmin) return agent;
    const wsIds = await agentWorkspaceIds(c, did);
    if ((await c.workspaceMembers.count({ userId: p.userId, workspaceId: { $in: wsIds } })) === 0) throw notFound(`no agent ${did}`);
    return agent;
  };

  /** The agent when the caller may change its config: admin of its primary workspace, or global admin. */
  const managedAgent = async (r: RequestContext<{ id: string }>): Promise<{ p: UserPrincipal; agent: AgentDoc }> => {
    const p = r.principal as UserPrincipal;
    const agent = await visibleAgent(p, r.params.id);
    if (!p.isAdmin) {
      const primary = await primaryWorkspaceOf(c, agent._id);
      if (!primary || !atLeast(await memberRole(c, p.userId, primary._id), 'admin')) {
        throw forbidden(`changing the LLM config of agent ${agent._id} needs the admin role in its primary workspace${primary ? ` ${primary.slug}` : ''} (or global admin)`);
      }
    }
    if (agent.status === 'rejected') throw badRequest(`agent ${agent._id} was rejected; it cannot be configured`, 'agent_rejected');
    return { p, agent };
  };

  const view = z.object({ provider: z.string().nullable(), baseUrl: z.string().nullable(), model: z.string().nullable(), apiKeySet: z.boolean() });

  return [
    route({
      method: 'GET',
      path: '/api/agents/:id/llm-config',
      auth: 'session',
      summary: "The agent's stored LLM config, key masked (apiKeySet); null fields when none is stored",
      tags: ['models'],
      params,
      response: z.object({ config: view }),
      handler: async (r) => ({ body: { config: await models.agentView(await visibleAgent(r.principal!, r.params.id)) } }),
    }),

    route({
      method: 'PUT',
      path: '/api/agents/:id/llm-config',
      auth: 'user',
      summary: 'Sets the LLM config in one of three modes (workspace routing, registry shortcut, manual); pushed is true when the online agent received it at once',
      tags: ['models'],
      params,
      body: putBody,
      response: z.object({ ok: z.literal(true), pushed: z.boolean(), config: z.object({ provider: z.string(), model: z.string(), apiKeySet: z.boolean() }) }),
      handler: async (r) => {
        const { p, agent } = await managedAgent(r);
        const out = await models.setAgentConfig(p, agent, r.body, isAdminLike(p));
        return { body: { ok: true, pushed: out.pushed, config: out.config } };
      },
    }),

    route({
      method: 'DELETE',
      path: '/api/agents/:id/llm-config',
      auth: 'user',
      summary: 'Removes the stored LLM config (the agent falls back to its environment); pushed is true when the online agent received the cleared config',
      tags: ['models'],
      params,
      response: z.object({ ok: z.literal(true), pushed: z.boolean() }),
      handler: async (r) => {
        const { p, agent } = await managedAgent(r);
        const out = await models.clearAgentConfig(p, agent);
        return { body: { ok: true, pushed: out.pushed } };
      },
    }),

    route({
      method: 'GET',
      path: '/api/agents/:id/workspace-llm',
      auth: 'session',
      summary: "The agent's workspaces (primary first) with their granted models and whether each has a virtual key",
      tags: ['models'],
      params,
      handler: async (r) => {
        const agent = await visibleAgent(r.principal!, r.params.id);
        return { body: await models.workspaceLlm(agent._id) };
      },
    }),
  ];
}
