/**
 * The team-chat bridge: bot-framework activities in, graph API posts out to a local server
 * playing the graph API, and the start-up warning about the unverified incoming endpoint.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { generateKeyPair } from '../src/domain/did.js';
import { activityText } from '../src/integrations/teams.js';
import { TEAMS_WARNING } from '../src/services/bridges.js';
import { http, logLines, sleep, startServer, tempDir, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { addMember, isError, makeAgent, makeChannel, makeWorkspace, messagesOf, post, startWithOwner } from './channels-helpers.js';
import { StandIn } from './stand-in-server.js';

const test = suite('teams bridges');
let s: TestServer;
let owner: TestUser;
let alice: TestUser;
let ws: { id: string; slug: string };
let graph: StandIn;

const TOKEN = 'graph-token-abcdefghijklmnopqrstuvwxyz';
const TEAM = 'team-0f1e2d';
const CHANNEL = '19:general0123@thread.tacv2';

test.before(async () => {
  graph = await StandIn.start();
  graph.respond = () => ({ status: 201, body: { id: 'graph-message-1' } });
  ({ s, owner } = await startWithOwner({ GRAPH_BASE_URL: `${graph.url}/v1.0`, BRIDGE_RETRY_BASE_MS: '20' }));
  ws = await makeWorkspace(owner, 'Teams');
  alice = await makeUser(s, { workspaces: { [ws.id]: 'member' }, name: 'Alice <Ops>' });
});

test.after(async () => {
  await s.stop(true);
  await graph.close();
});

async function teamsChannel(name: string, teamsChannelId: string, extra: Record<string, unknown> = {}): Promise<{ ch: any; bridge: any }> {
  const ch = await makeChannel(alice, { name, workspaceId: ws.id });
  const r = await alice.api.post(`/api/channels/${ch.id}/bridges`, {
    externalService: 'teams',
    externalChannelId: teamsChannelId,
    externalChannelName: 'General',
    externalWorkspaceId: TEAM,
    config: { accessToken: TOKEN, tenantId: 'tenant-1', botId: 'bot-1' },
    ...extra,
  });
  assert.is(r.status, 201, r.text);
  return { ch, bridge: r.body.bridge };
}

function activity(teamsChannelId: string, text: string, extra: Record<string, unknown> = {}) {
  return {
    type: 'message',
    id: '1700000000000',
    timestamp: new Date().toISOString(),
    serviceUrl: 'https://smba.example/teams/',
    channelId: 'msteams',
    from: { id: '29:user-bob', name: 'Bob Builder', aadObjectId: 'aad-bob' },
    conversation: { id: `${teamsChannelId};messageid=1700000000000`, isGroup: true },
    recipient: { id: '28:bot-1', name: 'Steward' },
    text,
    textFormat: 'plain',
    entities: [{ type: 'mention', text: '<at>Steward</at>', mentioned: { id: '28:bot-1', name: 'Steward' } }],
    channelData: { teamsChannelId, teamsTeamId: TEAM, tenant: { id: 'tenant-1' } },
    ...extra,
  };
}

const incoming = (body: unknown, headers: Record<string, string> = {}) =>
  http(s.url, 'POST', '/api/bridges/teams/incoming', {
    raw: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': 'application/json', authorization: 'Bearer unverified-bot-framework-token', ...headers },
  });

// --- incoming -------------------------------------------------------------------------------------------

test('incoming: an activity becomes a message; <at>…</at> markup becomes plain @names; answers {ok: true, messageId}', async () => {
  const { ch } = await teamsChannel('from-teams', CHANNEL, { syncDirection: 'incoming' });
  const agent = await makeAgent(s, 'deploy bot', undefined, ws.id);
  await addMember(alice, ch.id, agent._id, 'agent');
  const r = await incoming(activity(CHANNEL, '<at>Steward</at> ask <at>deploy bot</at> to ship &amp; tell me<br>thanks'));
  assert.is(r.status, 200, r.text);
  assert.equal(Object.keys(r.body).sort(), ['messageId', 'ok']);
  const [m] = await messagesOf(alice, ch.id);
  assert.is(m.id, r.body.messageId);
  assert.is(m.content, '@Steward ask @deploy bot to ship & tell me\nthanks');
  assert.is(m.authorDid, 'teams:aad-bob');
  assert.is(m.authorType, 'user');
  assert.equal(m.metadata, {
    teams: { activityId: '1700000000000', from: { id: '29:user-bob', name: 'Bob Builder' } },
    mentions: ['deploy bot'],
  });
});

test('incoming: 404 for an unknown team channel; 403 for a disabled or outgoing-only bridge; 400 for bad activities; 415 without JSON', async () => {
  const id = '19:second@thread.tacv2';
  const { ch, bridge } = await teamsChannel('teams-rules', id);
  isError(await incoming(activity('19:unknown@thread.tacv2', 'hello')), 404, 'not_found');
  await alice.api.patch(`/api/channels/${ch.id}/bridges/${bridge.id}`, { isSyncEnabled: false });
  isError(await incoming(activity(id, 'hello')), 403, 'bridge_disabled');
  await alice.api.patch(`/api/channels/${ch.id}/bridges/${bridge.id}`, { isSyncEnabled: true, syncDirection: 'outgoing' });
  isError(await incoming(activity(id, 'hello')), 403, 'bridge_outgoing_only');
  await alice.api.patch(`/api/channels/${ch.id}/bridges/${bridge.id}`, { syncDirection: 'bidirectional' });
  isError(await incoming('{"type": "message", '), 400, 'invalid_json');
  isError(await incoming(activity(id, 'hello', { channelData: {} })), 400, 'missing_channel');
  isError(await incoming(activity(id, '   ')), 400, 'message_required');
  isError(await incoming(activity(id, '<at></at>')), 400, 'message_required');
  isError(await incoming(activity(id, 'hello'), { 'content-type': 'text/plain' }), 415, 'unsupported_media_type');
  const typing = await incoming(activity(id, '', { type: 'typing' }));
  assert.is(typing.status, 200);
  assert.equal(typing.body, { ok: true, messageId: null }, 'activities other than messages are acknowledged and ignored');
  assert.equal(await messagesOf(alice, ch.id), []);
  assert.is((await incoming(activity(id, 'finally'))).status, 200);
  assert.is((await messagesOf(alice, ch.id)).length, 1);
});

test('activityText: mentions, line breaks, tags and entities', () => {
  assert.is(activityText('<at>Bot</at> hi'), '@Bot hi');
  assert.is(activityText('<p>one</p><p>two &lt;3 &#x1F600; &#233;</p>'), 'one\ntwo <3 😀 é');
  assert.is(activityText('<div><at><b>Team</b> Bot</at>&nbsp;go</div>'), '@Team Bot go');
  assert.is(activityText('plain &unknown; text'), 'plain &unknown; text');
});

// --- outgoing -------------------------------------------------------------------------------------------

test('outgoing: a new message is posted to {GRAPH_BASE_URL}/teams/{teamId}/channels/{channelId}/messages with the access token', async () => {
  graph.clear();
  const id = '19:outgoing@thread.tacv2';
  const { ch } = await teamsChannel('to-teams', id);
  await post(alice, ch.id, 'release <v2> is out\nsee notes');
  const [rec] = await graph.waitFor(1);
  assert.is(rec!.method, 'POST');
  assert.is(decodeURIComponent(rec!.url), `/v1.0/teams/${TEAM}/channels/${id}/messages`);
  assert.is(rec!.headers.authorization, `Bearer ${TOKEN}`);
  assert.is(rec!.headers['content-type'], 'application/json');
  assert.equal(rec!.body, {
    body: { contentType: 'html', content: '<b>Alice &lt;Ops&gt;</b>: release &lt;v2&gt; is out<br>see notes' },
  });
});

test('outgoing: a message that came in from the team channel is not posted back to it; failures are retried', async () => {
  graph.clear();
  const id = '19:echo@thread.tacv2';
  const { ch } = await teamsChannel('echo-teams', id);
  assert.is((await incoming(activity(id, 'from teams'))).status, 200);
  let calls = 0;
  graph.respond = () => (++calls === 1 ? { status: 429 } : { status: 201, body: { id: 'm' } });
  await post(alice, ch.id, 'from steward');
  const recs = await graph.waitFor(2);
  await sleep(100);
  assert.is(graph.received.length, 2, 'one failed attempt, one success, nothing for the incoming message');
  for (const r of recs) assert.match(r.body.body.content, /from steward/);
  graph.respond = () => ({ status: 201, body: { id: 'graph-message-1' } });
});

test('outgoing: an upstream 401 (expired token) is not retried, and the poster never sees it', async () => {
  graph.clear();
  graph.respond = () => ({ status: 401, body: { error: { code: 'InvalidAuthenticationToken' } } });
  const { ch } = await teamsChannel('expired-teams', '19:expired@thread.tacv2');
  const m = await post(alice, ch.id, 'will fail upstream');
  assert.ok(m.id, 'the poster does not see the upstream failure');
  await graph.waitFor(1);
  await sleep(100);
  assert.is(graph.received.length, 1);
  graph.respond = () => ({ status: 201, body: { id: 'graph-message-1' } });
});

// --- start-up warning -------------------------------------------------------------------------------------

test('a warning is logged at start when a teams bridge exists, without any secret', async () => {
  const { lines, sink } = logLines();
  const start = (dataDir: string) => startServer({ LOG_LEVEL: 'warn', STEWARD_OWNER_DID: generateKeyPair().did }, dataDir, { logTo: sink });
  const dir = await tempDir();
  let steward = await start(dir);
  assert.not.ok(lines.some((l) => l.includes(TEAMS_WARNING)), 'no warning without a teams bridge');
  await steward.ctx.c.bridges.insertOne({
    _id: 'b-teams',
    channelId: 'c',
    externalService: 'teams',
    externalChannelId: '19:x',
    externalChannelName: 'x',
    externalWorkspaceId: 'team',
    syncDirection: 'bidirectional',
    isSyncEnabled: true,
    configSealed: steward.ctx.secrets.sealJson({ accessToken: TOKEN, tenantId: 't', botId: 'b' }, 'b-teams'),
    createdAt: new Date().toISOString(),
    updatedAt: new Date().toISOString(),
    createdBy: 'did:key:x',
  });
  await steward.stop();
  steward = await start(dir);
  const warning = lines.find((l) => l.includes(TEAMS_WARNING));
  assert.ok(warning, 'the warning names the unverified endpoint');
  assert.is(JSON.parse(warning!).level, 40);
  assert.not.ok(lines.some((l) => l.includes(TOKEN)));
  await steward.stop(true);
});

test.run();
