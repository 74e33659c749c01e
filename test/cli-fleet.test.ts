/**
 * The admin CLI on the fleet, as a real `steward` process against a real server with real SDK
 * agents: agents list/get (every filter; the table and --json against what the API says; names
 * for DIDs), registrations list/approve/reject, policies list/create/revoke, intents send.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { http, waitFor, type TestServer } from './helpers.js';
import type { TestUser } from './fixtures.js';
import { makeAgent, makeWorkspace, startWithOwner } from './people-helpers.js';
import { newAgent, readyAgent, stopAll } from './fleet-helpers.js';
import { cliHome, fails, ok, tableRows, type CliHome } from './cli-helpers.js';
import { time } from '../src/cli/admin/output.js';
import type { StewardAgent } from '../src/agent/index.js';

const test = suite('steward CLI: agents, registrations, policies, intents');
let s: TestServer;
let owner: TestUser;
let ws: { id: string; slug: string };
let cli: CliHome;
let echo: StewardAgent;
const sdkAgents: StewardAgent[] = [];
/** Intents the echo agent holds until the test lets them go. */
const held: Array<() => void> = [];

const api = async (path: string) => {
  const r = await http(s.url, 'GET', path, { token: owner.token });
  assert.is(r.status, 200, r.text);
  return r.body;
};
/** An agent list without lastSeen, which a connected agent's frames move between two reads. */
const steady = (page: any) => ({ ...page, agents: page.agents.map(({ lastSeen: _, ...a }: any) => a) });
const enc = encodeURIComponent;

test.before(async () => {
  ({ s, owner } = await startWithOwner());
  ws = await makeWorkspace(owner, 'Ops');
  echo = await readyAgent(s, owner, {
    name: 'echo',
    workspace: ws.id,
    capabilities: ['api_call', 'file_access'],
    onIntent: async (i) => {
      if (i.params.hold) await new Promise<void>((resolve) => held.push(resolve));
      return { echo: i.params, action: i.action };
    },
  });
  sdkAgents.push(echo);
  await makeAgent(s, 'alpha', ['file_access']);
  await makeAgent(s, 'beta', ['api_call', 'file_access']);
  await makeAgent(s, 'twin', ['file_access']);
  await makeAgent(s, 'twin', ['api_call']);
  cli = await cliHome(owner.keys);
  assert.is((await cli.run('login', s.url)).code, 0);
});

test.after(async () => {
  for (const release of held) release();
  await stopAll(...sdkAgents);
  await s.stop(true);
});

test('agents list: --json is the API answer for each filter; the table shows the same agents, aligned', async () => {
  const cases: Array<[string[], string]> = [
    [[], ''],
    [['--offline'], 'online=false'],
    [['--online'], 'online=true'],
    [['-q', 'TWI'], 'q=TWI'],
    [['--capabilities', 'api_call,file_access'], 'capabilities=api_call%2Cfile_access'],
    [['--workspace', ws.slug], `workspace=${ws.slug}`],
    [['--page', '2', '--page-size', '2', '--sort-by', 'registeredAt', '--sort-dir', 'desc'], 'page=2&pageSize=2&sortBy=registeredAt&sortDir=desc'],
  ];
  const outs = await Promise.all(cases.map(([args]) => cli.run('agents', 'list', ...args, '--json')));
  for (const [i, [args, query]] of cases.entries()) {
    assert.equal(steady(ok(outs[i]!)), steady(await api(`/api/agents?${query}`)), `agents list ${args.join(' ')}`);
  }
  assert.is((await api('/api/agents?online=false')).agents.length, 4, 'the offline ones: a fixed answer to compare whole');
  assert.equal(ok(await cli.run('agents', 'list', '--offline', '--json')), await api('/api/agents?online=false'));

  const r = await cli.run('agents', 'list', '--sort-by', 'name');
  assert.is(r.code, 0, r.stderr);
  const page = await api('/api/agents?sortBy=name');
  const rows = tableRows(r.stdout, ['DID', 'NAME', 'ONLINE', 'CAPABILITIES IN FORCE', 'WORKSPACE', 'LAST SEEN']);
  // What each agent enforces (its certificate), and what was approved beside it when that differs.
  const inForce = (a: any) =>
    a.capabilitiesInForce === null ? `none yet (no certificate) (approved: ${a.capabilities.join(',')})` : a.capabilitiesInForce.join(',');
  assert.equal(
    rows.map(({ 'LAST SEEN': _, ...row }) => row),
    page.agents.map((a: any) => ({ DID: a.id, NAME: a.name, ONLINE: a.isOnline ? 'yes' : 'no', 'CAPABILITIES IN FORCE': inForce(a), WORKSPACE: a.workspace?.slug ?? '-' })),
  );
  for (const [i, a] of page.agents.entries()) if (!a.isOnline) assert.is(rows[i]!['LAST SEEN'], time(a.lastSeen));
  assert.ok(r.stdout.endsWith(`page 1 of 1: 5 agents, 1 online\n`), r.stdout);
  assert.not.match(r.stdout, / \n/, 'no trailing blanks');

  const none = await cli.run('agents', 'list', '-q', 'nobody-is-called-this');
  assert.is(none.stdout, 'No agents match.\npage 1 of 1: 0 agents, 0 online\n');
});

test('agents get: by DID or by name, the API detail as --json and as a list for people; unknown and ambiguous names', async () => {
  const detail = await api(`/api/agents/${enc(echo.did)}`);
  const byDid = ok(await cli.run('agents', 'get', echo.did, '--json'));
  assert.equal({ ...byDid.agent, lastSeen: null }, { ...detail.agent, lastSeen: null });
  const byName = ok(await cli.run('agents', 'get', 'echo', '--json'));
  assert.is(byName.agent.id, echo.did);

  const r = await cli.run('agents', 'get', 'echo');
  assert.is(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`^DID +${echo.did}\\nName +echo\\nVersion +1\\.0\\.0\\nOnline +yes\\nCapabilities in force +api_call,file_access\\nWorkspaces +${ws.slug} \\(primary\\)\\n`));
  assert.match(r.stdout, new RegExp(`\\nCertificate +serial ${detail.agent.certificate.certificate.serial}, issued `));
  assert.match(r.stdout, /\nPolicy +none \(the capabilities approved at registration, no limits\)\n/);

  fails(await cli.run('agents', 'get', 'nobody'), 4, "no agent named 'nobody' (give its DID, or look with 'steward agents list -q nobody')");
  const unknownDid = 'did:key:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw';
  const apiSays = await http(s.url, 'GET', `/api/agents/${enc(unknownDid)}`, { token: owner.token });
  assert.is(apiSays.status, 404);
  fails(await cli.run('agents', 'get', unknownDid), 4, apiSays.body.error.message);
  const twins = (await api('/api/agents?q=twin')).agents.map((a: any) => a.id);
  const ambiguous = await cli.run('agents', 'get', 'twin');
  fails(ambiguous, 2, "2 agents are named 'twin'; give one's DID:");
  for (const did of twins) assert.ok(ambiguous.stderr.includes(did));
});

test('registrations: list (table and --json as the API), approve with a subset, reject with a reason; decided ones and unknown ids', async () => {
  const newcomer = newAgent(s, { name: 'newcomer', capabilities: ['api_call', 'file_access'] });
  const intruder = newAgent(s, { name: 'intruder', capabilities: ['system_command'] });
  sdkAgents.push(newcomer, intruder);
  let rejection: any;
  intruder.on('registration', (f: any) => {
    if (f.status === 'rejected') rejection = f;
  });
  await Promise.all([newcomer.waitFor('pending'), intruder.waitFor('pending')]);

  const listed = ok(await cli.run('registrations', 'list', '--json'));
  assert.equal(listed, await api('/api/registrations'));
  assert.is(listed.registrations.length, 2);
  const r = await cli.run('registrations', 'list');
  assert.is(r.code, 0);
  const rows = tableRows(r.stdout, ['ID', 'NAME', 'DID', 'REQUESTED CAPABILITIES', 'REQUESTED AT']);
  assert.equal(
    rows,
    listed.registrations.map((x: any) => ({ ID: x.id, NAME: x.name, DID: x.agentDid, 'REQUESTED CAPABILITIES': x.requestedCapabilities.join(','), 'REQUESTED AT': time(x.requestedAt) })),
  );
  assert.match(r.stdout, /\n2 pending; approve with: steward registrations approve <id> --capabilities a,b\n$/);

  const approved = await cli.run('registrations', 'approve', newcomer.registrationId!, '--capabilities', 'api_call');
  assert.is(approved.code, 0, approved.stderr);
  assert.is(approved.stdout, `Approved registration ${newcomer.registrationId}: agent ${newcomer.did} with api_call.\n`);
  await newcomer.waitFor('ready');
  assert.equal((await api(`/api/agents/${enc(newcomer.did)}`)).agent.capabilities, ['api_call']);

  const again = await http(s.url, 'POST', `/api/registrations/${newcomer.registrationId}/approve`, { token: owner.token, json: { capabilities: ['api_call'] } });
  assert.is(again.status, 409);
  fails(await cli.run('registrations', 'approve', newcomer.registrationId!, '--capabilities', 'api_call'), 1, `${again.body.error.message} (409 ${again.body.error.code})`);

  const rejected = ok(await cli.run('registrations', 'reject', intruder.registrationId!, '--reason', 'not one of ours', '--json'));
  assert.equal(rejected, { success: true });
  await waitFor(() => rejection);
  assert.is(rejection.reason, 'not one of ours');
  assert.equal((await api('/api/registrations')).registrations, []);
  assert.is((await cli.run('registrations', 'list')).stdout, 'No pending registrations.\n');

  fails(await cli.run('registrations', 'approve', 'no-such-registration', '--capabilities', 'api_call'), 4, 'no-such-registration');
  fails(await cli.run('registrations', 'reject', 'no-such-registration', '--reason', 'x'), 4, 'no-such-registration');
});

test('intents send: the agent answers (as text and --json), refuses (exit 1, its words), is offline, does not answer in time; bad actions', async () => {
  const r = await cli.run('intents', 'send', 'echo', 'api_call', '--params', '{"hello":"world"}');
  assert.is(r.code, 0, r.stderr);
  const [first, ...rest] = r.stdout.split('\n');
  assert.match(first!, /^Intent \S+: ok$/);
  assert.equal(JSON.parse(rest.join('\n')), { echo: { hello: 'world' }, action: 'api_call' });

  const j = ok(await cli.run('intents', 'send', echo.did, 'file_access', '--json'));
  assert.equal(Object.keys(j).sort(), ['intentId', 'ok', 'output']);
  assert.equal([j.ok, j.output], [true, { echo: {}, action: 'file_access' }]);
  const audited = await api(`/api/audit?action=intent.send&target=${enc(echo.did)}`);
  assert.ok(audited.entries.some((e: any) => e.details.intentId === j.intentId && e.details.outcome === 'ok'), 'the server sent that very intent');

  // Gate 1 of the agent: mail_send is not in its certificate.
  const refused = await cli.run('intents', 'send', 'echo', 'mail_send', '--json');
  assert.is(refused.code, 1);
  const answer = JSON.parse(refused.stdout);
  assert.is(answer.ok, false);
  assert.is(refused.stderr, `steward: the agent refused intent ${answer.intentId}: ${answer.error}\n`);
  fails(await cli.run('intents', 'send', 'echo', 'mail_send'), 1, 'the agent refused intent ');

  const teleport = await http(s.url, 'POST', `/api/agents/${enc(echo.did)}/intents`, { token: owner.token, json: { action: 'teleport', params: {} } });
  assert.is(teleport.status, 400);
  fails(await cli.run('intents', 'send', 'echo', 'teleport'), 1, `${teleport.body.error.message} (400 ${teleport.body.error.code})`);
  fails(await cli.run('intents', 'send', 'alpha', 'file_access'), 1, 'the agent is not connected (409 agent_offline)');

  const late = await cli.run('intents', 'send', 'echo', 'api_call', '--params', '{"hold":true}', '--timeout', '200');
  fails(late, 1, 'the agent did not answer within 200 ms (504 intent_timeout)');
  for (const release of held.splice(0)) release();
});

test('policies: create for an agent by name (re-certified at once) and for a workspace, list (table and --json as the API), revoke', async () => {
  const created = ok(
    await cli.run('policies', 'create', '--agent', 'echo', '--capabilities', 'api_call', '--max-tokens-per-day', '1000', '--max-requests-per-hour', '5', '--allowed-domains', 'api.example.com,*.example.org', '--expires-at', '2030-01-31', '--json'),
  );
  assert.equal(created.sentTo, [echo.did], 'the connected agent got its new certificate');
  assert.equal(created.policy, (await api(`/api/policies/${created.policy.id}`)).policy);
  assert.equal(created.policy.resourceLimits, { maxTokensPerDay: 1000, maxRequestsPerHour: 5, allowedDomains: ['api.example.com', '*.example.org'] });
  assert.is(created.policy.expiresAt, '2030-01-31T00:00:00.000Z');
  await waitFor(async () => (await api(`/api/agents/${enc(echo.did)}`)).agent.certificate.certificate.policyId === created.policy.id);
  // The policy narrows echo to api_call: list and get show what is in force, the approved set beside it.
  const narrowed = await cli.run('agents', 'get', 'echo');
  assert.match(narrowed.stdout, /\nCapabilities in force +api_call\nApproved +api_call,file_access\n/);
  const listed = tableRows((await cli.run('agents', 'list', '-q', 'echo')).stdout, ['DID', 'NAME', 'ONLINE', 'CAPABILITIES IN FORCE', 'WORKSPACE', 'LAST SEEN']);
  assert.is(listed[0]!['CAPABILITIES IN FORCE'], 'api_call (approved: api_call,file_access)');

  const forWs = await cli.run('policies', 'create', '--workspace', ws.slug, '--capabilities', 'file_access');
  assert.is(forWs.code, 0, forWs.stderr);
  const wsPolicyId = /^Created policy (\S+)\.\n/.exec(forWs.stdout)?.[1];
  assert.ok(wsPolicyId, forWs.stdout);
  assert.ok(forWs.stdout.endsWith('No connected agent was affected (agents get it when they next connect).\n'), 'echo keeps its own, agent-scoped policy');

  const all = ok(await cli.run('policies', 'list', '--json'));
  assert.equal(all, await api('/api/policies'));
  assert.equal(ok(await cli.run('policies', 'list', '--agent', 'echo', '--json')), await api(`/api/policies?agentDid=${enc(echo.did)}`));
  assert.equal(ok(await cli.run('policies', 'list', '--workspace', ws.slug, '--json')).policies.map((p: any) => p.id), [wsPolicyId]);
  const table = await cli.run('policies', 'list');
  const rows = tableRows(table.stdout, ['ID', 'SCOPE', 'CAPABILITIES', 'LIMITS', 'EXPIRES', 'CREATED']);
  const limits = '1000 tokens/day; 5 intents/h; domains api.example.com,*.example.org';
  assert.equal(
    rows.map((x) => [x.ID, x.SCOPE, x.CAPABILITIES, x.LIMITS, x.EXPIRES]),
    [
      [wsPolicyId, `workspace ${ws.slug}`, 'file_access', '-', '-'],
      [created.policy.id, `agent ${echo.did}`, 'api_call', `${limits.slice(0, 47)}…`, '2030-01-31 00:00:00Z'],
    ],
    'a long cell is cut to its column width, identifiers never',
  );

  const revoked = await cli.run('policies', 'revoke', created.policy.id);
  assert.is(revoked.code, 0, revoked.stderr);
  assert.is(revoked.stdout, `Revoked policy ${created.policy.id}.\nRe-certified 1 connected agent: ${echo.did}.\n`);
  assert.equal((await api('/api/policies')).policies.map((p: any) => p.id), [wsPolicyId]);
  fails(await cli.run('policies', 'revoke', created.policy.id), 4, created.policy.id);
  fails(await cli.run('policies', 'create', '--agent', 'echo', '--capabilities', 'api_call', '--expires-at', '2030-02-30'), 1, 'validation_failed');
});

test.run();
