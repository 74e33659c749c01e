/**
 * Claim and invitation tokens at rest: the data files hold their hashes, never the tokens, while
 * every flow that takes a token keeps working; records stored by older versions under the token
 * itself are moved to the hash at start, and the old tokens keep working.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes, randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { generateKeyPair } from '../src/domain/did.js';
import { announceOwnerClaim } from '../src/services/claims.js';
import type { ClaimSessionDoc, InvitationDoc } from '../src/store/collections.js';
import { http, startServer } from './helpers.js';
import { makeUser } from './fixtures.js';
import { claimWith } from './identity-helpers.js';

const test = suite('secrets at rest: claim and invitation tokens');

/** Every file of the data directory, as text. */
async function dataFiles(dataDir: string): Promise<string> {
  let all = '';
  const walk = async (d: string) => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else all += `${await readFile(p, 'utf8')}\n`;
    }
  };
  await walk(dataDir);
  return all;
}

test('the data files never hold a claim or invitation token, and every flow that takes one works', async () => {
  let s = await startServer();
  try {
    const owner = await makeUser(s, { name: 'Olga', isOwner: true, isAdmin: true, role: 'owner' });
    const tokens: string[] = [];

    // The owner's bootstrap claim (what the console prints): the first start made an unclaimed owner.
    const boot = await announceOwnerClaim(s.ctx, () => undefined);
    assert.ok(boot, 'the owner is unclaimed');
    tokens.push(boot!.token);

    // send-qr, an invite link, an email invitation turned into a claim, and one declined.
    const unclaimed = await makeUser(s, { unclaimed: true });
    const sq = await owner.api.post('/api/server/directory/send-qr', { userId: unclaimed.user._id, sendByEmail: false });
    assert.is(sq.status, 200, sq.text);
    const link = await owner.api.get('/api/users/invite');
    assert.is(link.status, 200, link.text);
    const inv = await owner.api.post('/api/users/invite/email', { email: 'ann@example.test', name: 'Ann', role: 'member' });
    assert.is(inv.status, 200, inv.text);
    const declined = await owner.api.post('/api/users/invite/email', { email: 'bob@example.test', name: 'Bob', role: 'member' });
    tokens.push(sq.body.token, link.body.token, inv.body.token, declined.body.token);

    assert.equal((await http(s.url, 'GET', `/api/invitations/${inv.body.token}`)).body, { email: 'ann@example.test', name: 'Ann', role: 'member' });
    const fromEmail = await http(s.url, 'POST', '/api/users/invite/from-email', { json: { token: inv.body.token } });
    assert.is(fromEmail.status, 200, fromEmail.text);
    tokens.push(fromEmail.body.inviteToken);
    assert.is((await http(s.url, 'POST', `/api/invitations/${declined.body.token}/delete`)).status, 200);
    assert.is((await http(s.url, 'GET', `/api/invitations/${declined.body.token}`)).status, 404, 'the declined invitation is gone');

    // Restart in between: the tokens handed out before still work.
    s = await s.restart();
    assert.is((await http(s.url, 'GET', `/api/user/listen/${sq.body.token}`)).body.status, -1);
    assert.is((await http(s.url, 'GET', `/api/user/claim/${link.body.token}/qr.svg`)).status, 200);
    const ann = generateKeyPair();
    assert.is((await claimWith(s.url, fromEmail.body.inviteToken, ann)).status, 200);
    assert.is((await http(s.url, 'GET', `/api/user/listen/${fromEmail.body.inviteToken}`)).body.status, 2);
    assert.is((await http(s.url, 'GET', `/api/invitations/${inv.body.token}`)).status, 404, 'the claim deleted the invitation');
    assert.is((await claimWith(s.url, sq.body.token, generateKeyPair())).status, 200);
    assert.is((await claimWith(s.url, boot!.token, generateKeyPair())).status, 200);
    assert.is((await claimWith(s.url, link.body.token, generateKeyPair(), { name: 'Newcomer' })).status, 200);

    await s.stop();
    const text = await dataFiles(s.dataDir);
    assert.ok(text.includes(owner.user._id), 'the scan reads the data files');
    for (const t of tokens) assert.not.ok(text.includes(t), `token ${t.slice(0, 6)}… is not in the data files`);
  } finally {
    await s.stop(true);
  }
});

test('records stored under a token in clear are moved to its hash at start; the old tokens keep working and leave the files', async () => {
  let s = await startServer();
  try {
    const unclaimed = await makeUser(s, { unclaimed: true, email: 'cleo@example.test', name: 'Cleo' });
    const invitee = await makeUser(s, { unclaimed: true, email: 'dan@example.test', name: 'Dan' });
    // As an older version stored them: the token is the id.
    const claimToken = randomBytes(24).toString('base64url');
    const invitationToken = randomUUID();
    const linkedClaimToken = randomBytes(24).toString('base64url');
    const now = Date.now();
    const session = (id: string, userId: string, invitation: string | null): ClaimSessionDoc => ({
      _id: id,
      userId,
      nonce: randomBytes(32).toString('base64url'),
      status: -1,
      kind: invitation ? 'invitation' : 'send-qr',
      invitationToken: invitation,
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(now + 3600_000).toISOString(),
      completedAt: null,
      claimedDid: null,
      failure: null,
    });
    await s.ctx.c.claimSessions.insertOne(session(claimToken, unclaimed.user._id, null));
    const invitation: InvitationDoc = {
      _id: invitationToken,
      email: 'dan@example.test',
      emailLower: 'dan@example.test',
      name: 'Dan',
      role: 'member',
      userId: invitee.user._id,
      createdAt: new Date(now).toISOString(),
      createdBy: null,
    };
    await s.ctx.c.invitations.insertOne(invitation);
    await s.ctx.c.claimSessions.insertOne(session(linkedClaimToken, invitee.user._id, invitationToken));
    await s.stop();
    assert.ok((await dataFiles(s.dataDir)).includes(claimToken), 'stored in clear before the migration');

    s = await s.restart();
    // The old tokens work: the invitation, both claims, and the invitation's own claim goes when it is declined.
    assert.equal((await http(s.url, 'GET', `/api/invitations/${invitationToken}`)).body, { email: 'dan@example.test', name: 'Dan', role: 'member' });
    assert.is((await http(s.url, 'GET', `/api/user/listen/${linkedClaimToken}`)).body.status, -1);
    assert.is((await http(s.url, 'POST', `/api/invitations/${invitationToken}/delete`)).status, 200);
    assert.is((await http(s.url, 'GET', `/api/user/listen/${linkedClaimToken}`)).body.status, -2, 'declining ended the claim opened through it');
    const keys = generateKeyPair();
    assert.is((await claimWith(s.url, claimToken, keys)).status, 200);
    assert.is((await s.ctx.c.users.findById(unclaimed.user._id))!.did, keys.did);
    await s.stop();

    const text = await dataFiles(s.dataDir);
    for (const t of [claimToken, invitationToken, linkedClaimToken]) assert.not.ok(text.includes(t), `${t.slice(0, 6)}… left the data files`);
  } finally {
    await s.stop(true);
  }
});

test.run();
