/**
 * The handshake of /ws/agent (DESIGN §4; docs/agent-protocol.md):
 *
 *   hello → challenge → auth → [registration pending → approved | rejected] →
 *   [update_capabilities] → certificate_offer → certificate_accept → ready
 *
 * A hello counts against its address's rate limit; an unknown agent becomes a pending
 * registration (within the pending-registration limits, src/services/registration-limits.ts) and
 * waits on its socket for an admin's decision, at most AGENT_PENDING_SOCKET_TIMEOUT_SECONDS (4202:
 * it reconnects and waits on). One live socket per agent: a newly authenticated connection
 * replaces the old one (4409).
 */
import { randomBase64Url } from '../../domain/random.js';
import { CLOSE, type CertificateAcceptFrame, type HelloFrame, type ReadyFrame } from '../../domain/agent-protocol.js';
import { PURPOSE, decodePublicKey, encodeBase64Url, resolvePublicKey } from '../../domain/did.js';
import { sameTerms, verifyEd25519Async } from '../../domain/certificate.js';
import type { Config } from '../../config.js';
import type { Logger } from '../../log.js';
import type { HeartbeatSink } from '../../services/ports.js';
import type { FleetService, Decision } from '../../services/fleet.js';
import type { PolicyService } from '../../services/policies.js';
import type { AgentActors } from '../../services/agent-actors.js';
import type { ServerIdentity } from '../../services/server-identity.js';
import type { IssuedCertificate } from '../../services/certificates.js';
import type { RateLimits } from '../../services/rate-limits.js';
import { retryAfterSeconds } from '../../services/rate-limits.js';
import { RegistrationError } from '../../services/registrations.js';
import { sourceOf } from '../../services/registration-limits.js';
import { Outbox, Phase, failed, isClosed, unexpected, type AgentConn } from './connection.js';
import type { AgentConnections } from './connections.js';
import type { CertificateOffers } from './offers.js';
import { certificateFrame } from './frames.js';

export interface HandshakeDeps {
  config: Config;
  log: Logger;
  identity: ServerIdentity;
  rateLimits: RateLimits;
  connections: AgentConnections;
  offers: CertificateOffers;
  fleet: FleetService;
  policies: PolicyService;
  agentActors: AgentActors;
  /** Its `lastStoredSeq` goes into `ready`. */
  heartbeats: HeartbeatSink;
}

export class Handshake {
  private readonly invalidLimit: number;

  /** Answers the agents waiting on their sockets when an admin decides their registration. */
  constructor(private readonly deps: HandshakeDeps) {
    this.invalidLimit = deps.config.agentInvalidFrameLimit;
    deps.fleet.onDecision((did, d) => this.onDecision(did, d).catch((err: unknown) => deps.log.error({ err, did }, 'answering a registration decision failed')));
  }

  /** A new socket has until AGENT_HANDSHAKE_TIMEOUT_MS to complete the handshake (4408). */
  opened(conn: AgentConn): void {
    conn.arm(this.deps.config.agentHandshakeTimeoutMs, CLOSE.handshakeTimeout, 'handshake timeout');
  }

  /**
   * A hello counts against its address's limit (RATE_LIMIT_AGENT_PER_ADDRESS); one over it gets an
   * error frame and close 4429, and the agent comes back later with back-off.
   */
  async hello(conn: AgentConn, f: HelloFrame): Promise<void> {
    if (conn.phase !== Phase.AwaitHello) return unexpected(conn, 'hello', this.invalidLimit);
    conn.phase = Phase.Verifying; // a frame that comes while the hello is counted is out of order
    const waitMs = await this.deps.rateLimits.agent.address.take(conn.address ?? '');
    if (isClosed(conn)) return;
    conn.phase = Phase.AwaitHello;
    if (waitMs !== null) {
      const seconds = retryAfterSeconds(waitMs);
      conn.send({ type: 'error', code: 'rate_limited', message: `too many agent connections from this address; retry in ${seconds} s` });
      return conn.end(CLOSE.tryLater, 'rate limited; retry later');
    }
    this.challenge(conn, f);
  }

  private challenge(conn: AgentConn, f: HelloFrame): void {
    if (conn.phase !== Phase.AwaitHello) return unexpected(conn, 'hello', this.invalidLimit);
    const key = resolvePublicKey(f.did, f.publicKey);
    if (!key) {
      conn.send({
        type: 'error',
        code: 'invalid_key',
        message: f.did.startsWith('did:key:')
          ? 'publicKey does not match the key inside the did:key (or the did:key is not Ed25519)'
          : 'publicKey (base64url of the raw 32-byte Ed25519 key) is required for a DID that is not a did:key',
      });
      return conn.end(CLOSE.policyViolation, 'invalid key');
    }
    conn.did = f.did;
    conn.publicKey = encodeBase64Url(key);
    conn.hello = f;
    conn.nonce = randomBase64Url(24);
    conn.phase = Phase.AwaitAuth;
    conn.send({ type: 'challenge', nonce: conn.nonce, serverDid: this.deps.identity.did });
  }

  async auth(conn: AgentConn, signature: string): Promise<void> {
    if (conn.phase !== Phase.AwaitAuth) return unexpected(conn, 'auth', this.invalidLimit);
    const { connections, fleet } = this.deps;
    conn.phase = Phase.Verifying;
    const ok = await verifyEd25519Async(decodePublicKey(conn.publicKey!)!, Buffer.from(PURPOSE.agentAuth + conn.nonce!, 'utf8'), signature);
    conn.nonce = null;
    if (isClosed(conn)) return;
    if (!ok) return conn.end(CLOSE.badSignature, 'auth signature does not verify');
    const did = conn.did!;
    const hello = conn.hello!;
    const address = conn.address ?? '';
    conn.hello = null;
    conn.address = null;
    const agent = await fleet.agent(did);
    if (isClosed(conn)) return;
    if (agent && agent.publicKey !== conn.publicKey) return conn.end(CLOSE.badSignature, 'the key does not match the registered key');

    connections.claim(conn, did, CLOSE.replaced);

    if (!agent) {
      let registrationId: string;
      try {
        const outcome = await fleet.register(
          { did, publicKey: conn.publicKey!, name: hello.name, version: hello.version, capabilities: hello.capabilities, workspace: hello.workspace },
          { via: 'websocket', source: sourceOf(address) },
        );
        registrationId = outcome.registration._id;
      } catch (err) {
        if (!(err instanceof RegistrationError)) throw err;
        conn.send({ type: 'error', code: err.code, message: err.message });
        return conn.end(err.status === 429 ? CLOSE.tryLater : CLOSE.policyViolation, err.code);
      }
      return this.awaitApproval(conn, registrationId);
    }
    if (agent.status === 'pending') return this.awaitApproval(conn, await fleet.pendingRegistrationId(agent));
    if (agent.status === 'rejected') {
      conn.send({ type: 'registration', status: 'rejected', reason: await fleet.rejectionReason(did) });
      return conn.end(CLOSE.rejected, 'registration rejected');
    }
    conn.capabilities = agent.capabilities;
    await this.beginCertificate(conn);
  }

  /**
   * Waiting for a person may take long, but not forever on one socket: after the pending timeout
   * (plus up to a tenth, so agents that began waiting together do not return together) the agent
   * is sent away with 4202 and reconnects to wait on.
   */
  private awaitApproval(conn: AgentConn, registrationId: string): void {
    if (isClosed(conn)) return;
    conn.phase = Phase.WaitApproval;
    const ms = this.deps.config.agentPendingSocketTimeoutMs;
    conn.arm(ms + Math.random() * ms * 0.1, CLOSE.stillPending, 'still pending: reconnect to keep waiting');
    conn.send({ type: 'registration', status: 'pending', registrationId });
  }

  /** A registration decided on another node of a cluster, for an agent whose socket waits here. */
  decided(did: string, decision: Decision): void {
    this.onDecision(did, decision).catch((err: unknown) => this.deps.log.error({ err, did }, 'answering a registration decision failed'));
  }

  private async onDecision(did: string, decision: Decision): Promise<void> {
    const conn = this.deps.connections.current(did);
    if (!conn || conn.phase !== Phase.WaitApproval) return;
    if (decision.status === 'rejected') {
      conn.send({ type: 'registration', status: 'rejected', reason: decision.reason });
      return conn.end(CLOSE.rejected, 'registration rejected');
    }
    conn.send({ type: 'registration', status: 'approved', agentId: did });
    try {
      const agent = await this.deps.fleet.agent(did);
      if (!agent || isClosed(conn)) return;
      conn.capabilities = agent.capabilities;
      this.opened(conn);
      await this.beginCertificate(conn);
    } catch (err) {
      failed(conn, err, this.deps.log);
    }
  }

  /**
   * Handshake step 4. The stored certificate is offered again when it still matches the
   * agent's key and terms (its co-signature is then compared, not verified: Ed25519 signatures
   * are deterministic); otherwise a new one is issued, preceded by update_capabilities when the
   * agent had an older certificate (the capability mismatch found on reconnect, §6).
   */
  private async beginCertificate(conn: AgentConn): Promise<void> {
    const { fleet, policies, offers, identity } = this.deps;
    conn.phase = Phase.AwaitAccept;
    const did = conn.did!;
    const version = policies.version;
    const [terms, stored] = await Promise.all([policies.termsOf({ _id: did, capabilities: conn.capabilities }), fleet.certificates.current(did)]);
    if (isClosed(conn)) return;
    conn.serial = stored?.certificate.serial ?? null;
    if (stored && stored.certificate.subjectPublicKey === conn.publicKey && stored.certificate.issuer === identity.did && sameTerms(stored.certificate, terms)) {
      conn.policyId = terms.policyId;
      const issued = { certificate: stored.certificate, bytes: stored.bytes, serverSignature: stored.serverSignature };
      offers.push(conn, { issued, reused: stored, supersedes: null, policyVersion: version }, false);
      return;
    }
    await offers.offerNew(conn, terms, version, stored !== null);
  }

  async accept(conn: AgentConn, f: CertificateAcceptFrame): Promise<void> {
    if (conn.phase !== Phase.AwaitAccept && conn.phase !== Phase.Ready) return unexpected(conn, 'certificate_accept', this.invalidLimit);
    const { fleet, policies, offers, agentActors, heartbeats, config } = this.deps;
    const offer = conn.offers?.shift();
    if (!offer) return unexpected(conn, 'certificate_accept', this.invalidLimit);
    if (conn.offers!.length === 0) conn.offers = null;
    const cert = offer.issued.certificate;
    const unchanged = offer.reused !== null && offer.reused.agentSignature === f.agentSignature;
    const valid = unchanged || (await verifyEd25519Async(decodePublicKey(conn.publicKey!)!, offer.issued.bytes, f.agentSignature));
    if (isClosed(conn)) return;
    if (!valid) return conn.end(CLOSE.badSignature, 'certificate co-signature does not verify');
    if (!unchanged) {
      await fleet.certificates.save(
        {
          certificate: cert,
          bytes: offer.issued.bytes,
          serverSignature: offer.issued.serverSignature,
          agentSignature: f.agentSignature,
          acceptedAt: new Date().toISOString(),
        },
        offer.supersedes,
      );
    }
    conn.serial = cert.serial;
    if (isClosed(conn) || conn.offers) return; // a newer offer is on its way; `ready` follows that one
    const did = conn.did!;
    const first = conn.phase === Phase.AwaitAccept;
    const greeting = first ? this.becomeReady(conn, cert) : null;
    // In a cluster the agent's last heartbeats may have been stored by another node.
    const refreshing = first ? (heartbeats.refreshStoredSeq?.(did) ?? null) : null;
    const session = await fleet.agentSessions.sessionOf(did);
    if (greeting) await greeting;
    if (refreshing) await refreshing;
    if (isClosed(conn)) return;
    const rest: Omit<ReadyFrame, 'type' | 'agentId' | 'certificate'> = {
      serverSignature: offer.issued.serverSignature,
      agentSignature: f.agentSignature,
      session,
      heartbeatIntervalMs: config.agentHeartbeatIntervalMs,
      lastHeartbeatSeq: heartbeats.lastStoredSeq(did),
    };
    conn.release(certificateFrame(`{"type":"ready","agentId":${JSON.stringify(did)},"certificate":`, offer.issued.bytes, `,${JSON.stringify(rest).slice(1)}`));
    if (!first) {
      agentActors.tell(did, { type: 'CERTIFICATE_STORED', serial: cert.serial, policyId: cert.policyId });
      return;
    }
    // A policy changed while this handshake was under way: bring the certificate up to date.
    if (offer.policyVersion !== policies.version) {
      const terms = await policies.termsOf({ _id: did, capabilities: conn.capabilities });
      if (conn.phase === Phase.Ready && !sameTerms(cert, terms)) await offers.offerNew(conn, terms, policies.version, true);
    }
  }

  /**
   * The agent is online from here (pushes reach it, its actor learns it); the ready listeners
   * run, and what they and anyone else send it waits in its outbox for `ready`. Resolves once
   * every listener's work has settled; null when none returned any.
   */
  private becomeReady(conn: AgentConn, cert: IssuedCertificate['certificate']): Promise<unknown> | null {
    const { connections, agentActors, config } = this.deps;
    const did = conn.did!;
    conn.lastSeen = Date.now();
    conn.clearTimer();
    const left = connections.returned(did);
    // Back within the grace period: to its actor it never left; only a new certificate is news.
    if (left === undefined || left !== cert.serial) agentActors.tell(did, { type: 'CONNECTED', serial: cert.serial, policyId: cert.policyId });
    conn.outbox = new Outbox(config.agentSendBufferLimitBytes);
    return connections.ready(conn);
  }
}
