/**
 * People for tests: users with real Ed25519 keys, stored through the same collections the
 * server uses, with sessions minted by the server's own session service (so requests carry a
 * real bearer token over real HTTP). Login itself is tested in test/auth.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { nanoid } from 'nanoid';
import { generateKeyPair, type Ed25519KeyPair } from '../src/domain/did.js';
import type { GlobalRole } from '../src/domain/principal.js';
import type { UserDoc, WorkspaceRole } from '../src/store/collections.js';
import type { TestServer } from './helpers.js';
import { client } from './helpers.js';

export interface TestUser {
  user: UserDoc;
  keys: Ed25519KeyPair;
  token: string;
  api: ReturnType<typeof client>;
}

export interface MakeUserOptions {
  name?: string;
  email?: string;
  role?: GlobalRole;
  isAdmin?: boolean;
  isOwner?: boolean;
  /** Workspace memberships: workspace id -> role (the first is primary). */
  workspaces?: Record<string, WorkspaceRole>;
  /** Leave the user unclaimed (no DID, no session). */
  unclaimed?: boolean;
}

export async function makeUser(s: TestServer, opts: MakeUserOptions = {}): Promise<TestUser> {
  const c = s.ctx.c;
  const keys = generateKeyPair();
  const now = new Date().toISOString();
  const name = opts.name ?? `user-${nanoid(6)}`;
  const email = opts.email ?? `${name.toLowerCase()}@example.test`;
  const user: UserDoc = {
    _id: randomUUID(),
    did: opts.unclaimed ? null : keys.did,
    publicKey: opts.unclaimed ? null : keys.publicKey,
    name,
    email,
    emailLower: email.toLowerCase(),
    isOwner: opts.isOwner ?? false,
    isAdmin: opts.isAdmin ?? false,
    role: opts.role ?? 'member',
    registeredAt: now,
    directoryId: null,
    claimedAt: opts.unclaimed ? null : now,
    reportsTo: null,
    description: null,
  };
  if (user.did) await c.userDids.insertOne({ _id: user.did, userId: user._id, createdAt: now });
  await c.users.insertOne(user);
  let primary = true;
  for (const [workspaceId, role] of Object.entries(opts.workspaces ?? {})) {
    await c.workspaceMembers.insertOne({ _id: nanoid(), workspaceId, userId: user._id, role, isPrimary: primary, joinedAt: now });
    primary = false;
  }
  const token = opts.unclaimed ? '' : (await s.ctx.sessions.create('user', user._id)).token;
  return { user, keys, token, api: client(s.url, token || undefined) };
}

/** The owner created at first start, claimed with a fresh key (servers started with STEWARD_OWNER_DID). */
export async function ownerOf(s: TestServer): Promise<TestUser> {
  const owner = await s.ctx.c.users.findOne({ isOwner: true });
  if (!owner) throw new Error('no owner');
  const token = (await s.ctx.sessions.create('user', owner._id)).token;
  return { user: owner, keys: undefined as unknown as Ed25519KeyPair, token, api: client(s.url, token) };
}
