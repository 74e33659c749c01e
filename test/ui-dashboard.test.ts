/**
 * The dashboard in a real browser against a real Steward with real SDK agents: the owner claims
 * the account from the browser with the browser's own key and signs in; approves a pending
 * registration and sees the agent online; inspects the agent's certificate, whose two signatures
 * the browser verifies; creates a policy and sees which agents received it; posts in a channel and
 * sees the message arrive live in a second page. Each step saves a screenshot in docs/screenshots.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Dialog, Page } from 'playwright-core';
import { announceOwnerClaim } from '../src/services/claims.js';
import type { StewardAgent } from '../src/agent/index.js';
import { startServer, waitFor, type TestServer } from './helpers.js';
import { newAgent, stopAll } from './fleet-helpers.js';
import { launch, screenshot, type Browser } from './ui-helpers.js';

const test = suite('dashboard in a browser');

let s: TestServer;
let browser: Browser;
let page: Page;
let agent: StewardAgent | undefined;
let ownerToken = '';

test.before(async () => {
  s = await startServer();
  browser = await launch();
  page = await browser.newPage();
});

test.after(async () => {
  await stopAll(agent);
  await browser?.close();
  await s?.stop(true);
});

const api = async (method: string, path: string, body?: unknown) => {
  const r = await fetch(new URL(path, s.url), {
    method,
    headers: { authorization: `Bearer ${ownerToken}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: r.status, body: (await r.json()) as any };
};

test('the unclaimed owner is claimed from the browser with its own key, then signed in', async () => {
  let printed = '';
  await announceOwnerClaim(s.ctx, (t) => (printed += t));
  const link = /Connection string \(claim URL\): (\S+)/.exec(printed)?.[1];
  assert.ok(link, 'a claim link was printed');

  await page.goto(`${s.url}/agents?online=true`);
  await page.getByRole('heading', { name: 'Sign in to Steward' }).waitFor();
  await page.getByText('this browser\'s key and a wallet').waitFor();
  await page.getByLabel('Claim link or invitation link').fill(link!);
  await screenshot(page, 'signin');
  await page.getByRole('button', { name: 'Claim and sign in' }).click();

  await page.getByRole('navigation', { name: 'Screens' }).waitFor();
  const owner = await s.ctx.c.users.findOne({ isOwner: true });
  assert.ok(owner?.did?.startsWith('did:key:z6Mk'), `the owner now has a did:key (${owner?.did})`);
  // The browser's key is a WebCrypto key: the private key cannot be exported.
  const exportable = await page.evaluate(`(async () => {
    const db = await new Promise((ok, ko) => { const r = indexedDB.open('steward', 1); r.onsuccess = () => ok(r.result); r.onerror = ko; });
    const rec = await new Promise((ok) => { const g = db.transaction('keys').objectStore('keys').get('browser-identity'); g.onsuccess = () => ok(g.result); });
    return { did: rec.did, extractable: rec.keys.privateKey.extractable };
  })()`);
  assert.equal(exportable, { did: owner!.did, extractable: false });
  // Signed in with the cookie: the page asked /api/users/me and shows the global admin's screens.
  for (const name of ['Overview', 'Agents', 'Registrations', 'Policies', 'Audit']) {
    assert.ok(await page.getByRole('link', { name, exact: true }).isVisible(), `${name} is in the navigation`);
  }
  assert.ok(page.url().endsWith('/agents?online=true'), `the link opened first is kept (${page.url()})`);
  ownerToken = (await s.ctx.sessions.create('user', owner!._id)).token;
});

test('a pending registration is approved with a narrowed checklist and the agent shows online', async () => {
  // No agent yet: the page says how to start one, in both forms of the command.
  await page.goto(`${s.url}/agents`);
  await page.getByText('No agents yet.').waitFor();
  for (const command of [`steward agent --url ${s.url}`, `npm run steward -- agent --url ${s.url}`]) {
    assert.ok(await page.getByText(command, { exact: true }).isVisible(), command);
  }
  agent = newAgent(s, { name: 'ui-agent-one', capabilities: ['file_access', 'api_call'] });
  await agent.waitFor('pending');
  await page.goto(`${s.url}/registrations`);
  const item = page.locator('li[data-registration]', { hasText: 'ui-agent-one' });
  await item.waitFor();
  assert.ok(await page.getByLabel('1 pending').isVisible(), 'the navigation shows one pending registration');
  await item.getByRole('checkbox', { name: 'api_call' }).uncheck();
  await screenshot(page, 'registrations');
  await item.getByRole('button', { name: 'Approve ui-agent-one' }).click();
  await page.getByText('ui-agent-one: approved').waitFor();
  await agent.waitFor('ready');

  await page.getByRole('link', { name: 'Agents', exact: true }).click();
  const row = page.locator('tr[data-agent]', { hasText: 'ui-agent-one' });
  await row.getByText('online', { exact: true }).waitFor({ timeout: 30_000 });
  assert.ok(await page.getByText('1 agent matches, 1 online.', { exact: true }).isVisible());
  await screenshot(page, 'agents');
  const detail = await api('GET', `/api/agents/${encodeURIComponent(agent.did)}`);
  assert.equal(detail.body.agent.certificate.certificate.capabilities, ['file_access'], 'only the checked capability was approved');
});

test('the agent page shows both certificate signatures verified by the browser', async () => {
  await page.locator('tr[data-agent]', { hasText: 'ui-agent-one' }).getByRole('link', { name: 'ui-agent-one' }).click();
  await page.getByRole('heading', { name: 'Certificate', exact: true }).waitFor();
  const server = page.getByTestId('sig-server');
  const agentSig = page.getByTestId('sig-agent');
  await server.getByText('✓ verified').waitFor();
  await agentSig.getByText('✓ verified').waitFor();
  assert.ok(await page.getByText(s.ctx.identity.did, { exact: true }).isVisible(), 'the issuer is the server DID');
  await screenshot(page, 'agent');

  // The same page refuses a certificate changed after it was signed (an answer altered in transit).
  const detailPath = `/api/agents/${encodeURIComponent(agent!.did)}`;
  await page.route(`**${detailPath}`, async (route) => {
    const res = await route.fetch();
    const body = (await res.json()) as any;
    body.agent.certificate.certificate.capabilities = ['file_access', 'system_command'];
    await route.fulfill({ response: res, json: body });
  });
  await page.reload();
  await page.getByTestId('sig-server').getByText('✗ not verified').waitFor();
  await page.getByTestId('sig-agent').getByText('✗ not verified').waitFor();
  await page.unroute(`**${detailPath}`);
});

test('a policy created for the agent reports the connected agent it was sent to', async () => {
  await page.goto(`${s.url}/policies?agent=${encodeURIComponent(agent!.did)}`);
  await page.getByRole('heading', { name: 'New policy' }).waitFor();
  await page.getByRole('checkbox', { name: 'file_access' }).check();
  await page.getByRole('checkbox', { name: 'api_call' }).check();
  await page.getByLabel('Tokens per day').fill('5000');
  await page.getByRole('button', { name: 'Create policy' }).click();
  const sent = page.getByTestId('sent-to');
  await sent.getByText('1 connected agent received a new certificate').waitFor();
  assert.ok(await page.getByText(agent!.did, { exact: true }).first().isVisible(), 'sentTo lists the agent');
  await screenshot(page, 'policies');
  const policies = await api('GET', `/api/policies?agentDid=${encodeURIComponent(agent!.did)}`);
  assert.is(policies.body.policies.length, 1);
  assert.equal(policies.body.policies[0].resourceLimits, { maxTokensPerDay: 5000 });
  await waitFor(async () => (await api('GET', `/api/agents/${encodeURIComponent(agent!.did)}`)).body.agent.certificate.certificate.policyId === policies.body.policies[0].id, 10_000);

  // The list shows what the agent enforces now, and the approved set beside it, labelled.
  await page.goto(`${s.url}/agents`);
  const row = page.locator('tr[data-agent]', { hasText: 'ui-agent-one' });
  await row.getByText('approved: file_access', { exact: true }).waitFor();
  assert.equal((await row.locator('td:nth-child(4) .badge').allTextContents()).sort(), ['api_call', 'file_access']);
  await page.goBack();
  await page.getByRole('heading', { name: 'New policy' }).waitFor();
});

test('revoking a policy asks first: dismissed, the policy stays; accepted, it is revoked', async () => {
  const path = `/api/policies?agentDid=${encodeURIComponent(agent!.did)}`;
  const [policy] = (await api('GET', path)).body.policies;
  const asked: string[] = [];
  let accept = false;
  const answer = (d: Dialog) => {
    asked.push(`${d.type()}: ${d.message()}`);
    void (accept ? d.accept() : d.dismiss());
  };
  page.on('dialog', answer);
  try {
    const revoke = page.getByRole('button', { name: `Revoke policy ${policy.id}` });
    await revoke.click();
    await waitFor(() => asked.length === 1);
    assert.is((await api('GET', path)).body.policies.length, 1, 'dismissed: nothing was revoked');
    accept = true;
    await revoke.click();
    await page.getByText('Policy revoked.').waitFor();
    assert.equal(asked, Array(2).fill('confirm: Revoke this policy? Connected agents it applies to get a new certificate at once.'));
    assert.is((await api('GET', path)).body.policies.length, 0);
  } finally {
    page.off('dialog', answer);
  }
});

test('a message posted in a channel appears live in a second page; @ completes agent names', async () => {
  await page.goto(`${s.url}/channels`);
  await page.getByRole('button', { name: 'New channel' }).click();
  await page.getByLabel('Name').fill('Ops room');
  await page.getByRole('button', { name: 'Create', exact: true }).click();
  await page.getByRole('heading', { name: '# Ops room' }).waitFor();
  await page.getByText('No messages yet.').waitFor();

  const second = await browser.newPage();
  await second.goto(page.url());
  await second.getByText('No messages yet.').waitFor();
  await second.getByText('Live', { exact: true }).waitFor();
  await page.getByText('Live', { exact: true }).waitFor();

  const box = page.getByLabel('Message Ops room');
  await box.fill('status please @ui-ag');
  await page.getByRole('option', { name: /ui-agent-one/ }).waitFor();
  await box.press('Tab');
  assert.is(await box.inputValue(), 'status please @ui-agent-one ');
  await box.press('Enter');

  await second.locator('li[data-message]', { hasText: 'status please @ui-agent-one' }).waitFor();
  await page.locator('li[data-message]', { hasText: 'status please' }).getByRole('button', { name: 'React with 👍' }).click();
  await second.getByRole('button', { name: /👍 1/ }).waitFor();
  await screenshot(second, 'channels');
  await second.close();
});

test('the audit screen tails the log live: a new entry appears without a reload', async () => {
  await page.goto(`${s.url}/audit`);
  await page.getByRole('heading', { name: 'Audit' }).waitFor();
  await page.locator('table tbody tr').first().waitFor();
  // The page's feed subscription has reached the server before the change is made.
  await waitFor(() => s.ctx.fleet.feed.publisher.hasSubscribers('audit'), 10_000);
  const created = await api('POST', '/api/workspaces', { name: 'Live tail room' });
  assert.is(created.status, 201);
  const row = page.locator('table tbody tr', { hasText: 'Live tail room' });
  await row.waitFor();
  assert.ok(await row.getByText('workspace.create').isVisible());

  // Beside long details, at a tablet's width and at a narrow one, an action wraps only before a
  // dot, never mid-word.
  const long = await api('POST', '/api/workspaces', { name: 'A room whose long name fills the details column of its audit row' });
  assert.is(long.status, 201);
  await page.locator('table tbody tr', { hasText: 'fills the details column' }).waitFor();
  for (const width of [1024, 800]) {
    await page.setViewportSize({ width, height: 800 });
    // Each character's line (its top) from a Range; two letters of one word on two lines is a break mid-word.
    const broken = (await page.evaluate(`(() => {
      const bad = [];
      const actions = [...document.querySelectorAll('table tbody tr td:nth-child(3) code')];
      if (actions.length < 3) bad.push('only ' + actions.length + ' actions shown');
      for (const el of actions) {
        const text = el.textContent;
        const tops = [];
        const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
        for (let n = walker.nextNode(); n; n = walker.nextNode()) {
          for (let i = 0; i < n.textContent.length; i++) {
            const r = document.createRange();
            r.setStart(n, i);
            r.setEnd(n, i + 1);
            tops.push(Math.round(r.getBoundingClientRect().top));
          }
        }
        for (let i = 1; i < text.length; i++) if (tops[i] !== tops[i - 1] && text[i] !== '.') bad.push(text);
      }
      return bad;
    })()`)) as string[];
    assert.equal(broken, [], `actions broken mid-word at ${width} px`);
  }
  await page.setViewportSize({ width: 1280, height: 800 });
});

test('no page error and no content-security-policy violation happened', () => {
  assert.equal(browser.problems, []);
});

test.run();
