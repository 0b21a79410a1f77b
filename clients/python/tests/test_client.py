"""Every helper of the Python client against a live service, with mail sent over real SMTP."""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

from ephemail import (
    ConflictError,
    ConnectionFailedError,
    Email,
    Ephemail,
    EphemailError,
    EphemailTimeoutError,
    Inbox,
    InvalidRequestError,
    NoCodeError,
    NoLinkError,
    NotFoundError,
    RateLimitedError,
    UnauthorizedError,
    UnexpectedEmailError,
    id_at,
)
from support import later

SRC = str(Path(__file__).resolve().parents[1] / "src")
VERIFY_HTML = '<p>Your verification code is <b>559 120</b>.</p><p><a href="https://app.example/verify?t=9">Verify email</a></p>'


def test_create_inbox_gives_an_empty_address_at_the_default_domain(ephemail: Ephemail) -> None:
    inbox = ephemail.create_inbox()
    assert re.fullmatch(r"[a-z0-9]{10}@ephemail\.test", inbox.address)
    assert str(inbox) == inbox.address and repr(inbox) == f"Inbox({inbox.address!r})"
    assert inbox.emails() == []


def test_create_inbox_with_a_local_part_and_domain(ephemail: Ephemail, send_mail: Callable[..., None]) -> None:
    name = f"py{int(time.time() * 1000)}"
    inbox = ephemail.create_inbox(domain="ephemail.test", local_part=name)
    assert inbox.address == f"{name}@ephemail.test"
    send_mail(inbox.address, "hello", "hi")
    with pytest.raises(ConflictError) as taken:
        ephemail.create_inbox(local_part=name)
    assert taken.value.type == "address_in_use" and taken.value.status == 409
    with pytest.raises(InvalidRequestError) as bad:
        ephemail.create_inbox(domain="nowhere.example")
    assert bad.value.type == "invalid_request"
    assert inbox.clear() == 1


def test_wait_for_code_link_and_email_with_a_key_minted_on_the_first_wait(ephemail_url: str, send_mail: Callable[..., None]) -> None:
    mail = Ephemail(ephemail_url)
    inbox = mail.create_inbox()
    assert mail.api_key is None, "no key before a wait needs one"

    def app() -> None:
        send_mail(inbox.address, "Weekly news", "nothing to see")
        send_mail(inbox.address, "Please verify your email", "Your verification code is 559 120.", VERIFY_HTML)

    sending = later(0.3, app)
    t0 = time.monotonic()
    assert inbox.wait_for_code(subject="verify", timeout=20) == "559120"
    assert time.monotonic() - t0 < 10
    sending.join()
    assert re.fullmatch(r"eph_[A-Za-z0-9]{40}", mail.api_key or ""), "a key was minted for the held wait"
    key = mail.api_key
    assert inbox.wait_for_link(timeout=5) == "https://app.example/verify?t=9"
    assert inbox.wait_for_link(kind=None, subject="verify", timeout=5) == "https://app.example/verify?t=9"
    email = inbox.wait_for_email(subject="VERIFY", sender="example app", timeout=5)
    assert mail.api_key == key, "the key is reused"
    assert isinstance(email, Email)
    assert email.subject == "Please verify your email"
    assert email.sender == "Example App <no-reply@app.example>"
    assert email.mailed_by == "app.example"
    assert email.codes[0].value == "559120" and "559 120" in email.codes[0].context
    assert email.links[0].kind == "verify" and email.links[0].destination is None
    assert email.text_body is not None and "559 120" in email.text_body
    assert email.html_body is not None and "Verify email" in email.html_body
    assert email.to == inbox.address and email.cc == ""
    assert any(h.name.lower() == "subject" and h.value == email.subject for h in email.headers)
    assert email.attachments == [] and email.attachments_dropped == 0 and not email.has_attachments
    assert email.raw_url.endswith(f"/api/v1/emails/{email.id}/raw")
    assert email.data["id"] == email.id, "the object as received is kept"
    # the newest matching email, whatever else arrived
    assert inbox.wait_for_email(sender="app.example", timeout=5).subject == "Please verify your email"
    assert inbox.wait_for_email(subject="weekly", timeout=5).subject == "Weekly news"


def test_a_given_key_is_used_and_never_replaced(ephemail: Ephemail, ephemail_url: str, send_mail: Callable[..., None]) -> None:
    key = ephemail.ensure_key()
    assert ephemail.ensure_key() == key
    mail = Ephemail(ephemail_url, api_key=key)
    inbox = mail.create_inbox()
    send_mail(inbox.address, "Your code", "Your verification code is 4821.")
    assert inbox.wait_for_code(timeout=10) == "4821"
    assert mail.api_key == key
    with pytest.raises(UnauthorizedError) as bad:
        Ephemail(ephemail_url, api_key="eph_" + "x" * 40).inbox(inbox.address).wait_for_email(timeout=2)
    assert bad.value.type == "unauthorized" and bad.value.status == 401


def test_waits_look_at_mail_from_when_the_inbox_object_was_made_unless_given_since(ephemail: Ephemail, send_mail: Callable[..., None]) -> None:
    address = ephemail.create_inbox().address
    send_mail(address, "Old code", "Your verification code is 111 111.")
    first = ephemail.inbox(address).wait_for_email(since=datetime.now(timezone.utc) - timedelta(minutes=1), timeout=10)
    time.sleep(1.2)
    inbox = ephemail.inbox(address)  # made now: the old email is before its cursor (less a second)
    with pytest.raises(EphemailTimeoutError):
        inbox.wait_for_email(timeout=1)
    assert inbox.wait_for_code(since=datetime.now(timezone.utc) - timedelta(minutes=1), timeout=5) == "111111"
    sending = later(0.3, lambda: send_mail(address, "New code", "Your verification code is 222 222."))
    assert inbox.wait_for_code(timeout=10) == "222222"
    sending.join()
    # since as an email, its id, or id_at()
    assert inbox.wait_for_email(since=first, timeout=5).subject == "New code"
    assert inbox.wait_for_email(since=first.id, timeout=5).subject == "New code"
    with pytest.raises(EphemailTimeoutError):
        inbox.wait_for_email(since=id_at(), timeout=1)


def test_wait_for_email_times_out_within_its_timeout(ephemail: Ephemail) -> None:
    inbox = ephemail.inbox(f"quiet{int(time.time() * 1000)}@ephemail.test")
    t0 = time.monotonic()
    with pytest.raises(EphemailTimeoutError) as out:
        inbox.wait_for_email(subject="never", sender="nobody", timeout=1.5)
    elapsed = time.monotonic() - t0
    assert 0.9 <= elapsed < 5, elapsed
    assert out.value.type == "timeout" and isinstance(out.value, TimeoutError) and isinstance(out.value, EphemailError)
    assert str(out.value) == f'no email from "nobody" with subject "never" at {inbox.address} within 1.5 s'


def test_no_code_and_no_link_raise_with_the_email(ephemail: Ephemail, send_mail: Callable[..., None]) -> None:
    inbox = ephemail.create_inbox()
    send_mail(inbox.address, "Welcome", "Thanks for joining. Unsubscribe: https://app.example/unsubscribe?u=1")
    with pytest.raises(NoCodeError) as no_code:
        inbox.wait_for_code(timeout=10)
    assert no_code.value.type == "no_code" and no_code.value.email.subject == "Welcome"
    with pytest.raises(NoLinkError) as no_link:
        inbox.wait_for_link(kind="verify", timeout=5)
    assert no_link.value.type == "no_link" and "verify link" in str(no_link.value)
    with pytest.raises(NoLinkError):
        inbox.wait_for_link(kind=None, timeout=5)


def test_expect_no_email(ephemail: Ephemail, send_mail: Callable[..., None]) -> None:
    quiet = ephemail.create_inbox()
    t0 = time.monotonic()
    quiet.expect_no_email(1.2)
    assert 1.0 <= time.monotonic() - t0 < 5
    busy = ephemail.create_inbox()
    sending = later(0.3, lambda: send_mail(busy.address, "password changed", "Your password was changed."))
    with pytest.raises(UnexpectedEmailError) as out:
        busy.expect_no_email(5, subject="password")
    sending.join()
    assert isinstance(out.value, AssertionError) and out.value.type == "unexpected_email"
    assert out.value.email.subject == "password changed"
    # other mail does not count against a filter
    later(0.2, lambda: send_mail(busy.address, "newsletter", "hi")).join()
    busy.expect_no_email(1, subject="password")


def test_emails_clear_get_email_raw_and_attachments(ephemail: Ephemail, send_mail: Callable[..., None]) -> None:
    inbox = ephemail.create_inbox()
    pdf = b"%PDF-1.4 not really\x00\x01\x02"
    send_mail(inbox.address, "one", "first")
    send_mail(inbox.address, "two", "second", attachments=[("invoice.pdf", "application/pdf", pdf)])
    newest = inbox.wait_for_email(subject="two", timeout=10)
    summaries = inbox.emails()
    assert [s.subject for s in summaries] == ["two", "one"], "newest first"
    assert summaries[0].id == newest.id and summaries[0].has_attachments and summaries[0].mailed_by == "app.example"
    assert [s.subject for s in inbox.emails(limit=1)] == ["two"]
    assert [s.subject for s in inbox.emails(since=summaries[1])] == ["two"], "after a cursor, oldest first"
    assert [s.subject for s in inbox.emails(before=summaries[0].id)] == ["one"]
    full = ephemail.get_email(newest.id)
    assert full == newest
    (att,) = full.attachments
    assert (att.filename, att.content_type, att.size_bytes, att.content_id) == ("invoice.pdf", "application/pdf", len(pdf), None)
    assert att.download() == pdf
    raw = full.raw()
    assert isinstance(raw, bytes) and b"Subject: two" in raw and b"invoice.pdf" in raw
    assert inbox.clear() == 2
    assert inbox.emails() == [] and inbox.clear() == 0
    with pytest.raises(NotFoundError) as gone:
        ephemail.get_email(newest.id)
    assert gone.value.type == "not_found" and gone.value.status == 404 and gone.value.retry_after is None


def test_errors_carry_the_spec_type(ephemail: Ephemail, ephemail_url: str) -> None:
    with pytest.raises(NotFoundError) as other_domain:
        ephemail.inbox("someone@gmail.com").emails()
    assert other_domain.value.type == "not_found"
    with pytest.raises(InvalidRequestError) as bad_cursor:
        ephemail.inbox("x@ephemail.test").emails(since="not-an-id")
    assert bad_cursor.value.type == "invalid_request" and bad_cursor.value.status == 400
    with pytest.raises(NotFoundError):
        ephemail.raw_email("0190d5b0-0000-7000-8000-000000000000")
    # nothing listens on a port that was just free
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectionFailedError) as down:
        Ephemail(f"http://127.0.0.1:{port}").create_inbox()
    assert down.value.type == "connection_error" and isinstance(down.value, ConnectionError)


# -- 429 and retry-after, against a stand-in that answers 429 first ---------------------------------


@pytest.fixture
def limited() -> Iterator[Tuple[str, List[Tuple[str, float]], List[str]]]:
    """A stand-in service: POST /api/v1/inboxes answers 429 with the next retry-after of ``plan``
    (while any is left), then 201. Yields (url, requests as (path, time), plan)."""
    seen: List[Tuple[str, float]] = []
    plan: List[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("content-length") or 0))
            seen.append((self.path, time.monotonic()))
            body: Dict[str, Any]
            if plan:
                status, retry = 429, plan.pop(0)
                body = {"error": {"type": "rate_limited", "message": "Too many requests; retry later", "docs": "x"}}
            else:
                status, retry = 201, None
                body = {"data": {"address": "stub@ephemail.test", "local_part": "stub", "domain": "ephemail.test", "email_ttl_seconds": 3600}}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            if retry is not None:
                self.send_header("retry-after", retry)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen, plan
    finally:
        server.shutdown()
        server.server_close()


def test_429_is_retried_after_retry_after(limited: Tuple[str, List[Tuple[str, float]], List[str]]) -> None:
    url, seen, plan = limited
    plan.extend(["1", "1"])
    inbox = Ephemail(url).create_inbox()
    assert inbox.address == "stub@ephemail.test"
    assert len(seen) == 3
    assert seen[1][1] - seen[0][1] >= 0.95 and seen[2][1] - seen[1][1] >= 0.95, "each retry waited its retry-after"


def test_429_whose_retry_after_does_not_fit_is_raised(limited: Tuple[str, List[Tuple[str, float]], List[str]]) -> None:
    url, seen, plan = limited
    plan.append("86400")
    t0 = time.monotonic()
    with pytest.raises(RateLimitedError) as out:
        Ephemail(url).create_inbox()
    assert time.monotonic() - t0 < 5
    assert out.value.type == "rate_limited" and out.value.status == 429 and out.value.retry_after == 86400
    assert len(seen) == 1


# -- the plugin's fixtures ---------------------------------------------------------------------------


def test_the_fixtures_give_a_client_and_a_fresh_inbox(ephemail: Ephemail, ephemail_inbox: Inbox, ephemail_url: str) -> None:
    assert ephemail.base_url == ephemail_url
    assert ephemail_inbox.client is ephemail
    assert ephemail_inbox.emails() == []


@pytest.mark.parametrize("how", ["--ephemail-url", "EPHEMAIL_URL"])
def test_a_user_suite_with_the_plugin(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, service: Any, how: str) -> None:
    """A user's suite: the fixtures from the plugin, the service named by the option or the
    environment, and the inbox emptied after each test."""
    pytester.makeconftest(
        f"""
        import pytest
        pytest_plugins = ["ephemail.pytest_plugin"]

        @pytest.fixture
        def smtp():
            return ({service.smtp_host!r}, {service.smtp_port!r})
        """
    )
    pytester.makepyfile(
        test_user="""
        import smtplib
        from email.message import EmailMessage

        ADDRESSES = []

        def test_signup(ephemail, ephemail_inbox, smtp):
            m = EmailMessage()
            m["From"], m["To"], m["Subject"] = "a@app.example", ephemail_inbox.address, "Verify"
            m.set_content("Your verification code is 730 114.")
            with smtplib.SMTP(*smtp) as s:
                s.send_message(m)
            assert ephemail_inbox.wait_for_code(timeout=10) == "730114"
            ADDRESSES.append(ephemail_inbox.address)

        def test_after(ephemail):
            assert ephemail.inbox(ADDRESSES[0]).emails() == []
        """
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p))
    monkeypatch.delenv("EPHEMAIL_API_KEY", raising=False)
    if how == "EPHEMAIL_URL":
        monkeypatch.setenv("EPHEMAIL_URL", service.http)
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    else:
        monkeypatch.delenv("EPHEMAIL_URL", raising=False)
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", "--ephemail-url", service.http)
    result.assert_outcomes(passed=2)
