/**
 * The embedded store (nedb datafiles under DATA_DIR/store); docs/store.md describes its parts.
 */
export { openEmbeddedStore, type EmbeddedStoreHandle } from './store.js';
