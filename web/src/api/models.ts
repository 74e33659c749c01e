/** The model registry (interface §4.1; admin level). */
import { del, get, post, put, seg } from './http';

export interface Model {
  id: string;
  name: string;
  description?: string;
  provider: string;
  modelId: string;
  baseUrl?: string;
  status: 'active' | 'inactive';
  proxyModelName?: string;
  createdAt: string;
}
export const listModels = () => get<{ models: Model[] }>('/api/admin/models');
export const createModel = (body: { name: string; provider: string; modelId: string; baseUrl?: string; description?: string; apiKey?: string }) =>
  post<{ model: { id: string; name: string } }>('/api/admin/models', body);
export const updateModel = (id: string, body: { name?: string; description?: string; status?: 'active' | 'inactive' }) => put<{ ok: true }>(`/api/admin/models/${seg(id)}`, body);
export const deleteModel = (id: string) => del<{ ok: true }>(`/api/admin/models/${seg(id)}`);
