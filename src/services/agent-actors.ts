/**
 * The agents' actors (src/actors/agent.ts) as the rest of the server addresses them: an agent's
 * actor by DID, and the ordered queue through which the gateway tells actors what happened on
 * their sockets. The fleet service defines the actor kind (its IO is the fleet's); this module
 * only finds actors and delivers events to them.
 */
import type { AnyActorRef } from 'xstate';
import type { ActorHost } from '../actors/host.js';
import type { Logger } from '../log.js';
import type { AgentDoc } from '../store/collections.js';
import { AGENT_ACTOR_KIND, type AgentActorEvent } from '../actors/agent.js';
import { yieldToLoop } from '../domain/time-slice.js';
import type { ActorPlacement } from './ports.js';

/** Actor events delivered per turn of the event loop (dropped ones are not counted). */
const TELL_CHUNK = 128;
/** How long "reissue offered" waits for the co-signature that would make it moot. */
const OFFER_HOLD_MS = 1000;

interface Told {
  did: string;
  event: AgentActorEvent;
  status: AgentDoc['status'];
  dropped: boolean;
  /** performance.now() before which a held event is not delivered (0: at once). */
  due: number;
  /** Cluster mode: sent here by the node holding the socket (that node's listeners heard it already). */
  relayed: boolean;
}

export class AgentActors {
  /** Where a brand-new actor starts, read synchronously by the actor kind's `input`. */
  private readonly bootStatus = new Map<string, AgentDoc['status']>();
  private readonly told: Told[] = [];
  private readonly offered = new Map<string, Told>();
  private telling = false;
  private draining = false;
  private told0 = 0;
  private holdTimer: NodeJS.Timeout | null = null;
  private readonly deliveredListeners: Array<(did: string, event: AgentActorEvent) => void> = [];

  constructor(
    private readonly actors: ActorHost,
    private readonly log: Logger,
    /**
     * Cluster mode: an agent's actor lives on the owner of its shard, which may not be the node
     * holding its socket; events for it go there (`agent.tell`, docs/cluster.md "Placement").
     */
    private readonly placement?: ActorPlacement,
  ) {
    placement?.handle('agent.tell', (data) => {
      const { did, event, status } = data as { did: string; event: AgentActorEvent; status: AgentDoc['status'] };
      this.enqueue(did, event, status, true);
      return null;
    });
    placement?.handle('agent.ensure', async (data) => {
      const { did, status } = data as { did: string; status: AgentDoc['status'] };
      await this.actorOf(did, status);
      return null;
    });
  }

  /** Whether the agent's actor lives on this node (always, in one process). */
  isHere(did: string): boolean {
    return !this.placement?.clustered || this.placement.isLocal(`${AGENT_ACTOR_KIND}:${did}`);
  }

  /** Makes sure the agent's actor exists (made with `status` when it is new), wherever it lives. */
  async ensure(did: string, status: AgentDoc['status']): Promise<void> {
    if (this.isHere(did)) {
      await this.actorOf(did, status);
      return;
    }
    // Elsewhere: not needed for what follows (a decision makes the actor where it lives when it is missing).
    await this.placement!.run(`${AGENT_ACTOR_KIND}:${did}`, 'agent.ensure', { did, status }).catch((err: unknown) =>
      this.log.warn({ err, did }, "an agent's actor could not be made on the node that holds its shard; it is made at its first decision"),
    );
  }

  /** Where the actor of `did` starts when it is made now (the kind's `input` reads it). */
  startStatus(did: string): AgentDoc['status'] {
    return this.bootStatus.get(did) ?? 'pending';
  }

  /** The agent's actor; `status` says where a brand-new one starts (an agent stored without a snapshot). */
  async actorOf(did: string, status?: AgentDoc['status']): Promise<AnyActorRef> {
    if (status) this.bootStatus.set(did, status);
    try {
      return (await this.actors.get(AGENT_ACTOR_KIND, did)) as AnyActorRef;
    } finally {
      if (status) this.bootStatus.delete(did);
    }
  }

  /**
   * Tells an agent's actor what happened on its socket. Socket events are queued and delivered
   * in order, a chunk per turn of the event loop, so that a burst (ten thousand re-certifications)
   * does not starve the sockets themselves. "Reissue offered" is held back for
   * `OFFER_HOLD_MS` before it is delivered (and so is everything queued after it, to keep the
   * order): when the agent co-signs within that time, which is the common case, the certificate
   * is stored before the offer was delivered and the offer is dropped, so the actor goes
   * straight to the new certificate (one transition and one snapshot write instead of two). An
   * agent that is slow to co-sign shows `reissuePending` once the hold is over.
   * Failures are logged; the actor is not essential to the socket.
   */
  tell(did: string, event: AgentActorEvent, status: AgentDoc['status'] = 'active'): void {
    this.enqueue(did, event, status, false);
  }

  private enqueue(did: string, event: AgentActorEvent, status: AgentDoc['status'], relayed: boolean): void {
    const item: Told = { did, event, status, dropped: false, due: 0, relayed };
    if (event.type === 'CERTIFICATE_STORED') {
      const offered = this.offered.get(did);
      if (offered && (offered.event as { serial: string }).serial === event.serial) offered.dropped = true;
    } else if (event.type === 'REISSUE_OFFERED') {
      item.due = performance.now() + OFFER_HOLD_MS;
      this.offered.set(did, item);
    }
    this.told.push(item);
    if (!this.telling) {
      this.telling = true;
      setImmediate(this.deliver);
    }
  }

  /**
   * Runs `fn` for every event of a socket this node holds as it is handed to the agent's actor
   * (offers made moot by a co-signature are not). In a cluster an event relayed from the node
   * holding the socket to the node holding the actor is heard on the first only, so that each
   * event is heard once in the cluster.
   */
  onDelivered(fn: (did: string, event: AgentActorEvent) => void): void {
    this.deliveredListeners.push(fn);
  }

  /** Drops the events queued for an agent (it is being decommissioned). */
  forget(did: string): void {
    for (const item of this.told) if (item.did === did) item.dropped = true;
  }

  /** Delivers every queued actor event (held offers too); resolves once all are handed over. */
  async drain(): Promise<void> {
    this.draining = true;
    if (this.holdTimer) {
      // Waiting out a hold: deliver now instead.
      clearTimeout(this.holdTimer);
      this.holdTimer = null;
      setImmediate(this.deliver);
    }
    try {
      while (this.told.length > 0 || this.telling) await yieldToLoop();
    } finally {
      this.draining = false;
    }
  }

  private readonly deliver = (): void => {
    this.holdTimer = null;
    const now = performance.now();
    let delivered = 0;
    while (this.told0 < this.told.length && delivered < TELL_CHUNK) {
      const item = this.told[this.told0]!;
      if (!item.dropped && item.due > now && !this.draining) {
        // A held offer heads the queue: wait for it (the events behind it keep their order).
        this.compact();
        this.holdTimer = setTimeout(this.deliver, Math.max(1, Math.ceil(item.due - now)));
        return;
      }
      this.told0++;
      if (this.offered.get(item.did) === item) this.offered.delete(item.did);
      if (item.dropped) continue;
      delivered++;
      for (const fn of item.relayed ? [] : this.deliveredListeners) {
        try {
          fn(item.did, item.event);
        } catch (err) {
          this.log.error({ err, did: item.did }, 'agent actor delivery listener failed');
        }
      }
      // An actor in memory takes the event at once; one still to be loaded (or made) after the
      // load. The events of one agent keep their order either way: a load completes, and its
      // events are handed over, before the next turn's delivery can find the actor in memory.
      const live = this.actors.getLive(AGENT_ACTOR_KIND, item.did);
      if (!live && !this.isHere(item.did)) {
        // Cluster mode: the actor lives on its shard's owner. One request per event, in order
        // of sending; a lost one leaves the actor's connection state stale until the agent's next
        // event (the socket itself is unaffected: docs/cluster.md).
        this.placement!.run(`${AGENT_ACTOR_KIND}:${item.did}`, 'agent.tell', { did: item.did, event: item.event, status: item.status }).catch((err: unknown) =>
          this.log.warn({ err, did: item.did, event: item.event.type }, "an agent actor's event could not reach the node that holds it"),
        );
      } else if (live) {
        try {
          live.send(item.event as never);
        } catch (err) {
          this.log.warn({ err, did: item.did, event: item.event.type }, 'agent actor refused an event');
        }
      } else {
        this.actorOf(item.did, item.status).then(
          (actor) => actor.send(item.event),
          (err: unknown) => this.log.warn({ err, did: item.did, event: item.event.type }, 'agent actor unavailable'),
        );
      }
    }
    this.compact();
    if (this.told.length > 0) setImmediate(this.deliver);
    else this.telling = false;
  };

  /** Drops delivered items from the head of the queue. */
  private compact(): void {
    if (this.told0 === 0) return;
    this.told.splice(0, this.told0);
    this.told0 = 0;
  }
}
