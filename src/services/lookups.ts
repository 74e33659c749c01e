/** How a path or a body names a record: a workspace by id or slug, a person by DID or id. */
import type { Collections, UserDoc, WorkspaceDoc } from '../store/collections.js';
import { notFound } from '../domain/errors.js';

/** A workspace by id or by slug; null when neither names one. */
export async function resolveWorkspace(c: Collections, idOrSlug: string): Promise<WorkspaceDoc | null> {
  return (await c.workspaces.findById(idOrSlug)) ?? (await c.workspaces.findOne({ slug: idOrSlug.toLowerCase() }));
}

/** A user by DID (`did:...`) or by id. */
export async function findUserByRef(c: Collections, ref: string): Promise<UserDoc | null> {
  return ref.startsWith('did:') ? c.users.findOne({ did: ref }) : c.users.findById(ref);
}

/** A user by DID or id; 404 when there is none. */
export async function userByRef(c: Collections, ref: string): Promise<UserDoc> {
  const user = await findUserByRef(c, ref);
  if (!user) throw notFound(`no user ${ref}`);
  return user;
}
