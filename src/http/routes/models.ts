/**
 * The model registry (interface §4.1, Admin level) and workspace model access (§4.2, workspace
 * admin of that workspace or global admin). The rules live in src/services/model-catalogue.ts;
 * docs/models.md describes both.
 */
import { z } from 'zod';
import { route, type RouteDef } from '../router.js';
import { personOf } from '../auth.js';
import { OPENAI_COMPATIBLE } from '../../domain/models.js';
import { ModelEntry, toModelEntry, type ModelCatalogue } from '../../services/model-catalogue.js';
import { timestamp } from '../../domain/views.js';
import { Ok } from '../answers.js';

/** Provider names: lower-cased, then letters, digits, `.`, `_`, `-` (they become the proxy name's prefix). */
export const providerSchema = z
  .string()
  .trim()
  .toLowerCase()
  .regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, { message: "letters, digits, '.', '_' or '-' (e.g. openai, anthropic, openai-compatible)" });
export const baseUrlSchema = z
  .string()
  .trim()
  .max(2000)
  .url({ message: 'an absolute http:// or https:// URL' })
  .refine((u) => /^https?:\/\//i.test(u), { message: 'an absolute http:// or https:// URL' });
const nameSchema = z.string().trim().min(1).max(100);
const modelIdSchema = z.string().trim().min(1).max(200);
const descriptionSchema = z.string().max(2000);
export const apiKeySchema = z.string().min(1).max(8192);

const createBody = z
  .strictObject({
    name: nameSchema,
    provider: providerSchema,
    modelId: modelIdSchema,
    baseUrl: baseUrlSchema.optional(),
    description: descriptionSchema.optional(),
    apiKey: apiKeySchema.optional().describe('The provider API key; stored encrypted, never returned'),
  })
  .superRefine((b, ctx) => {
    if (b.provider === OPENAI_COMPATIBLE && !b.baseUrl) {
      ctx.addIssue({ code: 'custom', path: ['baseUrl'], message: `required when provider is ${OPENAI_COMPATIBLE}` });
    }
  });

const updateBody = z.strictObject({
  name: nameSchema.optional(),
  description: descriptionSchema.nullable().optional(),
  status: z.enum(['active', 'inactive']).optional(),
  provider: providerSchema.optional(),
  modelId: modelIdSchema.optional(),
  baseUrl: baseUrlSchema.nullable().optional(),
});

const idParams = z.object({ id: z.string().min(1).max(100) });
const wsParams = z.object({ workspace: z.string().min(1).max(200) });
const modelRef = z.uuid({ message: 'the UUID of a registry model' });


export function modelRoutes({ models }: { models: ModelCatalogue }): RouteDef[] {
  return [
    route({
      method: 'GET',
      path: '/api/admin/models',
      auth: 'admin',
      summary: 'The model registry, oldest first (provider keys never shown: apiKeySet only)',
      tags: ['models'],
      responses: { 200: z.strictObject({ models: z.array(ModelEntry) }) },
      handler: async () => ({ body: { models: (await models.list()).map(toModelEntry) } }),
    }),

    route({
      method: 'POST',
      path: '/api/admin/models',
      auth: 'admin',
      summary: 'Registers a model (active); with the proxy configured, registers it there too (502 and nothing kept when that fails)',
      tags: ['models'],
      body: createBody,
      responses: { 201: z.strictObject({ model: z.strictObject({ id: z.string(), name: z.string() }) }) },
      handler: async (r) => {
        const m = await models.create(personOf(r), r.body);
        return { status: 201, body: { model: { id: m._id, name: m.name } } };
      },
    }),

    route({
      method: 'GET',
      path: '/api/admin/models/:id',
      auth: 'admin',
      summary: 'One registry entry',
      tags: ['models'],
      params: idParams,
      responses: { 200: ModelEntry },
      handler: async (r) => ({ body: toModelEntry(await models.get(r.params.id)) }),
    }),

    route({
      method: 'PUT',
      path: '/api/admin/models/:id',
      auth: 'admin',
      summary: 'Updates name, description, status; provider, modelId and baseUrl are stored but not synced to the proxy',
      tags: ['models'],
      params: idParams,
      body: updateBody,
      responses: { 200: Ok },
      handler: async (r) => {
        await models.update(personOf(r), r.params.id, r.body);
        return { body: { ok: true } };
      },
    }),

    route({
      method: 'DELETE',
      path: '/api/admin/models/:id',
      auth: 'admin',
      summary: 'Deletes a model: from the proxy first (502 when that fails), then every workspace access to it',
      tags: ['models'],
      params: idParams,
      responses: { 200: Ok },
      handler: async (r) => {
        await models.delete(personOf(r), r.params.id);
        return { body: { ok: true } };
      },
    }),

    route({
      method: 'GET',
      path: '/api/workspaces/:workspace/models',
      auth: 'user',
      summary: "The registry models granted to a workspace, and whether it has a virtual key (members)",
      tags: ['models'],
      params: wsParams,
      responses: {
        200: z.strictObject({
          models: z.array(ModelEntry.extend({ grantedAt: timestamp })),
          hasVirtualKey: z.boolean().meta({ description: 'Whether the workspace has a virtual key of the model proxy' }),
        }),
      },
      handler: async (r) => {
        const { models: list, hasVirtualKey } = await models.ofWorkspace(personOf(r), r.params.workspace);
        return { body: { models: list.map((m) => ({ ...toModelEntry(m), grantedAt: m.grantedAt })), hasVirtualKey } };
      },
    }),

    route({
      method: 'POST',
      path: '/api/workspaces/:workspace/models',
      auth: 'user',
      summary: "Grants a workspace a model; with the proxy, generates or refreshes its virtual key and pushes llm_config to its online agents",
      tags: ['models'],
      params: wsParams,
      body: z.strictObject({ modelId: modelRef }),
      responses: { 200: Ok },
      handler: async (r) => {
        await models.grantTo(personOf(r), r.params.workspace, r.body.modelId);
        return { body: { ok: true } };
      },
    }),

    route({
      method: 'DELETE',
      path: '/api/workspaces/:workspace/models',
      auth: 'user',
      summary: "Revokes a workspace's access to a model (query modelId); with the proxy, refreshes its virtual key first",
      tags: ['models'],
      params: wsParams,
      query: z.object({ modelId: modelRef }),
      responses: { 200: Ok },
      handler: async (r) => {
        await models.revokeFrom(personOf(r), r.params.workspace, r.query.modelId);
        return { body: { ok: true } };
      },
    }),
  ];
}
