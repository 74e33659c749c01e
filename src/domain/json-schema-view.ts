/**
 * A part of a view whose contract is a committed JSON Schema (the certificate, the workflow
 * definition): a zod schema that checks a value with that JSON Schema's own validator and
 * documents itself with it, so the wire contract stays the one source of that shape.
 */
import { z } from 'zod';

type JsonSchema = Record<string, unknown>;

/**
 * `schema` with every `$ref` replaced by what it points at (in `schema` itself or in one of
 * `documents`, by `$id`), and without `$schema`, `$id` and `$defs`: a schema that can stand
 * anywhere, such as among the OpenAPI document's components. The schemas have no recursion.
 */
export function inlineRefs(schema: JsonSchema, documents: readonly JsonSchema[] = []): JsonSchema {
  const byId = new Map<string, JsonSchema>([schema, ...documents].map((d) => [String(d.$id), d]));
  const resolve = (ref: string, base: string): { target: unknown; base: string } => {
    const url = new URL(ref, base);
    const docId = url.href.slice(0, url.href.length - url.hash.length);
    const doc = byId.get(docId);
    if (!doc) throw new Error(`${ref} (from ${base}) names no known schema`);
    let target: unknown = doc;
    for (const part of url.hash.replace(/^#\/?/, '').split('/').filter(Boolean)) target = (target as JsonSchema)[decodeURIComponent(part)];
    if (target === undefined) throw new Error(`${ref} (from ${base}) points at nothing`);
    return { target, base: docId };
  };
  const walk = (value: unknown, base: string): unknown => {
    if (Array.isArray(value)) return value.map((v) => walk(v, base));
    if (value === null || typeof value !== 'object') return value;
    const { $ref, ...rest } = value as JsonSchema;
    const out: JsonSchema = {};
    if (typeof $ref === 'string') {
      const { target, base: at } = resolve($ref, base);
      Object.assign(out, walk(target, at));
    }
    for (const [k, v] of Object.entries(rest)) if (k !== '$schema' && k !== '$id' && k !== '$defs') out[k] = walk(v, base);
    return out;
  };
  return walk(schema, String(schema.$id)) as JsonSchema;
}

/**
 * A zod schema of `T` for a view: `problem` (the JSON Schema's validator) says what is wrong with
 * a value or null, and the JSON Schema (self-contained) describes it under `id`.
 */
export function jsonSchemaView<T>(id: string, jsonSchema: JsonSchema, problem: (value: unknown) => string | null): z.ZodType<T> {
  return z
    .custom<T>()
    .superRefine((value, ctx) => {
      const p = problem(value);
      if (p !== null) ctx.addIssue({ code: 'custom', message: p });
    })
    .meta({ ...jsonSchema, id });
}
