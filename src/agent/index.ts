/**
 * The agent SDK, published as `@steward/agent` (packages/agent/ builds it from these files and the
 * parts of src/domain/ they import); docs/sdk.md is its guide, docs/agent-protocol.md the
 * protocol for other languages. Everything an agent program uses is exported here.
 */
export { StewardAgent } from './agent.js';
export type {
  AgentStatus,
  ChannelMessageContext,
  CurrentCertificate,
  IntentContext,
  ReconnectOptions,
  RefusedIntent,
  StewardAgentEvents,
  StewardAgentHandlers,
  StewardAgentOptions,
} from './agent.js';
export { Gates, fileGateState, gateMessages, type Clock, type GateResult, type GateState, type GateStateStore } from './gates.js';
export { generateKeyPair, loadKeys, loadOrCreateKeys, type Ed25519KeyPair } from './keys.js';
export type { DisconnectCause, Disconnection } from './disconnection.js';
export { AGENT_PROTOCOL_VERSION, CLOSE, FATAL_CLOSE_CODES, closeMeaning, type CloseCodeMeaning } from '../domain/agent-protocol.js';
export type { ChannelMessageSendFrame, ErrorFrame, IntentFrame, LlmConfig, RegistrationFrame, SkillEntry, TokenDelta } from '../domain/agent-protocol.js';
export { CAPABILITIES, type Capability } from '../domain/capabilities.js';
export type { Certificate, CertificateTerms, ResourceLimits } from '../domain/certificate-format.js';
