/**
 * The fleet summary's certificates awaiting re-issue, for agents that hold a certificate whose terms
 * a policy change put out of date: offline ones too (they get the new terms at their next
 * handshake), counted from the store at start, once for an agent also offered new terms online,
 * after a policy expires, and when the store failed the first reads.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { makeUser, ownerOf, type TestUser } from './fixtures.js';
import { client, waitFor } from './helpers.js';
import { enc, fleet, makeWorkspace, RawAgent, readyAgent, readyRawAgent, startWithOwner, stopAll } from './fleet-helpers.js';
import { generateKeyPair, signMessage, type Ed25519KeyPair } from '../src/domain/did.js';
import { certificateBytes } from '../src/domain/certificate.js';
import { FaultInjector } from './fault-store.js';

const test = suite('fleet summary: out-of-date certificates');
const ctx = {} as Awaited<ReturnType<typeof startWithOwner>> & {
  ws: { id: string };
  member: TestUser;
  outsider: TestUser;
};
const raws: RawAgent[] = [];
const faults = new FaultInjector();

test.before(async () => {
  Object.assign(ctx, await startWithOwner({ AGENT_OFFLINE_GRACE_MS: '0' }, { wrapStore: faults.wrap }));
  ctx.ws = await makeWorkspace(ctx.owner, 'Narrowed');
  const elsewhere = await makeWorkspace(ctx.owner, 'Elsewhere');
  ctx.member = await makeUser(ctx.s, { workspaces: { [ctx.ws.id]: 'member' } });
  ctx.outsider = await makeUser(ctx.s, { workspaces: { [elsewhere.id]: 'member' } });
});
test.after(async () => {
  await stopAll(...raws);
  await ctx.s.stop(true);
});

const awaiting = async (who: TestUser): Promise<number> => {
  const r = await client(ctx.s.url, who.token).get('/api/fleet/summary');
  assert.is(r.status, 200, r.text);
  return r.body.certificatesAwaitingReissue;
};

/** Waits until `who` sees `n` certificates awaiting re-issue; the last figure seen is in the failure. */
async function awaitingBecomes(who: TestUser, n: number, timeoutMs = 5000): Promise<void> {
  let last: number | undefined;
  try {
    await waitFor(async () => (last = await awaiting(who)) === n, timeoutMs, 20);
  } catch {
    assert.unreachable(`certificatesAwaitingReissue never became ${n}; last: ${last}`);
  }
}

const offline = (did: string) => waitFor(() => !fleet(ctx.s).gateway.isOnline(did));

/** An agent of `workspace` approved, certified (co-signed through the SDK), and gone offline. */
async function certifiedThenOffline(workspace: string): Promise<Ed25519KeyPair> {
  const keys = generateKeyPair();
  const sdk = await readyAgent(ctx.s, ctx.owner, { keys, workspace });
  await sdk.stop();
  await offline(keys.did);
  return keys;
}

/** Connects the agent again; its handshake co-signs the certificate offered (its current terms). */
async function reconnect(keys: Ed25519KeyPair): Promise<{ raw: RawAgent; ready: any }> {
  const raw = new RawAgent(ctx.s.url, keys);
  raws.push(raw);
  await raw.authenticate();
  return { raw, ready: await raw.acceptNextOffer() };
}

const actorOf = async (did: string) => (await ctx.owner.api.get(`/api/admin/actors/${enc(`agent:${did}`)}`)).body.actor;

test('an offline agent whose workspace policy narrows its terms counts until it co-signs them; the policy deleted while it is offline, it counts again', async () => {
  const { owner, member, outsider } = ctx;
  const keys = await certifiedThenOffline(ctx.ws.id);
  await awaitingBecomes(owner, 0);

  const created = await owner.api.post('/api/policies', { workspaceId: ctx.ws.id, capabilities: ['file_access'] });
  assert.is(created.status, 201, created.text);
  assert.equal(created.body.sentTo, [], 'nobody online was re-certified');
  await awaitingBecomes(owner, 1);
  await awaitingBecomes(member, 1);
  assert.is(await awaiting(outsider), 0, 'not counted for who does not see its workspace');

  // It comes back: its handshake gives it the policy's terms, which it co-signs.
  const { raw, ready } = await reconnect(keys);
  assert.is(ready.certificate.policyId, created.body.policy.id);
  assert.equal(ready.certificate.capabilities, ['file_access']);
  await awaitingBecomes(owner, 0);
  await awaitingBecomes(member, 0);

  // Offline again, its certificate carries the policy: deleting it puts the certificate out of date.
  await raw.close();
  await offline(keys.did);
  const deleted = await owner.api.del(`/api/policies/${created.body.policy.id}`);
  assert.is(deleted.status, 200, deleted.text);
  await awaitingBecomes(owner, 1);
  await awaitingBecomes(member, 1);
  assert.is(await awaiting(outsider), 0);
});

test('a restart keeps the figure: it is computed from the store at start', async () => {
  ctx.s = await ctx.s.restart();
  ctx.owner = await ownerOf(ctx.s);
  // Read as soon as the server answers: nothing has connected or changed since the start.
  assert.is(await awaiting(ctx.owner), 1);
  assert.is(await awaiting(ctx.member), 1);
  assert.is(await awaiting(ctx.outsider), 0);
});

test('an agent offered new terms online and holding out-of-date ones counts once; after it reconnects and co-signs, not at all', async () => {
  const { s, owner } = ctx;
  const before = await awaiting(owner);
  const { raw, ready: first } = await readyRawAgent(s, owner);
  raws.push(raw);
  const did = raw.keys.did;
  await waitFor(async () => (await actorOf(did))?.state?.active?.connection === 'online');
  const created = await owner.api.post('/api/policies', { agentDid: did, capabilities: ['file_access'] });
  assert.is(created.status, 201, created.text);
  assert.equal(created.body.sentTo, [did]);
  await raw.next('certificate_offer'); // not co-signed
  // Both facts are known: its actor was told of the offer, and its stored certificate is out of date.
  await waitFor(async () => (await actorOf(did))?.state?.active?.certificate === 'reissuePending');
  assert.is(await awaiting(owner), before + 1);

  // Gone without co-signing: still out of date, still once.
  await raw.close();
  await offline(did);
  assert.is(await awaiting(owner), before + 1);

  // Back: its handshake offers the policy's terms again, and it co-signs them.
  const { ready } = await reconnect(raw.keys);
  assert.is.not(ready.certificate.serial, first.certificate.serial);
  assert.is(ready.certificate.policyId, created.body.policy.id);
  await awaitingBecomes(owner, before);
});

test('a policy that expires puts the certificates carrying it out of date, the agent offline', async () => {
  const { s, owner } = ctx;
  const { raw } = await readyRawAgent(s, owner);
  raws.push(raw);
  const did = raw.keys.did;
  const expiresAt = Date.now() + 4000;
  const created = await owner.api.post('/api/policies', { agentDid: did, capabilities: ['file_access'], expiresAt: new Date(expiresAt).toISOString() });
  assert.is(created.status, 201, created.text);
  const offer = await raw.next('certificate_offer');
  assert.is(offer.certificate.policyId, created.body.policy.id);
  raw.send({ type: 'certificate_accept', agentSignature: signMessage(raw.keys, certificateBytes(offer.certificate)) });
  await raw.next('ready');
  // Its actor has heard the certificate is stored (the figure has counted it in force since).
  await waitFor(async () => {
    const a = await actorOf(did);
    return a?.state?.active?.certificate === 'current' && a.context.serial === offer.certificate.serial;
  });
  await raw.close();
  await offline(did);
  const before = await awaiting(owner);
  await waitFor(() => Date.now() > expiresAt, 10_000, 50);
  await awaitingBecomes(owner, before + 1);
  // Back, it gets its terms without the expired policy.
  const { ready } = await reconnect(raw.keys);
  assert.is(ready.certificate.policyId, null);
  await awaitingBecomes(owner, before);
});

test('a failed read of the certificates after a policy change is tried again until it succeeds', async () => {
  const { owner } = ctx;
  const retried = await makeWorkspace(owner, 'Retried');
  const keys = await certifiedThenOffline(retried.id);
  const before = await awaiting(owner);
  faults.add({ collection: 'certificates', op: 'find', mode: 'fail', times: 2, when: (args) => JSON.stringify(args[0]).includes(keys.did) });
  const created = await owner.api.post('/api/policies', { workspaceId: retried.id, capabilities: ['file_access'] });
  assert.is(created.status, 201, created.text);
  await awaitingBecomes(owner, before + 1, 15_000);
  assert.equal(faults.injected, ['certificates.find fail', 'certificates.find fail']);
});

test.run();
