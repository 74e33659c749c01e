/**
 * The committed JSON Schema files that are derived from a zod schema rather than written by hand:
 * the error body and the skills_config frame. `npm run schemas` writes them and a test checks that
 * the committed files are what their zod schemas give, so each shape is declared once.
 */
import { z } from 'zod';
import { SkillsConfigFrame } from '../domain/agent-protocol.js';
import { ErrorBody } from './errors.js';

const DIALECT = 'https://json-schema.org/draft/2020-12/schema';

interface SchemaFile {
  /** The path from the repository's root. */
  path: string;
  schema: z.ZodType;
  /** `output`: exactly the fields declared; `input`: a reader accepts fields added later (every outbound frame is open). */
  io: 'input' | 'output';
  /** The file's `$id`, when the zod schema's `.meta` does not carry it. */
  $id?: string;
}

const FILES: readonly SchemaFile[] = [
  { path: 'schemas/error.schema.json', schema: ErrorBody, io: 'output', $id: 'https://steward.dev/schemas/error.schema.json' },
  { path: 'schemas/agent/skills_config.schema.json', schema: SkillsConfigFrame, io: 'input' },
];

type Json = Record<string, unknown>;

/** The schema itself where zod refers to it (a schema with an id is written as `$ref` to its one `$defs` entry). */
function unwrapRoot(schema: Json): Json {
  const { $ref, $defs, ...rest } = schema as Json & { $ref?: string; $defs?: Record<string, Json> };
  if (typeof $ref !== 'string' || !$ref.startsWith('#/$defs/') || !$defs) return schema;
  const name = $ref.slice('#/$defs/'.length);
  const { [name]: root, ...others } = $defs;
  if (!root || Object.keys(others).length > 0) return schema;
  return { ...rest, ...root };
}

/** Each derived file's path and the text it must hold. */
export function derivedSchemaFiles(): { path: string; text: string }[] {
  return FILES.map(({ path, schema, io, $id }) => {
    const generated = unwrapRoot(z.toJSONSchema(schema, { target: 'draft-2020-12', io }) as Json);
    // The component id of the OpenAPI document is not a field of the file; `$id` names it instead.
    const { $schema: _dialect, id: _componentId, $id: ownId, title, description, ...rest } = generated;
    const head = { $schema: DIALECT, $id: $id ?? ownId, title, description };
    return { path, text: `${JSON.stringify({ ...head, ...rest }, null, 2)}\n` };
  });
}
