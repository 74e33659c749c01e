/**
 * The agents connected to this process: the newest authenticated socket of each agent, the ready
 * listeners, the intents waiting for their answers, and the agents in their offline grace
 * period. It is how services reach agents (the AgentLink and AgentPresence ports) and needs
 * nothing from them, so it is built before the services that use it; the gateway (gateway.ts)
 * and the handshake (handshake.ts) drive it.
 */
import type { IntentResultFrame } from '../../domain/agent-protocol.js';
import type { Logger } from '../../log.js';
import type { AgentLink, AgentPresence, IntentOutcome, IntentRequest, LiveSeen, PushFrame, ReadyListener } from '../../services/ports.js';
import { Phase, type AgentConn } from './connection.js';

interface PendingIntent {
  did: string;
  settle(outcome: IntentOutcome): void;
}

/**
 * What a cluster needs to know of this process's sockets (src/ws/agent/cluster-link.ts): which
 * agents hold a socket here (to route to them) and which are ready (their presence). None in one process.
 */
export interface ConnectionObserver {
  /** `did` has an authenticated socket here now (whatever its phase). */
  held(did: string): void;
  /** `did` no longer has a socket here. */
  released(did: string): void;
  /** `did`'s socket here is ready (online). */
  online(did: string): void;
  /** `did` went offline here. */
  offline(did: string): void;
}

export class AgentConnections implements AgentLink, AgentPresence {
  /**
   * The newest authenticated connection of each agent, whatever its phase (waiting for approval,
   * certifying, ready): a newer one replaces it (4409). Online means: its phase is Ready.
   */
  private readonly conns = new Map<string, AgentConn>();
  private online = 0;
  /** Changes whenever the set of ready connections may have (AgentPresence.changes). */
  changes = 0;
  private readonly readyListeners = new Set<ReadyListener>();
  private readonly presenceListeners: Array<(did: string, online: boolean) => void> = [];
  private readonly intents = new Map<string, PendingIntent>();
  /** Agents whose socket closed recently: their actor learns it after the grace period (flap damping). */
  private readonly leaving = new Map<string, { timer: NodeJS.Timeout; serial: string | null }>();

  private observer: ConnectionObserver | undefined;

  constructor(private readonly log: Logger) {}

  /** Cluster mode: reports which agents hold a socket here, and which are online. */
  observe(observer: ConnectionObserver): void {
    this.observer = observer;
  }

  // -------------------------------------------------------------------------------------------
  // The ports

  isOnline(did: string): boolean {
    return this.liveConn(did) !== undefined;
  }

  push(did: string, frame: PushFrame): boolean {
    const conn = this.liveConn(did);
    return conn ? conn.send(frame) : false;
  }

  request(did: string, intent: IntentRequest, timeoutMs: number): Promise<IntentOutcome> {
    return new Promise<IntentOutcome>((resolve) => {
      const { intentId } = intent;
      const timer = setTimeout(() => settle({ failed: 'timeout' }), timeoutMs);
      const settle = (outcome: IntentOutcome) => {
        clearTimeout(timer);
        this.intents.delete(intentId);
        resolve(outcome);
      };
      this.intents.set(intentId, { did, settle });
      if (!this.push(did, { type: 'intent', ...intent })) settle({ failed: 'offline' });
    });
  }

  drop(did: string, code: number, reason: string): void {
    const conn = this.conns.get(did);
    if (conn) {
      this.conns.delete(did); // closed() then finds another (no) connection and does nothing more
      this.changes++;
      if (conn.phase === Phase.Ready) {
        this.online--;
        this.agentGone(did);
        this.observer?.offline(did);
      }
      this.observer?.released(did);
      conn.end(code, reason);
    }
    const left = this.leaving.get(did);
    if (left) {
      clearTimeout(left.timer);
      this.leaving.delete(did);
    }
  }

  onReady(listener: ReadyListener): () => void {
    this.readyListeners.add(listener);
    return () => {
      this.readyListeners.delete(listener);
    };
  }

  async lastActive(dids: readonly string[]): Promise<Array<number | undefined>> {
    return dids.map((did) => this.liveConn(did)?.lastSeen);
  }

  collectActive(): LiveSeen {
    const out: LiveSeen = { dids: [], ms: [] };
    this.conns.forEach((conn, did) => {
      if (conn.phase === Phase.Ready && conn.lastSeen > conn.seenCollected) {
        conn.seenCollected = conn.lastSeen;
        out.dids.push(did);
        out.ms.push(conn.lastSeen);
      }
    });
    return out;
  }

  /** Runs `listener` each time an agent comes online (ready) or goes offline (its ready socket gone), at once. */
  onPresence(listener: (did: string, online: boolean) => void): void {
    this.presenceListeners.push(listener);
  }

  private presenceChanged(did: string, online: boolean): void {
    for (const l of this.presenceListeners) {
      try {
        l(did, online);
      } catch (err) {
        this.log.error({ err, did }, 'presence listener failed');
      }
    }
  }

  // -------------------------------------------------------------------------------------------
  // For the gateway, the handshake and the tools

  onlineCount(): number {
    return this.online;
  }

  /** The agent's connection when it is ready. */
  liveConn(did: string): AgentConn | undefined {
    const conn = this.conns.get(did);
    return conn?.phase === Phase.Ready ? conn : undefined;
  }

  /** The agent's current connection, whatever its phase. */
  current(did: string): AgentConn | undefined {
    return this.conns.get(did);
  }

  /** One socket per agent: this newly authenticated connection replaces an older one (4409). */
  claim(conn: AgentConn, did: string, replacedCode: number): void {
    const old = this.conns.get(did);
    if (old && old !== conn) old.end(replacedCode, 'replaced by a newer connection');
    this.conns.set(did, conn);
    this.changes++;
    if (!old) this.observer?.held(did);
  }

  /**
   * The agent is online from here: pushes reach it, and the ready listeners run (what they and
   * anyone else send it waits in its outbox for `ready`). Resolves once every listener's work has
   * settled; null when none returned any.
   */
  ready(conn: AgentConn): Promise<unknown> | null {
    const did = conn.did!;
    conn.phase = Phase.Ready;
    this.online++;
    this.changes++;
    this.presenceChanged(did, true);
    this.observer?.online(did);
    let pending: Array<Promise<unknown>> | null = null;
    for (const l of this.readyListeners) {
      try {
        const work = l(did);
        if (work) (pending ??= []).push(work.catch((err: unknown) => this.log.error({ err, did }, 'ready listener failed')));
      } catch (err) {
        this.log.error({ err, did }, 'ready listener failed');
      }
    }
    return pending && Promise.all(pending);
  }

  /**
   * A socket closed: true when it was the agent's current, ready connection (the agent has gone
   * offline; intents waiting for it fail).
   */
  closed(conn: AgentConn, wasReady: boolean): boolean {
    const did = conn.did;
    if (!did || this.conns.get(did) !== conn) return false;
    this.conns.delete(did);
    this.changes++;
    this.observer?.released(did);
    if (!wasReady) return false;
    this.online--;
    this.agentGone(did);
    this.observer?.offline(did);
    return true;
  }

  /** An `intent_result` of a ready agent; one that is late (timed out) or not this agent's is dropped. */
  answer(did: string, frame: IntentResultFrame): void {
    const p = this.intents.get(frame.intentId);
    if (!p || p.did !== did) return;
    const answered: IntentOutcome = { answered: { intentId: frame.intentId, ok: frame.ok } };
    if (frame.output !== undefined) answered.answered.output = frame.output;
    if (frame.error !== undefined) answered.answered.error = frame.error;
    p.settle(answered);
  }

  private agentGone(did: string): void {
    this.presenceChanged(did, false);
    for (const p of [...this.intents.values()]) if (p.did === did) p.settle({ failed: 'disconnected' });
  }

  // -------------------------------------------------------------------------------------------
  // The offline grace period

  /** Starts the grace period of an agent whose ready socket closed: `gone` runs after `graceMs` unless it is back (or dropped) by then. */
  leave(did: string, serial: string | null, graceMs: number, gone: (did: string) => void): void {
    const prev = this.leaving.get(did);
    if (prev) clearTimeout(prev.timer);
    const timer = setTimeout(() => {
      this.leaving.delete(did);
      gone(did);
    }, graceMs);
    timer.unref();
    this.leaving.set(did, { timer, serial: prev?.serial ?? serial });
  }

  /** Ends the grace period of an agent that is back: the serial it left with; undefined when it was not leaving. */
  returned(did: string): string | null | undefined {
    const left = this.leaving.get(did);
    if (!left) return undefined;
    clearTimeout(left.timer);
    this.leaving.delete(did);
    return left.serial;
  }

  /** At shutdown: every grace period ends now, and `gone` runs for each. */
  flushLeaving(gone: (did: string) => void): void {
    for (const [did, { timer }] of this.leaving) {
      clearTimeout(timer);
      gone(did);
    }
    this.leaving.clear();
  }
}
