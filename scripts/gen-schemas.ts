/** Writes the JSON Schema files derived from zod schemas (src/http/schema-files.ts). */
import { writeFileSync } from 'node:fs';
import { derivedSchemaFiles } from '../src/http/schema-files.js';

for (const { path, text } of derivedSchemaFiles()) {
  writeFileSync(new URL(`../${path}`, import.meta.url), text);
  console.log(`wrote ${path}`);
}
