// The language view's rule (src/domain/language.ts): a paragraph is named, a line too short or too
// close between two languages is null rather than a wrong guess.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { detectLanguage } from '../../src/domain/language.ts';

test('paragraphs are named by their ISO 639-1 code', async () => {
  assert.equal(await detectLanguage('Hi there, thanks for signing up. Please confirm your email address by clicking the link below.'), 'en');
  assert.equal(await detectLanguage('Bonjour, merci de votre inscription. Veuillez confirmer votre adresse e-mail en cliquant sur le lien ci-dessous.'), 'fr');
  assert.equal(await detectLanguage('Your order has shipped and will arrive on Tuesday. Track it here.'), 'en');
});

test('a short line whose best guess does not clearly lead is null, not a wrong language', async () => {
  // franc alone scores this French 1, English 0.89
  assert.equal(await detectLanguage('Your verification code is 482913. It expires in 10 minutes.'), null);
  assert.equal(await detectLanguage('Welcome to Acme! Your account is ready.'), null, 'under 40 letters');
  assert.equal(await detectLanguage('https://example.com/verify?token=abc 123456 user@example.com'), null, 'links, addresses and digits are not text');
});
