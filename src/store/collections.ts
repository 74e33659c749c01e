/**
 * The documents Steward stores, one interface per collection, and the indexes each needs.
 * Field names follow the interface document where it shows them; internal fields are camelCase.
 * All timestamps are ISO 8601 strings.
 */
import type { Collection, Store } from './types.js';
import type { Capability } from '../domain/capabilities.js';
import type { ChannelRole, GlobalRole, WorkspaceRole } from '../domain/roles.js';
import type { Policy } from '../domain/policy.js';
import type { AgentPresenceDoc, ChangeCounterDoc, ChangeEntryDoc, ClusterClaimDoc, ClusterNodeDoc, ClusterShardDoc, EpochCounterDoc } from './cluster-docs.js';

// The vocabulary the documents use is the domain's; re-exported for readers of the documents.
export type { Capability } from '../domain/capabilities.js';
export type { ChannelRole, GlobalRole, WorkspaceRole } from '../domain/roles.js';
export type { PolicyResourceLimits } from '../domain/policy.js';

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
  /**
   * How the session was made, and by which client (the User-Agent header and source address of
   * the request that made it); absent on sessions made before these were recorded.
   */
  method?: SessionMethod | null;
  userAgent?: string | null;
  address?: string | null;
}

/** How a session was made: a signed login challenge, or a browser's device approval by a wallet. */
export type SessionMethod = 'login' | 'device';

/**
 * A browser's request to be signed in by a wallet (device approval, docs/identity.md). Both of
 * its codes are secrets, stored only as their SHA-256: the device code (what the browser polls
 * with) is the id, the user code (what the person types into the wallet) is `userCodeHash`.
 */
export interface DeviceRequestDoc {
  /** SHA-256 of the device code, hex. */
  _id: string;
  /** SHA-256 of the user code in its shown form (`WDJB-MJHT`), hex. */
  userCodeHash: string;
  /** pending -> approved -> used (the browser has its session), or pending -> denied. */
  status: 'pending' | 'approved' | 'denied' | 'used';
  createdAt: string;
  expiresAt: string;
  /** Seconds the browser must wait between two polls; grows by 5 with each slow_down. */
  interval: number;
  lastPolledAt: string | null;
  /** The browser that asked: its User-Agent header and source address. */
  userAgent: string | null;
  address: string | null;
  /** The nonce a wallet signs to approve, handed out by the last GET of the approval (to `nonceUserId`); null once used. */
  nonce: string | null;
  nonceUserId: string | null;
  /** The person who approved or denied, and when. */
  decidedBy: string | null;
  decidedAt: string | null;
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
  /** SHA-256 of the token, hex (src/services/sessions.ts `hashToken`). The token itself is never stored. */
  _id: string;
  /** The unclaimed user it completes; null for an open invite (GET /api/users/invite). */
  userId: string | null;
  nonce: string;
  /** -1 pending, 2 success, -2 failed or expired. */
  status: -1 | 2 | -2;
  kind: 'send-qr' | 'invitation' | 'invite-link' | 'owner-bootstrap';
  /** The id of the invitation it was opened through (the hash of the invitation's token), else null. */
  invitationToken: string | null;
  createdAt: string;
  expiresAt: string;
  completedAt: string | null;
  claimedDid: string | null;
  failure: string | null;
}

export interface InvitationDoc {
  /** SHA-256 of the token (a UUID), hex. The token itself is never stored. */
  _id: string;
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
  /** How the LLM config was set (PUT /api/agents/{did}/llm-config); null: none, the agent uses its environment. */
  llmSource?: 'workspace' | 'registry' | 'manual' | null;
  llmBaseUrl?: string | null;
  /** Workspace routing: the workspace whose virtual key the agent uses. */
  llmWorkspaceId?: string | null;
  /** Workspace routing and registry shortcut: the registry model. */
  llmRegistryModelId?: string | null;
  /** Manual mode: the API key, sealed (associated data `agent-llm-key:<did>`). Never returned. */
  llmApiKeySealed?: string | null;
  llmUpdatedAt?: string | null;
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
  /** A workspace named at registration that does not exist (the agent then waits in the default one); absent on older records. */
  requestedWorkspace?: string | null;
  requestedAt: string;
  via: 'websocket' | 'http';
  /** The source address it came from (IPv4, or an IPv6 /64), counted by the pending-registration limits; absent on older records. */
  source?: string;
  status: 'pending' | 'approved' | 'rejected';
  approvedCapabilities: Capability[] | null;
  reason: string | null;
  decidedAt: string | null;
  decidedBy: string | null;
}

/** A policy (interface §2.4): agent-scoped when agentDid is set, else workspace-scoped. */
export type PolicyDoc = Policy;

/**
 * A co-signed certificate, keyed by its serial. Append-only (written in batches); an agent's
 * current certificate is its newest one, older ones are deleted once superseded.
 */
export interface CertificateDoc {
  _id: string; // the serial
  agentDid: string;
  /** The RFC 8785 canonical JSON of the certificate: exactly the bytes both parties signed. */
  canonical: string;
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
  allTime: StoredTokenCounts;
  days: Record<string, StoredTokenCounts>;
  months: Record<string, StoredTokenCounts>;
  /** _id of the last ledger document folded into this one. */
  rolledUpTo: string;
  /**
   * An agent's highest heartbeat seq stored (at least every one folded in, written in the same
   * update); absent for the global document and for usage stored before seqs were.
   */
  lastSeq?: number;
  /** Cluster mode: the last roll-up batch applied to this document (each applies once). */
  rollupBatch?: number;
  updatedAt: string;
}

/**
 * A bucket's counts, each exact as `promptTokens + promptTokensBillions × 10^9` (src/domain/token-count.ts);
 * the `…Billions` parts are there only once a roll-up has added to them.
 */
export interface StoredTokenCounts {
  promptTokens: number;
  completionTokens: number;
  promptTokensBillions?: number;
  completionTokensBillions?: number;
}

/**
 * One agent's token counts of the past UTC days of one month (`_id` = `<did>|<YYYY-MM>`), for the
 * usage series. `days` is one text, `<DD> <promptTokens> <completionTokens>` per day with usage,
 * joined by `;`, each count exact in decimal digits: a document per agent and month costs the
 * embedded store's memory far less than one per agent and day (docs/performance.md). Written by
 * the daily prune of the roll-up, as day buckets leave the agent's usage document (so only for
 * agents that used tokens); kept TOKEN_HISTORY_DAYS_KEPT days (whole months).
 */
export interface TokenAgentMonthDoc {
  _id: string;
  agentDid: string;
  month: string;
  days: string;
}

/**
 * One workspace's token counts of one UTC day (`_id` = `<workspaceId>|<day>`): the usage of its
 * member agents, folded in by the roll-up with `rolledUpTo` in the same update, as an agent's
 * usage document is; kept TOKEN_HISTORY_DAYS_KEPT days.
 */
export interface TokenWorkspaceDayDoc extends StoredTokenCounts {
  _id: string;
  workspaceId: string;
  day: string;
  rolledUpTo: string;
  /** Cluster mode: the last roll-up batch applied to this document (each applies once). */
  rollupBatch?: number;
}

/** One batch of acknowledged heartbeat deltas, written in one store operation before the acks go out. */
export interface TokenLedgerDoc {
  _id: string; // time-ordered, given once: a write retried after a failure finds what landed
  at: string;
  day: string;
  month: string;
  /** Sum of the entries. */
  promptTokens: number;
  completionTokens: number;
  /**
   * One entry per heartbeat, `<agentDid> <promptTokens> <completionTokens> <seq>`, joined by `;`
   * (earlier versions joined them by newlines, without the seq; both are read): a single
   * string is cheap to write, copy and read, whatever the number of heartbeats, and it has nothing
   * JSON must escape, so the embedded store writes it as it is.
   */
  entries: string;
  /** Cluster mode: the agents the entries name, so a node finds an agent's unfolded seqs at its handshake. */
  dids?: string[];
}

/**
 * A workspace skill (interface §2.11), stored as the raw row the interface shows: snake_case,
 * `is_required` 0 or 1, `config` JSON text (so that any key, dots and `$` included, survives
 * every backend). `name_key` (the trimmed name in lower case) makes names unique per workspace.
 */
export interface SkillDoc {
  _id: string;
  workspace_id: string;
  name: string;
  name_key: string;
  description: string | null;
  version: string | null;
  is_required: 0 | 1;
  config: string;
  /** Markdown; '' when the skill has none. */
  content: string;
  created_at: string;
  updated_at: string;
}

/**
 * A per-agent override of a skill: opts the agent out (`enabled` false) and/or replaces the
 * skill's config for it (`config`, JSON text; null keeps the workspace one).
 */
export interface SkillOverrideDoc {
  _id: string;
  skillId: string;
  workspaceId: string;
  agentDid: string;
  enabled: boolean;
  config: string | null;
  createdAt: string;
  updatedAt: string;
  updatedBy: string;
}

/** A model registry entry (interface §2.2); src/services/model-catalogue.ts. */
export interface ModelDoc {
  _id: string; // UUID
  name: string;
  description: string | null;
  provider: string;
  modelId: string;
  baseUrl: string | null;
  status: 'active' | 'inactive';
  /** `{provider}/{slug of the name at creation}`; fixed for the model's life (the name the proxy knows). */
  proxyModelName: string;
  /** The provider API key, sealed (associated data `model-api-key:<id>`). Never returned. */
  apiKeySealed: string | null;
  /** Whether the model was registered with the model proxy at creation. */
  proxySynced: boolean;
  createdAt: string;
  updatedAt: string;
  createdBy: string | null;
}

/** A workspace's access to a registry model (interface §4.2). */
export interface WorkspaceModelDoc {
  _id: string;
  workspaceId: string;
  modelId: string;
  grantedAt: string;
  grantedBy: string;
}

/** A workspace's virtual key in the model proxy (`_id` is the workspace id). */
export interface WorkspaceLlmKeyDoc {
  _id: string;
  /** The key, sealed (associated data `workspace-llm-key:<workspaceId>`). Never returned. */
  keySealed: string;
  keyAlias: string;
  /** proxyModelNames the key was last scoped to. */
  models: string[];
  createdAt: string;
  updatedAt: string;
}

/** A channel member's role (interface §2.8, §5.8). */
/**
 * A channel (interface §2.7); written only by its channel actor (src/actors/channel.ts) once
 * created. `slugKey` (`<workspaceId or "global">/<slug>`) is unique, so a slug is unique within
 * its workspace, and among global channels, on every backend.
 */
export interface ChannelDoc {
  _id: string;
  workspaceId: string | null;
  name: string;
  slug: string;
  slugKey: string;
  description: string;
  topic: string;
  isPublic: boolean;
  isArchived: boolean;
  creatorDid: string;
  createdAt: string;
  updatedAt: string;
  /** The highest `seq` of its messages, kept as posts are stored (unread counts are read from it); 0 or absent when it has none. */
  lastSeq?: number;
}

/**
 * How far a member has read a channel (`_id` = `<channelId> <memberDid>`): the `seq` of the
 * newest message they marked read. Unread = the channel's `lastSeq` − `lastReadSeq`.
 */
export interface ChannelReadDoc {
  _id: string;
  channelId: string;
  memberDid: string;
  lastReadSeq: number;
  lastReadMessageId: string;
  updatedAt: string;
}

/** A channel member (interface §2.8). */
export interface ChannelMemberDoc {
  _id: string;
  channelId: string;
  memberDid: string;
  memberType: 'user' | 'agent';
  role: ChannelRole;
  joinedAt: string;
  invitedBy: string | null;
}

/**
 * A channel message (interface §2.9). `seq` is the channel's total order, in the order the
 * channel actor accepted the posts. `metadata` is JSON text, so any key (dots and `$` included) survives every backend.
 * A deleted message stays as a tombstone (content and metadata emptied, `deletedAt` set).
 */
export interface ChannelMessageDoc {
  _id: string;
  channelId: string;
  seq: number;
  threadId: string | null;
  authorDid: string;
  authorType: 'user' | 'agent';
  content: string;
  metadata: string;
  /** Emoji -> DIDs who reacted (emoji are checked to be safe as field names). */
  reactions: Record<string, string[]>;
  editedAt: string | null;
  deletedAt: string | null;
  createdAt: string;
  /** The bridge the message came in through (never sent back out through it); null otherwise. */
  viaBridgeId: string | null;
  /**
   * Top-level messages: replies not deleted, and when the newest of them was posted; kept as
   * replies are posted and deleted (src/services/channels.ts). Absent means 0 / null.
   */
  replyCount?: number;
  lastReplyAt?: string | null;
}

/**
 * A bridge between a channel and an outside service (interface §2.10). The configuration
 * (secrets, access tokens) is sealed with the bridge id as associated data and never returned.
 */
export interface BridgeDoc {
  _id: string;
  channelId: string;
  externalService: 'webhook' | 'teams';
  externalChannelId: string;
  externalChannelName: string;
  externalWorkspaceId: string;
  syncDirection: 'incoming' | 'outgoing' | 'bidirectional';
  isSyncEnabled: boolean;
  configSealed: string;
  createdAt: string;
  updatedAt: string;
  createdBy: string;
}

/** An accepted incoming webhook delivery (`_id` = `<bridgeId>:<signature hex>`), kept to refuse replays. */
export interface BridgeDeliveryDoc {
  _id: string;
  bridgeId: string;
  expiresAt: string;
}

/**
 * An outgoing bridge delivery not finished yet (`_id` = the delivery id): written before its
 * first attempt and deleted once it succeeds or fails for good, so a restart resumes what was
 * waiting. `attempt` counts the attempts made; `nextAttemptAt` is when the next may start.
 */
export interface BridgeOutboxDoc {
  _id: string;
  bridgeId: string;
  service: BridgeDoc['externalService'];
  /** The webhook body (the same bytes, so the same signature, on every attempt). */
  body: string;
  /** The team-chat post's HTML. */
  html: string;
  attempt: number;
  createdAt: string;
  nextAttemptAt: string;
  /** Cluster mode: the node working on it, until when, and the claim's token (src/cluster/claims.ts, WorkQueue). */
  claimedBy?: string | null;
  claimedUntil?: string | null;
  claimToken?: string | null;
}

/**
 * A workflow (interface §2.12). `definition` is the WorkflowDefinition as JSON text, so that any
 * variable or param key (dots and `$` included) survives every backend. `nameKey` (the trimmed
 * name in lower case) makes names unique per workspace.
 */
export interface WorkflowDoc {
  _id: string;
  name: string;
  nameKey: string;
  description: string;
  workspaceId: string;
  definition: string;
  stepCount: number;
  /** DID of the person who created it. */
  createdBy: string;
  createdAt: string;
  updatedAt: string;
}

/** Who started a workflow run: a person, or a schedule acting as the person who created it. */
export interface WorkflowRunStarter {
  type: 'person' | 'schedule';
  userId: string;
  did: string;
  scheduleId?: string;
}

/**
 * The listing record of a workflow run. The run itself (steps, outputs) is its actor's persisted
 * snapshot (src/actors/workflow-run.ts); this record is written when the run starts and ends.
 */
export interface WorkflowRunDoc {
  _id: string; // the run id
  workflowId: string;
  workspaceId: string;
  status: 'running' | 'completed' | 'failed' | 'cancelled';
  startedAt: string;
  completedAt: string | null;
  error: string | null;
  startedBy: WorkflowRunStarter;
  /** Cluster mode: the fence of the node that recorded the run's end (src/cluster/fence.ts). */
  fence?: { shard: number; epoch: number };
}

/** A cron schedule of a workflow (interface §4.10 rule 4). `params` is JSON text. */
export interface WorkflowScheduleDoc {
  _id: string;
  workflowId: string;
  workspaceId: string;
  cron: string;
  timezone: string;
  params: string;
  /** The person the scheduled runs act as. */
  createdBy: string;
  createdByUserId: string;
  createdAt: string;
  lastRunAt: string | null;
  lastRunId: string | null;
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
  deviceRequests: Collection<DeviceRequestDoc>;
  invitations: Collection<InvitationDoc>;
  grants: Collection<GrantDoc>;
  audit: Collection<AuditDoc>;
  agents: Collection<AgentDoc>;
  registrations: Collection<RegistrationDoc>;
  policies: Collection<PolicyDoc>;
  certificates: Collection<CertificateDoc>;
  tokenUsage: Collection<TokenUsageDoc>;
  tokenLedger: Collection<TokenLedgerDoc>;
  tokenAgentMonths: Collection<TokenAgentMonthDoc>;
  tokenWorkspaceDays: Collection<TokenWorkspaceDayDoc>;
  models: Collection<ModelDoc>;
  workspaceModels: Collection<WorkspaceModelDoc>;
  workspaceLlmKeys: Collection<WorkspaceLlmKeyDoc>;
  skills: Collection<SkillDoc>;
  skillOverrides: Collection<SkillOverrideDoc>;
  channels: Collection<ChannelDoc>;
  channelMembers: Collection<ChannelMemberDoc>;
  channelMessages: Collection<ChannelMessageDoc>;
  channelReads: Collection<ChannelReadDoc>;
  bridges: Collection<BridgeDoc>;
  bridgeDeliveries: Collection<BridgeDeliveryDoc>;
  bridgeOutbox: Collection<BridgeOutboxDoc>;
  workflows: Collection<WorkflowDoc>;
  workflowRuns: Collection<WorkflowRunDoc>;
  workflowSchedules: Collection<WorkflowScheduleDoc>;
  /** Cluster mode (src/store/cluster-docs.ts). */
  clusterNodes: Collection<ClusterNodeDoc>;
  clusterShards: Collection<ClusterShardDoc | EpochCounterDoc>;
  clusterClaims: Collection<ClusterClaimDoc>;
  agentPresence: Collection<AgentPresenceDoc>;
  changeLog: Collection<ChangeEntryDoc | ChangeCounterDoc>;
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
    deviceRequests: store.collection('device_requests'),
    invitations: store.collection('invitations'),
    grants: store.collection('grants'),
    audit: store.collection('audit'),
    agents: store.collection('agents'),
    registrations: store.collection('registrations'),
    policies: store.collection('policies'),
    certificates: store.collection('certificates'),
    tokenUsage: store.collection('token_usage'),
    tokenLedger: store.collection('token_ledger'),
    tokenAgentMonths: store.collection('token_agent_months'),
    tokenWorkspaceDays: store.collection('token_workspace_days'),
    models: store.collection('models'),
    workspaceModels: store.collection('workspace_models'),
    workspaceLlmKeys: store.collection('workspace_llm_keys'),
    skills: store.collection('skills'),
    skillOverrides: store.collection('skill_overrides'),
    channels: store.collection('channels'),
    channelMembers: store.collection('channel_members'),
    channelMessages: store.collection('channel_messages'),
    channelReads: store.collection('channel_reads'),
    bridges: store.collection('bridges'),
    bridgeDeliveries: store.collection('bridge_deliveries'),
    bridgeOutbox: store.collection('bridge_outbox'),
    workflows: store.collection('workflows'),
    workflowRuns: store.collection('workflow_runs'),
    workflowSchedules: store.collection('workflow_schedules'),
    clusterNodes: store.collection('cluster_nodes'),
    clusterShards: store.collection('cluster_shards'),
    clusterClaims: store.collection('cluster_claims'),
    agentPresence: store.collection('agent_presence'),
    changeLog: store.collection('change_log'),
  };
}

/**
 * The indexes Steward's queries use. `kind` picks where the backends differ: the embedded store
 * sorts in memory and looks compound indexes up by equality only, so an index that serves a sort
 * is made for MongoDB alone.
 */
export async function ensureIndexes(c: Collections, kind: Store['kind'] = 'embedded'): Promise<void> {
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
    c.deviceRequests.createIndex({ fields: { userCodeHash: 1 }, unique: true, name: 'user_code_unique' }),
    c.invitations.createIndex({ fields: { emailLower: 1 } }),
    c.grants.createIndex({ fields: { userId: 1 } }),
    // The audit list's sort (newest first, ties by id); the embedded store keeps `at` for its time range.
    kind === 'mongodb' ? c.audit.createIndex({ fields: { at: -1, _id: -1 }, name: 'at_id' }) : c.audit.createIndex({ fields: { at: -1 } }),
    c.registrations.createIndex({ fields: { agentDid: 1 } }),
    c.registrations.createIndex({ fields: { status: 1 } }),
    c.policies.createIndex({ fields: { agentDid: 1 } }),
    c.certificates.createIndex({ fields: { agentDid: 1 } }),
    c.models.createIndex({ fields: { proxyModelName: 1 }, unique: true, name: 'proxy_model_name_unique' }),
    c.workspaceModels.createIndex({ fields: { workspaceId: 1, modelId: 1 }, unique: true, name: 'workspace_model_unique' }),
    c.workspaceModels.createIndex({ fields: { modelId: 1 } }),
    c.skills.createIndex({ fields: { workspace_id: 1, name_key: 1 }, unique: true, name: 'skill_name_unique' }),
    c.skillOverrides.createIndex({ fields: { skillId: 1, agentDid: 1 }, unique: true, name: 'skill_override_unique' }),
    c.skillOverrides.createIndex({ fields: { agentDid: 1 } }),
    c.channels.createIndex({ fields: { slugKey: 1 }, unique: true, name: 'channel_slug_unique' }),
    c.channels.createIndex({ fields: { workspaceId: 1 } }),
    c.channelMembers.createIndex({ fields: { channelId: 1, memberDid: 1 }, unique: true, name: 'channel_member_unique' }),
    c.channelMembers.createIndex({ fields: { channelId: 1 } }),
    c.channelMembers.createIndex({ fields: { memberDid: 1 } }),
    c.channelMessages.createIndex({ fields: { channelId: 1, seq: 1 }, unique: true, name: 'channel_message_seq_unique' }),
    c.channelMessages.createIndex({ fields: { channelId: 1 } }),
    c.channelReads.createIndex({ fields: { memberDid: 1 } }),
    c.channelReads.createIndex({ fields: { channelId: 1 } }),
    c.bridges.createIndex({ fields: { channelId: 1, externalService: 1, externalChannelId: 1 }, unique: true, name: 'bridge_unique' }),
    c.bridges.createIndex({ fields: { channelId: 1 } }),
    c.bridges.createIndex({ fields: { externalChannelId: 1 } }),
    c.bridgeOutbox.createIndex({ fields: { bridgeId: 1 } }),
    c.workflows.createIndex({ fields: { workspaceId: 1, nameKey: 1 }, unique: true, name: 'workflow_name_unique' }),
    c.workflowRuns.createIndex({ fields: { workflowId: 1 } }),
    // GET /api/runs: by the caller's workspaces (or, for a global admin, by start time), newest first.
    ...(kind === 'mongodb'
      ? [
          c.workflowRuns.createIndex({ fields: { workspaceId: 1, startedAt: -1, _id: 1 }, name: 'workspace_started' }),
          c.workflowRuns.createIndex({ fields: { startedAt: -1, _id: 1 }, name: 'started' }),
        ]
      : [c.workflowRuns.createIndex({ fields: { workspaceId: 1 } }), c.workflowRuns.createIndex({ fields: { startedAt: 1 } })]),
    c.tokenAgentMonths.createIndex({ fields: { agentDid: 1 } }),
    c.tokenAgentMonths.createIndex({ fields: { month: 1 } }),
    c.tokenWorkspaceDays.createIndex({ fields: { workspaceId: 1 } }),
    c.tokenWorkspaceDays.createIndex({ fields: { day: 1 } }),
    c.workflowSchedules.createIndex({ fields: { workflowId: 1 } }),
  ]);
}

/** The indexes of the cluster collections, made only in cluster mode (a single node never uses them). */
export async function ensureClusterIndexes(
  c: Pick<Collections, 'clusterNodes' | 'clusterShards' | 'clusterClaims' | 'agentPresence'> & Partial<Pick<Collections, 'tokenLedger' | 'changeLog'>>,
  kind: Store['kind'] = 'embedded',
): Promise<void> {
  await Promise.all([
    // A handshake looks up the agent's unfolded ledger entries (the embedded store scans its few documents).
    kind === 'mongodb' ? c.tokenLedger?.createIndex({ fields: { dids: 1 } }) : undefined,
    c.clusterNodes.createIndex({ fields: { leaseUntil: 1 } }),
    c.clusterShards.createIndex({ fields: { owner: 1 } }),
    c.clusterShards.createIndex({ fields: { leaseUntil: 1 } }),
    c.clusterClaims.createIndex({ fields: { expiresAt: 1 } }),
    c.agentPresence.createIndex({ fields: { node: 1 } }),
    c.changeLog?.createIndex({ fields: { seq: 1 } }),
    c.changeLog?.createIndex({ fields: { at: 1 } }),
  ]);
}
