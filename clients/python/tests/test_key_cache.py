"""The key cache (``ephemail.key_cache``): a key the client minted for a base URL is remembered in the
user's cache file (mode 600) and reused by the next client, so a re-run mints nothing; a key given
(``api_key``, ``EPHEMAIL_API_KEY`` in the plugin) wins; a remembered key the service does not know is
replaced; a refused mint says what to do."""

from __future__ import annotations

import json
import re
import stat
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

from ephemail import Ephemail, KeyCache, RateLimitedError, key_cache_path
from test_answers import Stand, json_answer


@pytest.fixture
def mint() -> Iterator[Stand]:
    """A stand-in service that mints eph_…1, eph_…2, … (each POST /api/v1/keys is counted in ``seen``)."""
    stand = Stand("127.0.0.1")
    minted: List[str] = []

    def answer(h: BaseHTTPRequestHandler) -> None:
        if h.command == "POST" and h.path == "/api/v1/keys":
            minted.append(f"eph_{len(minted) + 1:040d}")
            json_answer(201, {"data": {"api_key": minted[-1]}})(h)
        else:
            json_answer(404, {"error": {"type": "not_found", "message": "no", "docs": ""}})(h)

    stand.answer = answer
    try:
        yield stand
    finally:
        stand.close()


def mints(stand: Stand) -> int:
    return sum(1 for method, path, _ in stand.seen if (method, path) == ("POST", "/api/v1/keys"))


def test_a_minted_key_is_remembered_mode_600_and_the_next_client_mints_nothing(mint: Stand, tmp_path: Path) -> None:
    cache = KeyCache(tmp_path / "cache" / "ephemail" / "keys.json")
    first = Ephemail(mint.url + "/", key_cache=cache)
    key = first.ensure_key()
    assert key == "eph_" + "0" * 39 + "1" and mints(mint) == 1
    assert stat.S_IMODE(cache.path.stat().st_mode) == 0o600  # type: ignore[union-attr]
    assert stat.S_IMODE(cache.path.parent.stat().st_mode) == 0o700  # type: ignore[union-attr]
    data = json.loads(cache.path.read_text())  # type: ignore[union-attr]
    assert data["version"] == 1 and data["keys"][mint.url]["api_key"] == key
    # the next run: a new client for the same service uses it, mints nothing
    again = Ephemail(mint.url, key_cache=KeyCache(tmp_path / "cache" / "ephemail" / "keys.json"))
    assert again.api_key is None, "nothing is read before a key is needed"
    assert again.ensure_key() == key and mints(mint) == 1
    # a key given wins, and is not remembered
    given = "eph_" + "g" * 40
    assert Ephemail(mint.url, api_key=given, key_cache=cache).ensure_key() == given and mints(mint) == 1
    assert json.loads(cache.path.read_text())["keys"][mint.url]["api_key"] == key  # type: ignore[union-attr]
    # key_cache=False: minted, not remembered
    assert Ephemail(mint.url, key_cache=False).ensure_key() != key and mints(mint) == 2
    assert json.loads(cache.path.read_text())["keys"][mint.url]["api_key"] == key  # type: ignore[union-attr]


def test_the_cache_file_is_named_by_the_environment(mint: Stand, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert key_cache_path({"EPHEMAIL_KEY_CACHE": "/x/k.json", "XDG_CACHE_HOME": "/y"}) == Path("/x/k.json")
    assert key_cache_path({"XDG_CACHE_HOME": "/y"}) == Path("/y/ephemail/keys.json")
    assert key_cache_path({}) == Path.home() / ".cache" / "ephemail" / "keys.json"
    assert key_cache_path({"XDG_CACHE_HOME": "relative"}) == Path.home() / ".cache" / "ephemail" / "keys.json"
    assert key_cache_path({"EPHEMAIL_KEY_CACHE": "off"}) is None
    # the default client: $XDG_CACHE_HOME/ephemail/keys.json
    monkeypatch.delenv("EPHEMAIL_KEY_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    key = Ephemail(mint.url).ensure_key()
    assert Ephemail(mint.url).ensure_key() == key and mints(mint) == 1
    assert json.loads((tmp_path / "ephemail" / "keys.json").read_text())["keys"][mint.url]["api_key"] == key


def test_a_remembered_key_the_service_does_not_know_is_replaced(ephemail_url: str, send_mail: Callable[..., None], tmp_path: Path) -> None:
    cache = KeyCache(tmp_path / "keys.json")
    stale = "eph_" + "s" * 40
    cache.set(ephemail_url, stale)
    mail = Ephemail(ephemail_url, key_cache=cache)
    inbox = mail.create_inbox()
    send_mail(inbox.address, "Verify your email", "Your verification code is 482913.")
    assert inbox.wait_for_code(subject="verify", timeout=20) == "482913"
    assert re.fullmatch(r"eph_[A-Za-z0-9]{40}", mail.api_key or "") and mail.api_key != stale
    assert cache.get(ephemail_url) == mail.api_key, "the new key is remembered in place of the stale one"
    # and the next client uses the new one as it is
    assert Ephemail(ephemail_url, key_cache=cache).ensure_key() == mail.api_key


def test_a_refused_mint_says_what_to_do(tmp_path: Path) -> None:
    stand = Stand("127.0.0.1")
    message = "This IP address already created 3 keys in the last 24 hours; the next one can be created in 3600 s. Reuse a key you have."

    def refuse(h: BaseHTTPRequestHandler) -> None:
        data = json.dumps({"error": {"type": "rate_limited", "message": message, "docs": ""}}).encode()
        h.send_response(429)
        h.send_header("content-type", "application/json")
        h.send_header("retry-after", "3600")
        h.send_header("content-length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    stand.answer = refuse
    try:
        with pytest.raises(RateLimitedError) as info:
            Ephemail(stand.url, key_cache=KeyCache(tmp_path / "keys.json")).ensure_key()
    finally:
        stand.close()
    said = str(info.value)
    m = re.fullmatch(re.escape(message) + r" Set EPHEMAIL_API_KEY \(or pass api_key\) to a key you have, or try again after (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\.", said)
    assert m, said
    at = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert abs(at - (datetime.now(timezone.utc) + timedelta(seconds=3600))) < timedelta(seconds=30)
    assert info.value.status == 429 and info.value.retry_after == 3600
    assert not (tmp_path / "keys.json").exists(), "nothing remembered"
