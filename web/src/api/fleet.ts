/** Fleet-wide figures and actors (docs/fleet.md; global admins). */
import { get, seg } from './http';
import type { TokenStats } from './types';

export const tokenStats = () => get<TokenStats>('/api/stats/tokens');
export interface ActorInfo {
  id: string;
  kind: string;
  state: unknown;
  status?: string;
}
export const listActors = (kind?: string) => get<{ actors: ActorInfo[] }>('/api/admin/actors', { kind });
export const getActor = (id: string) => get<{ actor: ActorInfo & { context?: unknown } }>(`/api/admin/actors/${seg(id)}`);
