/**
 * Agent certificates (DESIGN §4): the identity certificate Steward issues to an agent and both
 * parties sign. It carries the agent's effective policy, so limits cannot be altered in transit
 * and the agent can enforce them locally.
 *
 * Signed bytes: the UTF-8 bytes of the RFC 8785 (JCS) canonical JSON of the certificate object,
 * exactly the fields of schemas/certificate.schema.json. The server signs them with its Ed25519
 * key (the key of its did:key `issuer`), the agent co-signs the same bytes with its own key;
 * signatures are base64url without padding.
 */
import canonicalize from 'canonicalize';
import type { Capability } from './capabilities.js';
import { verifySignature } from './did.js';
import { randomBase64Url, randomHex } from './random.js';
import { verifyOffThread } from './crypto-worker.js';
import { certificateSchemaDocuments, describeSchemaErrors, validateCertificateShape } from './wire-schemas.js';
import { inlineRefs, jsonSchemaView } from './json-schema-view.js';

export const CERTIFICATE_VERSION = 1;

export interface ResourceLimits {
  /** Prompt plus completion tokens per UTC day. */
  maxTokensPerDay?: number;
  /** Intent executions per rolling 60 minutes. */
  maxRequestsPerHour?: number;
  /** Advisory list of outbound hostnames. */
  allowedDomains?: string[];
}

export interface Certificate {
  version: 1;
  serial: string;
  subject: string;
  subjectPublicKey: string;
  issuer: string;
  issuedAt: string;
  capabilities: Capability[];
  resourceLimits: ResourceLimits | null;
  policyId: string | null;
  policyExpiresAt: string | null;
  nonce: string;
}

/** A certificate in a view (the agent detail): checked and described by schemas/certificate.schema.json. */
export const CertificateView = jsonSchemaView<Certificate>(
  'Certificate',
  inlineRefs(certificateSchemaDocuments().certificate, [certificateSchemaDocuments().defs]),
  (value) => (validateCertificateShape(value) ? null : describeSchemaErrors(validateCertificateShape.errors)),
);

/** What a certificate grants: the policy part of it. */
export interface CertificateTerms {
  capabilities: Capability[];
  resourceLimits: ResourceLimits | null;
  policyId: string | null;
  policyExpiresAt: string | null;
}

export function termsOf(cert: CertificateTerms): CertificateTerms {
  return {
    capabilities: cert.capabilities,
    resourceLimits: cert.resourceLimits,
    policyId: cert.policyId,
    policyExpiresAt: cert.policyExpiresAt,
  };
}

/** The bytes both parties sign. */
export function certificateBytes(cert: Certificate): Buffer {
  const text = canonicalCertificate(cert) ?? canonicalize(cert);
  if (text === undefined) throw new Error('certificate cannot be canonicalised');
  return Buffer.from(text, 'utf8');
}

const str = JSON.stringify;
/** Members of a certificate (schemas/certificate.schema.json). */
const CERTIFICATE_MEMBERS = 11;
const isStringOrNull = (v: unknown): v is string | null => v === null || typeof v === 'string';

/**
 * The JCS text of a certificate that has exactly the certificate's members with their types,
 * written member by member in JCS order (UTF-16 code-unit order of the names) with
 * `JSON.stringify` for the values, which is how JCS serialises strings, finite numbers and
 * arrays of strings. Only `resourceLimits`, an object of open shape, goes through the general
 * canonicaliser. Anything else (a missing or extra member, another type) yields undefined and
 * the caller canonicalises the object as it is. Several times faster than the general
 * canonicaliser, which matters when ten thousand certificates are issued at once; a test checks
 * the two agree.
 */
function canonicalCertificate(c: Certificate): string | undefined {
  if (Object.keys(c).length !== CERTIFICATE_MEMBERS) return undefined;
  if (typeof c.version !== 'number' || !Number.isFinite(c.version)) return undefined;
  if (typeof c.serial !== 'string' || typeof c.subject !== 'string' || typeof c.subjectPublicKey !== 'string') return undefined;
  if (typeof c.issuer !== 'string' || typeof c.issuedAt !== 'string' || typeof c.nonce !== 'string') return undefined;
  if (!isStringOrNull(c.policyId) || !isStringOrNull(c.policyExpiresAt)) return undefined;
  if (!Array.isArray(c.capabilities)) return undefined;
  for (let i = 0; i < c.capabilities.length; i++) if (typeof c.capabilities[i] !== 'string') return undefined;
  let limits: string | undefined;
  if (c.resourceLimits === null) limits = 'null';
  else if (typeof c.resourceLimits === 'object' && !Array.isArray(c.resourceLimits)) limits = canonicalLimits(c.resourceLimits);
  if (limits === undefined) return undefined;
  return (
    `{"capabilities":${str(c.capabilities)},"issuedAt":${str(c.issuedAt)},"issuer":${str(c.issuer)},` +
    `"nonce":${str(c.nonce)},"policyExpiresAt":${str(c.policyExpiresAt)},"policyId":${str(c.policyId)},` +
    `"resourceLimits":${limits},"serial":${str(c.serial)},"subject":${str(c.subject)},` +
    `"subjectPublicKey":${str(c.subjectPublicKey)},"version":${str(c.version)}}`
  );
}

/**
 * The canonical text of resource limits, remembered per object: the certificates of one
 * re-certification share their policy's limits object. Limits objects are not changed after
 * they are made (a policy update makes new terms).
 */
const limitsText = new WeakMap<object, string | undefined>();
function canonicalLimits(limits: ResourceLimits): string | undefined {
  if (limitsText.has(limits)) return limitsText.get(limits);
  const text = canonicalize(limits);
  limitsText.set(limits, text);
  return text;
}

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

/** Null when the object has the certificate's shape, else what is wrong. */
export function certificateShapeError(value: unknown): string | null {
  return validateCertificateShape(value) ? null : describeSchemaErrors(validateCertificateShape.errors);
}

export function verifyCertificateSignature(cert: Certificate, publicKey: Uint8Array, signature: string): boolean {
  return verifySignature(publicKey, certificateBytes(cert), signature);
}

/**
 * Ed25519 verification off the event loop (a worker thread, in batches), so that thousands of
 * handshakes or re-certifications at once do not hold up heartbeats and HTTP.
 */
export function verifyEd25519Async(publicKey: Uint8Array, data: Uint8Array, signature: string): Promise<boolean> {
  if (typeof signature !== 'string' || !/^[A-Za-z0-9_-]{86}$/.test(signature)) return Promise.resolve(false);
  return verifyOffThread(publicKey, data, Buffer.from(signature, 'base64url'));
}
