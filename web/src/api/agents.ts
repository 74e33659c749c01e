/** Agents, registrations, intents and LLM configuration (docs/fleet.md, docs/models.md). */
import { del, get, post, put, seg, type Page } from './http';
import type { Policy } from './policies';
import type { Capability, ResourceLimits, TokenStats, WorkspaceRef } from './types';

export interface AgentItem {
  id: string;
  name: string;
  /** Approved at registration. */
  capabilities: Capability[];
  /** What the agent enforces now (its co-signed certificate's); null before its first certificate. */
  capabilitiesInForce: Capability[] | null;
  llmProvider: string | null;
  llmModel: string | null;
  isOnline: boolean;
  registeredAt: string;
  lastSeen: string | null;
  workspace: WorkspaceRef | null;
}

/** The policy in force for an agent: a policy (api/policies.ts) and whether it is the agent's or its workspace's. */
export interface EffectivePolicy extends Policy {
  scope: 'agent' | 'workspace';
}

export interface Certificate {
  version: number;
  serial: string;
  subject: string;
  subjectPublicKey: string;
  issuer: string;
  issuedAt: string;
  capabilities: Capability[];
  resourceLimits: ResourceLimits | null;
  policyId: string | null;
  policyExpiresAt: string | null;
  nonce: string;
}

export interface AgentDetail extends AgentItem {
  llmSystemPrompt: string;
  publicKey: string;
  version: string | null;
  workspaces: Array<WorkspaceRef & { isPrimary: boolean }>;
  policy: EffectivePolicy | null;
  certificate: { certificate: Certificate; serverSignature: string; agentSignature: string; acceptedAt: string } | null;
  tokenUsage: TokenStats;
}

export interface AgentQuery {
  q?: string;
  online?: boolean;
  workspace?: string;
  capabilities?: string;
  page?: number;
  pageSize?: number;
  sortBy?: 'name' | 'registeredAt' | 'lastSeen';
  sortDir?: 'asc' | 'desc';
}

export const listAgents = (query: AgentQuery, signal?: AbortSignal) => get<Page & { agents: AgentItem[]; online: number }>('/api/agents', { ...query }, signal);
export const getAgent = (did: string) => get<{ agent: AgentDetail }>(`/api/agents/${seg(did)}`);
export const searchAgents = (q: string) => get<{ agents: Array<{ did: string; name: string; capabilities: Capability[] }> }>('/api/agents/search', { q });
export const deleteAgent = (did: string) => del<{ ok: true }>(`/api/agents/${seg(did)}`);

export interface IntentAnswer {
  intentId: string;
  ok: boolean;
  output?: unknown;
  error?: string;
}
export const sendIntent = (did: string, body: { action: Capability; params: Record<string, unknown>; timeoutMs?: number }) =>
  post<IntentAnswer>(`/api/agents/${seg(did)}/intents`, body);

export interface Registration {
  id: string;
  name: string;
  publicKey: string;
  requestedCapabilities: Capability[];
  requestedAt: string;
  agentDid: string;
  version: string | null;
  workspaceId: string | null;
}
export const listRegistrations = () => get<{ registrations: Registration[]; availableCapabilities: Capability[] }>('/api/registrations');
export const approveRegistration = (id: string, capabilities: Capability[]) => post<{ success: true; agentId: string }>(`/api/registrations/${seg(id)}/approve`, { capabilities });
export const rejectRegistration = (id: string, reason: string) => post<{ success: true }>(`/api/registrations/${seg(id)}/reject`, { reason });

export interface LlmConfig {
  provider: string | null;
  baseUrl: string | null;
  model: string | null;
  apiKeySet: boolean;
}
export const getLlmConfig = (did: string) => get<{ config: LlmConfig }>(`/api/agents/${seg(did)}/llm-config`);
export type LlmConfigBody =
  | { workspaceId: string; workspaceModelId: string }
  | { registryModelId: string }
  | { provider: string; model: string; baseUrl?: string; apiKey?: string };
export const putLlmConfig = (did: string, body: LlmConfigBody) => put<{ ok: true; pushed: boolean; config: LlmConfig }>(`/api/agents/${seg(did)}/llm-config`, body);
export const deleteLlmConfig = (did: string) => del<{ ok: true }>(`/api/agents/${seg(did)}/llm-config`);

export interface WorkspaceLlm {
  proxyConfigured: boolean;
  proxyBaseUrl: string;
  workspaces: Array<{
    workspaceId: string;
    workspaceName: string;
    isPrimary: boolean;
    hasVirtualKey: boolean;
    models: Array<{ id: string; name: string; provider: string; modelId: string; proxyModelName: string | null }>;
  }>;
}
export const getWorkspaceLlm = (did: string) => get<WorkspaceLlm>(`/api/agents/${seg(did)}/workspace-llm`);
