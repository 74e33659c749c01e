/** Workspaces, their members and agents, and their model access (docs/people.md, docs/models.md). */
import { del, get, patch, post, seg } from './http';
import type { WorkspaceRole } from './types';

export interface Workspace {
  id: string;
  name: string;
  slug: string;
  color: string;
  description: string | null;
  isDefault: boolean;
  createdAt: string;
  updatedAt: string;
}
export interface Member {
  userId: string;
  did: string | null;
  name: string;
  email: string;
  role: WorkspaceRole;
  isPrimary: boolean;
  joinedAt: string;
}

export const listWorkspaces = () => get<{ workspaces: Workspace[] }>('/api/workspaces');
export const myWorkspaces = () => get<{ workspaces: Array<{ id: string; name: string; slug: string; isPrimary: boolean; isAdmin: boolean }> }>('/api/me/workspaces');
export const createWorkspace = (body: { name: string; slug?: string; description?: string; color?: string }) => post<{ workspace: Workspace }>('/api/workspaces', body);
export const updateWorkspace = (ws: string, body: { name?: string; slug?: string; description?: string | null; color?: string }) =>
  patch<{ workspace: Workspace }>(`/api/workspaces/${seg(ws)}`, body);
export const deleteWorkspace = (ws: string) => del<{ ok: true }>(`/api/workspaces/${seg(ws)}`);

export const listMembers = (ws: string) => get<{ members: Member[] }>(`/api/workspaces/${seg(ws)}/members`);
export const addMember = (ws: string, userDid: string, role: WorkspaceRole) => post<{ member: Member }>(`/api/workspaces/${seg(ws)}/members`, { userDid, role });
export const setMemberRole = (ws: string, member: string, role: WorkspaceRole) => patch<{ member: Member }>(`/api/workspaces/${seg(ws)}/members/${seg(member)}`, { role });
export const removeMember = (ws: string, member: string) => del<{ ok: true }>(`/api/workspaces/${seg(ws)}/members/${seg(member)}`);

export const listWorkspaceAgents = (ws: string) => get<{ agents: Array<{ id: string; name: string; isPrimary: boolean; joinedAt: string }> }>(`/api/workspaces/${seg(ws)}/agents`);
export const addWorkspaceAgent = (ws: string, agentDid: string, isPrimary = false) => post(`/api/workspaces/${seg(ws)}/agents`, { agentDid, isPrimary });
export const removeWorkspaceAgent = (ws: string, agentDid: string, primary?: string) => del(`/api/workspaces/${seg(ws)}/agents/${seg(agentDid)}`, { primary });

export interface WorkspaceModel {
  id: string;
  name: string;
  provider: string;
  modelId: string;
  proxyModelName: string | null;
  status?: string;
}
export const listWorkspaceModels = (ws: string) => get<{ models: WorkspaceModel[]; hasVirtualKey?: boolean }>(`/api/workspaces/${seg(ws)}/models`);
export const grantWorkspaceModel = (ws: string, modelId: string) => post<{ ok: true }>(`/api/workspaces/${seg(ws)}/models`, { modelId });
export const revokeWorkspaceModel = (ws: string, modelId: string) => del<{ ok: true }>(`/api/workspaces/${seg(ws)}/models`, { modelId });
