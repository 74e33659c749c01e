/**
 * Which store a suite's servers run on. The test runner runs each suite that imports this (or
 * cluster-stores.ts) twice: on the embedded store under the test's data directory, and with
 * STEWARD_TEST_STORE=standin on MongoStore through the MongoDB stand-in (tools/mongo-standin),
 * started once in the suite's process. MONGODB_URI set selects a real server instead (each
 * server a database of its own, dropped by `drop`). Pass `env` to startServer (or to a server
 * started as a child process).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { nanoid } from 'nanoid';
import { startMongoStandin, type MongoStandin } from '../tools/mongo-standin/server.js';

export const mongoUri = process.env.MONGODB_URI || undefined;

/** The store this run of the suite is on: a real MongoDB, the stand-in, or the embedded store. */
export const storeKind: 'embedded' | 'standin' | 'mongodb' = mongoUri ? 'mongodb' : process.env.STEWARD_TEST_STORE === 'standin' ? 'standin' : 'embedded';

let shared: Promise<MongoStandin> | undefined;

/**
 * The stand-in of this test process, started on first use; it lets the process exit.
 * Its `faults` reach the driver under test.
 */
export function standin(): Promise<MongoStandin> {
  if (!shared) {
    // Its data directory goes when the process does, however it ends.
    const dataDir = mkdtempSync(join(tmpdir(), 'steward-standin-'));
    process.once('exit', () => rmSync(dataDir, { recursive: true, force: true }));
    shared = startMongoStandin({ dataDir, log: (line) => standinLog.push(line), unref: true });
  }
  return shared;
}

/** What the stand-in of this process logged. */
export const standinLog: string[] = [];

/** The URI of a MongoDB for this run: MONGODB_URI, or the stand-in's. */
export async function mongoUriForTests(): Promise<string> {
  return mongoUri ?? (await standin()).uri('admin');
}

/** A fresh database name, unique to one server or case. */
export const testDbName = () => `steward_test_${Date.now()}_${nanoid(6).replace(/[^A-Za-z0-9]/g, 'x')}`;

/** Drops a database (used for cleaning up after a case). */
export async function dropDatabase(uri: string, dbName: string): Promise<void> {
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 5_000 });
  try {
    await client.db(dbName).dropDatabase();
  } finally {
    await client.close();
  }
}

export interface Backend {
  /** `embedded` or `mongodb` (a real server or the stand-in). */
  kind: 'embedded' | 'mongodb';
  /** Environment for startServer (empty for the embedded store). */
  env: Record<string, string>;
  /** The MongoDB database name, when on MongoDB. */
  dbName?: string;
  /** Removes what the backend kept outside the data directory (the MongoDB database). */
  drop(): Promise<void>;
}

export async function backend(): Promise<Backend> {
  if (storeKind === 'embedded') return { kind: 'embedded', env: {}, drop: async () => undefined };
  const uri = await mongoUriForTests();
  const dbName = testDbName();
  return {
    kind: 'mongodb',
    dbName,
    env: { MONGODB_URI: uri, MONGODB_DB: dbName, STEWARD_SECRET_KEY: randomBytes(32).toString('base64') },
    drop: () => dropDatabase(uri, dbName),
  };
}
