// Runs the example against a real ephemail (npm start) and the tiny app, both started by Playwright,
// in Debian's Chromium (never a downloaded browser). Ports come from the environment (the test in
// `npm test` picks free ones).
import { defineConfig } from '@playwright/test';

const HTTP = Number(process.env.EPHEMAIL_HTTP_PORT ?? 8025);
const SMTP = Number(process.env.EPHEMAIL_SMTP_PORT ?? 1025);
const APP = Number(process.env.APP_PORT ?? 3000);
process.env.EPHEMAIL_URL = `http://127.0.0.1:${HTTP}`;

export default defineConfig({
  testDir: '.',
  timeout: 60_000,
  reporter: 'list',
  use: {
    baseURL: `http://127.0.0.1:${APP}`,
    launchOptions: { executablePath: process.env.EPHEMAIL_CHROMIUM ?? '/usr/bin/chromium', args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update'] },
  },
  webServer: [
    {
      command: 'node ../../bin/ephemail.js serve',
      url: `http://127.0.0.1:${HTTP}/readyz`,
      env: { EPHEMAIL_HTTP_PORT: String(HTTP), EPHEMAIL_SMTP_PORT: String(SMTP), EPHEMAIL_STORE: 'sqlite::memory:', EPHEMAIL_LOG_LEVEL: 'warn' },
      reuseExistingServer: false,
      timeout: 60_000,
    },
    {
      command: 'node app.mjs',
      url: `http://127.0.0.1:${APP}/`,
      env: { APP_PORT: String(APP), SMTP_PORT: String(SMTP) },
      reuseExistingServer: false,
    },
  ],
});
