"""A tiny sign-up app for the tests (the app under test, not part of ephemail): POST /signup with an
email sends a verification email over SMTP with smtplib (a 6-digit code and a verify link);
POST /verify with the email and the code, or GET the link, answers "verified" or "wrong code"."""

from __future__ import annotations

import secrets
import smtplib
import threading
import urllib.parse
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, Tuple


class SignupApp:
    def __init__(self, smtp_host: str, smtp_port: int) -> None:
        self.smtp = (smtp_host, smtp_port)
        self.codes: Dict[str, str] = {}  # email -> code
        self.tokens: Dict[str, str] = {}  # token -> email
        self.verified: Dict[str, bool] = {}
        app = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def _answer(self, status: int, text: str) -> None:
                body = text.encode("utf-8")
                self.send_response(status)
                self.send_header("content-type", "text/plain; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("content-length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(length).decode("utf-8"))
                email = (form.get("email") or [""])[0]
                if self.path == "/signup":
                    app.sign_up(email)
                    return self._answer(200, f"we sent a code to {email}")
                if self.path == "/verify":
                    ok = app.codes.get(email) == (form.get("code") or [""])[0].strip()
                    app.verified[email] = app.verified.get(email, False) or ok
                    return self._answer(200 if ok else 400, "verified" if ok else "wrong code")
                self._answer(404, "not found")

            def do_GET(self) -> None:  # noqa: N802
                url = urllib.parse.urlparse(self.path)
                if url.path == "/verify":
                    token = (urllib.parse.parse_qs(url.query).get("token") or [""])[0]
                    email = app.tokens.get(token)
                    if email:
                        app.verified[email] = True
                    return self._answer(200 if email else 400, "verified" if email else "wrong link")
                self._answer(404, "not found")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "SignupApp":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def sign_up(self, email: str) -> Tuple[str, str]:
        code = f"{secrets.randbelow(900000) + 100000}"
        token = secrets.token_urlsafe(16)
        self.codes[email] = code
        self.tokens[token] = email
        link = f"{self.url}/verify?token={token}"
        msg = EmailMessage()
        msg["From"] = "Example App <no-reply@app.example>"
        msg["To"] = email
        msg["Subject"] = "Verify your email for Example App"
        msg.set_content(f"Welcome! Your verification code is {code[:3]} {code[3:]}.\n\nOr open {link} to verify your email.\n")
        msg.add_alternative(
            f'<p>Welcome!</p><p>Your verification code is <b>{code}</b>.</p><p><a href="{link}">Verify email</a></p>',
            subtype="html",
        )
        with smtplib.SMTP(*self.smtp, timeout=30) as smtp:
            smtp.send_message(msg)
        return code, link
