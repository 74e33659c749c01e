/**
 * Browser tests of the dashboard: Debian's Chromium driven by playwright-core against a real
 * Steward (the test runner builds the dashboard into dist/web first). Chromium gets a fresh
 * profile and no background traffic (this machine's network refuses it). Every console error
 * and page error is collected: a CSP violation shows up there.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { tempDir } from './helpers.js';

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
