/**
 * Models: the registry (interface §2.2, §4.1), workspace model access with the workspaces'
 * virtual keys (§4.2), agents' LLM configuration (§2.3, §4.3), and the model proxy kept in sync
 * with all three (docs/models.md tells the whole story).
 *
 * Rules kept here:
 * - proxyModelName is `{provider}/{slug of the name}`, fixed at creation: it is the name the
 *   proxy knows, so renaming a model does not change it. It is unique.
 * - Secrets (a model's provider key, a workspace's virtual key, a manual agent key) are sealed
 *   with associated data naming their record and are only ever opened to call the proxy or to
 *   build the `llm_config` frame pushed on an agent's authenticated socket.
 * - With the proxy configured, a change is made in the proxy first; when the proxy fails the
 *   change does not happen (502) and whatever was half-made is undone, in the store and, when
 *   the request may have reached it, in the proxy.
 * - A workspace's virtual key is scoped to exactly the proxy names of its granted models. When
 *   the last one is revoked the key is deleted (LiteLLM reads an empty model list as "every
 *   model"). Key changes of one workspace are serialised.
 * - An agent config that points at something that goes away (a revoked or deleted model, a
 *   deleted workspace) is cleared, and the agent, when online, gets the cleared config.
 */
import { randomUUID } from 'node:crypto';
import { nanoid } from 'nanoid';
import type { ServiceCore } from './core.js';
import type { AgentDoc, ModelDoc, WorkspaceDoc, WorkspaceLlmKeyDoc } from '../store/collections.js';
import { DuplicateKeyError, type Filter } from '../store/types.js';
import type { UserPrincipal } from '../domain/principal.js';
import { badGateway, badRequest, conflict, forbidden, notFound } from '../domain/errors.js';
import { LiteLlmClient, ProxyError, litellmModelOf } from '../integrations/litellm.js';
import { agentWorkspaceIds, resolveWorkspace } from './workspaces.js';
import { slugify } from '../domain/slugs.js';
import type { AgentLink, PushFrame } from './ports.js';
import type { LlmConfig } from '../domain/agent-protocol.js';
import { groupBy } from '../domain/group.js';

export const OPENAI_COMPATIBLE = 'openai-compatible';

/** The registry entry as the interface shows it (§2.2), plus whether a provider key is stored. */
export interface ModelEntry {
  id: string;
  name: string;
  description?: string;
  provider: string;
  modelId: string;
  baseUrl?: string;
  status: 'active' | 'inactive';
  proxyModelName: string;
  apiKeySet: boolean;
  createdAt: string;
}

export function toModelEntry(m: ModelDoc): ModelEntry {
  return {
    id: m._id,
    name: m.name,
    ...(m.description ? { description: m.description } : {}),
    provider: m.provider,
    modelId: m.modelId,
    ...(m.baseUrl ? { baseUrl: m.baseUrl } : {}),
    status: m.status,
    proxyModelName: m.proxyModelName,
    apiKeySet: m.apiKeySealed !== null,
    createdAt: m.createdAt,
  };
}

/** `{provider}/{slug}`; null when the name gives no slug. */
export function proxyModelNameOf(provider: string, name: string): string | null {
  const slug = slugify(name);
  return slug ? `${provider}/${slug}` : null;
}

export interface CreateModelInput {
  name: string;
  provider: string;
  modelId: string;
  baseUrl?: string;
  description?: string;
  apiKey?: string;
}

export interface UpdateModelInput {
  name?: string;
  description?: string | null;
  status?: 'active' | 'inactive';
  provider?: string;
  modelId?: string;
  baseUrl?: string | null;
}

/** The three body modes of PUT /api/agents/{did}/llm-config. */
export type AgentLlmInput =
  | { mode: 'workspace'; workspace: string; workspaceModelId: string; systemPrompt?: string }
  | { mode: 'registry'; registryModelId: string; systemPrompt?: string }
  | { mode: 'manual'; provider: string; model: string; baseUrl?: string; apiKey?: string; systemPrompt?: string };

/** GET /api/agents/{did}/llm-config: the key masked. Fields are null when no config is stored. */
export interface AgentLlmView {
  provider: string | null;
  baseUrl: string | null;
  model: string | null;
  apiKeySet: boolean;
}


const modelKeyAd = (id: string) => `model-api-key:${id}`;
const workspaceKeyAd = (workspaceId: string) => `workspace-llm-key:${workspaceId}`;
const agentKeyAd = (did: string) => `agent-llm-key:${did}`;

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

export class ModelService {
  /** The proxy client; null when PROXY_BASE_URL and PROXY_MASTER_KEY are not both set. */
  readonly proxy: LiteLlmClient | null;
  private readonly locks = new Map<string, Promise<void>>();
  /**
   * Agents that finished their handshake since the last batch: they get their llm_config
   * together, a turn of the event loop later, so that ten thousand agents reconnecting at once
   * cost a read per chunk, not one per agent.
   */
  private readyWaiting: string[] = [];
  private readyBatch: Promise<void> | null = null;

  constructor(
    private readonly ctx: ServiceCore,
    private readonly agents: AgentLink,
  ) {
    const { proxyBaseUrl, proxyMasterKey, proxyTimeoutMs, proxyIncomplete } = ctx.config;
    this.proxy = proxyBaseUrl && proxyMasterKey ? new LiteLlmClient({ baseUrl: proxyBaseUrl, masterKey: proxyMasterKey, timeoutMs: proxyTimeoutMs }) : null;
    if (proxyIncomplete) ctx.log.warn({ missing: proxyIncomplete }, `the model proxy is off: ${proxyIncomplete} is not set`);
  }

  // -------------------------------------------------------------------------------------------
  // Registry

  async list(): Promise<ModelDoc[]> {
    return this.ctx.c.models.find({}, { sort: { createdAt: 1, _id: 1 } });
  }

  async get(id: string): Promise<ModelDoc> {
    const m = await this.ctx.c.models.findById(id);
    if (!m) throw notFound(`no model ${id}`, 'model_not_found');
    return m;
  }

  async create(p: UserPrincipal, input: CreateModelInput): Promise<ModelDoc> {
    const { c } = this.ctx;
    const proxyModelName = proxyModelNameOf(input.provider, input.name);
    if (!proxyModelName) throw badRequest(`body field 'name': '${input.name}' gives no slug; use letters or digits`, 'validation_failed');
    const id = randomUUID();
    const now = new Date().toISOString();
    const doc: ModelDoc = {
      _id: id,
      name: input.name,
      description: input.description ?? null,
      provider: input.provider,
      modelId: input.modelId,
      baseUrl: input.baseUrl ?? null,
      status: 'active',
      proxyModelName,
      apiKeySealed: input.apiKey ? this.ctx.secrets.seal(input.apiKey, modelKeyAd(id)) : null,
      proxySynced: false,
      createdAt: now,
      updatedAt: now,
      createdBy: p.did,
    };
    try {
      await c.models.insertOne(doc);
    } catch (err) {
      if (err instanceof DuplicateKeyError) {
        throw conflict(`a model whose proxy name is ${proxyModelName} already exists; choose another name`, 'model_exists');
      }
      throw err;
    }
    if (this.proxy) {
      try {
        await this.proxy.newModel({
          modelName: proxyModelName,
          litellmModel: litellmModelOf(doc.provider, doc.modelId),
          apiBase: doc.baseUrl ?? undefined,
          apiKey: input.apiKey,
          id,
        });
        await c.models.updateOne({ _id: id }, { $set: { proxySynced: true } });
        doc.proxySynced = true;
      } catch (err) {
        // Leave nothing half-made: the registry row goes, and so does the proxy's copy when it may exist.
        const registered = !(err instanceof ProxyError) || err.reached;
        if (registered) await this.quietly('deregistering a model after a failed create', () => this.proxy!.deleteModel(id));
        await this.quietly('removing a model after a failed create', () => c.models.deleteOne({ _id: id }));
        throw this.proxyFailure(err, 'the model was not created');
      }
    }
    await this.ctx.audit.record(p, {
      action: 'model.create',
      targetType: 'model',
      target: id,
      details: { name: doc.name, provider: doc.provider, modelId: doc.modelId, proxyModelName, proxySynced: doc.proxySynced, apiKeySet: doc.apiKeySealed !== null },
    });
    return doc;
  }

  /** Stores the changes; provider, modelId and baseUrl are not synced to the proxy (§4.1 rule 2). */
  async update(p: UserPrincipal, id: string, patch: UpdateModelInput): Promise<void> {
    const m = await this.get(id);
    const provider = patch.provider ?? m.provider;
    const baseUrl = patch.baseUrl === undefined ? m.baseUrl : patch.baseUrl;
    if (provider === OPENAI_COMPATIBLE && !baseUrl) {
      throw badRequest(`body field 'baseUrl': required when provider is ${OPENAI_COMPATIBLE}`, 'validation_failed');
    }
    const set: Partial<ModelDoc> = { updatedAt: new Date().toISOString() };
    if (patch.name !== undefined) set.name = patch.name;
    if (patch.description !== undefined) set.description = patch.description || null;
    if (patch.status !== undefined) set.status = patch.status;
    if (patch.provider !== undefined) set.provider = patch.provider;
    if (patch.modelId !== undefined) set.modelId = patch.modelId;
    if (patch.baseUrl !== undefined) set.baseUrl = patch.baseUrl;
    await this.ctx.c.models.updateOne({ _id: id }, { $set: set });
    const backendChanged = ['provider', 'modelId', 'baseUrl'].filter((k) => k in patch);
    await this.ctx.audit.record(p, {
      action: 'model.update',
      targetType: 'model',
      target: id,
      details: { changes: patch, ...(backendChanged.length > 0 && m.proxySynced ? { notSyncedToProxy: backendChanged } : {}) },
    });
  }

  /**
   * Deletes a model: from the proxy first (a failure there is 502 and nothing changes), then its
   * workspace access (each affected workspace's key is refreshed), then agent configs using it.
   */
  async delete(p: UserPrincipal, id: string): Promise<void> {
    const { c, log } = this.ctx;
    const m = await this.get(id);
    if (m.proxySynced) {
      if (this.proxy) {
        try {
          await this.proxy.deleteModel(id);
        } catch (err) {
          throw this.proxyFailure(err, 'the model was not deleted');
        }
      } else {
        log.warn({ modelId: id, proxyModelName: m.proxyModelName }, 'deleting a model registered with a model proxy that is no longer configured; remove it there by hand');
      }
    }
    const grants = await c.workspaceModels.find({ modelId: id });
    await c.models.deleteOne({ _id: id });
    await c.workspaceModels.deleteMany({ modelId: id });
    const workspaceIds = [...new Set(grants.map((g) => g.workspaceId))];
    const keyFailures: string[] = [];
    if (this.proxy) {
      for (const wsId of workspaceIds) {
        try {
          await this.withLock(wsId, async () => this.syncKey(wsId, await this.grantedModelIds(wsId)));
        } catch (err) {
          keyFailures.push(wsId);
          log.error({ err: this.safeErr(err), workspaceId: wsId }, 'refreshing a workspace key after a model deletion failed; the next grant or revoke there retries it');
        }
      }
    }
    const cleared = await this.clearConfigs({ llmRegistryModelId: id }, `model ${m.proxyModelName} was deleted`);
    await this.ctx.audit.record(p, {
      action: 'model.delete',
      targetType: 'model',
      target: id,
      details: { name: m.name, proxyModelName: m.proxyModelName, workspaces: workspaceIds, clearedAgents: cleared, ...(keyFailures.length ? { keyRefreshFailed: keyFailures } : {}) },
    });
    await this.pushToWorkspaces(workspaceIds, cleared);
  }

  // -------------------------------------------------------------------------------------------
  // Workspace model access

  /** The models granted to a workspace, by name. */
  async workspaceModels(workspaceId: string): Promise<Array<ModelDoc & { grantedAt: string }>> {
    const { c } = this.ctx;
    const grants = await c.workspaceModels.find({ workspaceId });
    const models = await c.models.find({ _id: { $in: grants.map((g) => g.modelId) } });
    const at = new Map(grants.map((g) => [g.modelId, g.grantedAt]));
    return models
      .map((m) => ({ ...m, grantedAt: at.get(m._id)! }))
      .sort((a, b) => a.name.localeCompare(b.name) || a._id.localeCompare(b._id));
  }

  async hasVirtualKey(workspaceId: string): Promise<boolean> {
    return (await this.ctx.c.workspaceLlmKeys.count({ _id: workspaceId })) > 0;
  }

  /**
   * Grants a workspace a model. Granting again is not an error: it brings the workspace's key
   * back in line, which is how a grant whose proxy call failed is retried.
   */
  async grant(p: UserPrincipal, ws: WorkspaceDoc, modelId: string): Promise<{ pushedTo: number }> {
    const { c } = this.ctx;
    const m = await this.get(modelId);
    if (m.status !== 'active') throw conflict(`model ${m.name} is inactive; activate it before granting it`, 'model_inactive');
    if (this.proxy && !m.proxySynced) {
      throw conflict(`model ${m.name} is not registered with the model proxy (it was created while none was configured); delete it and create it again`, 'model_not_in_proxy');
    }
    let inserted = false;
    await this.withLock(ws._id, async () => {
      if (!(await c.workspaceModels.findOne({ workspaceId: ws._id, modelId }))) {
        try {
          await c.workspaceModels.insertOne({ _id: nanoid(), workspaceId: ws._id, modelId, grantedAt: new Date().toISOString(), grantedBy: p.did });
          inserted = true;
        } catch (err) {
          if (!(err instanceof DuplicateKeyError)) throw err;
        }
      }
      if (!this.proxy) return;
      try {
        await this.syncKey(ws._id, await this.grantedModelIds(ws._id), ws);
      } catch (err) {
        if (inserted) await this.quietly('undoing a grant', () => c.workspaceModels.deleteOne({ workspaceId: ws._id, modelId }));
        throw this.proxyFailure(err, 'the model was not granted');
      }
    });
    await this.ctx.audit.record(p, {
      action: 'workspace.model.grant',
      targetType: 'workspace',
      target: ws._id,
      details: { modelId, proxyModelName: m.proxyModelName, alreadyGranted: !inserted },
    });
    return { pushedTo: await this.pushToWorkspaces([ws._id]) };
  }

  /** Revokes a workspace's access to a model; 404 when it has none. The key is refreshed first. */
  async revoke(p: UserPrincipal, ws: WorkspaceDoc, modelId: string): Promise<{ pushedTo: number }> {
    const { c } = this.ctx;
    let proxyModelName: string | null = null;
    await this.withLock(ws._id, async () => {
      const grant = await c.workspaceModels.findOne({ workspaceId: ws._id, modelId });
      if (!grant) throw notFound(`model ${modelId} is not granted to workspace ${ws.slug}`, 'model_not_granted');
      proxyModelName = (await c.models.findById(modelId))?.proxyModelName ?? null;
      if (this.proxy) {
        const remaining = (await this.grantedModelIds(ws._id)).filter((id) => id !== modelId);
        try {
          await this.syncKey(ws._id, remaining, ws);
        } catch (err) {
          throw this.proxyFailure(err, 'the model was not revoked');
        }
      }
      await c.workspaceModels.deleteOne({ _id: grant._id });
    });
    const cleared = await this.clearConfigs(
      { llmSource: 'workspace', llmWorkspaceId: ws._id, llmRegistryModelId: modelId },
      `model ${proxyModelName ?? modelId} was revoked from workspace ${ws.slug}`,
    );
    await this.ctx.audit.record(p, {
      action: 'workspace.model.revoke',
      targetType: 'workspace',
      target: ws._id,
      details: { modelId, proxyModelName, clearedAgents: cleared },
    });
    return { pushedTo: await this.pushToWorkspaces([ws._id], cleared) };
  }

  private async grantedModelIds(workspaceId: string): Promise<string[]> {
    return (await this.ctx.c.workspaceModels.find({ workspaceId }, { projection: { modelId: 1 } })).map((g) => g.modelId);
  }

  /**
   * Makes the workspace's virtual key allow exactly `modelIds` (the ones that still exist):
   * generated when there is none, updated when there is one, deleted when the list is empty.
   * Call inside the workspace's lock, with the proxy configured. Throws ProxyError.
   */
  private async syncKey(workspaceId: string, modelIds: string[], ws?: WorkspaceDoc): Promise<void> {
    const { c, secrets } = this.ctx;
    const proxy = this.proxy!;
    const models = modelIds.length > 0 ? await c.models.find({ _id: { $in: modelIds } }, { projection: { proxyModelName: 1 } }) : [];
    const names = [...new Set(models.map((m) => m.proxyModelName))].sort();
    const keyDoc = await c.workspaceLlmKeys.findById(workspaceId);
    if (names.length === 0) {
      if (keyDoc) {
        await proxy.deleteKey(secrets.open(keyDoc.keySealed, workspaceKeyAd(workspaceId)));
        await c.workspaceLlmKeys.deleteOne({ _id: workspaceId });
      }
      return;
    }
    const now = new Date().toISOString();
    if (keyDoc) {
      await proxy.updateKey(secrets.open(keyDoc.keySealed, workspaceKeyAd(workspaceId)), names);
      await c.workspaceLlmKeys.updateOne({ _id: workspaceId }, { $set: { models: names, updatedAt: now } });
      return;
    }
    const workspace = ws ?? (await c.workspaces.findById(workspaceId));
    const keyAlias = `steward-workspace-${workspaceId}-${nanoid(6)}`;
    let key: string;
    try {
      key = await proxy.generateKey({
        models: names,
        keyAlias,
        metadata: { steward_workspace_id: workspaceId, steward_workspace_slug: workspace?.slug ?? '', managed_by: 'steward' },
      });
    } catch (err) {
      if (!(err instanceof ProxyError) || err.reached) await this.quietly('removing a half-generated key', () => proxy.deleteKeyByAlias(keyAlias));
      throw err;
    }
    const doc: WorkspaceLlmKeyDoc = {
      _id: workspaceId,
      keySealed: secrets.seal(key, workspaceKeyAd(workspaceId)),
      keyAlias,
      models: names,
      createdAt: now,
      updatedAt: now,
    };
    try {
      await c.workspaceLlmKeys.insertOne(doc);
    } catch (err) {
      await this.quietly('removing a key that could not be stored', () => proxy.deleteKey(key));
      throw err;
    }
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

  async workspaceDeleted(ws: WorkspaceDoc): Promise<void> {
    const { c, log, secrets } = this.ctx;
    await this.withLock(ws._id, async () => {
      const keyDoc = await c.workspaceLlmKeys.findById(ws._id);
      if (keyDoc) {
        if (this.proxy) {
          try {
            await this.proxy.deleteKey(secrets.open(keyDoc.keySealed, workspaceKeyAd(ws._id)));
          } catch (err) {
            log.error({ err: this.safeErr(err), workspaceId: ws._id, keyAlias: keyDoc.keyAlias }, 'deleting the virtual key of a deleted workspace failed; delete it in the proxy by its alias');
          }
        } else {
          log.warn({ workspaceId: ws._id, keyAlias: keyDoc.keyAlias }, 'a deleted workspace had a virtual key but no model proxy is configured; delete it in the proxy by its alias');
        }
        await c.workspaceLlmKeys.deleteOne({ _id: ws._id });
      }
      await c.workspaceModels.deleteMany({ workspaceId: ws._id });
    });
    const cleared = await this.clearConfigs({ llmSource: 'workspace', llmWorkspaceId: ws._id }, `workspace ${ws.slug} was deleted`);
    await this.pushTo(cleared);
  }

  // -------------------------------------------------------------------------------------------
  // Agent LLM config

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
        return agent.llmWorkspaceId ? this.hasVirtualKey(agent.llmWorkspaceId) : false;
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
  ): Promise<{ pushed: boolean; config: { provider: string; model: string; apiKeySet: boolean } }> {
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
      const m = await this.get(input.workspaceModelId);
      if ((await c.workspaceModels.count({ workspaceId: ws._id, modelId: m._id })) === 0) {
        throw badRequest(`body field 'workspaceModelId': model ${m.name} is not granted to workspace ${ws.slug}`, 'model_not_granted');
      }
      if (m.status !== 'active') throw conflict(`model ${m.name} is inactive`, 'model_inactive');
      if (!(await this.hasVirtualKey(ws._id))) {
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
      const m = await this.get(input.registryModelId);
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
    await this.ctx.audit.record(p, { action: 'agent.llm_config.clear', targetType: 'agent', target: agent._id, details: { removed } });
    const pushed = (await this.pushTo([agent._id])) > 0;
    return { pushed, removed };
  }

  /** GET /api/agents/{did}/workspace-llm */
  async workspaceLlm(did: string): Promise<{
    proxyConfigured: boolean;
    proxyBaseUrl: string;
    workspaces: Array<{
      workspaceId: string;
      workspaceName: string;
      isPrimary: boolean;
      hasVirtualKey: boolean;
      models: Array<{ id: string; name: string; provider: string; modelId: string; proxyModelName: string }>;
    }>;
  }> {
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

  // -------------------------------------------------------------------------------------------
  // Pushes

  /**
   * The llm_config frame for one agent (docs/models.md); `config` is empty when nothing applies.
   * `workspaceIds` are the agent's workspaces, needed only when the proxy is on.
   */
  private async frameOf(agent: AgentDoc | null, workspaceIds: readonly string[], cache: FrameCache): Promise<PushFrame> {
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

  private async pushToWorkspaces(workspaceIds: string[], extra: string[] = []): Promise<number> {
    const members = workspaceIds.length
      ? await this.ctx.c.workspaceAgents.find({ workspaceId: { $in: workspaceIds } }, { projection: { agentDid: 1 } })
      : [];
    return this.pushTo([...members.map((m) => m.agentDid), ...extra]);
  }

  /** Clears the configs of the agents matching `filter`; answers their DIDs. */
  private async clearConfigs(filter: Filter, reason: string): Promise<string[]> {
    const { c } = this.ctx;
    const agents = await c.agents.find(filter, { projection: { _id: 1 } });
    if (agents.length === 0) return [];
    const dids = agents.map((a) => a._id);
    await c.agents.updateMany({ _id: { $in: dids } }, { $set: { ...MODEL_CLEARED, llmUpdatedAt: new Date().toISOString() } });
    await this.ctx.audit.record('system', { action: 'agent.llm_config.clear', targetType: 'agent', target: null, details: { agents: dids, reason } });
    return dids;
  }

  // -------------------------------------------------------------------------------------------
  // Helpers

  private async withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const chained = prev.then(() => mine);
    this.locks.set(key, chained);
    await prev;
    try {
      return await fn();
    } finally {
      release();
      if (this.locks.get(key) === chained) this.locks.delete(key);
    }
  }

  /** A ProxyError becomes 502 saying what did not happen; anything else passes through. */
  private proxyFailure(err: unknown, outcome: string): unknown {
    if (err instanceof ProxyError) return badGateway(`${err.message}; ${outcome}`, 'proxy_error');
    return err;
  }

  /** What may be logged of an error: a ProxyError's message (it carries no secret), else the error. */
  private safeErr(err: unknown): unknown {
    return err instanceof ProxyError ? { type: 'ProxyError', message: err.message, status: err.status } : err;
  }

  private async quietly(what: string, fn: () => Promise<unknown>): Promise<void> {
    try {
      await fn();
    } catch (err) {
      this.ctx.log.error({ err: this.safeErr(err) }, `${what} failed`);
    }
  }
}
