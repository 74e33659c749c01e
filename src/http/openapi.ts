/**
 * OpenAPI 3.1 document generated from the route table: every declared route appears with its
 * path parameters, query parameters, body schema, success status, auth level and rate-limit
 * group, converted from the same zod schemas the router validates with.
 */
import { z } from 'zod';
import type { RouteDef } from './router.js';

type JsonSchema = Record<string, unknown>;

function toSchema(schema: z.ZodType): JsonSchema {
  const s = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as JsonSchema;
  delete s.$schema;
  return s;
}

function parameters(schema: z.ZodType | undefined, where: 'path' | 'query'): unknown[] {
  if (!schema) return [];
  const js = toSchema(schema);
  const props = (js.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((js.required ?? []) as string[]);
  return Object.entries(props).map(([name, s]) => ({
    name,
    in: where,
    required: where === 'path' ? true : required.has(name),
    schema: s,
    ...(typeof s.description === 'string' ? { description: s.description } : {}),
  }));
}

export function buildOpenApi(routes: readonly RouteDef[], info: { version: string; serverUrl: string }): unknown {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const path = r.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const op: Record<string, unknown> = {
      summary: r.summary,
      operationId: `${r.method.toLowerCase()}${r.path.replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
      tags: r.tags ?? [r.path.split('/')[2] ?? 'system'],
      'x-auth': r.auth,
      parameters: [...parameters(r.params, 'path'), ...parameters(r.query, 'query')],
      responses: {
        [String(r.successStatus ?? 200)]: {
          description: 'success',
          ...(r.response ? { content: { 'application/json': { schema: toSchema(r.response) } } } : {}),
        },
        default: { description: 'error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
      },
    };
    if (r.limit) {
      // docs/api.md, "Rate limits": the group names the settings that bound this route.
      op['x-rate-limit'] = r.limit.group;
      (op.responses as Record<string, unknown>)['429'] = {
        description: 'rate limited: too many requests from this address (or for the DID, token or bridge named)',
        headers: { 'Retry-After': { description: 'seconds until a request may succeed', schema: { type: 'integer', minimum: 1 } } },
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      };
    }
    if (r.auth !== 'public') op.security = r.auth === 'optional' ? [{}, { session: [] }, { bearer: [] }] : [{ session: [] }, { bearer: [] }];
    if (r.body) op.requestBody = { required: true, content: { 'application/json': { schema: toSchema(r.body) } } };
    (paths[path] ??= {})[r.method.toLowerCase()] = op;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Steward',
      version: info.version,
      description: 'Control plane for fleets of autonomous software agents. `x-auth` on each operation names its auth level.',
    },
    servers: [{ url: info.serverUrl }],
    paths,
    components: {
      securitySchemes: {
        session: { type: 'apiKey', in: 'cookie', name: 'steward_session' },
        bearer: { type: 'http', scheme: 'bearer' },
      },
      schemas: {
        Error: {
          type: 'object',
          required: ['error'],
          properties: {
            error: {
              type: 'object',
              required: ['code', 'message'],
              properties: { code: { type: 'string' }, message: { type: 'string' } },
            },
          },
        },
      },
    },
  };
}
