/** Workspace skills, per-agent overrides and the external library (docs/skills.md). */
import { del, get, patch, post, put, seg } from './http';

export interface SkillRow {
  id: string;
  workspace_id: string;
  workspace_name?: string;
  name: string;
  description: string | null;
  version: string | null;
  is_required: 0 | 1;
  config: string;
  content: string;
  created_at: string;
  agent_count?: number;
  override_count?: number;
}
export interface Skill {
  id: string;
  workspaceId: string;
  name: string;
  description: string | null;
  version: string | null;
  isRequired: boolean;
  config: Record<string, unknown>;
  createdAt: string;
  content?: string;
}
export interface Override {
  skillId: string;
  workspaceId: string;
  agentDid: string;
  enabled: boolean;
  config: Record<string, unknown> | null;
  effective: boolean;
  createdAt: string;
  updatedAt: string;
  updatedBy: string;
}
export interface LibraryEntry {
  id: string;
  name: string;
  description: string;
  source: string;
  skillId: string;
  installs: number;
  githubStars: number;
  repoUrl: string;
  standalone: boolean;
  contentType: string;
}

export const listAllSkills = () => get<SkillRow[]>('/api/skills');
export const listWorkspaceSkills = (ws: string) => get<{ skills: Skill[] }>(`/api/workspaces/${seg(ws)}/skills`);
export const createSkill = (body: { workspaceId: string; name: string; description?: string | null; version?: string | null; isRequired?: boolean; config?: Record<string, unknown>; content?: string }) =>
  post<SkillRow>('/api/skills', body);
export const updateSkill = (ws: string, id: string, body: Partial<{ description: string | null; version: string | null; isRequired: boolean; config: Record<string, unknown>; content: string | null }>) =>
  patch<Skill>(`/api/workspaces/${seg(ws)}/skills/${seg(id)}`, body);
export const deleteSkill = (ws: string, id: string) => del<{ ok: true }>(`/api/workspaces/${seg(ws)}/skills/${seg(id)}`);
export const listOverrides = (ws: string, id: string) => get<{ overrides: Override[] }>(`/api/workspaces/${seg(ws)}/skills/${seg(id)}/overrides`);
export const setOverride = (ws: string, id: string, did: string, body: { enabled: boolean; config: Record<string, unknown> | null }) =>
  put<{ override: Override }>(`/api/workspaces/${seg(ws)}/skills/${seg(id)}/overrides/${seg(did)}`, body);
export const deleteOverride = (ws: string, id: string, did: string) => del<{ ok: true }>(`/api/workspaces/${seg(ws)}/skills/${seg(id)}/overrides/${seg(did)}`);
export const agentSkills = (ws: string, did: string) =>
  get<{ skills: Array<{ id: string; name: string; description: string | null; version: string | null; isRequired: boolean; config: Record<string, unknown> }> }>(
    `/api/workspaces/${seg(ws)}/agents/${seg(did)}/skills`,
  );
export const library = () => get<LibraryEntry[]>('/api/skills/library');
export const libraryContent = (source: string, skillId: string) => get<{ content: string; url: string }>('/api/skills/library/content', { source, skillId });
export const installFromLibrary = (body: { workspaceId: string; source: string; skillId: string; isRequired?: boolean }) => post<SkillRow>('/api/skills/library/install', body);
