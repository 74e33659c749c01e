/**
 * Issuing certificates, and the co-signed certificates in the store. Writes are batched: every certificate accepted in the same
 * turn of the event loop goes into one `insertMany` (one round trip, one append in the embedded
 * store), and the caller is answered once it is durable — so ten thousand agents re-certified at
 * once cost a handful of writes, not ten thousand. An agent's current certificate is its newest
 * one; the ones it supersedes are deleted in batches once no certificate has been stored for
 * `pruneDelayMs` (a burst of re-certifications is not slowed by deletions), and at `flush`.
 */
import type { CertificateDoc, Collections } from '../store/collections.js';
import { certificateBytes, newCertificate, type Certificate, type CertificateTerms } from '../domain/certificate.js';
import type { ServerIdentity } from './server-identity.js';

/** A certificate signed by the server, with the exact bytes signed, not yet co-signed by its agent. */
export interface IssuedCertificate {
  certificate: Certificate;
  bytes: Buffer;
  serverSignature: string;
}

/** A new certificate with the given terms, signed by the server (on the crypto worker). */
export async function issueCertificate(identity: ServerIdentity, subject: string, subjectPublicKey: string, terms: CertificateTerms): Promise<IssuedCertificate> {
  const certificate = newCertificate({ subject, subjectPublicKey, issuer: identity.did, terms });
  const bytes = certificateBytes(certificate);
  return { certificate, bytes, serverSignature: await identity.signOffThread(bytes) };
}

export interface StoredCertificate {
  certificate: Certificate;
  serverSignature: string;
  agentSignature: string;
  acceptedAt: string;
}

/** A stored certificate with the exact bytes that were signed. */
export interface StoredCertificateWithBytes extends StoredCertificate {
  bytes: Buffer;
}

interface Pending {
  doc: CertificateDoc;
  supersedes: string | null;
  resolve(): void;
  reject(err: unknown): void;
}

const DELETE_CHUNK = 256;
/** Quiet time after the last stored certificate before superseded ones are deleted. */
const PRUNE_DELAY_MS = 1000;

export class CertificateStore {
  private queue: Pending[] = [];
  private scheduled = false;
  private inflight: Promise<void> | null = null;
  private superseded: string[] = [];
  private pruneTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly c: Collections,
    private readonly onError: (err: unknown, what: string) => void,
    private readonly pruneDelayMs = PRUNE_DELAY_MS,
  ) {}

  /** The agent's current (newest) certificate, or null. */
  async current(agentDid: string): Promise<StoredCertificateWithBytes | null> {
    const [doc] = await this.c.certificates.find({ agentDid }, { sort: { acceptedAt: -1, _id: -1 }, limit: 1 });
    return doc ? toStored(doc) : null;
  }

  /** The current certificates of several agents (one read), by DID; agents without one are absent. */
  async currentOf(agentDids: readonly string[]): Promise<Map<string, StoredCertificate>> {
    const out = new Map<string, StoredCertificate>();
    if (agentDids.length === 0) return out;
    const docs = await this.c.certificates.find({ agentDid: { $in: [...agentDids] } }, { sort: { acceptedAt: -1, _id: -1 } });
    for (const doc of docs) if (!out.has(doc.agentDid)) out.set(doc.agentDid, toView(doc));
    return out;
  }

  /** Stores a co-signed certificate; resolves once it is durable. `supersedes` is deleted later. */
  save(cert: StoredCertificateWithBytes, supersedes: string | null): Promise<void> {
    const doc: CertificateDoc = {
      _id: cert.certificate.serial,
      agentDid: cert.certificate.subject,
      canonical: cert.bytes.toString('utf8'),
      serverSignature: cert.serverSignature,
      agentSignature: cert.agentSignature,
      acceptedAt: cert.acceptedAt,
    };
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ doc, supersedes: supersedes !== cert.certificate.serial ? supersedes : null, resolve, reject });
      this.schedule();
    });
  }

  /** Resolves when every queued write has finished. */
  async flush(): Promise<void> {
    while (this.queue.length > 0 || this.inflight) {
      if (this.inflight) await this.inflight;
      else await this.write();
    }
    await this.prune();
  }

  private schedule(): void {
    if (this.scheduled || this.inflight) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.write().catch((err: unknown) => this.onError(err, 'storing certificates'));
    });
  }

  private write(): Promise<void> {
    const batch = this.queue;
    if (batch.length === 0) return Promise.resolve();
    this.queue = [];
    this.inflight = (async () => {
      try {
        await this.c.certificates.insertMany(batch.map((p) => p.doc));
        for (const p of batch) {
          if (p.supersedes) this.superseded.push(p.supersedes);
          p.resolve();
        }
      } catch (err) {
        this.onError(err, 'storing certificates');
        for (const p of batch) p.reject(err);
      }
    })().finally(() => {
      this.inflight = null;
      if (this.queue.length > 0) this.schedule();
      else if (this.superseded.length > 0) this.schedulePrune();
    });
    return this.inflight;
  }

  private pruning: Promise<void> | null = null;

  /** (Re)starts the quiet-time timer: each batch stored pushes the deletions back. */
  private schedulePrune(): void {
    if (this.pruneTimer) clearTimeout(this.pruneTimer);
    this.pruneTimer = setTimeout(() => {
      this.pruneTimer = null;
      this.prune().catch((err: unknown) => this.onError(err, 'deleting superseded certificates'));
    }, this.pruneDelayMs);
    this.pruneTimer.unref();
  }

  /** Deletes superseded certificates, a chunk per store call; resolves when none is left. */
  private prune(): Promise<void> {
    if (this.pruneTimer) {
      clearTimeout(this.pruneTimer);
      this.pruneTimer = null;
    }
    this.pruning ??= (async () => {
      try {
        while (this.superseded.length > 0) {
          const chunk = this.superseded.splice(0, DELETE_CHUNK);
          try {
            await this.c.certificates.deleteMany({ _id: { $in: chunk } });
          } catch (err) {
            this.onError(err, 'deleting superseded certificates');
          }
        }
      } finally {
        this.pruning = null;
      }
    })();
    return this.pruning;
  }
}

function toStored(doc: CertificateDoc): StoredCertificateWithBytes {
  return {
    certificate: JSON.parse(doc.canonical) as Certificate,
    bytes: Buffer.from(doc.canonical, 'utf8'),
    serverSignature: doc.serverSignature,
    agentSignature: doc.agentSignature,
    acceptedAt: doc.acceptedAt,
  };
}

/** Without the signed bytes: what a list of agents shows (no buffer made per row of a page). */
function toView(doc: CertificateDoc): StoredCertificate {
  return {
    certificate: JSON.parse(doc.canonical) as Certificate,
    serverSignature: doc.serverSignature,
    agentSignature: doc.agentSignature,
    acceptedAt: doc.acceptedAt,
  };
}
