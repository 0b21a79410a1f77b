"""pytest fixtures for ephemail, loaded by pytest when the package is installed (entry point
``pytest11``); without installing, add ``pytest_plugins = ["ephemail.pytest_plugin"]`` to your
top-level ``conftest.py``.

- ``ephemail``: the client (session-wide), for the service at ``--ephemail-url``, ``EPHEMAIL_URL``,
  the ``ephemail_url`` ini option, or http://localhost:8025; ``EPHEMAIL_API_KEY`` if set, else the key
  minted for that service before (the user's key cache, ``ephemail.key_cache``), else one minted on
  the first wait, reused for the session and remembered for the next run.
- ``ephemail_inbox``: a fresh, empty inbox for each test, emptied after it.
- ``ephemail_url``: the service's address; override this fixture to start a service yourself.
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest

from .client import DEFAULT_URL, Ephemail, Inbox


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ephemail", "ephemail throwaway inboxes")
    group.addoption("--ephemail-url", default=None, help=f"the ephemail service (default: EPHEMAIL_URL, the ephemail_url ini option, or {DEFAULT_URL})")
    parser.addini("ephemail_url", help="the ephemail service, when neither --ephemail-url nor EPHEMAIL_URL is given", default="")


@pytest.fixture(scope="session")
def ephemail_url(pytestconfig: pytest.Config) -> str:
    """The service's address: --ephemail-url, EPHEMAIL_URL, the ephemail_url ini option, or the default."""
    return str(pytestconfig.getoption("ephemail_url") or os.environ.get("EPHEMAIL_URL") or pytestconfig.getini("ephemail_url") or DEFAULT_URL)


@pytest.fixture(scope="session")
def ephemail(ephemail_url: str) -> Ephemail:
    """The client for the session (one API key for all its waits)."""
    return Ephemail(ephemail_url, api_key=os.environ.get("EPHEMAIL_API_KEY") or None)


@pytest.fixture
def ephemail_inbox(ephemail: Ephemail) -> Iterator[Inbox]:
    """A fresh, empty inbox for this test; its mail is deleted after the test."""
    inbox = ephemail.create_inbox()
    yield inbox
    inbox.clear()
