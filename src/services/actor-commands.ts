/**
 * Commands any actor answers where it lives (docs/cluster.md "Where actors live"): in one process
 * a direct call on the actor host; in a cluster through the placement (a direct call, counted,
 * for an actor of this node's shards; else a request on the shard's subject, answered by its
 * owner: a timeout answers 504, a shard changing hands 503).
 */
import type { ActorInspection } from '../actors/host.js';
import type { ServiceCore } from './core.js';

type Core = Pick<ServiceCore, 'actors' | 'placement'>;

const key = (kind: string, id: string) => `${kind}:${id}`;

/** Answers `actor.remove` and `actor.inspect` for the actors of this node. */
export function serveActorCommands(ctx: Core): void {
  ctx.placement.handle('actor.remove', async (data) => {
    const { kind, id } = data as { kind: string; id: string };
    await ctx.actors.remove(kind, id);
    return null;
  });
  ctx.placement.handle('actor.inspect', (data) => {
    const { kind, id } = data as { kind: string; id: string };
    return ctx.actors.inspect(kind, id);
  });
}

/** Stops an actor and deletes its snapshot, where it lives. */
export async function removeActor(ctx: Core, kind: string, id: string): Promise<void> {
  if (!ctx.placement.clustered) await ctx.actors.remove(kind, id);
  else await ctx.placement.run(key(kind, id), 'actor.remove', { kind, id });
}

/** One actor's state and context as its node holds it (live, or from its snapshot); null when there is none. */
export async function inspectActor(ctx: Core, kind: string, id: string): Promise<ActorInspection | null> {
  if (!ctx.placement.clustered) return ctx.actors.inspect(kind, id);
  return ctx.placement.run<ActorInspection | null>(key(kind, id), 'actor.inspect', { kind, id });
}
