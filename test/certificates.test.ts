import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { rmSync } from 'node:fs';
import { openStore } from '../src/store/index.js';
import { collections, ensureIndexes, type Collections } from '../src/store/collections.js';
import type { Store } from '../src/store/types.js';
import { CertificateStore, type StoredCertificateWithBytes } from '../src/services/certificates.js';
import { certificateBytes, newCertificate } from '../src/domain/certificate.js';
import { generateKeyPair, signMessage } from '../src/domain/did.js';
import { tempDir, waitFor } from './helpers.js';

const test = suite('certificate store');
const ctx = {} as { dir: string; store: Store; c: Collections };
const server = generateKeyPair();
const agent = generateKeyPair();

test.before(async () => {
  ctx.dir = await tempDir();
  ctx.store = await openStore({ dataDir: ctx.dir });
  ctx.c = collections(ctx.store);
  await ensureIndexes(ctx.c);
});
test.after(async () => {
  await ctx.store.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

function cosigned(acceptedAt: string): StoredCertificateWithBytes {
  const certificate = newCertificate({
    subject: agent.did,
    subjectPublicKey: agent.publicKey,
    issuer: server.did,
    terms: { capabilities: ['file_access'], resourceLimits: null, policyId: null, policyExpiresAt: null },
  });
  const bytes = certificateBytes(certificate);
  return { certificate, bytes, serverSignature: signMessage(server, bytes), agentSignature: signMessage(agent, bytes), acceptedAt };
}

const serials = async () => (await ctx.c.certificates.find({ agentDid: agent.did })).map((d) => d._id).sort();

test('a superseded certificate is deleted once certificates stop arriving, not during the burst', async () => {
  const errors: unknown[] = [];
  const certs = new CertificateStore(ctx.c, (err) => errors.push(err), 300);
  const first = cosigned('2026-01-01T00:00:00.000Z');
  await certs.save(first, null);
  const second = cosigned('2026-01-01T00:00:01.000Z');
  await certs.save(second, first.certificate.serial);
  // Still inside the quiet time: both stored, the newest is current.
  assert.equal(await serials(), [first.certificate.serial, second.certificate.serial].sort());
  assert.is((await certs.current(agent.did))?.certificate.serial, second.certificate.serial);
  const third = cosigned('2026-01-01T00:00:02.000Z');
  await certs.save(third, second.certificate.serial);
  await waitFor(async () => (await serials()).length === 1);
  assert.equal(await serials(), [third.certificate.serial]);
  const current = await certs.current(agent.did);
  assert.is(current?.agentSignature, third.agentSignature);
  assert.equal(current?.bytes, third.bytes);
  assert.equal(errors, []);
});

test('flush stores what is queued and deletes what is superseded at once', async () => {
  const certs = new CertificateStore(ctx.c, (err) => assert.unreachable(String(err)), 60_000);
  const [old] = await serials();
  const next = cosigned('2026-01-01T00:00:03.000Z');
  const saved = certs.save(next, old!);
  await certs.flush();
  await saved;
  assert.equal(await serials(), [next.certificate.serial]);
});

test.run();
