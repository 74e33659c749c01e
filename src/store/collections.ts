/**
 * The documents Steward stores, one interface per collection, and the indexes each needs.
 * Field names follow the interface document where it shows them; internal fields are camelCase.
 * All timestamps are ISO 8601 strings.
 */
import type { Collection, Store } from './types.js';
import type { GlobalRole } from '../domain/principal.js';

export type WorkspaceRole = 'member' | 'operator' | 'manager' | 'admin' | 'owner';
export const WORKSPACE_ROLES: readonly WorkspaceRole[] = ['member', 'operator', 'manager', 'admin', 'owner'];

export const CAPABILITIES = [
  'file_access',
  'internet_access',
  'browser_control',
  'api_call',
  'mail_send',
  'code_execution',
  'system_command',
  'agent_communication',
  'knowledge_search',
] as const;
export type Capability = (typeof CAPABILITIES)[number];

/** Server identity and other singletons (`_id` names the setting). */
export interface SettingDoc {
  _id: string;
  value: unknown;
  updatedAt: string;
}

export interface UserDoc {
  _id: string; // UUID
  did: string | null;
  /** Raw Ed25519 public key, base64url; set at claim (derived from did:key when possible). */
  publicKey: string | null;
  name: string;
  email: string;
  /** Lower-cased email for lookups and uniqueness. */
  emailLower: string;
  isOwner: boolean;
  isAdmin: boolean;
  role: GlobalRole;
  registeredAt: string;
  directoryId: string | null;
  claimedAt: string | null;
  reportsTo: string | null;
  description: string | null;
}

/**
 * Reservation of a DID by one user: `_id` is the DID, so the primary key makes a DID unique
 * across users on every backend (a unique index on the nullable `users.did` would make
 * unclaimed users collide). Written before `users.did` is set, removed when the user goes.
 */
export interface UserDidDoc {
  _id: string; // the DID
  userId: string;
  createdAt: string;
}

export interface WorkspaceDoc {
  _id: string;
  name: string;
  slug: string;
  color: string;
  description: string;
  isDefault: boolean;
  createdAt: string;
  updatedAt: string;
  createdBy: string | null;
}

/** A person's membership of a workspace. */
export interface WorkspaceMemberDoc {
  _id: string;
  workspaceId: string;
  userId: string;
  role: WorkspaceRole;
  isPrimary: boolean;
  joinedAt: string;
}

/** An agent's membership of a workspace; exactly one is primary. */
export interface WorkspaceAgentDoc {
  _id: string;
  workspaceId: string;
  agentDid: string;
  isPrimary: boolean;
  joinedAt: string;
}

export interface SessionDoc {
  _id: string;
  /** SHA-256 of the token, hex. The token itself is never stored. */
  tokenHash: string;
  kind: 'user' | 'agent';
  /** User id for people, DID for agents. */
  subject: string;
  createdAt: string;
  lastUsedAt: string;
  expiresAt: string;
}

export interface ChallengeDoc {
  _id: string;
  did: string;
  nonce: string;
  expiresAt: string;
  usedAt: string | null;
}

/** A claim session (send-qr, invitation, GET /api/users/invite); polled through listen. */
export interface ClaimSessionDoc {
  _id: string; // the token
  /** The unclaimed user it completes; null for an open invite (GET /api/users/invite). */
  userId: string | null;
  nonce: string;
  /** -1 pending, 2 success, -2 failed or expired. */
  status: -1 | 2 | -2;
  kind: 'send-qr' | 'invitation' | 'invite-link' | 'owner-bootstrap';
  invitationToken: string | null;
  createdAt: string;
  expiresAt: string;
  completedAt: string | null;
  claimedDid: string | null;
  failure: string | null;
}

export interface InvitationDoc {
  _id: string; // token (UUID)
  email: string;
  emailLower: string;
  name: string;
  role: GlobalRole;
  userId: string;
  createdAt: string;
  createdBy: string | null;
}

export interface GrantDoc {
  _id: string;
  userId: string;
  userDid: string;
  agentDid: string | null;
  capabilities: Capability[];
  expiresAt: string | null;
  createdAt: string;
  createdBy: string;
}

export interface AuditDoc {
  _id: string;
  at: string;
  /** DID (or user id) of who did it; `system` for the server itself. */
  actor: string;
  actorType: 'user' | 'agent' | 'system';
  action: string;
  targetType: string;
  target: string | null;
  details: Record<string, unknown>;
}

/**
 * An agent, keyed by its DID. Created at registration (status pending) and owned by the agent
 * actor afterwards (src/actors/agent.ts, src/services/fleet.ts).
 */
export interface AgentDoc {
  _id: string; // the DID
  name: string;
  /** Raw Ed25519 public key, base64url. */
  publicKey: string;
  version: string;
  status: 'pending' | 'active' | 'rejected';
  /** Capabilities approved at registration. */
  capabilities: Capability[];
  requestedCapabilities: Capability[];
  registeredAt: string;
  /** Last frame received, written in batches (at most every AGENT_LAST_SEEN_WRITE_SECONDS while connected, and at disconnect). */
  lastSeen: string | null;
  /** Not maintained in the store: whether an agent is online is the gateway's live state (FleetService.isOnline). */
  isOnline?: boolean;
  /** The registration this agent came from. */
  registrationId?: string;
  /** Set by the model-configuration area; null until then. */
  llmProvider?: string | null;
  llmModel?: string | null;
  llmSystemPrompt?: string | null;
}

/** A registration request (interface §2.6); pending ones are listed by GET /api/registrations. */
export interface RegistrationDoc {
  _id: string;
  agentDid: string;
  name: string;
  publicKey: string;
  version: string;
  requestedCapabilities: Capability[];
  /** The workspace named at registration, else the default workspace; primary at approval. */
  workspaceId: string;
  requestedAt: string;
  via: 'websocket' | 'http';
  status: 'pending' | 'approved' | 'rejected';
  approvedCapabilities: Capability[] | null;
  reason: string | null;
  decidedAt: string | null;
  decidedBy: string | null;
}

export interface PolicyResourceLimits {
  maxTokensPerDay?: number;
  maxRequestsPerHour?: number;
  allowedDomains?: string[];
}

/** A policy (interface §2.4): agent-scoped when agentDid is set, else workspace-scoped. */
export interface PolicyDoc {
  _id: string;
  agentDid: string | null;
  workspaceId: string | null;
  capabilities: Capability[];
  resourceLimits: PolicyResourceLimits | null;
  expiresAt: string | null;
  createdBy: string;
  createdAt: string;
}

/**
 * A co-signed certificate, keyed by its serial. Append-only (written in batches); an agent's
 * current certificate is its newest one, older ones are deleted once superseded.
 */
export interface CertificateDoc {
  _id: string; // the serial
  agentDid: string;
  /** The certificate object exactly as signed (schemas/certificate.schema.json). */
  certificate: Record<string, unknown>;
  serverSignature: string;
  agentSignature: string;
  acceptedAt: string;
}

/**
 * Token usage (interface §4.13). Per agent (`_id` = the DID): allTime plus daily (UTC
 * YYYY-MM-DD) and monthly (YYYY-MM) buckets; the global aggregate lives in `_id` `global`.
 * Written by the roll-up of token_ledger (src/services/token-usage.ts).
 */
export interface TokenUsageDoc {
  _id: string;
  allTime: { promptTokens: number; completionTokens: number };
  days: Record<string, { promptTokens: number; completionTokens: number }>;
  months: Record<string, { promptTokens: number; completionTokens: number }>;
  /** _id of the last ledger document folded into this one. */
  rolledUpTo: string;
  updatedAt: string;
}

/** One batch of acknowledged heartbeat deltas, written in one store operation before the acks go out. */
export interface TokenLedgerDoc {
  _id: string; // time-ordered
  at: string;
  day: string;
  month: string;
  /** Sum of the entries. */
  promptTokens: number;
  completionTokens: number;
  /** [agentDid, promptTokens, completionTokens] per heartbeat. */
  entries: Array<[string, number, number]>;
}

export interface Collections {
  settings: Collection<SettingDoc>;
  users: Collection<UserDoc>;
  userDids: Collection<UserDidDoc>;
  workspaces: Collection<WorkspaceDoc>;
  workspaceMembers: Collection<WorkspaceMemberDoc>;
  workspaceAgents: Collection<WorkspaceAgentDoc>;
  sessions: Collection<SessionDoc>;
  challenges: Collection<ChallengeDoc>;
  claimSessions: Collection<ClaimSessionDoc>;
  invitations: Collection<InvitationDoc>;
  grants: Collection<GrantDoc>;
  audit: Collection<AuditDoc>;
  agents: Collection<AgentDoc>;
  registrations: Collection<RegistrationDoc>;
  policies: Collection<PolicyDoc>;
  certificates: Collection<CertificateDoc>;
  tokenUsage: Collection<TokenUsageDoc>;
  tokenLedger: Collection<TokenLedgerDoc>;
}

export function collections(store: Store): Collections {
  return {
    settings: store.collection('settings'),
    users: store.collection('users'),
    userDids: store.collection('user_dids'),
    workspaces: store.collection('workspaces'),
    workspaceMembers: store.collection('workspace_members'),
    workspaceAgents: store.collection('workspace_agents'),
    sessions: store.collection('sessions'),
    challenges: store.collection('auth_challenges'),
    claimSessions: store.collection('claim_sessions'),
    invitations: store.collection('invitations'),
    grants: store.collection('grants'),
    audit: store.collection('audit'),
    agents: store.collection('agents'),
    registrations: store.collection('registrations'),
    policies: store.collection('policies'),
    certificates: store.collection('certificates'),
    tokenUsage: store.collection('token_usage'),
    tokenLedger: store.collection('token_ledger'),
  };
}

export async function ensureIndexes(c: Collections): Promise<void> {
  await Promise.all([
    c.users.createIndex({ fields: { did: 1 } }),
    c.userDids.createIndex({ fields: { userId: 1 } }),
    c.users.createIndex({ fields: { emailLower: 1 } }),
    c.workspaces.createIndex({ fields: { slug: 1 }, unique: true, name: 'slug_unique' }),
    c.workspaceMembers.createIndex({ fields: { workspaceId: 1, userId: 1 }, unique: true, name: 'member_unique' }),
    c.workspaceMembers.createIndex({ fields: { userId: 1 } }),
    c.workspaceAgents.createIndex({ fields: { workspaceId: 1, agentDid: 1 }, unique: true, name: 'agent_member_unique' }),
    c.workspaceAgents.createIndex({ fields: { agentDid: 1 } }),
    c.sessions.createIndex({ fields: { tokenHash: 1 }, unique: true, name: 'token_unique' }),
    c.sessions.createIndex({ fields: { subject: 1 } }),
    c.invitations.createIndex({ fields: { emailLower: 1 } }),
    c.grants.createIndex({ fields: { userId: 1 } }),
    c.audit.createIndex({ fields: { at: -1 } }),
    c.registrations.createIndex({ fields: { agentDid: 1 } }),
    c.policies.createIndex({ fields: { agentDid: 1 } }),
    c.certificates.createIndex({ fields: { agentDid: 1 } }),
  ]);
}
