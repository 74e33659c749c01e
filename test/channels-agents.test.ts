/**
 * @mentions reaching real SDK agents over /ws/agent, their replies through agent-response, and
 * channels that agents create with the HTTP session of their handshake.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { StewardAgent, ChannelMessageContext } from '../src/agent/index.js';
import { frameValidators } from '../src/domain/wire-schemas.js';
import { sign } from '../src/integrations/webhook.js';
import { client, http, waitFor, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { once, readyAgent, stopAll, startWithOwner } from './fleet-helpers.js';
import { addMember, isError, makeChannel, makeWorkspace, post, RawAgentSink } from './channels-helpers.js';

const test = suite('channel mentions to agents');
let s: TestServer;
let owner: TestUser;
let alice: TestUser;
let ws: { id: string; slug: string };
const agents: StewardAgent[] = [];

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  ws = await makeWorkspace(owner, 'Agents Talk');
  alice = await makeUser(s, { workspaces: { [ws.id]: 'member' }, name: 'Alice' });
});

test.after(async () => {
  await stopAll(...agents);
  await s.stop(true);
});

async function agentNamed(name: string, onChannelMessage?: (ctx: ChannelMessageContext) => void | Promise<void>): Promise<StewardAgent> {
  const a = await readyAgent(s, owner, { name, onChannelMessage, workspace: ws.slug });
  agents.push(a);
  return a;
}

test('a mentioned agent receives channel_message_send and its reply (the SDK helper) appears in the thread', async () => {
  const ch = await makeChannel(alice, { name: 'Support', workspaceId: ws.id });
  const helper = await agentNamed('helper', async (ctx) => {
    await ctx.reply(`echo: ${ctx.message.content}`);
  });
  await addMember(alice, ch.id, helper.did, 'agent');
  const got = once<ChannelMessageContext>(helper, 'channelMessage');
  const q = await post(alice, ch.id, 'hello @helper, are you there?');
  assert.equal(q.metadata.mentions, ['helper']);
  const ctx = await got;
  assert.is(ctx.channelId, ch.id);
  assert.is(ctx.message.id, q.id);
  assert.is(ctx.message.content, 'hello @helper, are you there?');
  assert.is(ctx.message.authorDid, alice.user.did);
  const replies = await waitFor(async () => {
    const r = await alice.api.get(`/api/channels/${ch.id}/messages?threadId=${q.id}`);
    return r.body.messages.length > 0 ? r.body.messages : null;
  });
  assert.is(replies[0].content, 'echo: hello @helper, are you there?');
  assert.is(replies[0].authorType, 'agent');
  assert.is(replies[0].authorDid, helper.did);
});

test('the channel_message_send frame matches its schema and carries the documented fields', async () => {
  const ch = await makeChannel(alice, { name: 'Frames', workspaceId: ws.id });
  const sink = await RawAgentSink.ready(s, owner, 'framebot', ws.slug);
  await addMember(alice, ch.id, sink.did, 'agent');
  const parent = await post(alice, ch.id, 'a parent');
  const m = await post(alice, ch.id, '@FrameBot please look', { threadId: parent.id, metadata: { ticket: 7 } });
  const frame = await sink.agent.next('channel_message_send');
  assert.ok(frameValidators.channel_message_send(frame), JSON.stringify(frameValidators.channel_message_send.errors));
  assert.equal(frame, {
    type: 'channel_message_send',
    channelId: ch.id,
    channel: { id: ch.id, name: 'Frames', slug: 'frames', workspaceId: ws.id },
    message: {
      id: m.id,
      channelId: ch.id,
      threadId: parent.id,
      authorDid: alice.user.did,
      authorType: 'user',
      content: '@FrameBot please look',
      metadata: { ticket: 7, mentions: ['framebot'] },
      createdAt: m.createdAt,
    },
    mention: 'framebot',
    source: 'channel',
  });
  sink.close();
});

test('only mentioned, online agent members get it; an agent never gets its own message', async () => {
  const ch = await makeChannel(alice, { name: 'Selective', workspaceId: ws.id });
  const seen = new Map<string, string[]>();
  const record = (name: string) => (ctx: ChannelMessageContext) => {
    seen.set(name, [...(seen.get(name) ?? []), ctx.message.content]);
  };
  const a = await agentNamed('alpha', record('alpha'));
  const b = await agentNamed('beta', record('beta'));
  const notMember = await agentNamed('gamma', record('gamma'));
  await addMember(alice, ch.id, a.did, 'agent');
  await addMember(alice, ch.id, b.did, 'agent');
  await post(alice, ch.id, '@alpha only');
  await post(alice, ch.id, '@gamma is not a member here');
  // alpha mentions itself and beta in its own message.
  const r = await http(s.url, 'POST', `/api/channels/${ch.id}/messages/agent-response`, { token: a.session!.token, json: { content: '@alpha asks @beta' } });
  assert.is(r.status, 201, r.text);
  await waitFor(() => (seen.get('beta')?.length ?? 0) >= 1);
  await post(alice, ch.id, '@beta last');
  await waitFor(() => (seen.get('beta')?.length ?? 0) >= 2);
  assert.equal(seen.get('alpha'), ['@alpha only']);
  assert.equal(seen.get('beta'), ['@alpha asks @beta', '@beta last']);
  assert.is(seen.get('gamma'), undefined);
  assert.ok(notMember);
});

test('an edit that adds a mention calls the newly mentioned agent', async () => {
  const ch = await makeChannel(alice, { name: 'Edits', workspaceId: ws.id });
  const seen: string[] = [];
  const late = await agentNamed('latecomer', (ctx) => {
    seen.push(ctx.message.content);
  });
  await addMember(alice, ch.id, late.did, 'agent');
  const m = await post(alice, ch.id, 'no mention yet');
  const r = await alice.api.patch(`/api/channels/${ch.id}/messages/${m.id}`, { content: 'now with @latecomer' });
  assert.equal(r.body.message.metadata.mentions, ['latecomer']);
  await waitFor(() => seen.length > 0);
  assert.equal(seen, ['now with @latecomer']);
});

test('a mention of an offline agent is recorded and the post still succeeds', async () => {
  const ch = await makeChannel(alice, { name: 'Offline', workspaceId: ws.id });
  const sleeper = await agentNamed('sleeper');
  await addMember(alice, ch.id, sleeper.did, 'agent');
  await sleeper.stop();
  await waitFor(() => !s.ctx.agentPush.isOnline(sleeper.did));
  const m = await post(alice, ch.id, '@sleeper wake up');
  assert.equal(m.metadata.mentions, ['sleeper']);
});

test("a message arriving through a bridge with an agent's @name reaches that agent", async () => {
  const ch = await makeChannel(alice, { name: 'Bridged', workspaceId: ws.id });
  const got: ChannelMessageContext[] = [];
  const listener = await agentNamed('listener', (ctx) => {
    got.push(ctx);
  });
  await addMember(alice, ch.id, listener.did, 'agent');
  const secret = 'a-webhook-secret-of-some-length-0123456789';
  const br = await alice.api.post(`/api/channels/${ch.id}/bridges`, {
    externalService: 'webhook',
    externalChannelId: 'ext-1',
    externalChannelName: 'External',
    externalWorkspaceId: 'platform',
    config: { secret },
  });
  assert.is(br.status, 201, br.text);
  const raw = JSON.stringify({ message: 'from outside: @listener ping', author: 'ext:bob' });
  const r = await http(s.url, 'POST', `/api/bridges/webhook/${br.body.bridge.id}/incoming`, {
    raw,
    headers: { 'content-type': 'application/json', 'x-signature': sign(raw, secret) },
  });
  assert.is(r.status, 200, r.text);
  await waitFor(() => got.length > 0);
  assert.is(got[0]!.message.id, r.body.messageId);
  assert.is(got[0]!.message.content, 'from outside: @listener ping');
  assert.is(got[0]!.message.authorDid, 'ext:bob');
});

test('an agent creates a channel with its handshake session: only in a workspace it belongs to, never a global one; it owns the channel; audited', async () => {
  const creator = await readyAgent(s, owner, { name: 'channel-maker' }); // of the default workspace only
  agents.push(creator);
  const token = creator.session!.token;
  const api = client(s.url, token);
  // Not (yet) an agent of this workspace: 404, as for a person outside it. A global channel: 403.
  isError(await api.post('/api/channels', { name: 'Agent Room', workspaceId: ws.id }), 404, 'not_found');
  isError(await api.post('/api/channels', { name: 'Agent Global' }), 403, 'forbidden');
  isError(await api.post('/api/channels', { name: 'Agent Global', workspaceId: null }), 403, 'forbidden');
  const joined = await owner.api.post(`/api/workspaces/${ws.id}/agents`, { agentDid: creator.did });
  assert.is(joined.status, 201, joined.text);

  const r = await api.post('/api/channels', { name: 'Agent Room', workspaceId: ws.id, isPublic: false });
  assert.is(r.status, 201, r.text);
  const ch = r.body.channel;
  assert.is(ch.creatorDid, creator.did);
  assert.is(ch.workspaceId, ws.id);
  assert.is(ch.slug, 'agent-room');
  const detail = await api.get(`/api/channels/${ch.id}`);
  assert.is(detail.status, 200, detail.text);
  assert.equal(
    detail.body.members.map((m: any) => [m.memberDid, m.memberType, m.role]),
    [[creator.did, 'agent', 'owner']],
  );
  const audit = await s.ctx.c.audit.findOne({ action: 'channel.create', target: ch.id });
  assert.ok(audit, 'channel.create is audited');
  assert.is(audit!.actor, creator.did);
  assert.is(audit!.actorType, 'agent');

  // As the owner it manages the channel: adds a person, who can then read the private channel.
  isError(await alice.api.get(`/api/channels/${ch.id}`), 404, 'not_found');
  const added = await api.post(`/api/channels/${ch.id}/members`, { memberDid: alice.user.did, memberType: 'user' });
  assert.is(added.status, 201, added.text);
  assert.is(added.body.member.invitedBy, creator.did);
  assert.is((await alice.api.get(`/api/channels/${ch.id}`)).status, 200);
  const topic = await api.patch(`/api/channels/${ch.id}`, { topic: 'run by an agent' });
  assert.is(topic.status, 200, topic.text);
  assert.is(topic.body.channel.topic, 'run by an agent');
});

test.run();
