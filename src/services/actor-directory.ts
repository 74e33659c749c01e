/**
 * The actors of the whole cluster as GET /api/admin/actors shows them: this node's live actors,
 * and in a cluster every other live node's, gathered with a deadline (a node that does not answer
 * in time is named in `missingNodes`; its actors are left out of that answer). One actor is
 * inspected where it lives (actor-commands.ts).
 */
import type { ActorInspection } from '../actors/host.js';
import type { ServiceCore } from './core.js';
import type { PeerNodes } from './ports.js';
import { inspectActor } from './actor-commands.js';

export interface ListedActor {
  kind: string;
  id: string;
  state: unknown;
  status: string;
  /** Cluster mode: the node that holds it. */
  node?: string;
}

export class ActorDirectory {
  constructor(
    private readonly ctx: Pick<ServiceCore, 'actors' | 'placement' | 'config'>,
    private readonly peers: PeerNodes,
  ) {
    peers.onGather('actors.list', (data) => this.here((data as { kind?: string } | undefined)?.kind));
  }

  /** Whether other nodes hold actors too. */
  get clustered(): boolean {
    return this.peers.clustered;
  }

  kindNames(): string[] {
    return this.ctx.actors.kindNames();
  }

  async list(kind?: string): Promise<{ actors: ListedActor[]; missingNodes?: string[] }> {
    if (!this.peers.clustered) return { actors: this.ctx.actors.list(kind) };
    const { answers, missing } = await this.peers.gather<ListedActor[]>('actors.list', { kind });
    const actors = [...this.here(kind), ...answers.flat()];
    return missing.length > 0 ? { actors, missingNodes: missing.sort() } : { actors };
  }

  inspect(kind: string, id: string): Promise<ActorInspection | null> {
    return inspectActor(this.ctx, kind, id);
  }

  private here(kind?: string): ListedActor[] {
    const node = this.ctx.config.cluster?.nodeId;
    return this.ctx.actors.list(kind).map((a) => ({ ...a, node }));
  }
}
