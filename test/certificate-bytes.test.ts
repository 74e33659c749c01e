import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import canonicalize from 'canonicalize';
import { certificateBytes, newCertificate, type Certificate, type CertificateTerms } from '../src/domain/certificate.js';
import { generateKeyPair } from '../src/domain/did.js';

const test = suite('certificate bytes');
const server = generateKeyPair();
const agent = generateKeyPair();

const jcs = (value: unknown) => Buffer.from(canonicalize(value)!, 'utf8');

function cert(terms: CertificateTerms): Certificate {
  return newCertificate({ subject: agent.did, subjectPublicKey: agent.publicKey, issuer: server.did, terms });
}

test('a certificate signs as its RFC 8785 text, whatever its terms', () => {
  const terms: CertificateTerms[] = [
    { capabilities: [], resourceLimits: null, policyId: null, policyExpiresAt: null },
    { capabilities: ['api_call', 'file_access'], resourceLimits: null, policyId: 'p1', policyExpiresAt: '2030-01-01T00:00:00.000Z' },
    {
      capabilities: ['api_call'],
      resourceLimits: { maxTokensPerDay: 100000, maxRequestsPerHour: 1000, allowedDomains: ['b.example', 'a.example'] },
      policyId: 'pol-é-\u2028-"quoted"-\\',
      policyExpiresAt: null,
    },
    { capabilities: ['network_access'], resourceLimits: { maxRequestsPerHour: 1e21, maxTokensPerDay: 0.5 }, policyId: '\ud83d\ude00', policyExpiresAt: null },
    { capabilities: ['x'], resourceLimits: {}, policyId: null, policyExpiresAt: null },
  ] as CertificateTerms[];
  for (const t of terms) {
    const c = cert(t);
    const bytes = certificateBytes(c);
    assert.equal(bytes.toString('utf8'), jcs(c).toString('utf8'));
    assert.equal(JSON.parse(bytes.toString('utf8')), JSON.parse(JSON.stringify(c)));
  }
});

test('member order of the object does not change the bytes', () => {
  const c = cert({ capabilities: ['api_call'], resourceLimits: { maxTokensPerDay: 5 }, policyId: 'p', policyExpiresAt: null });
  const reversed = Object.fromEntries(Object.entries(c).reverse()) as unknown as Certificate;
  assert.equal(certificateBytes(reversed).toString('utf8'), certificateBytes(c).toString('utf8'));
  assert.ok(certificateBytes(c).toString('utf8').startsWith('{"capabilities":["api_call"],"issuedAt":'));
});

test('an object that is not exactly a certificate is still canonicalised as it is', () => {
  const c = cert({ capabilities: ['api_call'], resourceLimits: null, policyId: null, policyExpiresAt: null });
  const odd: unknown[] = [
    { ...c, extra: 'member' },
    { ...c, version: '1' },
    { ...c, capabilities: ['api_call', 7] },
    { ...c, policyId: 42 },
    { ...c, resourceLimits: ['not', 'an', 'object'] },
  ];
  const { nonce: _omitted, ...withoutNonce } = c;
  odd.push({ ...withoutNonce, z: 1 });
  for (const o of odd) assert.equal(certificateBytes(o as Certificate).toString('utf8'), jcs(o).toString('utf8'));
  assert.ok(certificateBytes({ ...c, extra: 'member' } as Certificate).toString('utf8').includes('"extra":"member"'));
});

test.run();
