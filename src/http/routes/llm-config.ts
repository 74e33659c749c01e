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
import { route, type RouteDef } from '../router.js';
import { personOf } from '../auth.js';
import { AgentLlmSet, AgentLlmView, WorkspaceLlmView, type AgentLlmConfig, type AgentLlmInput } from '../../services/llm-config.js';
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

export function llmConfigRoutes({ llmConfig }: { llmConfig: AgentLlmConfig }): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/api/agents/:id/llm-config',
      auth: 'session',
      summary: "The agent's stored LLM config, key masked (apiKeySet); null fields when none is stored",
      tags: ['models'],
      params,
      responses: { 200: z.strictObject({ config: AgentLlmView }) },
      handler: async (r) => ({ body: { config: await llmConfig.view(r.principal!, r.params.id) } }),
    }),

    route({
      method: 'PUT',
      path: '/api/agents/:id/llm-config',
      auth: 'user',
      summary: 'Sets the LLM config in one of three modes (workspace routing, registry shortcut, manual); pushed is true when the online agent received it at once',
      tags: ['models'],
      params,
      body: putBody,
      responses: { 200: z.strictObject({ ok: z.literal(true), pushed: z.boolean(), config: AgentLlmSet }) },
      handler: async (r) => {
        const out = await llmConfig.set(personOf(r), r.params.id, r.body);
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
      responses: { 200: z.strictObject({ ok: z.literal(true), pushed: z.boolean() }) },
      handler: async (r) => {
        const out = await llmConfig.clear(personOf(r), r.params.id);
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
      responses: { 200: WorkspaceLlmView },
      handler: async (r) => ({ body: await llmConfig.workspaceLlmOf(r.principal!, r.params.id) }),
    }),
  ];
}
