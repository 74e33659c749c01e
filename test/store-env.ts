/**
 * The store a test server runs on: the embedded store in its data directory, or, when the test
 * process has MONGODB_URI, a fresh MongoDB database of its own (dropped by `cleanup`). Pass `env`
 * to startServer (or to a server started as a child process).
 */
import { randomBytes } from 'node:crypto';
import { MongoClient } from 'mongodb';
import { nanoid } from 'nanoid';

export interface StoreEnv {
  env: Record<string, string>;
  kind: 'embedded' | 'mongodb';
  cleanup(): Promise<void>;
}

export function storeEnv(): StoreEnv {
  const uri = process.env.MONGODB_URI;
  if (!uri) return { env: {}, kind: 'embedded', cleanup: async () => {} };
  const dbName = `steward_test_${Date.now()}_${nanoid(6).replace(/[^A-Za-z0-9]/g, 'x')}`;
  return {
    env: { MONGODB_URI: uri, MONGODB_DB: dbName, STEWARD_SECRET_KEY: randomBytes(32).toString('hex') },
    kind: 'mongodb',
    cleanup: async () => {
      const client = new MongoClient(uri);
      try {
        await client.db(dbName).dropDatabase();
      } finally {
        await client.close();
      }
    },
  };
}
