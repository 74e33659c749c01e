/**
 * The agent certificate's format (DESIGN §4), shared by Steward and the agent SDK: its shape, the
 * bytes both parties sign and the check of a signature. Issuing certificates is certificate.ts.
 *
 * Signed bytes: the UTF-8 bytes of the RFC 8785 (JCS) canonical JSON of the certificate object,
 * exactly the fields of schemas/certificate.schema.json. The server signs them with its Ed25519
 * key (the key of its did:key `issuer`), the agent co-signs the same bytes with its own key;
 * signatures are base64url without padding.
 */
import canonicalize from 'canonicalize';
import type { Capability } from './capabilities.js';
import { verifySignature } from './did.js';
import { describeSchemaErrors, validateCertificateShape } from './wire-schemas.js';

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

/** Null when the object has the certificate's shape, else what is wrong. */
export function certificateShapeError(value: unknown): string | null {
  return validateCertificateShape(value) ? null : describeSchemaErrors(validateCertificateShape.errors);
}

export function verifyCertificateSignature(cert: Certificate, publicKey: Uint8Array, signature: string): boolean {
  return verifySignature(publicKey, certificateBytes(cert), signature);
}
