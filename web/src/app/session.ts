/**
 * Who is signed in and what they may see. GET /api/users/me gives the global admin flag and the
 * workspace roles; the global role (owner, admin, ...) is read from the person's own profile,
 * which only the admin level may read (403 means the person is not of that level).
 */
import { computed, signal } from '@preact/signals';
import { ApiError, onUnauthorized } from '../api/http';
import { getMe, getUser, type Me } from '../api/people';
import { WORKSPACE_ROLES, type GlobalRole, type WorkspaceRole } from '../api/types';

export type SessionState = { status: 'loading' } | { status: 'signed-out'; reason?: string } | { status: 'signed-in'; me: Me; role: GlobalRole | null; isOwner: boolean };

export const session = signal<SessionState>({ status: 'loading' });

const rank = (r: WorkspaceRole) => WORKSPACE_ROLES.indexOf(r);

export interface Access {
  did: string;
  name: string;
  /** The isAdmin flag: policies, registrations, audit, every workspace. */
  globalAdmin: boolean;
  /** "Admin" level of the interface: the user directory, the model registry. */
  adminLevel: boolean;
  owner: boolean;
  roles: Map<string, WorkspaceRole>;
  /** The highest workspace role, or the admin flag. */
  atLeast(role: WorkspaceRole, workspaceId?: string): boolean;
}

export const access = computed<Access | null>(() => {
  const s = session.value;
  if (s.status !== 'signed-in') return null;
  const roles = new Map(s.me.workspaces.map((w) => [w.id, w.role] as const));
  const globalAdmin = s.me.user.isAdmin;
  const owner = s.isOwner || s.role === 'owner';
  return {
    did: s.me.user.did,
    name: s.me.user.name,
    globalAdmin,
    adminLevel: globalAdmin || owner || s.role === 'admin',
    owner,
    roles,
    atLeast(role, workspaceId) {
      if (globalAdmin) return true;
      if (workspaceId) {
        const r = roles.get(workspaceId);
        return r !== undefined && rank(r) >= rank(role);
      }
      return [...roles.values()].some((r) => rank(r) >= rank(role));
    },
  };
});

export async function loadSession(): Promise<void> {
  try {
    const me = await getMe();
    let role: GlobalRole | null = null;
    let isOwner = false;
    try {
      const { user } = await getUser(me.user.did);
      role = user.role;
      isOwner = user.isOwner;
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 403)) throw err;
    }
    session.value = { status: 'signed-in', me, role, isOwner };
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) session.value = { status: 'signed-out' };
    else session.value = { status: 'signed-out', reason: err instanceof Error ? err.message : String(err) };
  }
}

onUnauthorized(() => {
  if (session.value.status === 'signed-in') session.value = { status: 'signed-out', reason: 'Your session has ended. Sign in again.' };
});
