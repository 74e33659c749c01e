/**
 * Builds the dashboard (web/) into dist/web: `npm run build:web`. Preact through Vite's own JSX
 * transform; every screen is its own chunk (dynamic imports in src/app/routes.ts). A second page,
 * api-docs.html, is the interactive API reference (Swagger UI, from the npm registry, bundled here).
 */
import { defineConfig } from 'vite';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root: here,
  base: '/',
  publicDir: false,
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../dist/web', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
    // No inline data: scripts or styles; the CSP allows only the site's own files.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
    // Two pages: the dashboard, and the API reference served at /api/docs (src/http/static.ts).
    rolldownOptions: {
      input: { index: fileURLToPath(new URL('index.html', import.meta.url)), 'api-docs': fileURLToPath(new URL('api-docs.html', import.meta.url)) },
    },
    // The API reference's renderer (Swagger UI) is one prebuilt script of about 1.5 MB, loaded by that page alone.
    chunkSizeWarningLimit: 1600,
  },
});
