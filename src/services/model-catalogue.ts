/**
 * The model catalogue: the registry (interface §2.2, §4.1) and workspace model access with the
 * workspaces' virtual keys (§4.2), kept in sync with the model proxy (docs/models.md tells the
 * whole story).
 *
 * Rules kept here:
 * - proxyModelName is `{provider}/{slug of the name}`, fixed at creation: it is the name the
 *   proxy knows, so renaming a model does not change it. It is unique.
 * - Secrets (a model's provider key, a workspace's virtual key) are sealed with associated data
 *   naming their record and are only ever opened to call the proxy or to build the `llm_config`
 *   frame (src/services/llm-config.ts).
 * - With the proxy configured, a change is made in the proxy first; when the proxy fails the
 *   change does not happen (502) and whatever was half-made is undone, in the store and, when
 *   the request may have reached it, in the proxy.
 * - A workspace's virtual key is scoped to exactly the proxy names of its granted models. When
 *   the last one is revoked the key is deleted (LiteLLM reads an empty model list as "every
 *   model"). Key changes of one workspace are serialised.
 * - A workspace's models are listed to its members (and global admins; anyone else gets 404), and
 *   granted or revoked by its admins (or global admins).
 * - Agent configs that point at a revoked or deleted model are cleared (the LLM configuration's
 *   service does that, and pushes what changed).
 */
import { z } from 'zod';
import { timestamp } from '../domain/views.js';
import { randomUUID } from 'node:crypto';
import { nanoid } from 'nanoid';
import { newId } from '../domain/ids.js';
import type { ServiceCore } from './core.js';
import type { ModelDoc, WorkspaceDoc, WorkspaceLlmKeyDoc } from '../store/collections.js';
import { DuplicateKeyError } from '../store/types.js';
import type { UserPrincipal } from '../domain/principal.js';
import type { WorkspaceRole } from '../domain/roles.js';
import { badGateway, badRequest, conflict, forbidden, notFound } from '../domain/errors.js';
import { atLeast } from '../domain/permissions.js';
import { OPENAI_COMPATIBLE, modelKeyAd, proxyModelNameOf, workspaceKeyAd } from '../domain/models.js';
import { ProxyError, litellmModelOf, type LiteLlmClient } from '../integrations/litellm.js';
import { memberRole, resolveWorkspace } from './workspaces.js';
import { hasVirtualKey, modelById, type AgentLlmConfig } from './llm-config.js';

/** The registry entry as the interface shows it (§2.2), plus whether a provider key is stored. */
export const ModelEntry = z
  .strictObject({
    id: z.string(),
    name: z.string(),
    description: z.string().optional(),
    provider: z.string(),
    modelId: z.string(),
    baseUrl: z.string().optional(),
    status: z.enum(['active', 'inactive']),
    proxyModelName: z.string().optional().meta({ description: '`{provider}/{slug of the name}`' }),
    apiKeySet: z.boolean().meta({ description: 'Whether a provider API key is stored (the key is never shown)' }),
    createdAt: timestamp,
  })
  .meta({ id: 'ModelRegistryEntry' });
export type ModelEntry = z.infer<typeof ModelEntry>;

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

export class ModelCatalogue {
  /** The proxy client; null when PROXY_BASE_URL and PROXY_MASTER_KEY are not both set. */
  readonly proxy: LiteLlmClient | null;
  private readonly llmConfig: AgentLlmConfig;
  private readonly locks = new Map<string, Promise<void>>();

  constructor(
    private readonly ctx: ServiceCore,
    deps: { proxy: LiteLlmClient | null; llmConfig: AgentLlmConfig },
  ) {
    this.proxy = deps.proxy;
    this.llmConfig = deps.llmConfig;
    const { proxyIncomplete } = ctx.config;
    if (proxyIncomplete) ctx.log.warn({ missing: proxyIncomplete }, `the model proxy is off: ${proxyIncomplete} is not set`);
  }

  // -------------------------------------------------------------------------------------------
  // Registry

  async list(): Promise<ModelDoc[]> {
    return this.ctx.c.models.find({}, { sort: { createdAt: 1, _id: 1 } });
  }

  async get(id: string): Promise<ModelDoc> {
    return modelById(this.ctx.c, id);
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
    const cleared = await this.llmConfig.clearConfigs({ llmRegistryModelId: id }, `model ${m.proxyModelName} was deleted`);
    await this.ctx.audit.record(p, {
      action: 'model.delete',
      targetType: 'model',
      target: id,
      details: { name: m.name, proxyModelName: m.proxyModelName, workspaces: workspaceIds, clearedAgents: cleared, ...(keyFailures.length ? { keyRefreshFailed: keyFailures } : {}) },
    });
    await this.llmConfig.pushToWorkspaces(workspaceIds, cleared);
  }

  // -------------------------------------------------------------------------------------------
  // Workspace model access

  /** A workspace's models (members; 404 for anyone else), and whether it has a virtual key. */
  async ofWorkspace(p: UserPrincipal, ref: string): Promise<{ models: Array<ModelDoc & { grantedAt: string }>; hasVirtualKey: boolean }> {
    const { ws } = await this.workspaceFor(p, ref);
    return { models: await this.workspaceModels(ws._id), hasVirtualKey: await this.hasVirtualKey(ws._id) };
  }

  /** Grants a workspace (its admins) a model. */
  async grantTo(p: UserPrincipal, ref: string, modelId: string): Promise<{ pushedTo: number }> {
    return this.grant(p, await this.adminWorkspace(p, ref), modelId);
  }

  /** Revokes a workspace's (its admins) access to a model. */
  async revokeFrom(p: UserPrincipal, ref: string, modelId: string): Promise<{ pushedTo: number }> {
    return this.revoke(p, await this.adminWorkspace(p, ref), modelId);
  }

  /** The workspace, visible to the caller (else 404), with the caller's role there. */
  private async workspaceFor(p: UserPrincipal, ref: string): Promise<{ ws: WorkspaceDoc; role: WorkspaceRole | null }> {
    const { c } = this.ctx;
    const ws = await resolveWorkspace(c, ref);
    const role = ws ? await memberRole(c, p.userId, ws._id) : null;
    if (!ws || (!p.isAdmin && role === null)) throw notFound(`workspace ${ref} not found`);
    return { ws, role };
  }

  private async adminWorkspace(p: UserPrincipal, ref: string): Promise<WorkspaceDoc> {
    const { ws, role } = await this.workspaceFor(p, ref);
    if (!p.isAdmin && !atLeast(role, 'admin')) throw forbidden(`managing the models of workspace ${ws.slug} needs the admin role there (or global admin)`);
    return ws;
  }

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
    return hasVirtualKey(this.ctx.c, workspaceId);
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
          await c.workspaceModels.insertOne({ _id: newId(), workspaceId: ws._id, modelId, grantedAt: new Date().toISOString(), grantedBy: p.did });
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
    return { pushedTo: await this.llmConfig.pushToWorkspaces([ws._id]) };
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
    const cleared = await this.llmConfig.clearConfigs(
      { llmSource: 'workspace', llmWorkspaceId: ws._id, llmRegistryModelId: modelId },
      `model ${proxyModelName ?? modelId} was revoked from workspace ${ws.slug}`,
    );
    await this.ctx.audit.record(p, {
      action: 'workspace.model.revoke',
      targetType: 'workspace',
      target: ws._id,
      details: { modelId, proxyModelName, clearedAgents: cleared },
    });
    return { pushedTo: await this.llmConfig.pushToWorkspaces([ws._id], cleared) };
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

  /** For when a workspace is deleted: its virtual key (in the proxy too) and its model access go, and configs routing through it are cleared. */
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
    const cleared = await this.llmConfig.clearConfigs({ llmSource: 'workspace', llmWorkspaceId: ws._id }, `workspace ${ws.slug} was deleted`);
    await this.llmConfig.pushTo(cleared);
  }

  // -------------------------------------------------------------------------------------------
  // Helpers

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
