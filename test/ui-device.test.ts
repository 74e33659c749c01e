/**
 * Device approval, sessions and the API reference in a real browser against a real Steward: the
 * sign-in page shows a code, the real `steward wallet approve` (the command the page shows, run as
 * a child process) approves it and the page is signed in; refused and expired codes say so and
 * start again; polling stops while the tab is hidden; the Sessions page ends another session;
 * /api/docs renders the OpenAPI document with nothing fetched from elsewhere. Screenshots go to
 * docs/screenshots.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Page, Request } from 'playwright-core';
import { hashToken } from '../src/services/sessions.js';
import { http, sleep, startServer, tempDir, waitFor, type TestServer } from './helpers.js';
import { makeUser, type TestUser } from './fixtures.js';
import { login } from './identity-helpers.js';
import { inShell, runCli } from './cli-process.js';
import { launch, screenshot, type Browser } from './ui-helpers.js';

const test = suite('device approval, sessions and the API reference in a browser');

let s: TestServer;
let browser: Browser;
let page: Page;
let mia: TestUser;
let walletFile: string;
/** Every request the pages made. */
const requests: Request[] = [];

test.before(async () => {
  // Polls every second keep the suite short.
  s = await startServer({ DEVICE_POLL_INTERVAL_SECONDS: '1' });
  mia = await makeUser(s, { name: 'Mia Wallet', isAdmin: true });
  const dir = await tempDir('steward-ui-device-');
  walletFile = join(dir, 'wallet.json');
  await writeFile(walletFile, JSON.stringify({ version: 1, ...mia.keys, createdAt: new Date().toISOString() }), { mode: 0o600 });
  browser = await launch();
  browser.context.on('request', (r) => requests.push(r));
  page = await browser.newPage();
});

test.after(async () => {
  await browser?.close();
  await s?.stop(true);
});

/** Starts device sign-in on the page; the code and the command it shows. */
async function showCode(p: Page = page): Promise<{ userCode: string; command: string }> {
  const start = p.getByRole('button', { name: /Sign in with my wallet|Start again/ });
  await start.click();
  const userCode = (await p.getByTestId('user-code').textContent())!.trim();
  const command = (await p.getByLabel('Command that approves this browser (installed)', { exact: true }).textContent())!;
  return { userCode, command };
}

/** Runs the command the page shows, as a person would paste it (`steward` is the CLI), with extra flags. */
async function runShown(command: string, ...flags: string[]) {
  const [steward, ...args] = command.split(' ');
  assert.is(steward, 'steward');
  return runCli([...args, ...flags], { STEWARD_WALLET_FILE: walletFile });
}

const polls = () => requests.filter((r) => r.url().endsWith('/api/auth/device/token')).length;

test('signed in by the wallet: the page shows the code, the QR code and the exact command; the real wallet approves; the page is signed in', async () => {
  await page.goto(`${s.url}/agents`);
  await page.getByRole('heading', { name: 'With your wallet (device approval)' }).waitFor();
  const { userCode, command } = await showCode();
  assert.match(userCode, /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
  assert.is(command, `steward wallet approve ${s.url} ${userCode}`);
  const checkout = page.getByLabel('Command that approves this browser (from a checkout)', { exact: true });
  assert.is(await checkout.textContent(), `npm run steward -- wallet approve ${s.url} ${userCode}`);
  await page.getByText('With Steward installed', { exact: true }).waitFor();
  await page.getByText("From a checkout of Steward's sources", { exact: true }).waitFor();
  for (const form of ['installed', 'from a checkout']) {
    assert.ok(await page.getByRole('button', { name: `Copy: Command that approves this browser (${form})` }).isVisible(), `a copy button (${form})`);
  }
  // Shown whole at a phone's width: wrapped inside its box, never cut at the edge.
  await page.setViewportSize({ width: 360, height: 800 });
  const fits = await checkout.evaluate((el) => el.scrollWidth <= el.clientWidth && el.getBoundingClientRect().right <= el.ownerDocument.documentElement.clientWidth);
  assert.ok(fits, 'the command wraps within the page');
  await page.setViewportSize({ width: 1280, height: 800 });
  assert.ok(await page.getByRole('img', { name: /QR code of .*\/api\/auth\/device\/.*\/approve/ }).isVisible(), 'the QR code');
  assert.match((await page.getByTestId('device-countdown').textContent())!, /^(10:00|9:\d\d)$/);
  await page.getByRole('status').getByText('Waiting for your wallet…').waitFor();
  await page.locator('section.device').evaluate((el) => el.scrollIntoView({ block: 'start' }));
  await screenshot(page, 'device-signin');

  // The checkout's form, as printed, in bash at the repository's root.
  const r = await inShell(`${await checkout.textContent()} --yes`, { HOME: await tempDir(), PATH: process.env.PATH!, STEWARD_WALLET_FILE: walletFile });
  assert.is(r.code, 0, r.stderr);
  assert.ok(r.stdout.includes('HeadlessChrome') || r.stdout.includes('Chrome'), `the wallet showed the browser: ${r.stdout}`);
  await page.getByRole('navigation', { name: 'Screens' }).waitFor();
  assert.ok(page.url().endsWith('/agents'), 'the page opened first is kept');
  const me = await page.evaluate(`fetch('/api/users/me').then((r) => r.json())`);
  assert.is((me as any).user.did, mia.user.did, 'signed in as the wallet\'s identity');
});

test('the Sessions page lists this browser and the others; ending another ends it on the server', async () => {
  const other = await login(s.url, mia.keys, { 'user-agent': 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_0) Firefox/128.0' });
  const otherToken = other.body.token as string;
  await page.getByRole('link', { name: 'Sessions', exact: true }).click();
  await page.getByRole('heading', { name: 'Sessions' }).waitFor();
  const current = page.locator('tr[data-current="true"]');
  await current.getByText('This browser approved by a wallet').waitFor();
  await current.getByText('this browser', { exact: true }).waitFor();
  // A session of the steward command is named for it, not for the HTTP library beneath it.
  const cli = await runCli(['login', s.url], { STEWARD_WALLET_FILE: walletFile, XDG_CONFIG_HOME: await tempDir() });
  assert.is(cli.code, 0, cli.stderr);
  await page.reload();
  await page.locator('tr[data-session]', { hasText: `Steward CLI on ${process.platform}` }).waitFor();
  assert.is(await page.locator('tr[data-session]', { hasText: /^node$/ }).count(), 0);
  const firefox = page.locator('tr[data-session]', { hasText: 'Firefox/128 on Macintosh' });
  await firefox.waitFor();
  await screenshot(page, 'sessions');
  assert.is((await http(s.url, 'GET', '/api/me/sessions', { token: otherToken })).status, 200);
  await firefox.getByRole('button', { name: 'Sign out' }).click();
  await firefox.waitFor({ state: 'detached' });
  assert.is((await http(s.url, 'GET', '/api/me/sessions', { token: otherToken })).status, 401, 'the other session ended on the server');

  // Sign out of all others, then of this browser.
  await login(s.url, mia.keys, { 'user-agent': 'curl/8.0' });
  await page.reload();
  await page.locator('tr[data-session]', { hasText: 'curl/8.0' }).waitFor();
  await page.getByRole('button', { name: 'Sign out of all other sessions' }).click();
  await page.getByText(/Signed out of \d+ other sessions?\./).waitFor();
  const left = await s.ctx.sessions.liveOf(mia.user._id);
  assert.is(left.length, 1, 'only this browser\'s session is left');
  await page.getByRole('button', { name: 'Sign out of this browser' }).click();
  await page.getByRole('heading', { name: 'Sign in to Steward' }).waitFor();
  assert.is((await s.ctx.sessions.liveOf(mia.user._id)).length, 0);
});

test('refused from the wallet: the page says so and starts again with a new code', async () => {
  const { userCode, command } = await showCode();
  const r = await runShown(command, '--deny');
  assert.is(r.code, 0, r.stderr);
  await page.getByText('The sign-in was refused from the wallet.').waitFor();
  await page.locator('section.device').evaluate((el) => el.scrollIntoView({ block: 'start' }));
  await screenshot(page, 'device-denied');
  const again = await showCode();
  assert.is.not(again.userCode, userCode, 'a new code');
  await page.getByRole('button', { name: 'Cancel' }).click();
});

test('expired: the page says so and offers a new code', async () => {
  const { userCode } = await showCode();
  const req = await s.ctx.c.deviceRequests.findOne({ userCodeHash: hashToken(userCode) });
  // The clock seam: the stored expiry is moved to the past; the next poll hears expired_token.
  await s.ctx.c.deviceRequests.updateOne({ _id: req!._id }, { $set: { expiresAt: new Date(Date.now() - 1000).toISOString() } });
  await page.getByText('The code expired before it was approved.').waitFor();
  await page.getByRole('button', { name: 'Start again' }).waitFor();
});

test('polling stops while the tab is hidden and resumes when it is shown', async () => {
  await showCode();
  await waitFor(() => polls() > 0, 10_000);
  const setVisibility = (state: 'hidden' | 'visible') =>
    page.evaluate(`(() => { Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => '${state}' }); document.dispatchEvent(new Event('visibilitychange')); })()`);
  await setVisibility('hidden');
  await sleep(1500); // a poll in flight when the tab was hidden lands meanwhile
  const hiddenAt = polls();
  await sleep(3500); // more than three intervals
  assert.is(polls(), hiddenAt, 'no poll while hidden');
  await setVisibility('visible');
  await waitFor(() => polls() > hiddenAt, 10_000);
  await page.getByRole('button', { name: 'Cancel' }).click();
});

test('/api/docs: the API reference renders the OpenAPI document; every request of the page goes to this server', async () => {
  const docs = await browser.newPage();
  const mark = requests.length;
  const answer = await docs.goto(`${s.url}/api/docs`);
  assert.is(answer!.status(), 200);
  const headers = answer!.headers();
  assert.ok(headers['content-security-policy']?.includes("script-src 'self'"), 'the CSP of the dashboard');
  assert.not.ok(headers['content-security-policy']?.includes('unsafe'), 'no unsafe-inline or unsafe-eval');
  // Tags start folded (web/src/api-docs/main.ts): every tag of the interface is listed, and opening one shows its operations.
  await docs.locator('.opblock-tag').first().waitFor({ timeout: 30_000 });
  assert.ok((await docs.locator('.opblock-tag').count()) >= 15, 'every tag is listed');
  await docs.locator('.opblock-tag', { hasText: 'auth' }).first().click();
  const device = docs.locator('.opblock', { hasText: '/api/auth/device/token' });
  await device.waitFor();
  assert.ok((await docs.locator('.opblock').count()) >= 8, "the auth tag's operations are shown");
  await device.locator('.opblock-summary').click();
  await device.getByText('deviceCode').first().waitFor();
  await docs.getByRole('link', { name: 'OpenAPI document (JSON)' }).waitFor();
  await screenshot(docs, 'api-docs');
  const made = requests.slice(mark).map((r) => r.url());
  assert.ok(made.some((u) => u.endsWith('/api/openapi.json')), 'the document was fetched');
  assert.ok(made.some((u) => /\/assets\/api-docs-[^/]+\.js$/.test(u)), 'the renderer came from the build');
  for (const u of made) assert.ok(u.startsWith(`${s.url}/`) || u.startsWith('data:'), `a request left the server: ${u}`);
  await docs.close();
});

test('no console error and no CSP violation on any page', async () => {
  assert.equal(browser.problems, []);
});

test.run();
