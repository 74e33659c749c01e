/** Users, the caller's profile, invitations, claims for unclaimed users and grants (docs/people.md, docs/identity.md). */
import { del, get, patch, post, seg, type Page } from './http';
import type { Capability, GlobalRole, Grant, WorkspaceRole } from './types';

export interface Me {
  user: { id: string; did: string; name: string; email: string; isAdmin: boolean; registeredAt: string };
  workspaces: Array<{ id: string; name: string; slug: string; color: string; role: WorkspaceRole }>;
  grants: Grant[];
}
export const getMe = () => get<Me>('/api/users/me');

/** What every answer about a person holds. */
export interface PersonCore {
  id: string;
  did: string | null;
  name: string;
  email: string;
  isOwner: boolean;
  isAdmin: boolean;
  registeredAt: string;
}
export interface User extends PersonCore {
  role: GlobalRole;
  directoryId: string | null;
  claimedAt: string | null;
  reportsTo: string | null;
  description: string | null;
  workspaces: Array<{ id: string; name: string; slug: string; color: string; isPrimary: boolean }>;
  grants: Grant[];
}

export interface UserQuery {
  q?: string;
  role?: GlobalRole;
  workspace?: string;
  isAdmin?: boolean;
  hasAccount?: boolean;
  page?: number;
  pageSize?: number;
  sortBy?: 'name' | 'email' | 'registeredAt';
  sortDir?: 'asc' | 'desc';
}
export const listUsers = (q: UserQuery) => get<Page & { users: User[] }>('/api/users', { ...q });
/** A user by DID or id (admin level). */
export const getUser = (ref: string) => get<{ user: User }>(`/api/users/${seg(ref)}`);
export const updateUser = (ref: string, body: Partial<Pick<User, 'name' | 'email' | 'role' | 'reportsTo' | 'description'>>) =>
  patch<{ user: User }>(`/api/users/${seg(ref)}`, body);
export const deleteUser = (ref: string) => del<{ ok: true }>(`/api/users/${seg(ref)}`);
export const deleteUnclaimed = (id: string) => del<{ ok: true }>(`/api/users/unclaimed/${seg(id)}`);

export const sendQr = (userId: string, sendByEmail: boolean) =>
  post<{ qrUrl: string; token: string; serverDid: string; emailSent: boolean }>('/api/server/directory/send-qr', { userId, sendByEmail });
export const inviteLink = () => get<{ connectionString: string; token: string; key: string; serverDid: string }>('/api/users/invite');
export const inviteByEmail = (body: { email: string; name: string; role: GlobalRole }) => post<{ token: string; userId: string }>('/api/users/invite/email', body);
export interface Invitation {
  id: string;
  email: string;
  workspaceId: string | null;
  role: string;
  invitedBy: string;
  createdAt: string;
  expiresAt: string;
}
export const listInvitations = (q: { page?: number; pageSize?: number }) => get<Page & { invitations: Invitation[] }>('/api/invitations', q);
export const revokeInvitationById = (id: string) => del<{ success: true }>(`/api/invitations/id/${seg(id)}`);
export const revokeInvitation = (token: string) => post<{ success: true }>(`/api/invitations/${seg(token)}/delete`);

export const listGrants = (userRef: string) => get<{ grants: Grant[] }>(`/api/users/${seg(userRef)}/grants`);
export const createGrant = (userRef: string, body: { agentDid: string | null; capabilities: Capability[]; expiresAt?: string }) =>
  post<{ grant: Grant }>(`/api/users/${seg(userRef)}/grants`, body);
export const revokeGrant = (userRef: string, grantId: string) => del<{ ok: true }>(`/api/users/${seg(userRef)}/grants/${seg(grantId)}`);

/** Names of DIDs the caller may see (others are absent from the answer). */
export const lookupNames = (dids: string[]) => post<{ names: Record<string, { name: string; kind: 'user' | 'agent' }> }>('/api/lookup/names', { dids });
