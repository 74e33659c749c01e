import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { generateKeyPair, publicKeyFromDidKey, signMessage } from '../src/domain/did.js';
import { certificateBytes } from '../src/domain/certificate.js';
import { ed25519, libsodium } from '../src/domain/ed25519.js';
import { approve, fleet, newAgent, RawAgent, startWithOwner, stopAll } from './fleet-helpers.js';

// A Steward told to use OpenSSL (STEWARD_ED25519=openssl): handshakes, certificates and the
// crypto worker run on node:crypto, and what it signs verifies under libsodium.
const test = suite('fleet on OpenSSL Ed25519');
const ctx = {} as Awaited<ReturnType<typeof startWithOwner>>;

test.before(async () => {
  Object.assign(ctx, await startWithOwner({ STEWARD_ED25519: 'openssl' }));
});
test.after(async () => {
  await ctx.s.stop(true);
});

test('registration, approval and a co-signed certificate; both signatures verify under libsodium', async () => {
  assert.is(ed25519().name, 'openssl');
  const agent = newAgent(ctx.s, { capabilities: ['file_access'] });
  try {
    await approve(ctx.owner, agent);
    await agent.waitFor('ready');
    const cur = agent.certificate!;
    const bytes = certificateBytes(cur.certificate);
    assert.ok(libsodium!.verify(publicKeyFromDidKey(ctx.s.ctx.identity.did)!, bytes, Buffer.from(cur.serverSignature, 'base64url')), 'server signature');
    assert.ok(libsodium!.verify(publicKeyFromDidKey(agent.did)!, bytes, Buffer.from(cur.agentSignature, 'base64url')), 'co-signature');
    const stored = await fleet(ctx.s).service.certificates.current(agent.did);
    assert.is(stored?.agentSignature, cur.agentSignature);
  } finally {
    await stopAll(agent);
  }
});

test('a forged handshake signature is refused (4401)', async () => {
  const raw = new RawAgent(ctx.s.url);
  await raw.open();
  raw.hello();
  const ch = await raw.next('challenge');
  raw.send({ type: 'auth', signature: signMessage(generateKeyPair(), `steward-agent-auth:${ch.nonce}`) });
  assert.is((await raw.waitClosed()).code, 4401);
});

test.run();
