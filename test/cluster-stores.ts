/**
 * The stores the cluster suites run on: the embedded store always, MongoDB too when MONGODB_URI
 * is set (a database of its own per case, dropped afterwards). Nodes of one case share the store,
 * each through a fault injector of its own.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { nanoid } from 'nanoid';
import { openEmbeddedStore } from '../src/store/embedded/index.js';
import { openMongoStore } from '../src/store/mongo.js';
import type { Store } from '../src/store/types.js';

export interface StoreTarget {
  name: string;
  open(): Promise<{ store: Store; cleanup(): Promise<void> }>;
}

export function storeTargets(): StoreTarget[] {
  const targets: StoreTarget[] = [
    {
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
    },
  ];
  const uri = process.env.MONGODB_URI;
  if (uri) {
    targets.push({
      name: 'mongodb',
      async open() {
        const dbName = `steward_test_${Date.now()}_${nanoid(6).replace(/[^A-Za-z0-9]/g, 'x')}`;
        const store = await openMongoStore({ uri, dbName });
        return {
          store,
          cleanup: async () => {
            await store.close();
            const client = new MongoClient(uri);
            try {
              await client.db(dbName).dropDatabase();
            } finally {
              await client.close();
            }
          },
        };
      },
    });
  }
  return targets;
}
