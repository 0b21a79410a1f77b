// The example sign-up flow, end to end: a real browser signs up with a fresh ephemail inbox, the
// test waits for the verification email, types its code and sees "verified".
import { expect, test } from '@ephemail/client/playwright';

test('sign up with a throwaway inbox and verify the code', async ({ page, inbox }) => {
  await page.goto('/');
  await page.fill('#email', inbox.address);
  await page.click('text=Sign up');
  await expect(page.locator('body')).toContainText('We sent a code');
  const code = await inbox.waitForCode({ subject: 'Verify your email', timeoutMs: 20_000 });
  expect(code).toMatch(/^\d{6}$/);
  await page.fill('#code', code);
  await page.click('text=Verify');
  await expect(page.locator('#result')).toHaveText('verified');
});
