/**
 * What per-agent history costs a server on the embedded store, which holds every document in
 * memory (figures for docs/performance.md):
 *
 * - token usage history: `days` UTC days for each of `agents` agents, heap used per agent after a
 *   full collection, in two shapes: a document per agent and day, and a document per agent and
 *   month (what `token_agent_months` holds), each with its collection's two indexes;
 * - `since` on each hosted actor's entry (src/actors/hosted.ts): heap per entry with it, against
 *   entries with the fields they had before it;
 * - the fleet summary's records (src/services/fleet-summary.ts) for 18,000 agents in one workspace.
 *
 * Usage: node --expose-gc --import tsx scripts/history-memory.ts [agents] [days]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../src/store/index.js';
import { collections, ensureIndexes } from '../src/store/collections.js';
import { generateKeyPair } from '../src/domain/did.js';
import { Entry, type KindState } from '../src/actors/hosted.js';
import { FleetSummary } from '../src/services/fleet-summary.js';
import type { ServiceCore } from '../src/services/core.js';
import type { PolicyService } from '../src/services/policies.js';

const agents = Number(process.argv[2] ?? 2000);
const days = Number(process.argv[3] ?? 90);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

const heap = () => {
  gc!();
  gc!();
  return process.memoryUsage().heapUsed;
};

/**
 * Heap per agent of `days` days of history in one of two shapes: a document per agent and day
 * (`{_id: did|day, agentDid, day, promptTokens, completionTokens}`, indexed on agentDid and day),
 * or a document per agent and month whose days are one text (`{_id: did|month, agentDid, month,
 * days: "DD prompt completion;..."}`, indexed on agentDid and month).
 */
async function tokenHistory(shape: 'day' | 'month'): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'steward-history-'));
  const store = await openStore({ dataDir });
  try {
    type Probe = { _id: string; agentDid: string; day?: string; month?: string; days?: string; promptTokens?: number; completionTokens?: number };
    const coll = store.collection<Probe>(`probe_${shape}`);
    await coll.createIndex({ fields: { agentDid: 1 } });
    await coll.createIndex({ fields: shape === 'day' ? { day: 1 } : { month: 1 } });
    const dids = Array.from({ length: agents }, () => generateKeyPair().did);
    const before = heap();
    const t0 = Date.UTC(2026, 0, 1);
    const texts = new Map<string, string>();
    for (let d = 0; d < days; d++) {
      const day = new Date(t0 + d * 86_400_000).toISOString().slice(0, 10);
      const month = day.slice(0, 7);
      for (let i = 0; i < dids.length; i += 100) {
        await coll.bulkUpdate(
          dids.slice(i, i + 100).map((did, j) => {
            const p = 100_000 + i + j;
            const c = 20_000 + d;
            if (shape === 'day') return { filter: { _id: `${did}|${day}` }, update: { $set: { agentDid: did, day, promptTokens: p, completionTokens: c } }, upsert: true };
            const id = `${did}|${month}`;
            const text = `${texts.get(id) ? `${texts.get(id)};` : ''}${day.slice(8)} ${p} ${c}`;
            texts.set(id, text);
            return { filter: { _id: id }, update: { $set: { agentDid: did, month, days: text } }, upsert: true };
          }),
        );
      }
    }
    texts.clear();
    const after = heap();
    console.log(`token history, a document per agent and ${shape}: ${agents} agents x ${days} days: ${((after - before) / agents / 1024).toFixed(2)} KiB of heap per agent (${((after - before) / agents / days).toFixed(0)} bytes per agent-day)`);
  } finally {
    await store.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** Entry's fields as they were before `since` (the comparison's baseline). */
class EntryWithoutSince {
  actor: unknown = undefined;
  usedEpoch = 0;
  seen: unknown = undefined;
  frozen: unknown = undefined;
  waiters: unknown = undefined;
  dirty = false;
  busy = false;
  retired = false;
  restoring = false;
  passivating = false;
  deleteOnFlush = false;
  constructor(
    readonly owner: unknown,
    readonly kind: unknown,
    readonly id: string,
  ) {}
}

function sinceField(): void {
  const n = 18_000;
  const kind = { name: 'agent' } as unknown as KindState;
  const owner = { actorFailed: () => undefined };
  const ids = Array.from({ length: n }, (_, i) => `id-${i}`);
  const measure = (make: (id: string) => object) => {
    const before = heap();
    const kept = ids.map(make);
    return { bytes: heap() - before, kept };
  };
  const without = measure((id) => new EntryWithoutSince(owner, kind, id));
  const withSince = measure((id) => new Entry(owner, kind, id));
  console.log(`actor entries (${n}): ${(withSince.bytes / n).toFixed(1)} bytes each with since, ${(without.bytes / n).toFixed(1)} without (${withSince.kept.length + without.kept.length} kept)`);
}

async function summaryRecords(): Promise<void> {
  const n = 18_000;
  const dataDir = await mkdtemp(join(tmpdir(), 'steward-summary-'));
  const store = await openStore({ dataDir });
  try {
    const c = collections(store);
    await ensureIndexes(c, store.kind);
    const now = new Date().toISOString();
    for (let i = 0; i < n; i += 1000) {
      const dids = Array.from({ length: Math.min(1000, n - i) }, (_, j) => `did:key:z6Mkbench${String(i + j).padStart(40, '0')}`);
      await c.agents.insertMany(dids.map((did) => ({ _id: did, name: did.slice(-8), publicKey: 'x', version: '1', status: 'active' as const, capabilities: [], requestedCapabilities: [], registeredAt: now, lastSeen: null })));
      await c.workspaceAgents.insertMany(dids.map((did) => ({ _id: `m-${did}`, workspaceId: 'ws-1', agentDid: did, isPrimary: true, joinedAt: now })));
    }
    const before = heap();
    const summary = new FleetSummary({ c, log: console } as unknown as ServiceCore, {} as PolicyService);
    await summary.start();
    const after = heap();
    console.log(`fleet summary: ${n} agents: ${((after - before) / n).toFixed(1)} bytes of heap per agent (${summary.workspacesOf('none').length})`);
  } finally {
    await store.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

await tokenHistory('day');
await tokenHistory('month');
sinceField();
await summaryRecords();
