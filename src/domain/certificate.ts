/**
 * Agent certificates (DESIGN §4): the identity certificate Steward issues to an agent and both
 * parties sign. It carries the agent's effective policy, so limits cannot be altered in transit
 * and the agent can enforce them locally. This file is the issuing side (server only); the format
 * both sides share is certificate-format.ts, re-exported here for the server's code.
 */
import canonicalize from 'canonicalize';
import { CERTIFICATE_VERSION, type Certificate, type CertificateTerms } from './certificate-format.js';
import { randomBase64Url, randomHex } from './random.js';
import { verifyOffThread } from './crypto-worker.js';
import { certificateSchemaDocuments, describeSchemaErrors, validateCertificateShape } from './wire-schemas.js';
import { inlineRefs, jsonSchemaView } from './json-schema-view.js';

export * from './certificate-format.js';

/** A certificate in a view (the agent detail): checked and described by schemas/certificate.schema.json. */
export const CertificateView = jsonSchemaView<Certificate>(
  'Certificate',
  inlineRefs(certificateSchemaDocuments().certificate, [certificateSchemaDocuments().defs]),
  (value) => (validateCertificateShape(value) ? null : describeSchemaErrors(validateCertificateShape.errors)),
);

export function newCertificate(input: {
  subject: string;
  subjectPublicKey: string;
  issuer: string;
  terms: CertificateTerms;
  now?: Date;
}): Certificate {
  return {
    version: CERTIFICATE_VERSION,
    serial: randomHex(16),
    subject: input.subject,
    subjectPublicKey: input.subjectPublicKey,
    issuer: input.issuer,
    issuedAt: (input.now ?? new Date()).toISOString(),
    capabilities: [...input.terms.capabilities],
    resourceLimits: input.terms.resourceLimits,
    policyId: input.terms.policyId,
    policyExpiresAt: input.terms.policyExpiresAt,
    nonce: randomBase64Url(18),
  };
}

/** Whether two sets of terms grant the same thing (capability order does not matter). */
export function sameTerms(a: CertificateTerms, b: CertificateTerms): boolean {
  if (a.policyId !== b.policyId || a.policyExpiresAt !== b.policyExpiresAt) return false;
  if (a.capabilities.length !== b.capabilities.length) return false;
  const set = new Set(a.capabilities);
  if (!b.capabilities.every((c) => set.has(c))) return false;
  return canonicalize(a.resourceLimits ?? null) === canonicalize(b.resourceLimits ?? null);
}

/**
 * Ed25519 verification off the event loop (a worker thread, in batches), so that thousands of
 * handshakes or re-certifications at once do not hold up heartbeats and HTTP.
 */
export function verifyEd25519Async(publicKey: Uint8Array, data: Uint8Array, signature: string): Promise<boolean> {
  if (typeof signature !== 'string' || !/^[A-Za-z0-9_-]{86}$/.test(signature)) return Promise.resolve(false);
  return verifyOffThread(publicKey, data, Buffer.from(signature, 'base64url'));
}
