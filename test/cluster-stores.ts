/**
 * The stores the cluster suites run on: the embedded store, or MongoStore through the MongoDB
 * stand-in when the runner runs the suite with STEWARD_TEST_STORE=standin (store-backend.ts);
 * with MONGODB_URI set, the embedded store and that MongoDB (a database of its own per case,
 * dropped afterwards). Nodes of one case share the store, each through a fault injector of its own.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openEmbeddedStore } from '../src/store/embedded/index.js';
import { openMongoStore } from '../src/store/mongo.js';
import type { Store } from '../src/store/types.js';
import { dropDatabase, mongoUriForTests, storeKind, testDbName } from './store-backend.js';

export interface StoreTarget {
  name: string;
  open(): Promise<{ store: Store; cleanup(): Promise<void> }>;
}

const embedded: StoreTarget = {
  name: 'embedded',
  async open() {
    const dir = await mkdtemp(join(tmpdir(), 'steward-cluster-'));
    const store = await openEmbeddedStore({ dataDir: dir });
    return {
      store,
      cleanup: async () => {
        await store.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  },
};

const mongodb = (name: string): StoreTarget => ({
  name,
  async open() {
    const uri = await mongoUriForTests();
    const dbName = testDbName();
    const store = await openMongoStore({ uri, dbName });
    return {
      store,
      cleanup: async () => {
        await store.close();
        await dropDatabase(uri, dbName);
      },
    };
  },
});

/** The targets of this run; the last is the one a suite that takes one store uses. */
export function storeTargets(): StoreTarget[] {
  if (storeKind === 'mongodb') return [embedded, mongodb('mongodb')];
  if (storeKind === 'standin') return [mongodb('mongodb stand-in')];
  return [embedded];
}
