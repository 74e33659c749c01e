/**
 * Managing bridges (interface §2.10, §4.8): who may list, create, change and delete them, the
 * refusals, and the sealed configuration that never appears in any answer.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { http, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { addMember, isError, makeChannel, makeWorkspace, startWithOwner } from './channels-helpers.js';
import { sign } from '../src/integrations/webhook.js';

const test = suite('bridges');
let s: TestServer;
let owner: TestUser;
let chOwner: TestUser;
let member: TestUser;
let reader: TestUser; // workspace member, not in the channel
let ch: any;

const SECRET = 'whsec-0123456789abcdef0123456789abcdef';
const TOKEN = 'graph-access-token-ABCDEFGHIJKLMNOP';
const BRIDGE_KEYS = ['channelId', 'createdAt', 'externalChannelId', 'externalChannelName', 'externalService', 'externalWorkspaceId', 'id', 'isSyncEnabled', 'syncDirection'];

const webhook = (externalChannelId: string, extra: Record<string, unknown> = {}) => ({
  externalService: 'webhook',
  externalChannelId,
  externalChannelName: `Ext ${externalChannelId}`,
  externalWorkspaceId: 'platform-x',
  config: { secret: SECRET, outgoingUrl: 'http://127.0.0.1:9/hook', webhookUrl: '' },
  ...extra,
});

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  const ws = await makeWorkspace(owner, 'Bridging');
  chOwner = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  member = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  reader = await makeUser(s, { workspaces: { [ws.id]: 'member' } });
  ch = await makeChannel(chOwner, { name: 'Bridged', workspaceId: ws.id });
  await addMember(chOwner, ch.id, member.user.did!, 'user', 'moderator');
});

test.after(async () => {
  await s.stop(true);
});

/** No answer may carry a secret of the configuration. */
function noSecrets(text: string): void {
  for (const secret of [SECRET, TOKEN, 'configJson', 'configSealed', '"config"']) assert.not.ok(text.includes(secret), `answer leaks ${secret}: ${text}`);
}

test('create: 201 {bridge} without its configuration; syncDirection defaults to bidirectional, enabled; audited', async () => {
  const r = await chOwner.api.post(`/api/channels/${ch.id}/bridges`, webhook('c-1'));
  assert.is(r.status, 201, r.text);
  noSecrets(r.text);
  assert.equal(Object.keys(r.body), ['bridge']);
  const b = r.body.bridge;
  assert.equal(Object.keys(b).sort(), BRIDGE_KEYS);
  assert.is(b.channelId, ch.id);
  assert.is(b.externalService, 'webhook');
  assert.is(b.externalChannelId, 'c-1');
  assert.is(b.externalChannelName, 'Ext c-1');
  assert.is(b.externalWorkspaceId, 'platform-x');
  assert.is(b.syncDirection, 'bidirectional');
  assert.is(b.isSyncEnabled, true);
  const audit = await s.ctx.c.audit.findOne({ action: 'bridge.create', target: b.id });
  assert.ok(audit);
  noSecrets(JSON.stringify(audit));
  const teams = await chOwner.api.post(`/api/channels/${ch.id}/bridges`, {
    externalService: 'teams',
    externalChannelId: '19:abc@thread.tacv2',
    externalChannelName: 'General',
    externalWorkspaceId: 'team-1',
    syncDirection: 'incoming',
    config: { accessToken: TOKEN, tenantId: 'tenant', botId: 'bot' },
  });
  assert.is(teams.status, 201, teams.text);
  assert.is(teams.body.bridge.syncDirection, 'incoming');
  noSecrets(teams.text);
});

test('the configuration is stored sealed, bound to its bridge id', async () => {
  const r = await chOwner.api.post(`/api/channels/${ch.id}/bridges`, webhook('c-sealed'));
  const doc = await s.ctx.c.bridges.findById(r.body.bridge.id);
  assert.ok(doc);
  assert.not.ok(JSON.stringify(doc).includes(SECRET), 'the stored document does not hold the secret in clear');
  assert.equal(s.ctx.secrets.openJson(doc.configSealed, doc._id), { secret: SECRET, outgoingUrl: 'http://127.0.0.1:9/hook', webhookUrl: '' });
  assert.throws(() => s.ctx.secrets.openJson(doc.configSealed, 'another-bridge-id'));
});

test('create: 400 for missing fields, an invalid externalService or config; 409 for the same channel, service and external channel', async () => {
  const path = `/api/channels/${ch.id}/bridges`;
  for (const field of ['externalService', 'externalChannelId', 'externalChannelName', 'externalWorkspaceId', 'config']) {
    const body: Record<string, unknown> = webhook('c-missing');
    delete body[field];
    isError(await chOwner.api.post(path, body), 400, 'validation_failed');
  }
  isError(await chOwner.api.post(path, webhook('c-x', { externalService: 'slack' })), 400, 'validation_failed');
  isError(await chOwner.api.post(path, webhook('c-x', { syncDirection: 'sideways' })), 400, 'validation_failed');
  isError(await chOwner.api.post(path, webhook('c-x', { config: {} })), 400, 'validation_failed');
  isError(await chOwner.api.post(path, webhook('c-x', { config: { secret: '' } })), 400, 'validation_failed');
  isError(await chOwner.api.post(path, webhook('c-x', { config: { secret: SECRET, outgoingUrl: 'ftp://x' } })), 400, 'validation_failed');
  const teamsMissing = await chOwner.api.post(path, { ...webhook('c-x'), externalService: 'teams', config: { accessToken: TOKEN, tenantId: 't' } });
  isError(teamsMissing, 400, 'validation_failed');
  assert.match(teamsMissing.body.error.message, /config\.botId/);
  noSecrets(teamsMissing.text);
  assert.is((await chOwner.api.post(path, webhook('c-dup'))).status, 201);
  isError(await chOwner.api.post(path, webhook('c-dup')), 409, 'bridge_exists');
  assert.is((await chOwner.api.post(path, { ...webhook('c-dup'), externalService: 'teams', config: { accessToken: TOKEN, tenantId: 't', botId: 'b' } })).status, 201, 'another service may use the same external id');
});

test('who: list for channel members (and global admins); create, change, delete for the channel owner or a global admin', async () => {
  const path = `/api/channels/${ch.id}/bridges`;
  const list = await member.api.get(path);
  assert.is(list.status, 200, list.text);
  assert.equal(Object.keys(list.body), ['bridges']);
  assert.ok(list.body.bridges.length >= 3);
  for (const b of list.body.bridges) assert.equal(Object.keys(b).sort(), BRIDGE_KEYS);
  noSecrets(list.text);
  assert.is((await owner.api.get(path)).status, 200);
  isError(await reader.api.get(path), 403, 'not_a_member');
  isError(await member.api.post(path, webhook('c-mod')), 403, 'forbidden');
  const b = list.body.bridges[0];
  isError(await member.api.patch(`${path}/${b.id}`, { isSyncEnabled: false }), 403, 'forbidden');
  isError(await member.api.del(`${path}/${b.id}`), 403, 'forbidden');
  assert.is((await owner.api.post(path, webhook('c-admin'))).status, 201);
  isError(await http(s.url, 'GET', path), 401, 'unauthorized');
});

test('PATCH: isSyncEnabled and syncDirection; the configuration is kept; 404 for an unknown bridge', async () => {
  const created = (await chOwner.api.post(`/api/channels/${ch.id}/bridges`, webhook('c-patch'))).body.bridge;
  const path = `/api/channels/${ch.id}/bridges/${created.id}`;
  const r = await chOwner.api.patch(path, { isSyncEnabled: false });
  assert.is(r.status, 200, r.text);
  assert.equal(Object.keys(r.body), ['bridge']);
  assert.is(r.body.bridge.isSyncEnabled, false);
  noSecrets(r.text);
  const r2 = await owner.api.patch(path, { syncDirection: 'outgoing', isSyncEnabled: true });
  assert.is(r2.body.bridge.syncDirection, 'outgoing');
  assert.is(r2.body.bridge.isSyncEnabled, true);
  const doc = await s.ctx.c.bridges.findById(created.id);
  assert.is(s.ctx.secrets.openJson<{ secret: string }>(doc!.configSealed, created.id).secret, SECRET);
  isError(await chOwner.api.patch(`/api/channels/${ch.id}/bridges/nope`, { isSyncEnabled: true }), 404, 'not_found');
  isError(await chOwner.api.patch(path, { syncDirection: 'up' }), 400, 'validation_failed');
  isError(await chOwner.api.patch(path, { config: { secret: 'x' } }), 400, 'validation_failed');
  const otherChannel = await makeChannel(chOwner, { name: 'Other', workspaceId: ch.workspaceId });
  isError(await chOwner.api.patch(`/api/channels/${otherChannel.id}/bridges/${created.id}`, { isSyncEnabled: true }), 404, 'not_found');
  assert.ok(await s.ctx.c.audit.findOne({ action: 'bridge.update', target: created.id }));
});

test('DELETE: {success: true}; the bridge and its configuration are gone; its incoming address answers 404', async () => {
  const created = (await chOwner.api.post(`/api/channels/${ch.id}/bridges`, webhook('c-del'))).body.bridge;
  const raw = JSON.stringify({ message: 'before deletion' });
  const send = () =>
    http(s.url, 'POST', `/api/bridges/webhook/${created.id}/incoming`, { raw, headers: { 'content-type': 'application/json', 'x-signature': sign(raw, SECRET) } });
  assert.is((await send()).status, 200);
  const d = await chOwner.api.del(`/api/channels/${ch.id}/bridges/${created.id}`);
  assert.is(d.status, 200, d.text);
  assert.equal(d.body, { success: true });
  assert.is(await s.ctx.c.bridges.findById(created.id), null);
  isError(await send(), 404, 'not_found');
  isError(await chOwner.api.del(`/api/channels/${ch.id}/bridges/${created.id}`), 404, 'not_found');
  assert.ok(!(await chOwner.api.get(`/api/channels/${ch.id}/bridges`)).body.bridges.some((b: any) => b.id === created.id));
  assert.ok(await s.ctx.c.audit.findOne({ action: 'bridge.delete', target: created.id }));
});

test('the OpenAPI document lists the bridge routes with their auth levels and no configuration in answers', async () => {
  const r = await http(s.url, 'GET', '/api/openapi.json');
  assert.is(r.status, 200);
  const paths = r.body.paths;
  assert.is(paths['/api/bridges/webhook/{bridgeId}/incoming'].post['x-auth'], 'public');
  assert.is(paths['/api/bridges/teams/incoming'].post['x-auth'], 'public');
  assert.ok(paths['/api/channels/{channelId}/bridges/{bridgeId}'].patch);
});

test.run();
