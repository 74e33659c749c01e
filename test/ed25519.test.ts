import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { ed25519, libsodium, openssl, selectEd25519 } from '../src/domain/ed25519.js';
import { CryptoWorker, offThreadSigner, verifyOffThread } from '../src/domain/crypto-worker.js';
import { generateKeyPair, publicKeyFromDidKey, signMessage, verifySignature } from '../src/domain/did.js';

const test = suite('ed25519');

// RFC 8032 §7.1, test 2 (one-byte message 0x72).
const RFC = {
  seed: Buffer.from('4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb', 'hex'),
  publicKey: Buffer.from('3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c', 'hex'),
  message: Buffer.from('72', 'hex'),
  signature: Buffer.from(
    '92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00',
    'hex',
  ),
};

test('libsodium loads here (its prebuilt binary ships in the package) and is the default', () => {
  assert.ok(libsodium, 'sodium-native loads');
  assert.is(ed25519().name, 'libsodium');
});

for (const impl of [libsodium!, openssl]) {
  test(`${impl.name}: RFC 8032 vector, tampering refused, bad sizes answered false`, () => {
    assert.equal(impl.sign(impl.signingKey(RFC.seed), RFC.message), RFC.signature);
    assert.ok(impl.verify(RFC.publicKey, RFC.message, RFC.signature));
    assert.not.ok(impl.verify(RFC.publicKey, Buffer.from('73', 'hex'), RFC.signature), 'other message');
    const flipped = Buffer.from(RFC.signature);
    flipped[10] ^= 1;
    assert.not.ok(impl.verify(RFC.publicKey, RFC.message, flipped), 'altered signature');
    assert.not.ok(impl.verify(impl.generate().publicKey, RFC.message, RFC.signature), 'other key');
    assert.not.ok(impl.verify(RFC.publicKey.subarray(0, 31), RFC.message, RFC.signature), 'short key');
    assert.not.ok(impl.verify(RFC.publicKey, RFC.message, Buffer.concat([RFC.signature, Buffer.alloc(1)])), 'long signature');
    assert.throws(() => impl.signingKey(RFC.seed.subarray(1)), /32 bytes/);
  });
}

test('libsodium and OpenSSL make the same signatures and accept each other’s', () => {
  for (let i = 0; i < 20; i++) {
    const { seed, publicKey } = (i % 2 ? libsodium! : openssl).generate();
    const msg = randomBytes(1 + i * 37);
    const a = libsodium!.sign(libsodium!.signingKey(seed), msg);
    const b = openssl.sign(openssl.signingKey(seed), msg);
    assert.equal(a, b, 'Ed25519 is deterministic');
    assert.ok(openssl.verify(publicKey, msg, a));
    assert.ok(libsodium!.verify(publicKey, msg, b));
  }
});

test('did helpers work on either implementation, and a signing key of one is refused by the other', () => {
  const keys = generateKeyPair();
  const pub = publicKeyFromDidKey(keys.did)!;
  const sig = signMessage(keys, 'hello');
  try {
    selectEd25519('openssl');
    assert.is(ed25519().name, 'openssl');
    assert.is(signMessage(keys, 'hello'), sig, 'the cached libsodium key is replaced, same signature');
    assert.ok(verifySignature(pub, 'hello', sig));
    assert.not.ok(verifySignature(pub, 'hellO', sig));
    const other = generateKeyPair();
    assert.ok(verifySignature(publicKeyFromDidKey(other.did)!, 'x', signMessage(other, 'x')));
    assert.throws(() => openssl.sign(libsodium!.signingKey(Buffer.alloc(32)), Buffer.alloc(1)), /another Ed25519 implementation/);
  } finally {
    selectEd25519('auto');
  }
  assert.is(ed25519().name, 'libsodium');
});

test('crypto worker: batches of verifications give the verdicts of the calling thread, in order', async () => {
  const keys = Array.from({ length: 8 }, () => libsodium!.generate());
  const jobs = Array.from({ length: 700 }, (_, i) => {
    const k = keys[i % keys.length]!;
    const data = randomBytes(i % 300);
    let signature = libsodium!.sign(libsodium!.signingKey(k.seed), data);
    const valid = i % 3 !== 0;
    if (!valid) signature = Buffer.from(signature.map((b, j) => (j === 5 ? b ^ 0x40 : b)));
    return { publicKey: k.publicKey, data, signature, valid };
  });
  const got = await Promise.all(jobs.map((j) => verifyOffThread(j.publicKey, j.data, j.signature)));
  assert.equal(
    got,
    jobs.map((j) => j.valid),
  );
  assert.is(await verifyOffThread(Buffer.alloc(31), Buffer.alloc(1), Buffer.alloc(64)), false, 'bad key size');
});

test('crypto worker: signatures made off thread are the signer’s, byte for byte', async () => {
  const { seed, publicKey } = libsodium!.generate();
  const sign = offThreadSigner(seed);
  const messages = Array.from({ length: 300 }, (_, i) => Buffer.from(`certificate ${i}`));
  const sigs = await Promise.all(messages.map((m) => sign(m)));
  sigs.forEach((s, i) => {
    assert.equal(s, libsodium!.sign(libsodium!.signingKey(seed), messages[i]!));
    assert.ok(openssl.verify(publicKey, messages[i]!, s));
  });
});

test('crypto worker: jobs run on the thread; once closed, pending and later jobs run on the calling thread', async () => {
  const w = new CryptoWorker();
  const { seed, publicKey } = libsodium!.generate();
  const signer = w.addSigner(seed);
  const data = Buffer.from('payload');
  const good = libsodium!.sign(libsodium!.signingKey(seed), data);
  assert.equal(await Promise.all([w.verify(publicKey, data, good), w.sign(signer, data)]), [true, good]);
  assert.equal(w.stats, { onThread: 2, here: 0 }, 'done by the worker thread');
  const pending = [w.verify(publicKey, data, good), w.verify(publicKey, Buffer.from('other'), good), w.sign(signer, data)];
  await new Promise((r) => setImmediate(r)); // the batch goes to the worker
  await w.close();
  assert.equal(await Promise.all(pending), [true, false, good]);
  assert.is(await w.verify(publicKey, data, good), true);
  assert.equal(await w.sign(signer, data), good);
  assert.is(w.stats.onThread + w.stats.here, 7);
  assert.ok(w.stats.here >= 2, 'the jobs after close ran here');
});

test.run();
