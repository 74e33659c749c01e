/** Rewrites the configuration table in docs/configuration.md from src/config.ts. */
import { readFileSync, writeFileSync } from 'node:fs';
import { configTable } from '../src/config.js';

const START = '<!-- config:start -->';
const END = '<!-- config:end -->';
for (const file of ['docs/configuration.md']) {
  const url = new URL(`../${file}`, import.meta.url);
  const text = readFileSync(url, 'utf8');
  const a = text.indexOf(START);
  const b = text.indexOf(END);
  if (a < 0 || b < a) throw new Error(`${file}: markers ${START} ... ${END} not found`);
  writeFileSync(url, `${text.slice(0, a + START.length)}\n${configTable()}\n${text.slice(b)}`);
  console.log(`updated ${file}`);
}
