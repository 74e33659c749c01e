/**
 * The dashboard's live feed when the server ends or refuses its socket, in a real browser against
 * a real Steward: refused for holding too many feed sockets (4413), the page says so and does not
 * try again until the person asks; its session ended elsewhere (4401), the page returns to
 * sign-in. The page's clock is Playwright's, so back-off timers are run by moving it, not waited for.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Page } from 'playwright-core';
import { startServer, waitFor, type TestServer } from './helpers.js';
import { apiAs, launch, signInOwner, type Browser } from './ui-helpers.js';

const test = suite('dashboard live feed: refused and ended sockets');

let s: TestServer;
let browser: Browser;
let first: Page;
let second: Page;
let token = '';
const api = (method: string, path: string, body?: unknown) => apiAs(s, () => token)(method, path, body);

/** Counts the WebSockets the page opens, in `window.feedSockets`. */
async function countSockets(page: Page): Promise<void> {
  await page.addInitScript(() => {
    type Socket = new (url: string | URL, protocols?: string | string[]) => object;
    const w = globalThis as unknown as { feedSockets: number; WebSocket: Socket };
    const Native = w.WebSocket;
    w.feedSockets = 0;
    w.WebSocket = class extends Native {
      constructor(url: string | URL, protocols?: string | string[]) {
        super(url, protocols);
        w.feedSockets++;
      }
    };
  });
}
const socketsOpened = (page: Page) => page.evaluate(() => (globalThis as unknown as { feedSockets: number }).feedSockets);

test.before(async () => {
  s = await startServer({ FEED_SOCKETS_PER_PERSON: '1' });
  browser = await launch();
  first = await browser.newPage();
  token = await signInOwner(s, first, '/overview');
  await first.locator('.feed-status.open', { hasText: 'Live' }).waitFor();
});

test.after(async () => {
  await browser?.close();
  await s?.stop(true);
});

test('refused for too many feed sockets (4413), the page says so and opens no other socket until asked', async () => {
  second = await browser.newPage();
  await countSockets(second);
  await second.clock.install();
  await second.goto(`${s.url}/overview`);
  const refused = second.getByRole('alert').filter({ hasText: 'Live updates are off' });
  await refused.waitFor();
  assert.match((await refused.textContent()) ?? '', /too many Steward tabs, devices or scripts/);
  // A back-off timer would have fired many times over within ten minutes.
  await second.clock.fastForward('10:00');
  assert.is(await socketsOpened(second), 1, 'one attempt, no reconnection loop');
  assert.ok(await refused.isVisible(), 'still said');

  // The person closes the other tab and asks again: the page goes live.
  await first.close();
  await waitFor(async () => {
    if (await second.locator('.feed-status.open', { hasText: 'Live' }).isVisible()) return true;
    // The server may not have seen the other tab's socket close yet: it refuses again, and the page says so.
    if (await refused.isVisible()) await second.getByRole('button', { name: 'try again' }).click();
    return false;
  }, 15_000);
  assert.ok((await socketsOpened(second)) >= 2);
});

test('its session ended elsewhere (4401), the page returns to sign-in and opens no other socket', async () => {
  const { body } = await api('GET', '/api/me/sessions');
  const browserSession = (body.sessions as Array<{ id: string; current: boolean }>).find((x) => !x.current && x.id);
  assert.ok(browserSession, 'the browser has a session of its own');
  const opened = await socketsOpened(second);
  assert.is((await api('DELETE', `/api/me/sessions/${browserSession.id}`)).status, 200);
  await second.getByText('Your session has ended. Sign in again.').waitFor();
  await second.getByLabel('Claim link or invitation link').waitFor();
  await second.clock.fastForward('10:00');
  assert.is(await socketsOpened(second), opened, 'no reconnection with the ended session');
});

test('no page error and no content-security-policy violation happened', () => {
  assert.equal(browser.problems, []);
});

test.run();
