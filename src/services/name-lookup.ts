/**
 * DID → display name for the audit and chat views (POST /api/lookup/names): people and agents,
 * answered only for those the caller may see, so the answer says nothing of the others (they are
 * left out, exactly like DIDs that name no one).
 *
 * Who sees whom: a global admin sees every person and agent; anyone else (an agent's session
 * too) sees themselves, the people who are members of one of their workspaces, and the active
 * agents of those workspaces.
 */
import { z } from 'zod';
import type { Collections } from '../store/collections.js';
import type { Principal } from '../domain/principal.js';
import { visibleWorkspaceIds } from './workspaces.js';

export const MAX_LOOKUP_DIDS = 200;

export const namesSchema = z.object({
  names: z.record(z.string(), z.object({ name: z.string(), kind: z.enum(['user', 'agent']) })),
});
export type NamesView = z.infer<typeof namesSchema>;

export async function lookupNames(c: Collections, p: Principal, dids: readonly string[]): Promise<NamesView> {
  const wanted = [...new Set(dids)];
  const names: NamesView['names'] = {};
  const workspaces = await visibleWorkspaceIds(c, p);
  const all = workspaces === 'all';
  const mine = new Set(all ? [] : workspaces);
  const shared = (ids: string[]) => all || ids.some((id) => mine.has(id));

  const users = await c.users.find({ did: { $in: wanted } }, { projection: { did: 1, name: 1 } });
  const userWorkspaces =
    !all && users.length > 0
      ? workspacesOf(await c.workspaceMembers.find({ userId: { $in: users.map((u) => u._id) } }, { projection: { userId: 1, workspaceId: 1 } }), (m) => m.userId)
      : new Map<string, string[]>();
  for (const u of users) {
    const self = p.kind === 'user' && p.userId === u._id;
    if (u.did && (self || shared(userWorkspaces.get(u._id) ?? []))) names[u.did] = { name: u.name, kind: 'user' };
  }

  const agentDids = wanted.filter((d) => names[d] === undefined);
  if (agentDids.length === 0) return { names };
  const agents = await c.agents.find({ _id: { $in: agentDids } }, { projection: { name: 1, status: 1 } });
  const agentWorkspaces =
    !all && agents.length > 0
      ? workspacesOf(await c.workspaceAgents.find({ agentDid: { $in: agents.map((a) => a._id) } }, { projection: { agentDid: 1, workspaceId: 1 } }), (m) => m.agentDid)
      : new Map<string, string[]>();
  for (const a of agents) {
    const self = p.kind === 'agent' && p.did === a._id;
    if (all || self || (a.status === 'active' && shared(agentWorkspaces.get(a._id) ?? []))) names[a._id] = { name: a.name, kind: 'agent' };
  }
  return { names };
}

/** The workspace ids of each member (user id or agent DID) in a list of membership rows. */
function workspacesOf<M extends { workspaceId: string }>(rows: readonly M[], member: (m: M) => string): Map<string, string[]> {
  const byMember = new Map<string, string[]>();
  for (const m of rows) {
    const list = byMember.get(member(m)) ?? [];
    list.push(m.workspaceId);
    byMember.set(member(m), list);
  }
  return byMember;
}
