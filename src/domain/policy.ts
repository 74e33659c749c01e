/**
 * Effective policy of an agent (DESIGN §4): its newest unexpired agent-scoped policy, else the
 * newest unexpired policy of its primary workspace, else none — then the certificate carries the
 * capabilities approved at registration, no limits and policyId null. A policy's capabilities
 * replace the approved ones (a policy grants; it is written by a global admin).
 *
 * An expired policy no longer counts: an agent whose certificate still carries it refuses every
 * intent (its local gate 2) until it receives a new certificate — when a policy is created or
 * deleted for it, or when it next connects (the server then finds the stored certificate out of
 * date and reissues it).
 */
import type { Capability } from './capabilities.js';
import type { CertificateTerms } from './certificate.js';

export interface PolicyResourceLimits {
  maxTokensPerDay?: number;
  maxRequestsPerHour?: number;
  allowedDomains?: string[];
}

/** A policy (interface §2.4): agent-scoped when agentDid is set, else workspace-scoped. */
export interface Policy {
  _id: string;
  agentDid: string | null;
  workspaceId: string | null;
  capabilities: Capability[];
  resourceLimits: PolicyResourceLimits | null;
  expiresAt: string | null;
  createdBy: string;
  createdAt: string;
}

export function isExpired(p: Pick<Policy, 'expiresAt'>, now: number): boolean {
  return p.expiresAt !== null && Date.parse(p.expiresAt) <= now;
}

/** Newest first: createdAt descending, then id descending (ids break ties deterministically). */
export function newerFirst(a: Policy, b: Policy): number {
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? 1 : -1;
  return a._id < b._id ? 1 : a._id > b._id ? -1 : 0;
}

function newestUnexpired(list: readonly Policy[] | undefined, now: number): Policy | null {
  let best: Policy | null = null;
  for (const p of list ?? []) if (!isExpired(p, now) && (best === null || newerFirst(p, best) < 0)) best = p;
  return best;
}

/**
 * The policy that applies to an agent, given its agent-scoped policies and those of its primary
 * workspace (expired ones may be included; they are skipped).
 */
export function effectivePolicy(agentPolicies: readonly Policy[] | undefined, workspacePolicies: readonly Policy[] | undefined, now: number): Policy | null {
  return newestUnexpired(agentPolicies, now) ?? newestUnexpired(workspacePolicies, now);
}

/** What the agent's certificate must carry under a policy (or under none). */
export function termsFor(policy: Policy | null, approved: readonly Capability[]): CertificateTerms {
  if (!policy) return { capabilities: [...approved], resourceLimits: null, policyId: null, policyExpiresAt: null };
  return {
    capabilities: [...policy.capabilities],
    resourceLimits: policy.resourceLimits,
    policyId: policy._id,
    policyExpiresAt: policy.expiresAt,
  };
}
