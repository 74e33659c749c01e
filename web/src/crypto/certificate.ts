/**
 * Checks an agent certificate's two signatures in the browser (DESIGN §4): both are Ed25519 over
 * the UTF-8 bytes of the RFC 8785 canonical JSON of the certificate, the server's with the key of
 * its did:key `issuer`, the agent's with `subjectPublicKey`.
 */
import canonicalize from 'canonicalize';
import { publicKeyOfDidKey } from './did';
import { fromBase64Url } from './encoding';

export type SignatureCheck = { ok: true } | { ok: false; reason: string };

async function verify(publicKey: Uint8Array, signature: string, data: Uint8Array): Promise<SignatureCheck> {
  try {
    const key = await crypto.subtle.importKey('raw', publicKey as BufferSource, { name: 'Ed25519' }, false, ['verify']);
    const ok = await crypto.subtle.verify({ name: 'Ed25519' }, key, fromBase64Url(signature) as BufferSource, data as BufferSource);
    return ok ? { ok: true } : { ok: false, reason: 'the signature does not match the certificate' };
  } catch (err) {
    return { ok: false, reason: `the signature could not be checked: ${(err as Error).message}` };
  }
}

export interface CertificateChecks {
  server: SignatureCheck;
  agent: SignatureCheck;
}

export async function checkCertificate(cert: Record<string, unknown>, serverSignature: string, agentSignature: string): Promise<CertificateChecks> {
  if (!crypto?.subtle) {
    const no: SignatureCheck = { ok: false, reason: 'this page is not a secure context: the browser offers no Ed25519 here' };
    return { server: no, agent: no };
  }
  const text = canonicalize(cert);
  if (text === undefined) {
    const no: SignatureCheck = { ok: false, reason: 'the certificate cannot be canonicalised' };
    return { server: no, agent: no };
  }
  const bytes = new TextEncoder().encode(text);
  const issuerKey = typeof cert.issuer === 'string' ? publicKeyOfDidKey(cert.issuer) : null;
  const server: SignatureCheck = issuerKey ? await verify(issuerKey, serverSignature, bytes) : { ok: false, reason: 'the issuer is not an Ed25519 did:key' };
  let agent: SignatureCheck;
  try {
    agent = typeof cert.subjectPublicKey === 'string' ? await verify(fromBase64Url(cert.subjectPublicKey), agentSignature, bytes) : { ok: false, reason: 'no subject key' };
  } catch {
    agent = { ok: false, reason: 'the subject key is not base64url' };
  }
  return { server, agent };
}
