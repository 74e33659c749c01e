/**
 * The agents' LLM configuration (interface §2.3, §4.3; docs/models.md): three modes — a
 * workspace's virtual key through the model proxy, a registry model with its stored key, or a
 * provider set by hand — and the `llm_config` frame that carries it to the agent, pushed at
 * connect and whenever it changes (the AgentLink port).
 *
 * - Reading a config needs sight of the agent: a global admin, a member of one of its workspaces,
 *   or the agent itself; anyone else gets 404, as for an agent that does not exist. Changing it
 *   needs the admin role in the agent's primary workspace (which manages it), or global admin.
 * - Keys are sealed with associated data naming their record (src/domain/models.ts) and opened
 *   only to build the frame pushed on the agent's authenticated socket.
 * - A config that points at something that goes away (a revoked or deleted model, a workspace
 *   the agent left or that was deleted) is cleared, and the agent, when online, gets the cleared
 *   config.
 */
import { z } from 'zod';
import type { ServiceCore } from './core.js';
import type { AgentDoc, Collections, ModelDoc } from '../store/collections.js';
import type { Filter } from '../store/types.js';
import type { Principal, UserPrincipal } from '../domain/principal.js';
import { badRequest, conflict, forbidden, notFound } from '../domain/errors.js';
import { atLeast, isAdminLike } from '../domain/permissions.js';
import { OPENAI_COMPATIBLE, agentKeyAd, modelKeyAd, workspaceKeyAd } from '../domain/models.js';
import type { LlmConfig, LlmConfigFrame } from '../domain/agent-protocol.js';
import { groupBy } from '../domain/group.js';
import type { LiteLlmClient } from '../integrations/litellm.js';
import { agentWorkspaceIds, memberRole, primaryWorkspaceOf, resolveWorkspace } from './workspaces.js';
import type { AgentLink } from './ports.js';

/** The three body modes of PUT /api/agents/{did}/llm-config. */
export type AgentLlmInput =
  | { mode: 'workspace'; workspace: string; workspaceModelId: string; systemPrompt?: string }
  | { mode: 'registry'; registryModelId: string; systemPrompt?: string }
  | { mode: 'manual'; provider: string; model: string; baseUrl?: string; apiKey?: string; systemPrompt?: string };

/** GET /api/agents/{did}/llm-config (interface §2.3): the key masked. Fields are null when no config is stored. */
export const AgentLlmView = z
  .strictObject({
    provider: z.string().nullable(),
    baseUrl: z.string().nullable().meta({ description: "'' when the provider's default applies" }),
    model: z.string().nullable(),
    apiKeySet: z.boolean().meta({ description: 'Whether a key applies; the key itself is never shown' }),
  })
  .meta({ id: 'AgentLlmConfig' });
export type AgentLlmView = z.infer<typeof AgentLlmView>;

/** The config part of the answer to PUT /api/agents/{did}/llm-config. */
export const AgentLlmSet = z.strictObject({ provider: z.string(), model: z.string(), apiKeySet: z.boolean() });
export type AgentLlmSet = z.infer<typeof AgentLlmSet>;

/** GET /api/agents/{did}/workspace-llm: the agent's workspaces (primary first) with their granted models. */
export const WorkspaceLlmView = z.strictObject({
  proxyConfigured: z.boolean(),
  proxyBaseUrl: z.string().meta({ description: "'' without the model proxy" }),
  workspaces: z.array(
    z.strictObject({
      workspaceId: z.string(),
      workspaceName: z.string(),
      isPrimary: z.boolean(),
      hasVirtualKey: z.boolean(),
      models: z.array(z.strictObject({ id: z.string(), name: z.string(), provider: z.string(), modelId: z.string(), proxyModelName: z.string() })),
    }),
  ),
});
export type WorkspaceLlmView = z.infer<typeof WorkspaceLlmView>;


/** The model part of an agent's config; the system prompt is not about the model and survives a model going away. */
const MODEL_CLEARED: Partial<AgentDoc> = {
  llmSource: null,
  llmProvider: null,
  llmModel: null,
  llmBaseUrl: null,
  llmWorkspaceId: null,
  llmRegistryModelId: null,
  llmApiKeySealed: null,
};
const CLEARED: Partial<AgentDoc> = { ...MODEL_CLEARED, llmSystemPrompt: null };

const PUSH_CHUNK = 200;

/** Per-batch memo of what several frames share (workspace keys, registry models). */
class FrameCache {
  readonly keys = new Map<string, Promise<{ apiKey: string; models: string[] } | null>>();
  readonly models = new Map<string, Promise<ModelDoc | null>>();
}

/** A registry model; 404 `model_not_found` when there is none. */
export async function modelById(c: Collections, id: string): Promise<ModelDoc> {
  const m = await c.models.findById(id);
  if (!m) throw notFound(`no model ${id}`, 'model_not_found');
  return m;
}

/** Whether a workspace has a virtual key (the proxy's key scoped to its granted models). */
export async function hasVirtualKey(c: Collections, workspaceId: string): Promise<boolean> {
  return (await c.workspaceLlmKeys.count({ _id: workspaceId })) > 0;
}

export class AgentLlmConfig {
  private readonly agents: AgentLink;
  /** The proxy client; null when PROXY_BASE_URL and PROXY_MASTER_KEY are not both set. */
  private readonly proxy: LiteLlmClient | null;
  /**
   * Agents that finished their handshake since the last batch: they get their llm_config
   * together, a turn of the event loop later, so that ten thousand agents reconnecting at once
   * cost a read per chunk, not one per agent.
   */
  private readyWaiting: string[] = [];
  private readonly changedHooks: Array<(dids: readonly string[]) => void> = [];
  private readyBatch: Promise<void> | null = null;

  constructor(
    private readonly ctx: ServiceCore,
    deps: { agents: AgentLink; proxy: LiteLlmClient | null },
  ) {
    this.agents = deps.agents;
    this.proxy = deps.proxy;
  }

  /** Runs `fn` after agents' stored LLM settings changed (their provider and model are list fields). */
  onAgentsChanged(fn: (dids: readonly string[]) => void): void {
    this.changedHooks.push(fn);
  }

  private emitChanged(dids: readonly string[]): void {
    for (const fn of this.changedHooks) fn(dids);
  }

  // -------------------------------------------------------------------------------------------
  // The routes' operations

  /** GET /api/agents/{did}/llm-config: the stored config, its key masked. */
  async view(p: Principal, did: string): Promise<AgentLlmView> {
    return this.agentView(await this.visibleAgent(p, did));
  }

  /** PUT: stores a config in one of the three modes and pushes it when the agent is online. */
  async set(p: UserPrincipal, did: string, input: AgentLlmInput) {
    return this.setAgentConfig(p, await this.managedAgent(p, did), input, isAdminLike(p));
  }

  /** DELETE: removes the stored config; the agent falls back to its environment. */
  async clear(p: UserPrincipal, did: string): Promise<{ pushed: boolean; removed: boolean }> {
    return this.clearAgentConfig(p, await this.managedAgent(p, did));
  }

  /** GET /api/agents/{did}/workspace-llm. */
  async workspaceLlmOf(p: Principal, did: string): Promise<WorkspaceLlmView> {
    return this.workspaceLlm((await this.visibleAgent(p, did))._id);
  }

  /** The agent when the caller may see it; 404 otherwise. */
  private async visibleAgent(p: Principal, did: string): Promise<AgentDoc> {
    const { c } = this.ctx;
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
  }

  /** The agent when the caller may change its config: admin of its primary workspace, or global admin. */
  private async managedAgent(p: UserPrincipal, did: string): Promise<AgentDoc> {
    const { c } = this.ctx;
    const agent = await this.visibleAgent(p, did);
    if (!p.isAdmin) {
      const primary = await primaryWorkspaceOf(c, agent._id);
      if (!primary || !atLeast(await memberRole(c, p.userId, primary._id), 'admin')) {
        throw forbidden(`changing the LLM config of agent ${agent._id} needs the admin role in its primary workspace${primary ? ` ${primary.slug}` : ''} (or global admin)`);
      }
    }
    if (agent.status === 'rejected') throw badRequest(`agent ${agent._id} was rejected; it cannot be configured`, 'agent_rejected');
    return agent;
  }

  // -------------------------------------------------------------------------------------------
  // Configs

  async agentView(agent: AgentDoc): Promise<AgentLlmView> {
    if (!agent.llmSource) return { provider: null, baseUrl: null, model: null, apiKeySet: false };
    return {
      provider: agent.llmProvider ?? null,
      baseUrl: agent.llmBaseUrl ?? '',
      model: agent.llmModel ?? null,
      apiKeySet: await this.agentKeySet(agent),
    };
  }

  private async agentKeySet(agent: AgentDoc): Promise<boolean> {
    const { c } = this.ctx;
    switch (agent.llmSource) {
      case 'manual':
        return Boolean(agent.llmApiKeySealed);
      case 'registry':
        return agent.llmRegistryModelId ? Boolean((await c.models.findById(agent.llmRegistryModelId))?.apiKeySealed) : false;
      case 'workspace':
        return agent.llmWorkspaceId ? hasVirtualKey(this.ctx.c, agent.llmWorkspaceId) : false;
      default:
        return false;
    }
  }

  /**
   * Stores an agent's config in one of the three modes and pushes it when the agent is online.
   * `registryAdmin`: the caller may use any registry model (the registry's Admin level); anyone
   * else may pick only models granted to one of the agent's workspaces.
   */
  async setAgentConfig(
    p: UserPrincipal,
    agent: AgentDoc,
    input: AgentLlmInput,
    registryAdmin: boolean,
  ): Promise<{ pushed: boolean; config: AgentLlmSet }> {
    const { c } = this.ctx;
    const did = agent._id;
    const set: Partial<AgentDoc> = { ...MODEL_CLEARED, llmSystemPrompt: agent.llmSystemPrompt ?? null, llmUpdatedAt: new Date().toISOString() };
    if (input.systemPrompt !== undefined) set.llmSystemPrompt = input.systemPrompt;
    let apiKeySet: boolean;
    if (input.mode === 'workspace') {
      if (!this.proxy) throw conflict('workspace routing needs the model proxy (PROXY_BASE_URL and PROXY_MASTER_KEY)', 'proxy_not_configured');
      const ws = await resolveWorkspace(c, input.workspace);
      // An unknown workspace answers as one the agent is not in: nothing tells which exist.
      if (!ws || (await c.workspaceAgents.count({ workspaceId: ws._id, agentDid: did })) === 0) {
        throw badRequest(`body field 'workspaceId': agent ${did} is not in workspace ${input.workspace}`, 'agent_not_in_workspace');
      }
      const m = await modelById(c, input.workspaceModelId);
      if ((await c.workspaceModels.count({ workspaceId: ws._id, modelId: m._id })) === 0) {
        throw badRequest(`body field 'workspaceModelId': model ${m.name} is not granted to workspace ${ws.slug}`, 'model_not_granted');
      }
      if (m.status !== 'active') throw conflict(`model ${m.name} is inactive`, 'model_inactive');
      if (!(await hasVirtualKey(c, ws._id))) {
        throw conflict(`workspace ${ws.slug} has no virtual key; grant the model again to create it`, 'no_virtual_key');
      }
      Object.assign(set, {
        llmSource: 'workspace',
        llmProvider: OPENAI_COMPATIBLE,
        llmModel: m.proxyModelName,
        llmBaseUrl: this.proxy.baseUrl,
        llmWorkspaceId: ws._id,
        llmRegistryModelId: m._id,
      } satisfies Partial<AgentDoc>);
      apiKeySet = true;
    } else if (input.mode === 'registry') {
      const m = await modelById(c, input.registryModelId);
      if (m.status !== 'active') throw conflict(`model ${m.name} is inactive`, 'model_inactive');
      if (!registryAdmin) {
        const wsIds = await agentWorkspaceIds(c, did);
        if ((await c.workspaceModels.count({ modelId: m._id, workspaceId: { $in: wsIds } })) === 0) {
          throw forbidden(`model ${m.name} is not granted to any workspace of agent ${did}; only an admin may assign it directly`);
        }
      }
      Object.assign(set, {
        llmSource: 'registry',
        llmProvider: m.provider,
        llmModel: m.modelId,
        llmBaseUrl: m.baseUrl ?? '',
        llmRegistryModelId: m._id,
      } satisfies Partial<AgentDoc>);
      apiKeySet = m.apiKeySealed !== null;
    } else {
      if (input.provider === OPENAI_COMPATIBLE && !input.baseUrl) {
        throw badRequest(`body field 'baseUrl': required when provider is ${OPENAI_COMPATIBLE}`, 'validation_failed');
      }
      Object.assign(set, {
        llmSource: 'manual',
        llmProvider: input.provider,
        llmModel: input.model,
        llmBaseUrl: input.baseUrl ?? '',
        llmApiKeySealed: input.apiKey ? this.ctx.secrets.seal(input.apiKey, agentKeyAd(did)) : null,
      } satisfies Partial<AgentDoc>);
      apiKeySet = Boolean(input.apiKey);
    }
    const updated = await c.agents.updateOne({ _id: did }, { $set: set });
    if (updated.matched === 0) throw notFound(`no agent ${did}`);
    this.emitChanged([did]);
    await this.ctx.audit.record(p, {
      action: 'agent.llm_config.set',
      targetType: 'agent',
      target: did,
      details: {
        mode: input.mode,
        provider: set.llmProvider,
        model: set.llmModel,
        workspaceId: set.llmWorkspaceId ?? null,
        registryModelId: set.llmRegistryModelId ?? null,
        apiKeySet,
      },
    });
    const pushed = (await this.pushTo([did])) > 0;
    return { pushed, config: { provider: set.llmProvider!, model: set.llmModel!, apiKeySet } };
  }

  /** Removes an agent's stored config; the agent falls back to its environment. */
  async clearAgentConfig(p: UserPrincipal, agent: AgentDoc): Promise<{ pushed: boolean; removed: boolean }> {
    const removed = Boolean(agent.llmSource || agent.llmSystemPrompt);
    await this.ctx.c.agents.updateOne({ _id: agent._id }, { $set: { ...CLEARED, llmUpdatedAt: new Date().toISOString() } });
    this.emitChanged([agent._id]);
    await this.ctx.audit.record(p, { action: 'agent.llm_config.clear', targetType: 'agent', target: agent._id, details: { removed } });
    const pushed = (await this.pushTo([agent._id])) > 0;
    return { pushed, removed };
  }

  /** GET /api/agents/{did}/workspace-llm */
  async workspaceLlm(did: string): Promise<WorkspaceLlmView> {
    const { c } = this.ctx;
    const memberships = await c.workspaceAgents.find({ agentDid: did }, { sort: { joinedAt: 1, _id: 1 } });
    const ids = memberships.map((m) => m.workspaceId);
    const [workspaces, grants, keys] = await Promise.all([
      c.workspaces.find({ _id: { $in: ids } }),
      c.workspaceModels.find({ workspaceId: { $in: ids } }),
      c.workspaceLlmKeys.find({ _id: { $in: ids } }, { projection: { _id: 1 } }),
    ]);
    const models = await c.models.find({ _id: { $in: [...new Set(grants.map((g) => g.modelId))] } });
    const byId = new Map(models.map((m) => [m._id, m]));
    const wsById = new Map(workspaces.map((w) => [w._id, w]));
    const withKey = new Set(keys.map((k) => k._id));
    const ordered = [...memberships].sort((a, b) => Number(b.isPrimary) - Number(a.isPrimary));
    return {
      proxyConfigured: this.proxy !== null,
      proxyBaseUrl: this.proxy?.baseUrl ?? '',
      workspaces: ordered
        .filter((m) => wsById.has(m.workspaceId))
        .map((m) => ({
          workspaceId: m.workspaceId,
          workspaceName: wsById.get(m.workspaceId)!.name,
          isPrimary: m.isPrimary,
          hasVirtualKey: withKey.has(m.workspaceId),
          models: grants
            .filter((g) => g.workspaceId === m.workspaceId && byId.has(g.modelId))
            .map((g) => byId.get(g.modelId)!)
            .sort((a, b) => a.name.localeCompare(b.name) || a._id.localeCompare(b._id))
            .map((x) => ({ id: x._id, name: x.name, provider: x.provider, modelId: x.modelId, proxyModelName: x.proxyModelName })),
        })),
    };
  }

  /**
   * An agent that left the workspace it routes through loses that config; in every case it gets
   * a fresh frame, whose proxy section lists the virtual keys of its current workspaces.
   */
  async agentMembershipChanged(workspaceId: string, did: string): Promise<void> {
    const still = await this.ctx.c.workspaceAgents.count({ workspaceId, agentDid: did });
    if (still === 0) await this.clearConfigs({ _id: did, llmSource: 'workspace', llmWorkspaceId: workspaceId }, 'the agent left the workspace it routes through');
    await this.pushTo([did]);
  }

  // -------------------------------------------------------------------------------------------
  // Pushes

  /**
   * The llm_config frame for one agent (docs/models.md); `config` is empty when nothing applies.
   * `workspaceIds` are the agent's workspaces, needed only when the proxy is on.
   */
  private async frameOf(agent: AgentDoc | null, workspaceIds: readonly string[], cache: FrameCache): Promise<LlmConfigFrame> {
    const config: LlmConfig = {};
    if (agent?.llmSource) {
      config.provider = agent.llmProvider ?? '';
      config.model = agent.llmModel ?? '';
      config.baseUrl = agent.llmBaseUrl ?? '';
      config.source = agent.llmSource;
      const apiKey = await this.agentKey(agent, cache);
      if (apiKey) config.apiKey = apiKey;
      if (agent.llmWorkspaceId) config.workspaceId = agent.llmWorkspaceId;
    }
    if (agent?.llmSystemPrompt) config.systemPrompt = agent.llmSystemPrompt;
    if (this.proxy && agent) {
      const workspaces: NonNullable<LlmConfig['proxy']>['workspaces'] = [];
      for (const workspaceId of workspaceIds) {
        const key = await this.cachedKey(workspaceId, cache);
        if (key) workspaces.push({ workspaceId, apiKey: key.apiKey, models: key.models });
      }
      if (workspaces.length > 0) config.proxy = { baseUrl: this.proxy.baseUrl, workspaces };
    }
    return { type: 'llm_config', config };
  }

  private async agentKey(agent: AgentDoc, cache: FrameCache): Promise<string | null> {
    const open = (sealed: string, ad: string): string | null => {
      try {
        return this.ctx.secrets.open(sealed, ad);
      } catch (err) {
        this.ctx.log.error({ err, agentDid: agent._id }, 'a stored LLM key does not open (was STEWARD_SECRET_KEY changed?)');
        return null;
      }
    };
    switch (agent.llmSource) {
      case 'manual':
        return agent.llmApiKeySealed ? open(agent.llmApiKeySealed, agentKeyAd(agent._id)) : null;
      case 'registry': {
        const id = agent.llmRegistryModelId;
        if (!id) return null;
        let m = cache.models.get(id);
        if (!m) cache.models.set(id, (m = this.ctx.c.models.findById(id)));
        const model = await m;
        return model?.apiKeySealed ? open(model.apiKeySealed, modelKeyAd(id)) : null;
      }
      case 'workspace':
        return agent.llmWorkspaceId ? ((await this.cachedKey(agent.llmWorkspaceId, cache))?.apiKey ?? null) : null;
      default:
        return null;
    }
  }

  private cachedKey(workspaceId: string, cache: FrameCache): Promise<{ apiKey: string; models: string[] } | null> {
    let k = cache.keys.get(workspaceId);
    if (!k) {
      k = this.ctx.c.workspaceLlmKeys.findById(workspaceId).then((doc) => {
        if (!doc) return null;
        try {
          return { apiKey: this.ctx.secrets.open(doc.keySealed, workspaceKeyAd(workspaceId)), models: doc.models };
        } catch (err) {
          this.ctx.log.error({ err, workspaceId }, 'a workspace virtual key does not open (was STEWARD_SECRET_KEY changed?)');
          return null;
        }
      });
      cache.keys.set(workspaceId, k);
    }
    return k;
  }

  /**
   * Pushes llm_config to those of `dids` that are online; answers how many received it. The
   * agents (and, with the proxy on, their memberships) are read a chunk at a time, one query each.
   */
  async pushTo(dids: string[]): Promise<number> {
    const { c } = this.ctx;
    const push = this.agents;
    const online = [...new Set(dids)].filter((d) => push.isOnline(d));
    const cache = new FrameCache();
    let sent = 0;
    for (let i = 0; i < online.length; i += PUSH_CHUNK) {
      const chunk = online.slice(i, i + PUSH_CHUNK);
      const [agents, memberships] = await Promise.all([
        c.agents.find({ _id: { $in: chunk } }),
        this.proxy ? c.workspaceAgents.find({ agentDid: { $in: chunk } }, { projection: { workspaceId: 1, agentDid: 1 } }) : [],
      ]);
      const agentOf = new Map(agents.map((a) => [a._id, a]));
      const workspacesOf = groupBy(memberships, (m) => m.agentDid, (m) => m.workspaceId);
      const frames = await Promise.all(chunk.map(async (did) => [did, await this.frameOf(agentOf.get(did) ?? null, workspacesOf.get(did) ?? [], cache)] as const));
      for (const [did, frame] of frames) if (push.push(did, frame)) sent++;
    }
    return sent;
  }

  /** For when an agent completes its handshake: its llm_config goes out with the next batch. */
  agentReady(did: string): Promise<void> {
    this.readyWaiting.push(did);
    return (this.readyBatch ??= new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
      const dids = this.readyWaiting;
      this.readyWaiting = [];
      this.readyBatch = null;
      try {
        await this.pushTo(dids);
      } catch (err) {
        this.ctx.log.error({ err, agents: dids.length }, 'pushing llm_config at connect failed');
      }
    }));
  }

  /** Pushes llm_config to the online agents of some workspaces, and to `extra`; answers how many received it. */
  async pushToWorkspaces(workspaceIds: string[], extra: string[] = []): Promise<number> {
    const members = workspaceIds.length
      ? await this.ctx.c.workspaceAgents.find({ workspaceId: { $in: workspaceIds } }, { projection: { agentDid: 1 } })
      : [];
    return this.pushTo([...members.map((m) => m.agentDid), ...extra]);
  }

  /** Clears the configs of the agents matching `filter`; answers their DIDs. */
  async clearConfigs(filter: Filter, reason: string): Promise<string[]> {
    const { c } = this.ctx;
    const agents = await c.agents.find(filter, { projection: { _id: 1 } });
    if (agents.length === 0) return [];
    const dids = agents.map((a) => a._id);
    await c.agents.updateMany({ _id: { $in: dids } }, { $set: { ...MODEL_CLEARED, llmUpdatedAt: new Date().toISOString() } });
    this.emitChanged(dids);
    await this.ctx.audit.record('system', { action: 'agent.llm_config.clear', targetType: 'agent', target: null, details: { agents: dids, reason } });
    return dids;
  }
}
