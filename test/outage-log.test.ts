/**
 * Outside services failing, as the log tells it (src/integrations/outage-log.ts): a bridge's
 * webhook endpoint that fails every delivery attempt gets one warn line with the reason for the
 * whole streak, not one per attempt or per message, and one info line when it works again.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { logLines, waitFor, type TestServer } from './helpers.js';
import { makeChannel, makeWorkspace, post, startWithOwner } from './channels-helpers.js';
import { StandIn } from './stand-in-server.js';
import type { TestUser } from './fixtures.js';

const test = suite('outside services failing, in the log');
const log = logLines();
let s: TestServer;
let owner: TestUser;
let remote: StandIn;

test.before(async () => {
  remote = await StandIn.start();
  ({ s, owner } = await startWithOwner({ LOG_LEVEL: 'info', BRIDGE_RETRY_BASE_MS: '10', BRIDGE_DELIVERY_ATTEMPTS: '3' }, { logTo: log.sink }));
});

test.after(async () => {
  await s.stop(true);
  await remote.close();
});

const parsed = () => log.lines.map((l) => JSON.parse(l) as { level: number; msg: string; outsideService?: string; reason?: string; bridgeId?: string });

test('a webhook endpoint down for several messages: one warn line with the reason, then one when it works again', async () => {
  let up = false;
  remote.respond = () => (up ? { status: 204 } : { status: 503 });
  const ws = await makeWorkspace(owner, 'Outages');
  const ch = await makeChannel(owner, { name: 'outage-room', workspaceId: ws.id });
  const r = await owner.api.post(`/api/channels/${ch.id}/bridges`, {
    externalService: 'webhook',
    externalChannelId: 'ext-outage',
    externalChannelName: 'outage',
    externalWorkspaceId: 'platform',
    config: { secret: 'whsec-0123456789abcdef0123456789abcdef', outgoingUrl: `${remote.url}/hook` },
  });
  assert.is(r.status, 201, r.text);
  const bridgeId = r.body.bridge.id as string;

  // Two messages, three attempts each: six failures.
  await post(owner, ch.id, 'first, into the void');
  await post(owner, ch.id, 'second, into the void');
  await waitFor(() => parsed().filter((l) => l.msg === 'outgoing bridge delivery failed for good').length === 2, 10_000);
  assert.is(remote.received.length, 6);
  const failing = parsed().filter((l) => l.bridgeId === bridgeId && l.outsideService);
  assert.equal(
    failing.map((l) => [l.level, l.msg, l.reason]),
    [[40, `a webhook endpoint of bridge ${bridgeId} is failing: HTTP 503`, 'HTTP 503']],
  );
  assert.not.ok(parsed().some((l) => /will retry/.test(l.msg)), 'no line per attempt at info level');
  assert.not.ok(parsed().some((l) => l.level >= 40 && l.msg === 'outgoing bridge delivery failed for good'), 'each lost message is an info line, not a warn');

  up = true;
  await post(owner, ch.id, 'third, heard');
  await waitFor(() => parsed().some((l) => l.bridgeId === bridgeId && /works again/.test(l.msg)), 10_000);
  const back = parsed().filter((l) => l.bridgeId === bridgeId && l.outsideService);
  assert.equal(back.map((l) => l.level), [40, 30]);
  assert.is(back[1]!.msg, `a webhook endpoint of bridge ${bridgeId} works again after 6 failed call(s)`);
});

test.run();
