// The realistic message of the ingest benchmarks: a 5 KB
// multipart/alternative mail as transactional senders send it — plain and ~1.6 KB HTML parts in
// quoted-printable UTF-8, RFC 2047 encoded From and Subject, three Received headers, a
// DKIM-Signature and List-Unsubscribe. CRLF lines, not dot-stuffed.

const qp = (s: string) =>
  Buffer.from(s, 'utf8').toString('latin1')
    .replace(/[^\x20-\x7e\n]|=/g, (c) => `=${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`)
    .split('\n')
    .map((line) => line.replace(/.{72}(?=.)/g, '$&=\r\n'))
    .join('\r\n');

export function realisticMessage(): Buffer {
  const html = `<!doctype html><html><head><meta charset="utf-8"><style>.btn{background:#2563eb;color:#fff;padding:12px 20px;border-radius:6px;text-decoration:none}</style></head><body style="margin:0;background:#f4f4f5"><table width="100%" cellpadding="0" cellspacing="0"><tr><td align="center"><table width="600" style="background:#fff;font-family:Helvetica,Arial,sans-serif;color:#111"><tr><td style="padding:32px"><h1 style="font-size:22px;margin:0 0 16px">Bestätigen Sie Ihre E-Mail-Adresse</h1><p style="font-size:15px;line-height:1.5">Hallo Jürgen, vielen Dank für Ihre Anmeldung bei Beispiel. Ihr Bestätigungscode lautet <b style="letter-spacing:4px">559 120</b>. Er ist 15 Minuten gültig.</p><p style="margin:24px 0"><a class="btn" href="https://beispiel.example/verify?token=c0ffee&amp;utm_source=email">E-Mail-Adresse bestätigen</a></p><p style="font-size:13px;color:#555">Falls Sie sich nicht angemeldet haben, ignorieren Sie diese E-Mail einfach.</p></td></tr><tr><td style="padding:16px 32px;font-size:12px;color:#6b7280">Beispiel GmbH · Musterstraße 1 · 10115 Berlin · <a href="https://beispiel.example/unsubscribe?u=42">Abmelden</a> · <a href="https://beispiel.example/privacy">Datenschutz</a></td></tr></table></td></tr></table></body></html>`;
  const text = 'Hallo Jürgen,\n\nvielen Dank für Ihre Anmeldung bei Beispiel. Ihr Bestätigungscode lautet 559 120.\nEr ist 15 Minuten gültig.\n\nOder bestätigen Sie hier: https://beispiel.example/verify?token=c0ffee\n\nFalls Sie sich nicht angemeldet haben, ignorieren Sie diese E-Mail einfach.\n\n-- \nBeispiel GmbH, Musterstraße 1, 10115 Berlin\nAbmelden: https://beispiel.example/unsubscribe?u=42\n'.repeat(4);
  return Buffer.from([
    'Received: from mail-out-7.beispiel.example (mail-out-7.beispiel.example [192.0.2.17]) by mx.ephemail.test (Postfix) with ESMTPS id 4Nq2Xk0hQz; Tue, 24 Nov 2026 10:00:01 +0000 (UTC)',
    'Received: from app-3.internal.beispiel.example (app-3.internal.beispiel.example [10.1.2.3]) by mail-out-7.beispiel.example with ESMTP id 8F3A2C; Tue, 24 Nov 2026 10:00:00 +0000',
    'Received: by app-3.internal.beispiel.example (Postfix, from userid 1000) id 5B1E7; Tue, 24 Nov 2026 10:00:00 +0000 (UTC)',
    'DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=beispiel.example; s=mail2026; t=1795600800;',
    '\th=from:to:subject:date:message-id:list-unsubscribe:mime-version; bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=;',
    '\tb=dzdVyOfAKCdLXdJOc9G2q8LoXSlEniSbav+yuU4zGeeruD00lszZVoG4ZHRNiYzR2F0aGVyIHRoYW4gYmx1ZSBza2llcyBhbmQgZ3JlZW4gZmllbGRzIHRoaXMgaXMgbm90IGEgcmVhbCBzaWduYXR1cmU=',
    'From: =?utf-8?q?Beispiel_Anmeldung?= <no-reply@beispiel.example>',
    'To: user@ephemail.test',
    'Subject: =?utf-8?b?QmVzdMOkdGlnZW4gU2llIElocmUgRS1NYWlsLUFkcmVzc2U=?=',
    'Date: Tue, 24 Nov 2026 10:00:00 +0000',
    'Message-ID: <20261124100000.5B1E7@app-3.internal.beispiel.example>',
    'List-Unsubscribe: <https://beispiel.example/unsubscribe?u=42>, <mailto:unsubscribe@beispiel.example?subject=42>',
    'List-Unsubscribe-Post: List-Unsubscribe=One-Click',
    'MIME-Version: 1.0',
    'Content-Type: multipart/alternative; boundary="=_alt_5B1E7"',
    '',
    '--=_alt_5B1E7',
    'Content-Type: text/plain; charset=utf-8',
    'Content-Transfer-Encoding: quoted-printable',
    '',
    qp(text),
    '--=_alt_5B1E7',
    'Content-Type: text/html; charset=utf-8',
    'Content-Transfer-Encoding: quoted-printable',
    '',
    qp(html),
    '--=_alt_5B1E7--',
    '',
  ].join('\r\n'), 'latin1');
}
