/**
 * Registration of agents (interface §3, §4.5): an unknown agent — met on its socket (`hello`) or
 * through POST /api/agents/register — becomes a pending registration and a pending agent record
 * until a global admin approves a subset of the capabilities it asked for, or rejects it.
 *
 * Rules:
 * - The agent id is its DID; without a DID, the did:key of its public key. A did:key must carry
 *   the public key given; another DID method keeps the key given (base64url of the raw 32 bytes).
 * - A DID already held by a person cannot register as an agent.
 * - Registering again: a pending agent with the same key gets its existing registration back;
 *   an active one, a rejected one, or one registered with another key is a conflict (409).
 * - With no workspace named, the agent goes to the default workspace, which becomes its primary
 *   one at approval. So does one naming a workspace that does not exist (kept as
 *   `requestedWorkspace` for the admin who approves): refusing it would tell anyone, signed in or
 *   not, which workspaces exist.
 * - A new pending registration needs a place (PendingAdmission: limits in all and per source
 *   address); an agent already pending gets its registration back whatever the limits.
 */
import { z } from 'zod';
import { capabilityList, pageFields, timestamp } from '../domain/views.js';
import { newId } from '../domain/ids.js';
import { AppError } from '../domain/errors.js';
import type { AgentDoc, Collections, RegistrationDoc, WorkspaceDoc } from '../store/collections.js';
import type { Capability } from '../domain/capabilities.js';
import { decodePublicKey, didKeyFromPublicKey, encodeBase64Url, isDid, resolvePublicKey } from '../domain/did.js';
import { DuplicateKeyError } from '../store/types.js';
import type { RegistrationFrame } from '../domain/feed-frames.js';
import { resolveWorkspace } from './workspaces.js';
import type { FeedPublisher } from './ports.js';

/** A refused registration (said to an agent on its socket as an error frame, over HTTP as the error answer). */
export class RegistrationError extends AppError {
  constructor(status: 400 | 404 | 409 | 429, code: string, message: string, retryAfterSeconds?: number) {
    super(status, code, message, retryAfterSeconds);
    this.name = 'RegistrationError';
  }
}

export interface RegistrationInput {
  did?: string;
  publicKey?: string;
  name: string;
  version: string;
  capabilities: Capability[];
  workspace?: string;
}

/** Where a registration comes from: the transport, and the source address it is counted against. */
export interface RegistrationOrigin {
  via: RegistrationDoc['via'];
  /** See sourceOf in registration-limits.ts. */
  source: string;
}

/** Places for new pending registrations (PendingRegistrations in registration-limits.ts). */
export interface PendingAdmission {
  /** Takes a place for a new pending registration (false: `did` holds one already); throws RegistrationError 429 when none is left. */
  reserve(did: string, source: string): boolean;
  /** Gives the place back; idempotent. */
  release(did: string): void;
}

export interface RegistrationOutcome {
  registration: RegistrationDoc;
  agent: AgentDoc;
  /** False when an existing pending registration was returned. */
  created: boolean;
}

/** The DID and base64url public key an agent registers with; throws RegistrationError. */
export function identityOf(input: { did?: string; publicKey?: string }): { did: string; publicKey: string } {
  if (input.did !== undefined && !isDid(input.did)) throw new RegistrationError(400, 'invalid_did', `'${input.did}' is not a DID`);
  if (input.publicKey !== undefined && decodePublicKey(input.publicKey) === null) {
    throw new RegistrationError(400, 'invalid_public_key', 'publicKey must be the base64url encoding of a raw 32-byte Ed25519 key');
  }
  if (input.did === undefined) {
    if (input.publicKey === undefined) throw new RegistrationError(400, 'invalid_public_key', 'publicKey is required');
    const raw = decodePublicKey(input.publicKey)!;
    return { did: didKeyFromPublicKey(raw), publicKey: encodeBase64Url(raw) };
  }
  const key = resolvePublicKey(input.did, input.publicKey);
  if (!key) {
    throw new RegistrationError(
      400,
      'invalid_public_key',
      input.did.startsWith('did:key:')
        ? 'publicKey does not match the key inside the did:key (or the did:key is not Ed25519)'
        : 'publicKey is required for a DID that is not a did:key',
    );
  }
  return { did: input.did, publicKey: encodeBase64Url(key) };
}

export async function createRegistration(
  c: Collections,
  input: RegistrationInput,
  origin: RegistrationOrigin,
  defaultWorkspace: WorkspaceDoc,
  admission: PendingAdmission,
): Promise<RegistrationOutcome> {
  const { did, publicKey } = identityOf(input);
  let workspace = defaultWorkspace;
  let requestedWorkspace: string | null = null;
  if (input.workspace !== undefined) {
    const found = await resolveWorkspace(c, input.workspace);
    if (found) workspace = found;
    else requestedWorkspace = input.workspace;
  }
  const existing = await c.agents.findById(did);
  if (existing) return existingRegistration(c, existing, publicKey);
  if (await c.userDids.findById(did)) throw new RegistrationError(409, 'did_taken', 'this DID belongs to a person');

  const now = new Date().toISOString();
  const registration: RegistrationDoc = {
    _id: newId(),
    agentDid: did,
    name: input.name,
    publicKey,
    version: input.version,
    requestedCapabilities: [...new Set(input.capabilities)],
    workspaceId: workspace._id,
    requestedWorkspace,
    requestedAt: now,
    via: origin.via,
    source: origin.source,
    status: 'pending',
    approvedCapabilities: null,
    reason: null,
    decidedAt: null,
    decidedBy: null,
  };
  const agent: AgentDoc = {
    _id: did,
    name: input.name,
    publicKey,
    version: input.version,
    status: 'pending',
    capabilities: [],
    requestedCapabilities: registration.requestedCapabilities,
    registeredAt: now,
    lastSeen: null,
    isOnline: false,
    registrationId: registration._id,
  };
  const took = admission.reserve(did, origin.source);
  const giveBack = () => took && admission.release(did);
  try {
    await c.agents.insertOne(agent); // the DID is the key: of two concurrent registrations, one wins
  } catch (err) {
    giveBack();
    if (!(err instanceof DuplicateKeyError)) throw err;
    const winner = await c.agents.findById(did);
    if (!winner) throw err;
    return existingRegistration(c, winner, publicKey);
  }
  try {
    await c.registrations.insertOne(registration);
  } catch (err) {
    giveBack();
    throw err;
  }
  return { registration, agent, created: true };
}

async function existingRegistration(c: Collections, agent: AgentDoc, publicKey: string): Promise<RegistrationOutcome> {
  if (agent.publicKey !== publicKey) throw new RegistrationError(409, 'key_mismatch', 'this DID is registered with another public key');
  if (agent.status === 'active') throw new RegistrationError(409, 'already_registered', 'this agent is already registered and approved');
  if (agent.status === 'rejected') throw new RegistrationError(409, 'rejected', 'the registration of this agent was rejected');
  const registration = await pendingRegistrationOf(c, agent._id);
  if (!registration) throw new RegistrationError(409, 'conflict', 'this agent is pending without a registration record');
  return { registration, agent, created: false };
}

export async function pendingRegistrationOf(c: Collections, agentDid: string): Promise<RegistrationDoc | null> {
  return c.registrations.findOne({ agentDid, status: 'pending' });
}

/** The newest decided registration of an agent (for the rejection reason). */
export async function latestRegistrationOf(c: Collections, agentDid: string): Promise<RegistrationDoc | null> {
  const [r] = await c.registrations.find({ agentDid }, { sort: { requestedAt: -1 }, limit: 1 });
  return r ?? null;
}

/** A pending registration (interface §2.6), with the agent's DID, version and workspace. */
export const PendingRegistrationView = z
  .strictObject({
    id: z.string(),
    name: z.string(),
    publicKey: z.string(),
    requestedCapabilities: capabilityList,
    requestedAt: timestamp,
    agentDid: z.string(),
    version: z.string(),
    workspaceId: z.string().meta({ description: 'The workspace it joins as primary at approval' }),
    requestedWorkspace: z.string().nullable().meta({ description: 'A workspace named at registration that does not exist (it then waits in the default one)' }),
  })
  .meta({ id: 'PendingRegistration' });
export type PendingRegistrationView = z.infer<typeof PendingRegistrationView>;

/** A page of the registration queue, oldest first. */
export const PendingRegistrationPage = z.strictObject({ registrations: z.array(PendingRegistrationView), ...pageFields });
export type PendingRegistrationPage = z.infer<typeof PendingRegistrationPage>;

export function toPendingRegistrationView(r: RegistrationDoc): PendingRegistrationView {
  return {
    id: r._id,
    name: r.name,
    publicKey: r.publicKey,
    requestedCapabilities: r.requestedCapabilities,
    requestedAt: r.requestedAt,
    agentDid: r.agentDid,
    version: r.version,
    workspaceId: r.workspaceId,
    requestedWorkspace: r.requestedWorkspace ?? null,
  };
}

/**
 * Tells the live feed's `registrations` topic (global admins, as GET /api/registrations) that a
 * registration was made or decided; nothing is built while nobody follows it.
 */
export function publishRegistration(feed: FeedPublisher | undefined, r: RegistrationDoc, status: RegistrationFrame['status']): void {
  if (!feed?.hasSubscribers('registrations')) return;
  const frame: RegistrationFrame = { type: 'registration', id: r._id, did: r.agentDid, name: r.name, status, at: new Date().toISOString() };
  feed.publish('registrations', frame, { adminOnly: true });
}
