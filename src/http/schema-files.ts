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
  /** Fields written first, the zod schema's `.meta` ones among them ($id, title, description). */
  head: Record<string, unknown>;
}

const FILES: readonly SchemaFile[] = [
  {
    path: 'schemas/error.schema.json',
    schema: ErrorBody,
    io: 'output',
    head: { $id: 'https://steward.dev/schemas/error.schema.json' },
  },
  { path: 'schemas/agent/skills_config.schema.json', schema: SkillsConfigFrame, io: 'input', head: {} },
];

/** Each derived file's path and the text it must hold. */
export function derivedSchemaFiles(): { path: string; text: string }[] {
  return FILES.map(({ path, schema, io, head }) => {
    const { $schema: _dialect, id: _componentId, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io }) as Record<string, unknown>;
    return { path, text: `${JSON.stringify({ $schema: DIALECT, ...head, ...rest }, null, 2)}\n` };
  });
}
