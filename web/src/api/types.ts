/** Shapes shared by several areas of the interface. */

// The interface's capabilities: one list, the server's (a plain module with no imports, bundled as it is).
import { CAPABILITIES, type Capability } from '../../../src/domain/capabilities';

export { CAPABILITIES, type Capability };

export const CAPABILITY_TEXT: Record<Capability, string> = {
  file_access: 'Read and write files within the workspace root',
  internet_access: 'Outbound HTTP/HTTPS requests',
  browser_control: 'Control a headless browser',
  api_call: 'Call external APIs in a structured way',
  mail_send: 'Send email',
  code_execution: 'Execute code in a sandbox',
  system_command: 'Execute shell commands',
  agent_communication: 'Send intents to peer agents',
  knowledge_search: 'Query its local knowledge base',
};

export const WORKSPACE_ROLES = ['member', 'operator', 'manager', 'admin', 'owner'] as const;
export type WorkspaceRole = (typeof WORKSPACE_ROLES)[number];
export const GLOBAL_ROLES = ['owner', 'admin', 'manager', 'operator', 'member'] as const;
export type GlobalRole = (typeof GLOBAL_ROLES)[number];

export interface WorkspaceRef {
  id: string;
  name: string;
  slug: string;
  color: string;
}

export interface ResourceLimits {
  maxTokensPerDay?: number;
  maxRequestsPerHour?: number;
  allowedDomains?: string[];
}

export interface TokenCounts {
  promptTokens: number;
  completionTokens: number;
}
export interface TokenStats {
  allTime: TokenCounts;
  daily: TokenCounts;
  monthly: TokenCounts;
}

export interface Grant {
  id: string;
  agentDid: string | null;
  capabilities: Capability[];
  expiresAt: string | null;
  createdAt: string;
}
