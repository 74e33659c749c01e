/**
 * What operators see of the actors (global admins; docs/fleet.md, "Actors"): live actors listed
 * by kind, state and id prefix, a page at a time; a kind's machine definition for drawing its
 * state chart; one actor's state, context, time in its state and recent transitions. Inspecting
 * an actor starts keeping its transitions for a while (src/actors/history.ts). In a cluster the
 * list is gathered from every node (actor-directory.ts) and one actor is inspected where it lives.
 */
import { z } from 'zod';
import { notFound } from '../domain/errors.js';
import type { ActorHost, ActorInspection } from '../actors/host.js';
import type { ActorDirectory } from './actor-directory.js';

const actorItem = z.object({
  kind: z.string(),
  id: z.string(),
  state: z.unknown(),
  status: z.string(),
  since: z.string(),
  node: z.string().optional().meta({ description: 'Cluster mode: the node that holds it' }),
});

export const actorListView = z.object({
  actors: z.array(actorItem),
  total: z.number().int(),
  page: z.number().int(),
  pageSize: z.number().int(),
  totalPages: z.number().int(),
  /** Live actors per kind (all of each kind, whatever the filters). */
  kinds: z.array(z.object({ kind: z.string(), count: z.number().int() })),
  /** Cluster mode: nodes that did not answer in time (their actors are not in this answer). */
  missingNodes: z.array(z.string()).optional(),
});
export type ActorListView = z.infer<typeof actorListView>;

export const actorDefinitionView = z.object({ kind: z.string(), definition: z.unknown() });

export const actorDetailView = z.object({
  actor: z.object({
    kind: z.string(),
    id: z.string(),
    state: z.unknown(),
    status: z.string(),
    context: z.unknown(),
    live: z.boolean(),
    since: z.string().nullable(),
    history: z.array(z.object({ from: z.unknown(), to: z.unknown(), event: z.string(), at: z.string() })),
  }),
});

export interface ActorListQuery {
  kind?: string;
  state?: string;
  prefix?: string;
  page: number;
  pageSize: number;
}

export class ActorInspector {
  constructor(
    private readonly actors: ActorHost,
    private readonly directory: ActorDirectory,
  ) {}

  async list(q: ActorListQuery): Promise<ActorListView> {
    const state = q.state;
    const inState = state === undefined ? undefined : (value: unknown) => statePaths(value).some((p) => matchesState(p, state));
    let all: Array<ActorListView['actors'][number]>;
    let kinds: Record<string, number>;
    let missingNodes: string[] | undefined;
    if (this.directory.clustered) {
      const gathered = await this.directory.list();
      missingNodes = gathered.missingNodes;
      kinds = {};
      for (const a of gathered.actors) kinds[a.kind] = (kinds[a.kind] ?? 0) + 1;
      all = (gathered.actors as typeof all).filter(
        (a) => (q.kind === undefined || a.kind === q.kind) && (q.prefix === undefined || a.id.startsWith(q.prefix)) && (!inState || inState(a.state)),
      );
    } else {
      all = this.actors.list(q.kind, q.prefix, inState);
      kinds = this.actors.counts();
    }
    all.sort((a, b) => (a.kind !== b.kind ? (a.kind < b.kind ? -1 : 1) : a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return {
      actors: all.slice((q.page - 1) * q.pageSize, q.page * q.pageSize),
      total: all.length,
      page: q.page,
      pageSize: q.pageSize,
      totalPages: Math.ceil(all.length / q.pageSize),
      kinds: Object.entries(kinds).map(([kind, count]) => ({ kind, count })),
      ...(missingNodes ? { missingNodes } : {}),
    };
  }

  definition(kind: string): { kind: string; definition: unknown } {
    const definition = this.actors.definition(kind);
    if (definition === null) throw notFound(`no actor kind ${kind}`);
    return { kind, definition };
  }

  /** One actor (live, or from its stored snapshot); its transitions are kept from now on for a while. */
  async inspect(kind: string, id: string): Promise<ActorInspection> {
    const found = this.actors.kindNames().includes(kind) ? await this.directory.inspect(kind, id) : null;
    if (!found) throw notFound(`no actor ${kind}:${id}`);
    // Transitions are kept where the actor lives: in a cluster, only when that is this node.
    if (found.live && (!this.directory.clustered || this.actors.peek(kind, id))) this.actors.watch(kind, id);
    return found;
  }
}

/** A state value as dotted paths to its leaves: `pending`; `{active: {connection: 'online'}}` → `active.connection.online`. */
export function statePaths(value: unknown, prefix = ''): string[] {
  if (typeof value === 'string') return [prefix + value];
  if (value === null || typeof value !== 'object') return [];
  const out: string[] = [];
  for (const [k, v] of Object.entries(value)) out.push(...statePaths(v, `${prefix}${k}.`));
  return out;
}

/** `state` names a path, a leading part of one (`active`), or its last parts (`online`, `connection.online`). */
function matchesState(path: string, state: string): boolean {
  return path === state || path.startsWith(`${state}.`) || path.endsWith(`.${state}`);
}
