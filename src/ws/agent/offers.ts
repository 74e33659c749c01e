/**
 * Certificate offers: issuing, signing (on the crypto worker) and sending a certificate_offer to
 * an agent, in its handshake or later when its terms change. Re-certifying connected agents after
 * a policy change (the AgentCertification port) is offering each a new certificate in chunks,
 * yielding to the event loop between them.
 */
import type { Capability } from '../../domain/capabilities.js';
import type { CertificateTerms } from '../../domain/certificate.js';
import { yieldToLoop } from '../../domain/time-slice.js';
import type { Logger } from '../../log.js';
import type { AgentCertification } from '../../services/ports.js';
import type { AgentActors } from '../../services/agent-actors.js';
import type { ServerIdentity } from '../../services/server-identity.js';
import { issueCertificate } from '../../services/certificates.js';
import { Phase, isClosed, type AgentConn, type Offer } from './connection.js';
import type { AgentConnections } from './connections.js';
import { OFFER_HEAD, certificateFrame } from './frames.js';

/** Offers started per turn of the event loop when many agents are re-certified at once. */
const REISSUE_CHUNK = 256;

export class CertificateOffers implements AgentCertification {
  constructor(
    private readonly deps: { connections: AgentConnections; identity: ServerIdentity; agentActors: AgentActors; log: Logger },
  ) {}

  /**
   * Issues, signs and offers a new certificate; with `announce`, update_capabilities goes first.
   * False when the socket closed before the offer could go.
   */
  async offerNew(conn: AgentConn, terms: CertificateTerms, version: number, announce: boolean): Promise<boolean> {
    conn.policyId = terms.policyId;
    const issued = await issueCertificate(this.deps.identity, conn.did!, conn.publicKey!, terms);
    if (isClosed(conn)) return false;
    const offer: Offer = { issued, reused: null, supersedes: conn.serial, policyVersion: version };
    conn.ws?.cork(() => {
      if (announce) conn.send({ type: 'update_capabilities', ...terms });
      this.push(conn, offer, conn.phase === Phase.Ready);
    });
    return true;
  }

  /** Sends an offer; a re-certification of a ready agent is also told to its actor. */
  push(conn: AgentConn, offer: Offer, reissue: boolean): void {
    (conn.offers ??= []).push(offer);
    // The certificate goes out as the canonical text that was signed (valid JSON), not re-serialised.
    const { bytes, serverSignature } = offer.issued;
    conn.sendText(certificateFrame(OFFER_HEAD, bytes, `,"serverSignature":"${serverSignature}"}`));
    if (reissue) this.deps.agentActors.tell(conn.did!, { type: 'REISSUE_OFFERED', serial: offer.issued.certificate.serial });
  }

  async reissue(dids: readonly string[], termsOf: (did: string, approved: readonly Capability[]) => CertificateTerms, policyVersion: number): Promise<string[]> {
    const { connections, log } = this.deps;
    const offers: Array<Promise<string | null>> = [];
    let sinceYield = 0;
    for (const did of dids) {
      if (sinceYield === REISSUE_CHUNK) {
        await yieldToLoop();
        sinceYield = 0;
      }
      const conn = connections.liveConn(did);
      if (!conn) continue;
      const terms = termsOf(did, conn.capabilities);
      if (conn.policyId === terms.policyId && terms.policyId !== null) continue;
      if (conn.policyId === null && terms.policyId === null) continue;
      sinceYield++;
      offers.push(
        this.offerNew(conn, terms, policyVersion, true).then(
          (sent) => (sent ? did : null),
          (err: unknown) => {
            log.error({ err, did }, 'certificate could not be issued');
            return null;
          },
        ),
      );
    }
    return (await Promise.all(offers)).filter((did): did is string => did !== null);
  }
}
