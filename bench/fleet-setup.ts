/**
 * What the benchmark servers (bench/server.ts, bench/cluster-server.ts) do to a fresh Steward
 * before the load starts: an owner session and a workspace, and N agents registered and
 * approved directly through the store (fast), with the keys bench/keys.ts derives.
 */
import { fleetOf } from '../src/app/handle.js';
import { nanoid } from 'nanoid';
import type { Steward } from '../src/server.js';
import type { AgentDoc, WorkspaceAgentDoc } from '../src/store/collections.js';
import { benchKey } from './keys.js';

/** The owner's session token and a new workspace "Bench". */
export async function ownerAndWorkspace(steward: Steward): Promise<{ token: string; workspaceId: string }> {
  const ownerDoc = await steward.ctx.c.users.findOne({ isOwner: true });
  const token = (await steward.ctx.sessions.create('user', ownerDoc!._id)).token;
  const now = new Date().toISOString();
  const ws = { _id: nanoid(), name: 'Bench', slug: 'bench', color: '#000000', description: '', isDefault: false, createdAt: now, updatedAt: now, createdBy: null };
  await steward.ctx.c.workspaces.insertOne(ws);
  return { token, workspaceId: ws._id };
}

/** Agents `seed`:0 … `seed`:count-1, active, members of the workspace. */
export async function preregister(steward: Steward, seed: string, count: number, workspaceId: string): Promise<void> {
  const c = steward.ctx.c;
  const now = new Date().toISOString();
  for (let from = 0; from < count; from += 2000) {
    const agents: AgentDoc[] = [];
    const members: WorkspaceAgentDoc[] = [];
    for (let i = from; i < Math.min(count, from + 2000); i++) {
      const k = benchKey(seed, i);
      agents.push({
        _id: k.did,
        name: `bench-${i}`,
        publicKey: k.publicKey,
        version: '1.0.0',
        status: 'active',
        capabilities: ['api_call', 'file_access'],
        requestedCapabilities: ['api_call', 'file_access'],
        registeredAt: now,
        lastSeen: null,
      });
      members.push({ _id: nanoid(), workspaceId, agentDid: k.did, isPrimary: true, joinedAt: now });
    }
    await c.agents.insertMany(agents);
    await c.workspaceAgents.insertMany(members);
    // Written behind the fleet's back: the summary's counters and the agents list's rows are
    // told, as registration would (without the second, GET /api/agents answers an empty list).
    const { summary, roster } = fleetOf(steward.ctx);
    await Promise.all(agents.map((a) => summary.agentChanged(a._id)));
    await roster.changed(agents.map((a) => a._id));
  }
}
