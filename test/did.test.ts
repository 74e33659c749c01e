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

test.run();
