/**
 * The agent protocol's vocabulary, shared by the gateway (src/ws/agent/) and the SDK
 * (src/agent/): frame shapes as TypeScript types, close codes and what they tell an agent.
 * The JSON Schemas in schemas/agent/ are the contract; these types mirror them for code, except
 * skills_config, whose schema is generated from the zod schema here (`npm run schemas`).
 * docs/agent-protocol.md is the description for people writing agents in other languages.
 */
import { z } from 'zod';
import { CAPABILITIES, type Capability } from './capabilities.js';
import type { Certificate, ResourceLimits } from './certificate-format.js';

export const AGENT_WS_PATH = '/ws/agent';

/**
 * The version of the agent protocol that Steward's gateway and the SDK (built from this file)
 * speak. It goes up only with a change an agent of the previous version could not follow; added
 * optional fields, frames and close codes leave it as it is (docs/agent-protocol.md, "Versions").
 */
export const AGENT_PROTOCOL_VERSION = 1;

/** What a close code of /ws/agent tells an agent. */
export interface CloseCodeMeaning {
  code: number;
  /** Whether the agent reconnects (with back-off) on its own; false: it stops and a person must act. */
  reconnect: boolean;
  /** What happened, in words a person can act on. */
  meaning: string;
}

/**
 * The close codes of /ws/agent and whether an agent reconnects after each (docs/agent-protocol.md,
 * "Closing, and when to reconnect", is this table for people). Every close of an agent socket uses
 * one of these; an agent reconnects after any code not listed here.
 */
const CLOSE_TABLE = {
  goingAway: { code: 1001, reconnect: true, meaning: 'Steward is shutting down' },
  abnormal: { code: 1006, reconnect: true, meaning: 'the connection was lost' },
  policyViolation: { code: 1008, reconnect: false, meaning: 'Steward refused the frames or the registration of this agent (a protocol error: fix the agent)' },
  internalError: { code: 1011, reconnect: true, meaning: 'a fault inside Steward' },
  /** Sent by the SDK, not by Steward. */
  certificateRefused: { code: 4000, reconnect: true, meaning: "the agent refused Steward's certificate or DID" },
  stillPending: { code: 4202, reconnect: true, meaning: 'the registration still awaits an admin; reconnect to keep waiting' },
  badSignature: { code: 4401, reconnect: false, meaning: "Steward refused this agent's key or signature" },
  rejected: { code: 4403, reconnect: false, meaning: 'the registration was rejected, or the agent was decommissioned' },
  handshakeTimeout: { code: 4408, reconnect: true, meaning: 'the handshake did not finish in time' },
  replaced: { code: 4409, reconnect: false, meaning: 'another connection of this agent (the same key) replaced this one' },
  /** Too many hellos from the agent's address (RATE_LIMIT_AGENT_PER_ADDRESS), or too many pending registrations in all or from it. */
  tryLater: { code: 4429, reconnect: true, meaning: 'too many connection attempts or pending registrations; try again later' },
} as const satisfies Record<string, CloseCodeMeaning>;

/** Close codes of /ws/agent by name (see CLOSE_TABLE for what each means). */
export const CLOSE = Object.fromEntries(Object.entries(CLOSE_TABLE).map(([name, c]) => [name, c.code])) as {
  readonly [K in keyof typeof CLOSE_TABLE]: (typeof CLOSE_TABLE)[K]['code'];
};

const BY_CODE: ReadonlyMap<number, CloseCodeMeaning> = new Map(Object.values(CLOSE_TABLE).map((c) => [c.code, c]));

/** What a close code means to an agent; a code not in the table means: reconnect. */
export function closeMeaning(code: number): CloseCodeMeaning {
  return BY_CODE.get(code) ?? { code, reconnect: true, meaning: 'the connection was closed' };
}

/** Close codes after which an agent must not reconnect on its own. */
export const FATAL_CLOSE_CODES: ReadonlySet<number> = new Set(Object.values(CLOSE_TABLE).filter((c) => !c.reconnect).map((c) => c.code));

/**
 * Reconnect back-off of the SDK and `steward agent` (docs/agent-protocol.md, "Reconnect
 * advice"): the delay doubles from RECONNECT_INITIAL_DELAY_MS up to RECONNECT_MAX_DELAY_MS, so an
 * agent is back within about the cap after Steward returns, however long it was away.
 */
export const RECONNECT_INITIAL_DELAY_MS = 500;
export const RECONNECT_MAX_DELAY_MS = 8_000;

/**
 * The wait before reconnect attempt `failures + 1` ("equal jitter"): a random time between half
 * and all of min(max, initial × 2^failures), so a fleet that lost Steward at once comes back spread
 * over half the delay rather than in lockstep. `random` is Math.random (tests pass their own).
 */
export function reconnectDelayMs(
  failures: number,
  { initialDelayMs = RECONNECT_INITIAL_DELAY_MS, maxDelayMs = RECONNECT_MAX_DELAY_MS }: { initialDelayMs?: number; maxDelayMs?: number } = {},
  random: () => number = Math.random,
): number {
  const base = Math.min(maxDelayMs, initialDelayMs * 2 ** Math.min(failures, 30));
  return Math.round(base / 2 + random() * (base / 2));
}

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
/**
 * One skill of `skills_config` (docs/skills.md, "The skills_config frame"), and of the HTTP view of
 * an agent's effective skills. Open to added fields on the wire, as every outbound frame is.
 */
export const SkillEntry = z.object({
  id: z.string().meta({ description: "The skill's id." }),
  workspaceId: z.string().meta({ description: 'The workspace the skill belongs to.' }),
  name: z.string(),
  description: z.string().nullable(),
  version: z.string().nullable().meta({ description: 'Free-form, informational.' }),
  isRequired: z.boolean().meta({ description: 'A required skill is never left out by an override.' }),
  config: z.record(z.string(), z.unknown()).meta({ description: "The skill's config, or the agent's override of it." }),
  content: z.string().meta({ description: 'Markdown to inject into the system prompt; "" when the skill has none.' }),
});
export type SkillEntry = z.infer<typeof SkillEntry>;

/** The frame; schemas/agent/skills_config.schema.json is generated from it (`npm run schemas`). */
export const SkillsConfigFrame = z
  .object({
    type: z.literal('skills_config'),
    skills: z.array(SkillEntry).meta({ description: 'The full effective set; replaces the previous one.' }),
  })
  .meta({
    $id: 'https://steward.dev/schemas/agent/skills_config.schema.json',
    title: 'skills_config (server → agent)',
    description:
      "The agent's full effective skill set (replaces the previous one): the skills of every workspace it belongs to, minus the ones it is opted out of, each with its overriding config when it has one. See docs/skills.md.",
  });
export type SkillsConfigFrame = z.infer<typeof SkillsConfigFrame>;
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

/**
 * The frames a service sends an agent outside the handshake, through `AgentLink.push`
 * (src/services/ports.ts): the one type of that boundary. In a cluster they travel to the process
 * that holds the agent's socket. The handshake's own frames (challenge, registration,
 * certificate_offer, ready) go out on the connection itself (src/ws/agent/).
 */
export type PushFrame = LlmConfigFrame | SkillsConfigFrame | ChannelMessageSendFrame | IntentFrame | UpdateCapabilitiesFrame;
