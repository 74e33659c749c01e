/**
 * Out-of-date certificates: an active agent whose current co-signed certificate carries other
 * terms than its effective policy gives now (a policy came, went or expired while it was offline;
 * it gets the new terms at its next handshake). The fleet summary counts them among the
 * certificates awaiting re-issue. Many agents are judged with one read of each collection
 * (agents, memberships, certificates), whatever their number.
 */
import { sameTerms, type Certificate, type CertificateTerms } from '../domain/certificate.js';
import type { AgentDoc, Collections, WorkspaceAgentDoc } from '../store/collections.js';
import type { PolicyService, PrimaryChoice } from './policies.js';

/** What judging an agent needs of its record. */
export type AgentTermsRow = Pick<AgentDoc, '_id' | 'status' | 'capabilities'>;
/** What judging an agent needs of a membership. */
export type MembershipRow = PrimaryChoice & Pick<WorkspaceAgentDoc, 'agentDid'>;

/** The projections that read those (for callers that read agents and memberships for more). */
export const AGENT_TERMS_FIELDS = { status: 1, capabilities: 1 } as const;
export const MEMBERSHIP_FIELDS = { agentDid: 1, workspaceId: 1, isPrimary: 1, joinedAt: 1 } as const;

/** The terms of the current (newest) certificate of each of `dids`, or of every agent; agents without one are absent. */
export async function heldTerms(c: Collections, dids?: readonly string[]): Promise<Map<string, CertificateTerms>> {
  const docs = await c.certificates.find(dids ? { agentDid: { $in: [...dids] } } : {}, { projection: { agentDid: 1, canonical: 1, acceptedAt: 1 } });
  // Superseded certificates stay until they are pruned: the newest (acceptedAt, then serial) is current.
  const newest = new Map<string, (typeof docs)[number]>();
  for (const d of docs) {
    const was = newest.get(d.agentDid);
    if (!was || d.acceptedAt > was.acceptedAt || (d.acceptedAt === was.acceptedAt && d._id > was._id)) newest.set(d.agentDid, d);
  }
  const out = new Map<string, CertificateTerms>();
  for (const [did, d] of newest) {
    const cert = JSON.parse(d.canonical) as Certificate;
    out.set(did, { capabilities: cert.capabilities, resourceLimits: cert.resourceLimits, policyId: cert.policyId, policyExpiresAt: cert.policyExpiresAt });
  }
  return out;
}

/** Whether an agent's certificate is out of date: it is active, holds one, and its terms are not those it would be given now. */
export function isStale(policies: PolicyService, agent: AgentTermsRow, memberships: readonly PrimaryChoice[], held: CertificateTerms | undefined, now = Date.now()): boolean {
  if (agent.status !== 'active' || held === undefined) return false;
  return !sameTerms(held, policies.termsWith(agent, memberships, now));
}

/** Groups memberships by agent. */
export function byAgent(memberships: readonly MembershipRow[]): Map<string, MembershipRow[]> {
  const out = new Map<string, MembershipRow[]>();
  for (const m of memberships) {
    const list = out.get(m.agentDid);
    if (list) list.push(m);
    else out.set(m.agentDid, [m]);
  }
  return out;
}

/**
 * Which of `dids` hold an out-of-date certificate now (three reads). Agents not found are absent
 * from the answer. The terms are those of the policies as they are when the reads have come back.
 */
export async function staleAmong(c: Collections, policies: PolicyService, dids: readonly string[]): Promise<Map<string, boolean>> {
  const out = new Map<string, boolean>();
  if (dids.length === 0) return out;
  const list = [...dids];
  const [agents, memberships, held] = await Promise.all([
    c.agents.find({ _id: { $in: list } }, { projection: AGENT_TERMS_FIELDS }),
    c.workspaceAgents.find({ agentDid: { $in: list } }, { projection: MEMBERSHIP_FIELDS }),
    heldTerms(c, list),
  ]);
  const of = byAgent(memberships);
  const now = Date.now();
  for (const a of agents) out.set(a._id, isStale(policies, a, of.get(a._id) ?? [], held.get(a._id), now));
  return out;
}
