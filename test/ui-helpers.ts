/**
 * Browser tests of the dashboard: Debian's Chromium driven by playwright-core against a real
 * Steward (the test runner builds the dashboard into dist/web first). Chromium gets a fresh
 * profile and no background traffic (this machine's network refuses it). Every console error
 * and page error is collected: a CSP violation shows up there.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { announceOwnerClaim } from '../src/services/claims.js';
import { tempDir, type TestServer } from './helpers.js';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const SCREENSHOTS = new URL('../docs/screenshots/', import.meta.url).pathname;

export interface Browser {
  context: BrowserContext;
  /** Console errors and page errors seen so far, on every page. */
  problems: string[];
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

export async function launch(): Promise<Browser> {
  const profile = await tempDir('steward-chromium-');
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 800 },
    colorScheme: 'light',
    args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const problems: string[] = [];
  const watch = (page: Page) => {
    page.on('console', (m) => {
      // Answers such as the 401 of a signed-out page are logged as "Failed to load resource": expected.
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(`console: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  };
  context.on('page', watch);
  for (const p of context.pages()) watch(p);
  return {
    context,
    problems,
    newPage: () => context.newPage(),
    close: () => context.close(),
  };
}

export async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: false });
}

/**
 * Claims the unclaimed owner from the browser with the browser's own key (the claim link Steward
 * prints at first start) and waits for the signed-in navigation. Returns a session token of the
 * owner for the test's own HTTP calls.
 */
export async function signInOwner(s: TestServer, page: Page, path = '/'): Promise<string> {
  let printed = '';
  await announceOwnerClaim(s.ctx, (t) => (printed += t));
  const link = /Connection string \(claim URL\): (\S+)/.exec(printed)?.[1];
  if (!link) throw new Error('no claim link was printed');
  await page.goto(`${s.url}${path}`);
  await page.getByLabel('Claim link or invitation link').fill(link);
  await page.getByRole('button', { name: 'Claim and sign in' }).click();
  await page.getByRole('navigation', { name: 'Screens' }).waitFor();
  const owner = await s.ctx.c.users.findOne({ isOwner: true });
  return (await s.ctx.sessions.create('user', owner!._id)).token;
}

/** The HTTP interface as a bearer of `token`: status and parsed body. */
export function apiAs(s: TestServer, token: () => string) {
  return async (method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> => {
    const r = await fetch(new URL(path, s.url), {
      method,
      headers: { authorization: `Bearer ${token()}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await r.text();
    return { status: r.status, body: text ? JSON.parse(text) : undefined };
  };
}
