/**
 * `npm run build:web`: builds the dashboard (web/) into dist/web with Vite, unless the build there
 * is newer than every source it is made from, so `npm start` does not rebuild an unchanged UI.
 * `--force` builds anyway. Each compressible file gets its brotli and gzip forms beside it
 * (`.br`, `.gz`), which Steward serves as they are (src/http/static.ts) instead of compressing
 * the build at every start (the API reference's script alone would take seconds). A build whose
 * first screen is over its size limit (scripts/web-sizes.ts) fails, and is made again next time.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants as zlib, gzipSync } from 'node:zlib';

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

// web/ and the one server module it bundles (web/src/api/types.ts imports the capabilities from it).
const sources = [join(root, 'web'), join(root, 'src', 'domain', 'capabilities.ts'), join(root, 'package-lock.json')];
if (!process.argv.includes('--force') && existsSync(stamp) && statSync(stamp).mtimeMs > Math.max(...sources.map(newest))) {
  console.log('dashboard: dist/web is up to date');
} else {
  const { build } = await import('vite');
  await build({ configFile: join(root, 'web', 'vite.config.ts') });
  compressAll(join(root, 'dist', 'web'));
  const sizes = spawnSync(process.execPath, ['--import', 'tsx', join(root, 'scripts', 'web-sizes.ts'), '--summary'], { cwd: root, stdio: 'inherit' });
  if (sizes.status !== 0) {
    rmSync(stamp, { force: true }); // not up to date: the next build:web builds again
    console.error('dashboard: the first screen is over its size limit; `npm run web:sizes` lists every script');
    process.exit(1);
  }
  console.log('dashboard: built into dist/web');
}

/** Writes `<file>.br` and `<file>.gz` beside every compressible file of at least 512 bytes, when smaller. */
function compressAll(dir) {
  const COMPRESSIBLE = new Set(['.html', '.js', '.mjs', '.css', '.json', '.svg', '.txt', '.map', '.webmanifest']);
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      compressAll(path);
      continue;
    }
    if (!COMPRESSIBLE.has(extname(name).toLowerCase())) continue;
    const data = readFileSync(path);
    if (data.length < 512) continue;
    const br = brotliCompressSync(data, { params: { [zlib.BROTLI_PARAM_QUALITY]: 10, [zlib.BROTLI_PARAM_SIZE_HINT]: data.length } });
    const gz = gzipSync(data, { level: 9 });
    if (br.length < data.length) writeFileSync(`${path}.br`, br);
    if (gz.length < data.length) writeFileSync(`${path}.gz`, gz);
  }
}
