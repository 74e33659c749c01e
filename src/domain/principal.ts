/**
 * Who is making a request. People authenticate with a DID login session; agents with the
 * session their WebSocket handshake grants them.
 */
import type { GlobalRole } from './roles.js';

export type { GlobalRole } from './roles.js';

export interface UserPrincipal {
  kind: 'user';
  userId: string;
  did: string;
  name: string;
  isOwner: boolean;
  isAdmin: boolean;
  role: GlobalRole;
  sessionId: string;
  /** How the session was presented: cookie requests are subject to the Origin check. */
  via: 'cookie' | 'bearer';
}

export interface AgentPrincipal {
  kind: 'agent';
  did: string;
  name: string;
  sessionId: string;
  via: 'cookie' | 'bearer';
}

export type Principal = UserPrincipal | AgentPrincipal;
