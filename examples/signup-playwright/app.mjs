// A tiny sign-up app for the example: enter an email, get a 6-digit code by email (sent with
// nodemailer to the SMTP server in SMTP_PORT), type it, see "verified". Not part of the service.
import { randomInt } from 'node:crypto';
import { createServer } from 'node:http';
import nodemailer from 'nodemailer';

const port = Number(process.env.APP_PORT ?? 3000);
const smtp = nodemailer.createTransport({ host: '127.0.0.1', port: Number(process.env.SMTP_PORT ?? 1025), secure: false, ignoreTLS: true });
const pending = new Map(); // email -> code
const page = (body) => `<!doctype html><html><head><meta charset="utf-8"><title>Example sign-up</title></head><body>${body}</body></html>`;
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

createServer(async (req, res) => {
  const body = await new Promise((r) => {
    let b = '';
    req.on('data', (d) => (b += d));
    req.on('end', () => r(new URLSearchParams(b)));
  });
  res.setHeader('content-type', 'text/html; charset=utf-8');
  if (req.method === 'POST' && req.url === '/signup') {
    const email = body.get('email') ?? '';
    const code = String(randomInt(100000, 1000000));
    pending.set(email, code);
    await smtp.sendMail({
      from: 'Example App <no-reply@app.example>', to: email, subject: 'Verify your email for Example App',
      text: `Welcome! Your verification code is ${code.slice(0, 3)} ${code.slice(3)}. It expires in 10 minutes.`,
      html: `<p>Welcome!</p><p>Your verification code is <b style="letter-spacing:4px">${code}</b>.</p><p>It expires in 10 minutes.</p>`,
    });
    return res.end(page(`<p>We sent a code to ${esc(email)}.</p><form method="post" action="/verify"><input type="hidden" name="email" value="${esc(email)}"><label>Code <input name="code" id="code"></label><button>Verify</button></form>`));
  }
  if (req.method === 'POST' && req.url === '/verify') {
    const ok = pending.get(body.get('email') ?? '') === (body.get('code') ?? '').trim();
    return res.end(page(ok ? '<h1 id="result">verified</h1>' : '<h1 id="result">wrong code</h1>'));
  }
  res.end(page('<form method="post" action="/signup"><label>Email <input name="email" id="email" type="email"></label><button>Sign up</button></form>'));
}).listen(port, '127.0.0.1', () => console.log(`example app on http://127.0.0.1:${port}`));
