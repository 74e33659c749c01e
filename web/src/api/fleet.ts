/** Fleet-wide figures, token series and actors (docs/fleet.md; docs/dashboard.md). */
import { get, seg, type Page } from './http';
import type { TokenStats } from './types';

export const tokenStats = () => get<TokenStats>('/api/stats/tokens');

export interface FleetSummary {
  scope: 'server' | 'workspaces';
  agents: { total: number; online: number; pending: number; rejected: number };
  workspaces: Array<{ id: string; slug: string; name: string; total: number; online: number }>;
  /** null when the caller may not see registrations. */
  registrationsPending: number | null;
  certificatesAwaitingReissue: number;
  policiesExpiringSoon: number;
  runs: { running: number; failedLast24h: number };
  at: string;
}
export const fleetSummary = () => get<FleetSummary>('/api/fleet/summary');

/** Token counts are numbers, or strings of digits past 2^53. */
export type TokenCount = number | string;
export type SeriesScope = 'server' | 'workspace' | 'agent';
export type Granularity = 'day' | 'month';
export interface TokenSeries {
  scope: SeriesScope;
  id: string | null;
  granularity: Granularity;
  points: Array<{ bucket: string; tokens: TokenCount }>;
  total: TokenCount;
  budget: { maxTokensPerDay: number; todayUsed: TokenCount; todayFraction: number } | null;
}
export const tokenSeries = (q: { scope: SeriesScope; id?: string; granularity?: Granularity; from?: string; to?: string }) => get<TokenSeries>('/api/stats/tokens/series', q);
export interface TokenTop {
  by: 'agent' | 'workspace';
  bucket: string;
  items: Array<{ id: string; name: string; tokens: TokenCount }>;
}
export const tokenTop = (q: { by: 'agent' | 'workspace'; granularity?: Granularity; bucket?: string; limit?: number }) => get<TokenTop>('/api/stats/tokens/top', q);

/** An XState state value: a state's name, or nested objects for compound and parallel states. */
export type StateValue = string | { [region: string]: StateValue };
export interface ActorItem {
  kind: string;
  id: string;
  state: StateValue;
  status: string;
  /** When it entered its current state. */
  since: string | null;
}
export interface ActorQuery {
  kind?: string;
  state?: string;
  prefix?: string;
  page?: number;
  pageSize?: number;
}
export const listActors = (q: ActorQuery) => get<Page & { actors: ActorItem[]; kinds: Array<{ kind: string; count: number }> }>('/api/admin/actors', { ...q });
export interface ActorTransition {
  from: StateValue | null;
  to: StateValue;
  event: string;
  at: string;
}
export interface ActorDetail extends ActorItem {
  context?: unknown;
  live?: boolean;
  history?: ActorTransition[];
}
/** An actor by kind and id (the address `kind:id`). */
export const getActor = (kind: string, id: string) => get<{ actor: ActorDetail }>(`/api/admin/actors/${seg(`${kind}:${id}`)}`);

/** XState's `machine.toJSON()`, as much of it as the chart draws. */
export interface StateNodeDef {
  id?: string;
  key?: string;
  type?: 'atomic' | 'compound' | 'parallel' | 'final' | 'history';
  initial?: unknown;
  on?: Record<string, Array<{ target?: string[] | string; eventType?: string }> | { target?: string[] | string }>;
  states?: Record<string, StateNodeDef>;
}
export const actorDefinition = (kind: string) => get<{ kind: string; definition: StateNodeDef }>(`/api/admin/actors/kinds/${seg(kind)}/definition`);
