// The agent SDK package (packages/agent/) validates certificates against the protocol's JSON
// Schemas at run time, so it ships a copy of them: schemas/agent/ and the certificate's schema,
// copied from schemas/ (their one source) by `npm run build:sdk`. Unchanged files are left alone.
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const from = join(root, 'schemas');
const to = join(root, 'packages', 'agent', 'schemas');

const wanted = new Map([['certificate.schema.json', join(from, 'certificate.schema.json')]]);
for (const name of readdirSync(join(from, 'agent'))) if (name.endsWith('.schema.json')) wanted.set(join('agent', name), join(from, 'agent', name));

mkdirSync(join(to, 'agent'), { recursive: true });
for (const [name, source] of wanted) {
  const target = join(to, name);
  if (!existsSync(target) || !readFileSync(target).equals(readFileSync(source))) copyFileSync(source, target);
}
// A schema removed from schemas/ leaves the package too.
for (const name of readdirSync(join(to, 'agent'))) if (!wanted.has(join('agent', name))) rmSync(join(to, 'agent', name));
for (const name of readdirSync(to)) if (name !== 'agent' && !wanted.has(name)) rmSync(join(to, name), { recursive: true });
