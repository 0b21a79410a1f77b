"""A sign-up test as a user writes it: the app under test (signup_app.py, sending with smtplib) mails
a code and a link; the test (urllib standing in for a browser) signs up with a fresh inbox from the
``ephemail_inbox`` fixture, waits for the code, types it, and is verified; then by the link."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from typing import Iterator, Tuple

import pytest

from ephemail import Inbox
from signup_app import SignupApp


@pytest.fixture
def app(service: object) -> Iterator[SignupApp]:
    with SignupApp(getattr(service, "smtp_host"), getattr(service, "smtp_port")) as a:
        yield a


def post(url: str, **form: str) -> Tuple[int, str]:
    data = urllib.parse.urlencode(form).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, method="POST"), timeout=30) as res:
            return res.status, res.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def get(url: str) -> Tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as res:
            return res.status, res.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_sign_up_and_verify_with_the_code(app: SignupApp, ephemail_inbox: Inbox) -> None:
    assert post(f"{app.url}/signup", email=ephemail_inbox.address) == (200, f"we sent a code to {ephemail_inbox.address}")
    code = ephemail_inbox.wait_for_code(subject="verify", timeout=30)
    assert code == app.codes[ephemail_inbox.address]
    assert post(f"{app.url}/verify", email=ephemail_inbox.address, code="000000" if code != "000000" else "111111") == (400, "wrong code")
    assert post(f"{app.url}/verify", email=ephemail_inbox.address, code=code) == (200, "verified")
    assert app.verified[ephemail_inbox.address]


def test_sign_up_and_verify_with_the_link(app: SignupApp, ephemail_inbox: Inbox) -> None:
    post(f"{app.url}/signup", email=ephemail_inbox.address)
    link = ephemail_inbox.wait_for_link(kind="verify", subject="Verify your email", sender="Example App", timeout=30)
    assert link.startswith(f"{app.url}/verify?token=")
    assert get(link) == (200, "verified")
    assert app.verified[ephemail_inbox.address]


def test_a_second_sign_up_waits_for_the_new_code(app: SignupApp, ephemail_inbox: Inbox) -> None:
    post(f"{app.url}/signup", email=ephemail_inbox.address)
    first = ephemail_inbox.wait_for_email(subject="verify", timeout=30)
    post(f"{app.url}/signup", email=ephemail_inbox.address)  # "resend the code"
    second = ephemail_inbox.wait_for_code(subject="verify", since=first, timeout=30)
    assert second == app.codes[ephemail_inbox.address]
    assert post(f"{app.url}/verify", email=ephemail_inbox.address, code=second) == (200, "verified")
