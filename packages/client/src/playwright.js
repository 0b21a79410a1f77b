// A Playwright fixture: `inbox` is a fresh ephemail inbox for each test (and `ephemail` the client).
//   import { test, expect } from '@ephemail/client/playwright';
//   test('sign up', async ({ page, inbox }) => { …; const code = await inbox.waitForCode(); … });
// The service is EPHEMAIL_URL (default http://localhost:8025); @playwright/test is a peer dependency.
import { test as base, expect } from '@playwright/test';
import { createEphemail } from './index.js';

export const test = base.extend({
  // eslint-disable-next-line no-empty-pattern
  ephemail: async ({}, use) => {
    await use(createEphemail({ baseUrl: process.env.EPHEMAIL_URL ?? 'http://localhost:8025', apiKey: process.env.EPHEMAIL_API_KEY }));
  },
  inbox: async ({ ephemail }, use) => {
    const inbox = await ephemail.createInbox();
    await use(inbox);
    await inbox.clear().catch(() => undefined);
  },
});

export { expect };
