/**
 * OpenAPI 3.1 document generated from the route table: every declared route appears with its
 * path parameters, query parameters, body schema, auth level, rate-limit group and the schema of
 * each success answer, converted from the same zod schemas the router validates with. A view that
 * carries an id (`.meta({ id })`) is one component, referenced wherever it appears; so is the one
 * error shape every route may answer.
 */
import { z } from 'zod';
import { isRawResponse, type RouteDef } from './router.js';
import { ErrorBody } from './errors.js';
import { SERVER_PATHS } from './static.js';

type JsonSchema = Record<string, unknown>;

const COMPONENTS = '#/components/schemas/';
const ERROR_REF = { $ref: `${COMPONENTS}Error` };

function toSchema(schema: z.ZodType): JsonSchema {
  const s = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as JsonSchema;
  delete s.$schema;
  return s;
}

/** Points `#/$defs/<id>` references at the components. */
function rewriteRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(rewriteRefs);
  if (value === null || typeof value !== 'object') return value;
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] = k === '$ref' && typeof v === 'string' && v.startsWith('#/$defs/') ? COMPONENTS + v.slice('#/$defs/'.length) : rewriteRefs(v);
  }
  return out;
}

/**
 * The JSON Schema of an answer, its views with an id moved into `components` (one entry per id:
 * two different schemas under one id are a mistake in the declarations, and refused).
 */
function answerSchema(schema: z.ZodType, components: Record<string, JsonSchema>): JsonSchema {
  const s = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'output', unrepresentable: 'any' }) as JsonSchema;
  const defs = (s.$defs ?? {}) as Record<string, JsonSchema>;
  delete s.$schema;
  delete s.$defs;
  for (const [id, def] of Object.entries(defs)) {
    const shaped = rewriteRefs(def) as JsonSchema;
    const known = components[id];
    if (known !== undefined && JSON.stringify(known) !== JSON.stringify(shaped)) throw new Error(`two different response schemas carry the id ${id}`);
    components[id] = shaped;
  }
  return rewriteRefs(s) as JsonSchema;
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
  const components: Record<string, JsonSchema> = {};
  answerSchema(ErrorBody, components);
  for (const r of routes) {
    const path = r.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const responses: Record<string, unknown> = {};
    for (const [status, declared] of Object.entries(r.responses)) {
      const content = isRawResponse(declared)
        ? { [declared.contentType]: { schema: { ...declared.schema, description: declared.description } } }
        : { 'application/json': { schema: answerSchema(declared, components) } };
      responses[status] = { description: 'success', content };
    }
    responses.default = { description: 'error', content: { 'application/json': { schema: ERROR_REF } } };
    const op: Record<string, unknown> = {
      summary: r.summary,
      operationId: `${r.method.toLowerCase()}${r.path.replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
      tags: r.tags ?? [r.path.split('/')[2] ?? 'system'],
      'x-auth': r.auth,
      parameters: [...parameters(r.params, 'path'), ...parameters(r.query, 'query')],
      responses,
    };
    if (r.limit) {
      // docs/api.md, "Rate limits": the group names the settings that bound this route.
      op['x-rate-limit'] = r.limit.group;
      responses['429'] = {
        description: 'rate limited: too many requests from this address (or for the DID, token or bridge named)',
        headers: { 'Retry-After': { description: 'seconds until a request may succeed', schema: { type: 'integer', minimum: 1 } } },
        content: { 'application/json': { schema: ERROR_REF } },
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
    // Not an operation: what answers outside the API (src/http/static.ts).
    'x-dashboard': {
      description: `The web dashboard: GET of any path outside ${SERVER_PATHS.join(', ')} by a client that accepts HTML answers index.html; its assets are served under /assets/`,
      content: { 'text/html; charset=utf-8': { schema: { type: 'string' } } },
    },
    components: {
      securitySchemes: {
        session: { type: 'apiKey', in: 'cookie', name: 'steward_session' },
        bearer: { type: 'http', scheme: 'bearer' },
      },
      schemas: Object.fromEntries(Object.entries(components).sort(([a], [b]) => (a === 'Error' ? -1 : b === 'Error' ? 1 : a.localeCompare(b)))),
    },
  };
}
