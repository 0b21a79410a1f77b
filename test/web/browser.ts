// Browser-test helpers: Debian's Chromium driven by playwright-core, a local HTTP server that records
// every request it gets (the "remote" side of hostile mail), and screenshots into test-output/.
import { existsSync, mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';

export const CHROMIUM_PATH = process.env.EPHEMAIL_CHROMIUM ?? '/usr/bin/chromium';

export function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    // loud, not skipped: the browser tests are part of the bar (README "Test", .ci/run)
    throw new Error(`No Chromium at ${CHROMIUM_PATH}: install it with "apt-get install -y chromium" (or set EPHEMAIL_CHROMIUM)`);
  }
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: 30_000,
  });
}

export const DESKTOP = { width: 1280, height: 860 };
export const PHONE = { width: 390, height: 844 };

const SHOTS = resolve(import.meta.dirname, '..', '..', 'test-output', 'screenshots');

/** Saves `test-output/screenshots/<name>-desktop.png` and `<name>-phone.png`; restores the viewport. */
export async function screenshots(page: Page, name: string): Promise<string[]> {
  mkdirSync(SHOTS, { recursive: true });
  const before = page.viewportSize() ?? DESKTOP;
  const files: string[] = [];
  for (const [label, size] of [['desktop', DESKTOP], ['phone', PHONE]] as const) {
    await page.setViewportSize(size);
    const file = join(SHOTS, `${name}-${label}.png`);
    await page.screenshot({ path: file, fullPage: true, animations: 'disabled', caret: 'hide' });
    files.push(file);
  }
  await page.setViewportSize(before);
  return files;
}

export interface Recorder {
  url: string;
  hits: string[];
  close(): Promise<void>;
}

const GIF = Buffer.from('R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==', 'base64');

/** An HTTP server on 127.0.0.1 that records each request path (a tracking pixel's view). */
export async function startRecorder(): Promise<Recorder> {
  const hits: string[] = [];
  const server: Server = createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': 'image/gif', 'cache-control': 'no-store' });
    res.end(GIF);
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hits,
    close: () => new Promise<void>((done) => {
      server.closeAllConnections();
      server.close(() => done());
    }),
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
