/**
 * The agent SDK, published as `steward/agent`:
 *
 *   import { StewardAgent, loadOrCreateKeys } from 'steward/agent';
 *   const { keys } = await loadOrCreateKeys('./agent-key.json');
 *   const agent = new StewardAgent({ url: 'http://localhost:8080', keys, name: 'echo', version: '1.0.0',
 *     capabilities: ['api_call'], onIntent: ({ params }) => params }).start();
 *   await agent.waitFor('ready', 600_000); // after an admin approves it
 *
 * docs/agent-protocol.md describes the protocol for other languages.
 */
export { StewardAgent } from './agent.js';
export type {
  AgentStatus,
  ChannelMessageContext,
  CurrentCertificate,
  IntentContext,
  ReconnectOptions,
  StewardAgentHandlers,
  StewardAgentOptions,
} from './agent.js';
export { Gates, fileGateState, gateMessages, type Clock, type GateResult, type GateState, type GateStateStore } from './gates.js';
export { generateKeyPair, loadKeys, loadOrCreateKeys, type Ed25519KeyPair } from './keys.js';
export type { DisconnectCause, Disconnection } from './disconnection.js';
export { CLOSE, FATAL_CLOSE_CODES, closeMeaning, type CloseCodeMeaning } from '../domain/agent-protocol.js';
export type { Certificate, CertificateTerms, ResourceLimits } from '../domain/certificate.js';
export type { Capability } from '../domain/capabilities.js';
