/**
 * `npm run build:web`: builds the dashboard (web/) into dist/web with Vite, unless the build there
 * is newer than every source it is made from, so `npm start` does not rebuild an unchanged UI.
 * `--force` builds anyway.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const stamp = join(root, 'dist', 'web', 'index.html');

/** The newest modification time under `path` (a file or a folder, walked). */
function newest(path) {
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  let max = s.mtimeMs;
  for (const name of readdirSync(path)) max = Math.max(max, newest(join(path, name)));
  return max;
}

const sources = [join(root, 'web'), join(root, 'package-lock.json')];
if (!process.argv.includes('--force') && existsSync(stamp) && statSync(stamp).mtimeMs > Math.max(...sources.map(newest))) {
  console.log('dashboard: dist/web is up to date');
} else {
  const { build } = await import('vite');
  await build({ configFile: join(root, 'web', 'vite.config.ts') });
  console.log('dashboard: built into dist/web');
}
