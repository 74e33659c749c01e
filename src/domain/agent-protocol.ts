/**
 * The agent protocol's vocabulary, shared by the gateway (src/ws/agent-gateway.ts) and the SDK
 * (src/agent/): frame shapes as TypeScript types, close codes and what they tell an agent.
 * The JSON Schemas in schemas/agent/ are the contract; these types mirror them for code.
 * docs/agent-protocol.md is the description for people writing agents in other languages.
 */
import { CAPABILITIES, type Capability } from '../store/collections.js';
import type { Certificate, ResourceLimits } from './certificate.js';

export const AGENT_WS_PATH = '/ws/agent';

/** Close codes of /ws/agent (see docs/agent-protocol.md). */
export const CLOSE = {
  /** Server shutting down: reconnect with back-off. */
  goingAway: 1001,
  /** Repeated invalid frames (binary, not JSON, failing their schema, out of order): fix the agent. */
  policyViolation: 1008,
  /** Bad auth signature, or a certificate co-signature that does not verify: do not retry with this key. */
  badSignature: 4401,
  /** Registration rejected, or the agent decommissioned (DELETE /api/agents/:id): do not retry. */
  rejected: 4403,
  /** The handshake did not finish in time: reconnect with back-off. */
  handshakeTimeout: 4408,
  /** Another connection of the same agent authenticated and replaced this one: do not reconnect. */
  replaced: 4409,
  /** Too many hellos from the agent's address (RATE_LIMIT_AGENT_PER_ADDRESS): reconnect later, with back-off. */
  tryLater: 4429,
} as const;

/** Close codes after which an agent must not reconnect on its own. */
export const FATAL_CLOSE_CODES: ReadonlySet<number> = new Set([CLOSE.policyViolation, CLOSE.badSignature, CLOSE.rejected, CLOSE.replaced]);

/** `availableCapabilities` of GET /api/registrations: the first eight capability values (§2.1). */
export const AVAILABLE_CAPABILITIES: readonly Capability[] = CAPABILITIES.slice(0, 8);

export interface TokenDelta {
  promptTokens: number;
  completionTokens: number;
}

// --- agent -> server ------------------------------------------------------------------------

export interface HelloFrame {
  type: 'hello';
  did: string;
  publicKey?: string;
  name: string;
  version: string;
  capabilities: Capability[];
  workspace?: string;
}
export interface AuthFrame {
  type: 'auth';
  signature: string;
}
export interface CertificateAcceptFrame {
  type: 'certificate_accept';
  agentSignature: string;
  serial?: string;
}
export interface HeartbeatFrame {
  type: 'heartbeat';
  seq: number;
  sinceLastSync: TokenDelta;
}
export interface IntentResultFrame {
  type: 'intent_result';
  intentId: string;
  ok: boolean;
  output?: unknown;
  error?: string;
}
export type InboundFrame = HelloFrame | AuthFrame | CertificateAcceptFrame | HeartbeatFrame | IntentResultFrame;

// --- server -> agent ------------------------------------------------------------------------

export interface ChallengeFrame {
  type: 'challenge';
  nonce: string;
  serverDid: string;
}
export interface RegistrationFrame {
  type: 'registration';
  status: 'pending' | 'approved' | 'rejected';
  registrationId?: string;
  agentId?: string;
  reason?: string;
}
export interface CertificateOfferFrame {
  type: 'certificate_offer';
  certificate: Certificate;
  serverSignature: string;
}
export interface ReadyFrame {
  type: 'ready';
  agentId: string;
  certificate: Certificate;
  serverSignature: string;
  agentSignature: string;
  session: { token: string; expiresAt: string };
  heartbeatIntervalMs: number;
  /** The highest heartbeat seq whose delta is stored for this agent, null when none is (see HeartbeatSink). */
  lastHeartbeatSeq: number | null;
}
export interface HeartbeatAckFrame {
  type: 'heartbeat_ack';
  seq: number;
}
export interface UpdateCapabilitiesFrame {
  type: 'update_capabilities';
  capabilities: Capability[];
  resourceLimits: ResourceLimits | null;
  policyId: string | null;
  policyExpiresAt: string | null;
}
/** The `config` of `llm_config` (docs/models.md, "The llm_config frame"). No `provider`: use your environment. */
export interface LlmConfig {
  provider?: string;
  model?: string;
  /** '' when the provider's default applies. */
  baseUrl?: string;
  apiKey?: string;
  source?: 'workspace' | 'registry' | 'manual';
  /** Workspace routing: the workspace whose key is used. */
  workspaceId?: string;
  systemPrompt?: string;
  /** With the model proxy configured: per workspace of the agent that has a virtual key, its key and allowed proxyModelNames. */
  proxy?: { baseUrl: string; workspaces: Array<{ workspaceId: string; apiKey: string; models: string[] }> };
}
export interface LlmConfigFrame {
  type: 'llm_config';
  config: LlmConfig;
}
/** One skill of `skills_config` (docs/skills.md, "The skills_config frame"). */
export interface SkillEntry {
  id: string;
  workspaceId: string;
  name: string;
  description: string | null;
  version: string | null;
  isRequired: boolean;
  /** The skill's config, or the agent's override of it. */
  config: Record<string, unknown>;
  /** Markdown; '' when the skill has none. */
  content: string;
}
export interface SkillsConfigFrame {
  type: 'skills_config';
  /** The full effective set; replaces the previous one. */
  skills: SkillEntry[];
}
export interface ChannelMessageSendFrame {
  type: 'channel_message_send';
  channelId: string;
  channel?: { id: string; name: string; slug: string; workspaceId?: string | null };
  message: {
    id: string;
    content: string;
    channelId?: string;
    threadId?: string | null;
    authorDid?: string;
    authorType?: 'user' | 'agent';
    metadata?: Record<string, unknown>;
    createdAt?: string;
  };
  /** The name the agent was mentioned by. */
  mention?: string;
  /** `channel`, or the bridge the message came in through. */
  source?: 'channel' | 'webhook' | 'teams';
}
export interface IntentFrame {
  type: 'intent';
  intentId: string;
  action: Capability;
  params: Record<string, unknown>;
  requestedBy: string;
}
export interface ErrorFrame {
  type: 'error';
  code: string;
  message: string;
}
export type OutboundFrame =
  | ChallengeFrame
  | RegistrationFrame
  | CertificateOfferFrame
  | ReadyFrame
  | HeartbeatAckFrame
  | UpdateCapabilitiesFrame
  | LlmConfigFrame
  | SkillsConfigFrame
  | ChannelMessageSendFrame
  | IntentFrame
  | ErrorFrame;

/** Frames the server may push to a connected agent outside the handshake. */
export type PushFrame = UpdateCapabilitiesFrame | LlmConfigFrame | SkillsConfigFrame | ChannelMessageSendFrame | IntentFrame;
