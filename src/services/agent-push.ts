/**
 * The narrow interface other areas use to reach connected agents, so that models, skills,
 * channels and workflows do not depend on the gateway's internals. The fleet gateway provides
 * the implementation (AppContext.agentPush); until it is attached, every agent is offline.
 */
export interface PushFrame {
  type: string;
  [field: string]: unknown;
}

export interface IntentRequest {
  action: string;
  params: Record<string, unknown>;
  /** DID of the person on whose behalf the intent is sent (for a workflow step, the person the run acts for). */
  requestedBy: string;
  timeoutMs?: number;
}

export interface IntentResult {
  intentId: string;
  ok: boolean;
  output?: unknown;
  error?: string;
}

/**
 * Runs when an agent completes its handshake. The agent's `ready` waits until the promise it
 * returns settles, and frames pushed to the agent meanwhile follow `ready` in the same write: the
 * state an area sends every agent at connect costs it no write of its own. Keep the work short
 * (a few reads): every agent's `ready` waits for it.
 */
export type ReadyListener = (did: string) => Promise<unknown> | void;

export interface AgentPush {
  /** Whether the agent has an authenticated, ready socket now. */
  isOnline(did: string): boolean;
  /** Sends one frame to the agent's live socket; false when it is offline (nothing queued). */
  push(did: string, frame: PushFrame): boolean;
  /** Called when an agent completes its handshake, so areas can send it their state (see ReadyListener). */
  onReady(listener: ReadyListener): () => void;
}

export const offlinePush: AgentPush = {
  isOnline: () => false,
  push: () => false,
  onReady: () => () => undefined,
};

/**
 * Sending an intent to an agent with every check of POST /api/agents/{did}/intents: the caller's
 * workspace role (operator or higher) and capability grant unless a global admin, the agent
 * online (else 409), an answer in time (else 504). The fleet provides it.
 */
export interface AgentIntents {
  send(caller: import('../domain/principal.js').UserPrincipal, agentDid: string, request: Omit<IntentRequest, 'requestedBy'>): Promise<IntentResult>;
}
