/**
 * First start: the default workspace and the owner.
 *
 * - The default workspace is created once (`isDefault: true`, slug `default`); it can be renamed
 *   and recoloured, never deleted.
 * - With no user in the store, the owner is created (isOwner, isAdmin, role owner) as a member
 *   of the default workspace with role owner. With STEWARD_OWNER_DID it is already claimed;
 *   otherwise it is unclaimed and the caller prints a claim for it.
 */
import { randomUUID } from 'node:crypto';
import { newId } from '../domain/ids.js';
import type { Collections, UserDoc, WorkspaceDoc } from '../store/collections.js';
import { createUser } from './users.js';
import { DuplicateKeyError } from '../store/types.js';
import { encodeBase64Url, publicKeyFromDidKey } from '../domain/did.js';

export const DEFAULT_WORKSPACE_SLUG = 'default';

export async function ensureDefaultWorkspace(c: Collections): Promise<WorkspaceDoc> {
  const existing = await c.workspaces.findOne({ isDefault: true });
  if (existing) return existing;
  const now = new Date().toISOString();
  const ws: WorkspaceDoc = {
    _id: newId(),
    name: 'Default',
    slug: DEFAULT_WORKSPACE_SLUG,
    color: '#4f46e5',
    description: 'The workspace every installation starts with.',
    isDefault: true,
    createdAt: now,
    updatedAt: now,
    createdBy: null,
  };
  try {
    await c.workspaces.insertOne(ws);
    return ws;
  } catch (err) {
    if (!(err instanceof DuplicateKeyError)) throw err;
    return (await c.workspaces.findOne({ isDefault: true }))!;
  }
}

/**
 * Creates the owner when the store holds no user; returns it when created, else null. Nodes of a
 * cluster starting together on an empty store race here: with STEWARD_OWNER_DID the DID's unique
 * key lets one create the owner, and the others find it taken and go on.
 */
export async function ensureOwner(c: Collections, defaultWs: WorkspaceDoc, ownerDid?: string): Promise<UserDoc | null> {
  if ((await c.users.count({})) > 0) return null;
  const now = new Date().toISOString();
  const pub = ownerDid ? publicKeyFromDidKey(ownerDid) : null;
  const id = randomUUID();
  if (ownerDid) {
    try {
      await c.userDids.insertOne({ _id: ownerDid, userId: id, createdAt: now });
    } catch (err) {
      if (err instanceof DuplicateKeyError) return null; // another node is creating the owner
      throw err;
    }
  }
  const owner = await createUser(c, {
    id,
    name: 'Owner',
    role: 'owner',
    isOwner: true,
    isAdmin: true,
    did: ownerDid ?? null,
    publicKey: pub ? encodeBase64Url(pub) : null,
    workspace: { id: defaultWs._id, role: 'owner' },
    at: now,
  });
  return owner;
}
