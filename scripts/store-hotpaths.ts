/**
 * Time and allocations of the embedded store's hot paths for a held fleet's documents: 18,000
 * token-totals documents (an agent's DID as `_id`, nested counters, timestamps) inserted one by
 * one, read by `_id`, read by an indexed field, incremented by `bulkUpdate` (the in-place path),
 * given a new nested field by `bulkUpdate` (the merge path), and compacted. Each phase runs
 * ROUNDS times for its median time (wall clock, and the process's CPU time) and its least CPU time
 * (the steadiest figure on a busy machine), then twice under V8's sampling heap profiler (collected
 * objects included) for the bytes it allocates per operation (the lower of the two).
 *
 * Usage: node --expose-gc --import tsx scripts/store-hotpaths.ts [agents] [rounds]
 */
import { Session } from 'node:inspector/promises';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, type Collection, type Doc } from '../src/store/index.js';

const AGENTS = Number(process.argv[2] ?? 18_000);
const ROUNDS = Number(process.argv[3] ?? 5);
const CHUNK = 500; // what the actor host and the token roll-up send per bulkUpdate

interface Counts {
  promptTokens: number;
  completionTokens: number;
  requests: number;
}
interface TotalsDoc extends Doc {
  workspaceId: string;
  allTime: Counts;
  days: Record<string, Counts>;
  lastSeen: string;
  updatedAt: string;
}

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

const did = (i: number) => `did:key:z6Mk${i.toString(36).padStart(8, '0')}${'q'.repeat(36)}`;
const iso = (ms: number) => new Date(Date.UTC(2026, 10, 26) + ms).toISOString();
const counts = (n: number): Counts => ({ promptTokens: n, completionTokens: 2 * n, requests: 1 });
const newDoc = (i: number): TotalsDoc => ({
  _id: did(i),
  workspaceId: `ws-${i % 20}`,
  allTime: counts(i),
  days: { '2026-11-26': counts(i) },
  lastSeen: iso(i),
  updatedAt: iso(i),
});

const session = new Session();
session.connect();

interface ProfileNode {
  selfSize: number;
  children: ProfileNode[];
}
const total = (n: ProfileNode): number => n.children.reduce((sum, c) => sum + total(c), n.selfSize);

/** Runs `fn` under V8's sampling heap profiler; returns the bytes it allocated (estimated from the samples). */
async function allocated(fn: () => Promise<void>): Promise<number> {
  gc!();
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 512,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  } as never);
  await fn();
  const { profile } = (await session.post('HeapProfiler.stopSampling')) as unknown as { profile: { head: ProfileNode } };
  return total(profile.head);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** ROUNDS timed runs, then two under the allocation profiler (which slows them); `before` prepares each. */
async function phase(name: string, ops: number, run: (round: number) => Promise<void>, before?: (round: number) => Promise<void>): Promise<void> {
  const times: number[] = [];
  const cpu: number[] = [];
  const bytes: number[] = [];
  let round = 0;
  for (; round < ROUNDS; round++) {
    await before?.(round);
    gc!();
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await run(round);
    times.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
  }
  for (const end = round + 2; round < end; round++) {
    await before?.(round);
    bytes.push(await allocated(() => run(round)));
  }
  const ms = median(times);
  const cpuMs = median(cpu);
  const bestCpuMs = Math.min(...cpu);
  const perOp = Math.min(...bytes) / ops;
  const us = (total: number) => ((total * 1000) / ops).toFixed(2).padStart(9);
  console.log(
    `${name.padEnd(36)} ${us(ms)} µs/op ${us(cpuMs)} µs CPU/op ${us(bestCpuMs)} best ${perOp.toFixed(0).padStart(8)} B/op  (ms: ${times.map((t) => t.toFixed(0)).join(', ')})`,
  );
}

async function main(): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'steward-hotpaths-'));
  const store = await openStore({ dataDir });
  try {
    let coll: Collection<TotalsDoc>;
    let generation = 0;
    const fresh = async () => {
      coll = store.collection<TotalsDoc>(`totals${generation++}`);
      await coll.createIndex({ fields: { workspaceId: 1 } });
    };
    console.log(`${AGENTS} documents, ${ROUNDS} rounds, node ${process.version}`);

    // Retained heap of the documents (their index entries included).
    await fresh();
    gc!();
    const heapBefore = process.memoryUsage().heapUsed;
    for (let i = 0; i < AGENTS; i++) await coll!.insertOne(newDoc(i));
    gc!();
    console.log(`retained heap per document: ${((process.memoryUsage().heapUsed - heapBefore) / AGENTS).toFixed(0)} B`);

    await phase(
      'insertOne (one append each)',
      AGENTS,
      async () => {
        for (let i = 0; i < AGENTS; i++) await coll.insertOne(newDoc(i));
      },
      fresh,
    );

    const ids = Array.from({ length: AGENTS }, (_, i) => did(i));
    await phase('findById', AGENTS, async () => {
      for (const id of ids) if ((await coll.findById(id)) === null) throw new Error(`missing ${id}`);
    });

    await phase('find({workspaceId}) (indexed field)', 20, async () => {
      for (let w = 0; w < 20; w++) await coll.find({ workspaceId: `ws-${w}` });
    });

    const incOps = ids.map((id) => ({
      filter: { _id: id },
      update: { $inc: { 'allTime.promptTokens': 5, 'allTime.completionTokens': 7, 'days.2026-11-26.requests': 1 }, $set: { lastSeen: iso(1e6) } },
    }));
    const incChunks: Array<typeof incOps> = [];
    for (let i = 0; i < incOps.length; i += CHUNK) incChunks.push(incOps.slice(i, i + CHUNK));
    await phase('bulkUpdate $inc/$set (in place)', AGENTS, async () => {
      for (const chunk of incChunks) await coll.bulkUpdate(chunk);
    });

    let dayOps: Array<Array<{ filter: { _id: string }; update: { $set: Record<string, Counts> } }>> = [];
    await phase(
      'bulkUpdate new day (merge)',
      AGENTS,
      async () => {
        for (const chunk of dayOps) await coll.bulkUpdate(chunk);
      },
      async (round) => {
        const day = `2026-12-${String(round + 1).padStart(2, '0')}`;
        dayOps = [];
        for (let i = 0; i < ids.length; i += CHUNK) {
          dayOps.push(ids.slice(i, i + CHUNK).map((id) => ({ filter: { _id: id }, update: { $set: { [`days.${day}`]: counts(3) } } })));
        }
      },
    );

    await phase('compact', AGENTS, async () => {
      await store.compact!(coll.name);
    });
  } finally {
    await store.close();
    await rm(dataDir, { recursive: true, force: true });
    session.disconnect();
  }
}

await main();
