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
 * actor afterwards; the fleet (src/services/fleet*, src/actors/agent.ts) extends this shape.
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
  lastSeen: string | null;
  isOnline: boolean;
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
  ]);
}
