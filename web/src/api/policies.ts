/** Policies (interface §4.4; global admins only). */
import { del, get, post, seg } from './http';
import type { Capability, ResourceLimits } from './types';

export interface Policy {
  id: string;
  agentDid: string | null;
  workspaceId: string | null;
  capabilities: Capability[];
  resourceLimits: ResourceLimits | null;
  expiresAt: string | null;
  createdBy: string;
  createdAt: string;
}

export interface PolicyBody {
  agentDid?: string;
  workspaceId?: string;
  capabilities: Capability[];
  resourceLimits?: ResourceLimits | null;
  expiresAt?: string;
}

export const listPolicies = (q: { agentDid?: string; workspaceId?: string; includeExpired?: boolean }) => get<{ policies: Policy[] }>('/api/policies', q);
export const createPolicy = (body: PolicyBody) => post<{ policy: Policy; sentTo: string[] }>('/api/policies', body);
export const revokePolicy = (id: string) => del<{ ok: true; sentTo: string[] }>(`/api/policies/${seg(id)}`);
