/**
 * What operators see of the actors (global admins; docs/fleet.md, "Actors"): live actors listed
 * by kind, state and id prefix, a page at a time; a kind's machine definition for drawing its
 * state chart; one actor's state, context, time in its state and recent transitions. Inspecting
 * an actor starts keeping its transitions for a while (src/actors/history.ts).
 */
import { z } from 'zod';
import { notFound } from '../domain/errors.js';
import type { ActorHost, ActorInspection } from '../actors/host.js';

const actorItem = z.object({ kind: z.string(), id: z.string(), state: z.unknown(), status: z.string(), since: z.string() });

export const actorListView = z.object({
  actors: z.array(actorItem),
  total: z.number().int(),
  page: z.number().int(),
  pageSize: z.number().int(),
  totalPages: z.number().int(),
  /** Live actors per kind (all of each kind, whatever the filters). */
  kinds: z.array(z.object({ kind: z.string(), count: z.number().int() })),
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
  constructor(private readonly actors: ActorHost) {}

  list(q: ActorListQuery): ActorListView {
    const state = q.state;
    const all = this.actors.list(q.kind, q.prefix, state === undefined ? undefined : (value) => statePaths(value).some((p) => matchesState(p, state)));
    all.sort((a, b) => (a.kind !== b.kind ? (a.kind < b.kind ? -1 : 1) : a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const counts = this.actors.counts();
    return {
      actors: all.slice((q.page - 1) * q.pageSize, q.page * q.pageSize),
      total: all.length,
      page: q.page,
      pageSize: q.pageSize,
      totalPages: Math.ceil(all.length / q.pageSize),
      kinds: Object.entries(counts).map(([kind, count]) => ({ kind, count })),
    };
  }

  definition(kind: string): { kind: string; definition: unknown } {
    const definition = this.actors.definition(kind);
    if (definition === null) throw notFound(`no actor kind ${kind}`);
    return { kind, definition };
  }

  /** One actor (live, or from its stored snapshot); its transitions are kept from now on for a while. */
  async inspect(kind: string, id: string): Promise<ActorInspection> {
    const found = this.actors.kindNames().includes(kind) ? await this.actors.inspect(kind, id) : null;
    if (!found) throw notFound(`no actor ${kind}:${id}`);
    if (found.live) this.actors.watch(kind, id);
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
