/**
 * Prints the sizes of the built dashboard (dist/web; run `npm run build:web` first): every
 * script and style, raw and gzip, and the first screen's total — the entry with everything it
 * imports statically, plus the chunk of the screen a signed-in person lands on (Agents) — which
 * must stay under 60 KB gzip. Exit code 1 when it does not. `--summary` prints the first screen's
 * total alone (what `npm run build:web` checks after each build).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

const LIMIT = 60 * 1024;
const dir = new URL('../dist/web/', import.meta.url).pathname;
const assets = join(dir, 'assets');
let names: string[];
try {
  names = readdirSync(assets).filter((n) => n.endsWith('.js') || n.endsWith('.css'));
} catch {
  console.error('no build in dist/web: run npm run build:web first');
  process.exit(1);
}
const gz = (name: string) => gzipSync(readFileSync(join(assets, name)), { level: 9 }).length;
const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;
const rows = names.map((n) => ({ n, raw: readFileSync(join(assets, n)).length, gzip: gz(n) })).sort((a, b) => b.gzip - a.gzip);
const summary = process.argv.includes('--summary');
if (!summary) for (const r of rows) console.log(`${r.n.padEnd(40)} ${kb(r.raw).padStart(10)} ${kb(r.gzip).padStart(10)} gzip`);

// The entry and its static imports, followed transitively (`import ... from "./x.js"`).
const html = readFileSync(join(dir, 'index.html'), 'utf8');
const entry = /src="\/assets\/([^"]+\.js)"/.exec(html)?.[1];
const css = [...html.matchAll(/href="\/assets\/([^"]+\.css)"/g)].map((m) => m[1]!);
if (!entry) throw new Error('no entry script in index.html');
const seen = new Set<string>();
const follow = (name: string) => {
  if (seen.has(name)) return;
  seen.add(name);
  const text = readFileSync(join(assets, name), 'utf8');
  for (const m of text.matchAll(/(?:^|[;\n}])\s*import\s*(?:[^'"();]*?from\s*)?["']\.\/([^"']+\.js)["']/g)) follow(m[1]!);
};
follow(entry);
const landing = names.find((n) => /^agents-[\w-]+\.js$/.test(n));
if (landing) follow(landing);
const first = [...seen, ...css];
const total = first.reduce((s, n) => s + gz(n), 0);
if (!summary) console.log(`\nfirst screen (entry, its imports, the Agents screen, styles): ${first.join(', ')}`);
console.log(`first screen total: ${kb(total)} gzip (limit ${kb(LIMIT)})`);
process.exit(total <= LIMIT ? 0 : 1);
