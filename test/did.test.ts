import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  didKeyFromPublicKey,
  generateKeyPair,
  publicKeyFromDidKey,
  resolvePublicKey,
  signMessage,
  verifySignature,
} from '../src/domain/did.js';
import { verifyEd25519Async } from '../src/domain/certificate.js';
import { randomBase64Url, randomHex } from '../src/domain/random.js';

const test = suite('did:key and signatures');

test('a known did:key decodes to its public key and back', () => {
  // Test vector from the did:key method specification (Ed25519).
  const did = 'did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp';
  const raw = publicKeyFromDidKey(did);
  assert.ok(raw);
  assert.is(raw!.length, 32);
  assert.is(didKeyFromPublicKey(raw!), did);
});

test('generated keys make did:key DIDs that verify their own signatures', () => {
  const k = generateKeyPair();
  assert.match(k.did, /^did:key:z6Mk/);
  const sig = signMessage(k, 'steward-login:abc');
  const pub = resolvePublicKey(k.did)!;
  assert.ok(verifySignature(pub, 'steward-login:abc', sig));
  assert.not.ok(verifySignature(pub, 'steward-claim:abc', sig), 'another purpose does not verify');
  const other = generateKeyPair();
  assert.not.ok(verifySignature(resolvePublicKey(other.did)!, 'steward-login:abc', sig), 'another key does not verify');
  assert.not.ok(verifySignature(pub, 'steward-login:abc', 'not-a-signature'));
  const flipped = sig.slice(0, 10) + (sig[10] === 'A' ? 'B' : 'A') + sig.slice(11);
  assert.not.ok(verifySignature(pub, 'steward-login:abc', flipped));
});

test('resolvePublicKey: did:key must match a given key; other methods need one', () => {
  const k = generateKeyPair();
  const other = generateKeyPair();
  assert.ok(resolvePublicKey(k.did, k.publicKey));
  assert.is(resolvePublicKey(k.did, other.publicKey), null);
  assert.is(resolvePublicKey('did:web:example.org'), null);
  assert.ok(resolvePublicKey('did:web:example.org', k.publicKey));
  assert.is(resolvePublicKey('did:web:example.org', 'garbage'), null);
  assert.is(publicKeyFromDidKey('did:key:zQ3shokFTS3brHcDQrn82RUDfCZESWL1ZdCEJwekUDPQiYBme'), null, 'secp256k1 did:key is not Ed25519');
});

test('pooled random bytes: right lengths, never handed out twice, across pool refills', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 2000; i++) {
    const hex = randomHex(16);
    const b64 = randomBase64Url(18);
    assert.match(hex, /^[0-9a-f]{32}$/);
    assert.match(b64, /^[A-Za-z0-9_-]{24}$/);
    assert.not.ok(seen.has(hex) || seen.has(b64), 'a value came out twice');
    seen.add(hex);
    seen.add(b64);
  }
  assert.is(randomHex(5000).length, 10000, 'more than the pool at once');
});

test('thread-pool verification: many more jobs than may run at once all answer, each with its own result', async () => {
  const k = generateKeyPair();
  const pub = resolvePublicKey(k.did)!;
  const messages = Array.from({ length: 100 }, (_, i) => Buffer.from(`message ${i}`));
  const sigs = messages.map((m) => signMessage(k, m));
  // Odd jobs get the signature of another message: they must come back false, the others true.
  const results = await Promise.all(messages.map((m, i) => verifyEd25519Async(pub, m, sigs[i % 2 === 0 ? i : (i + 1) % 100]!)));
  results.forEach((ok, i) => assert.is(ok, i % 2 === 0, `job ${i}`));
  assert.is(await verifyEd25519Async(pub, messages[0]!, 'not-a-signature'), false, 'a malformed signature is false');
});

test.run();
