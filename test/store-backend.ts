/**
 * Which store a suite's servers run on: the embedded store under the test's data directory, or
 * MongoDB when MONGODB_URI is set (each server a database of its own, dropped by `drop`). Pass
 * `env` to startServer (or to a server started as a child process). Suites about store faults run
 * on both, so the MongoDB backend meets the same faults as the embedded one.
 */
import { randomBytes } from 'node:crypto';
import { MongoClient } from 'mongodb';
import { nanoid } from 'nanoid';

export const mongoUri = process.env.MONGODB_URI || undefined;

export interface Backend {
  /** `embedded` or `mongodb`. */
  kind: 'embedded' | 'mongodb';
  /** Environment for startServer (empty for the embedded store). */
  env: Record<string, string>;
  /** The MongoDB database name, when on MongoDB. */
  dbName?: string;
  /** Removes what the backend kept outside the data directory (the MongoDB database). */
  drop(): Promise<void>;
}

export function backend(): Backend {
  if (!mongoUri) return { kind: 'embedded', env: {}, drop: async () => undefined };
  const dbName = `steward_test_${Date.now()}_${nanoid(6).replace(/[^A-Za-z0-9]/g, 'x')}`;
  return {
    kind: 'mongodb',
    dbName,
    env: { MONGODB_URI: mongoUri, MONGODB_DB: dbName, STEWARD_SECRET_KEY: randomBytes(32).toString('base64') },
    async drop() {
      const client = new MongoClient(mongoUri);
      try {
        await client.db(dbName).dropDatabase();
      } finally {
        await client.close();
      }
    },
  };
}
