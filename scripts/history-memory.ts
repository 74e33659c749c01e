/**
 * What per-agent history costs a server on the embedded store, which holds every document in
 * memory (figures for docs/performance.md):
 *
 * - token usage history: `days` UTC days of `token_agent_days` documents for each of `agents`
 *   agents, written as the daily prune writes them (one upsert per agent and day, with the
 *   collection's indexes), heap used per agent after a full collection;
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

async function tokenHistory(): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'steward-history-'));
  const store = await openStore({ dataDir });
  try {
    const c = collections(store);
    await ensureIndexes(c, store.kind);
    const dids = Array.from({ length: agents }, () => generateKeyPair().did);
    const before = heap();
    const t0 = Date.UTC(2026, 0, 1);
    for (let d = 0; d < days; d++) {
      const day = new Date(t0 + d * 86_400_000).toISOString().slice(0, 10);
      for (let i = 0; i < dids.length; i += 100) {
        await c.tokenAgentDays.bulkUpdate(
          dids.slice(i, i + 100).map((did, j) => ({
            filter: { _id: `${did}|${day}` },
            update: { $set: { agentDid: did, day, promptTokens: 100_000 + i + j, completionTokens: 20_000 + d } },
            upsert: true,
          })),
        );
      }
    }
    const after = heap();
    console.log(`token history: ${agents} agents x ${days} days: ${((after - before) / agents / 1024).toFixed(2)} KiB of heap per agent (${((after - before) / agents / days).toFixed(0)} bytes per agent-day)`);
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

await tokenHistory();
sinceField();
await summaryRecords();
