/**
 * The agent WebSocket gateway at /ws/agent (DESIGN §4; docs/agent-protocol.md describes it for
 * agent authors): the uWS route, and each inbound frame to its handler — the handshake's frames
 * to handshake.ts, heartbeats to the heartbeat sink (token usage), intent answers to the
 * connection map — and each closed socket to the agent's presence.
 *
 * Every inbound frame is JSON text validated against its schema (src/domain/wire-schemas.ts).
 * Binary, unparsable, unknown, invalid or out-of-order frames get an `error` frame; the
 * AGENT_INVALID_FRAME_LIMIT-th one closes the socket with 1008. A frame sent while the send
 * buffer is above AGENT_SEND_BUFFER_LIMIT_BYTES closes the socket (uWS maxBackpressure with
 * closeOnBackpressureLimit), so a reader that stalls cannot grow the server's memory; a single
 * frame may be larger than the limit. Frames held for `ready` are bounded likewise (Outbox).
 *
 * A ready agent whose socket closes is offline at once (pushes fail, intents fail with 502); its
 * actor learns it after AGENT_OFFLINE_GRACE_MS, unless it is back by then.
 */
import type { Config } from '../../config.js';
import type { Logger } from '../../log.js';
import type { TemplatedApp, WebSocket } from '../../http/uws.js';
import type { ClientAddresses } from '../../http/client-address.js';
import { addressKey } from '../../domain/net-address.js';
import { AGENT_WS_PATH, type CertificateAcceptFrame, type HeartbeatFrame, type HelloFrame, type IntentResultFrame } from '../../domain/agent-protocol.js';
import { describeSchemaErrors, frameValidators, isInboundType } from '../../domain/wire-schemas.js';
import { nestsDeeperThan, tooDeepMessage } from '../../domain/json-depth.js';
import type { HeartbeatSink } from '../../services/ports.js';
import type { FleetService } from '../../services/fleet.js';
import type { AgentActors } from '../../services/agent-actors.js';
import type { SocketRegistry } from '../sockets.js';
import { AgentConn, Phase, failed, isClosed, refuse, unexpected, type ConnRef } from './connection.js';
import type { AgentConnections } from './connections.js';
import type { Handshake } from './handshake.js';
import { hbCompletion, hbPrompt, hbSeq, readCanonicalHeartbeat, utf8 } from './frames.js';

export interface GatewayDeps {
  app: TemplatedApp;
  sockets: SocketRegistry;
  config: Config;
  log: Logger;
  clientAddresses: ClientAddresses;
  connections: AgentConnections;
  handshake: Handshake;
  heartbeats: HeartbeatSink;
  fleet: FleetService;
  agentActors: AgentActors;
}

export class AgentGateway {
  private closing = false;
  private readonly invalidLimit: number;
  private readonly heartbeats: HeartbeatSink;
  /** Tells an agent's actor that it went offline (its grace period is over). */
  private readonly gone: (did: string) => void;

  constructor(private readonly deps: GatewayDeps) {
    this.invalidLimit = deps.config.agentInvalidFrameLimit;
    this.heartbeats = deps.heartbeats;
    this.gone = (did) => deps.agentActors.tell(did, { type: 'DISCONNECTED' });
  }

  /** Registers the /ws/agent route on the uWS app (before the HTTP catch-all). */
  attach(): void {
    const { app, config: cfg, clientAddresses, sockets, handshake } = this.deps;
    app.ws<ConnRef>(AGENT_WS_PATH, {
      maxPayloadLength: cfg.agentMaxFrameBytes,
      maxBackpressure: cfg.agentSendBufferLimitBytes,
      closeOnBackpressureLimit: 1,
      idleTimeout: cfg.agentIdleTimeoutSeconds,
      sendPingsAutomatically: true,
      upgrade: (res, req, context) => {
        const conn = new AgentConn();
        const peer = Buffer.from(res.getRemoteAddressAsText()).toString();
        conn.address = addressKey(clientAddresses.of(peer, req.getHeader('x-forwarded-for') || undefined));
        res.upgrade<ConnRef>(
          { conn },
          req.getHeader('sec-websocket-key'),
          req.getHeader('sec-websocket-protocol'),
          req.getHeader('sec-websocket-extensions'),
          context,
        );
      },
      open: (ws) => {
        const conn = ws.getUserData().conn;
        conn.ws = ws;
        sockets.add('agent', ws as WebSocket<unknown>);
        handshake.opened(conn);
      },
      message: (ws, data, isBinary) => this.onMessage(ws.getUserData().conn, data, isBinary),
      drain: (ws) => ws.getUserData().conn.drained(),
      close: (ws) => this.onClose(ws.getUserData().conn, ws),
    });
  }

  /** At shutdown: every agent still in its grace period is told now. */
  flushLeaving(): void {
    this.closing = true;
    this.deps.connections.flushLeaving(this.gone);
  }

  private onMessage(conn: AgentConn, data: ArrayBuffer, isBinary: boolean): void {
    if (isClosed(conn)) return;
    if (isBinary) return refuse(conn, 'binary_frame', 'frames are JSON text, not binary', this.invalidLimit);
    const text = utf8.decode(data);
    if (readCanonicalHeartbeat(text)) {
      if (conn.phase === Phase.Ready) conn.lastSeen = Date.now();
      return this.onHeartbeat(conn, hbSeq, hbPrompt, hbCompletion);
    }
    if (nestsDeeperThan(text)) return refuse(conn, 'too_deep', tooDeepMessage('the frame'), this.invalidLimit);
    let frame: { type?: unknown };
    try {
      frame = JSON.parse(text) as { type?: unknown };
    } catch {
      return refuse(conn, 'invalid_json', 'the frame is not valid JSON', this.invalidLimit);
    }
    const type: unknown = typeof frame === 'object' && frame !== null ? frame.type : undefined;
    if (!isInboundType(type)) return refuse(conn, 'unknown_frame', `unknown frame type ${JSON.stringify(type ?? null)}`, this.invalidLimit);
    const validate = frameValidators[type];
    if (!validate(frame)) return refuse(conn, 'schema_violation', `${type}: ${describeSchemaErrors(validate.errors)}`, this.invalidLimit);
    if (conn.phase === Phase.Ready) conn.lastSeen = Date.now();
    const { handshake } = this.deps;
    switch (type) {
      case 'hello':
        return this.guard(conn, handshake.hello(conn, frame as HelloFrame));
      case 'auth':
        return this.guard(conn, handshake.auth(conn, (frame as { signature: string }).signature));
      case 'certificate_accept':
        return this.guard(conn, handshake.accept(conn, frame as CertificateAcceptFrame));
      case 'heartbeat': {
        const f = frame as HeartbeatFrame;
        return this.onHeartbeat(conn, f.seq, f.sinceLastSync.promptTokens, f.sinceLastSync.completionTokens);
      }
      case 'intent_result':
        if (conn.phase !== Phase.Ready) return unexpected(conn, 'intent_result', this.invalidLimit);
        this.deps.connections.answer(conn.did!, frame as IntentResultFrame);
        return;
    }
  }

  private onHeartbeat(conn: AgentConn, seq: number, promptTokens: number, completionTokens: number): void {
    if (conn.phase !== Phase.Ready) return unexpected(conn, 'heartbeat', this.invalidLimit);
    const sink = this.heartbeats;
    // Seqs increase on a connection: one that does not is acknowledged (after the write, as any
    // other) with nothing counted, so a repeated heartbeat cannot count its delta twice.
    if (seq <= conn.heartbeatSeq) return sink.record(conn, seq, 0, 0);
    conn.heartbeatSeq = seq;
    sink.record(conn, seq, promptTokens, completionTokens);
  }

  private onClose(conn: AgentConn, ws: WebSocket<ConnRef>): void {
    const wasReady = conn.phase === Phase.Ready;
    conn.phase = Phase.Closed;
    conn.ws = null;
    conn.offers = null;
    conn.outbox = null;
    conn.hello = null;
    conn.clearTimer();
    this.deps.sockets.delete('agent', ws as WebSocket<unknown>);
    if (!this.deps.connections.closed(conn, wasReady)) return;
    const did = conn.did!;
    this.deps.fleet.seen(did, conn.lastSeen);
    this.leave(did, conn.serial);
  }

  /** Tells the agent's actor it went offline, after AGENT_OFFLINE_GRACE_MS unless it is back by then. */
  private leave(did: string, serial: string | null): void {
    const grace = this.deps.config.agentOfflineGraceMs;
    if (grace === 0 || this.closing) return this.gone(did);
    this.deps.connections.leave(did, serial, grace, this.gone);
  }

  /** Runs an async handler; an unexpected failure is logged and closes the socket with 1011. */
  private guard(conn: AgentConn, p: Promise<void>): void {
    p.catch((err: unknown) => failed(conn, err, this.deps.log));
  }
}
