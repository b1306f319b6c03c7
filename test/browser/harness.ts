/// <reference lib="dom" />
// The DOM types are for the callbacks these tests run inside the page (page.evaluate and friends).
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';

/** Debian's Chromium; `npx playwright install` cannot work here (it downloads a browser build). */
export const CHROMIUM = '/usr/bin/chromium';

export const ARTIFACTS = join(import.meta.dirname, 'artifacts');
export const CORPUS = join(import.meta.dirname, '..', '..', '..', 'shared', 'corpus');

export const VIEWPORTS = {
  desktop: { width: 1280, height: 800 },
  phone: { width: 375, height: 812 },
} as const;

/**
 * Launch headless Chromium with the flags that work on these machines. A missing browser is a
 * failure with the fix in the message, never a skip: a skipped browser suite proves nothing.
 * Each launch gets a fresh temporary profile (playwright's default for launch()).
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium is not installed at ${CHROMIUM}. Install it with "apt-get install -y chromium" (.ci/run does this on a bare machine). The browser tests do not skip.`,
    );
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
    ],
  });
}

/**
 * A browser context that fails the test on anything a user would not see but should not happen:
 * a script error, a console error (a CSP violation is reported there) or a failed request of ours.
 */
export async function watchedContext(
  browser: Browser,
  viewport: { width: number; height: number } = VIEWPORTS.desktop,
): Promise<{ context: BrowserContext; problems: string[] }> {
  const context = await browser.newContext({ viewport, acceptDownloads: true });
  const problems: string[] = [];
  context.on('page', (page) => watchPage(page, problems));
  return { context, problems };
}

/** Console errors a test provokes on purpose (a 429 answer, say) are listed in `expected`. */
export function watchPage(page: Page, problems: string[]): void {
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
  });
}

/** Console errors the browser prints for an HTTP error answer the page handles itself. */
export function unexpected(problems: string[], allowedStatuses: number[] = []): string[] {
  return problems.filter(
    (p) =>
      !allowedStatuses.some((status) =>
        p.includes(`Failed to load resource: the server responded with a status of ${status}`),
      ),
  );
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** Screenshots of the current page at both widths (the page is reloaded at each width). */
export async function screenshotBoth(page: Page, name: string): Promise<void> {
  const original = page.viewportSize();
  for (const [label, size] of Object.entries(VIEWPORTS)) {
    await page.setViewportSize(size);
    await screenshot(page, `${name}-${label}`);
  }
  if (original) await page.setViewportSize(original);
}

export function corpusFile(name: string): { name: string; mimeType: string; buffer: Buffer } {
  const types: Record<string, string> = {
    jpg: 'image/jpeg',
    png: 'image/png',
    heic: 'image/heic',
    webp: 'image/webp',
    gif: 'image/gif',
    avif: 'image/avif',
  };
  const extension = name.slice(name.lastIndexOf('.') + 1);
  return {
    name,
    mimeType: types[extension] ?? 'application/octet-stream',
    buffer: readFileSync(join(CORPUS, name)),
  };
}

/**
 * Drop files on an element the way a user's drag from the desktop does: a real `drop` event whose
 * DataTransfer holds File objects.
 */
export async function dropFiles(
  page: Page,
  selector: string,
  files: ReturnType<typeof corpusFile>[],
): Promise<void> {
  const payload = files.map((f) => ({ name: f.name, type: f.mimeType, base64: f.buffer.toString('base64') }));
  const dataTransfer = await page.evaluateHandle((items) => {
    const transfer = new DataTransfer();
    for (const item of items) {
      const bytes = Uint8Array.from(atob(item.base64), (c) => c.charCodeAt(0));
      transfer.items.add(new File([bytes], item.name, { type: item.type }));
    }
    return transfer;
  }, payload);
  await page.dispatchEvent(selector, 'dragenter', { dataTransfer });
  await page.dispatchEvent(selector, 'dragover', { dataTransfer });
  await page.dispatchEvent(selector, 'drop', { dataTransfer });
}
