"""The client: an ``Ephemail`` for one service, an ``Inbox`` per address, and waits built on the
service's ``GET /api/v1/inboxes/{address}/latest?wait=`` (held requests, no polling storm), looped
within a total timeout, honouring ``retry-after`` on 429. Standard library only (urllib, json).

Every answer is read through one opener that follows redirects only within the service's origin
(a redirect elsewhere raises ``RedirectRefusedError``: the API key is never sent to another host),
and every body is read up to ``max_body_bytes`` (``ResponseTooLargeError`` beyond)."""

from __future__ import annotations

import http.client
import json
import math
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union, cast

from . import __version__
from .errors import (
    ConnectionFailedError,
    EphemailError,
    EphemailTimeoutError,
    InvalidResponseError,
    NoCodeError,
    NoLinkError,
    RedirectRefusedError,
    ResponseTooLargeError,
    UnexpectedEmailError,
    api_error,
)
from .key_cache import KeyCache
from .models import Email, EmailSummary, convert

__all__ = ["Ephemail", "Inbox", "Operation", "OPERATIONS", "ERROR_FIELDS", "DEFAULT_URL", "DEFAULT_MAX_BODY_BYTES", "id_at", "ACTION_LINK_KINDS"]

DEFAULT_URL = "http://localhost:8025"

#: The largest answer body the client reads unless ``max_body_bytes`` says otherwise: 64 MiB.
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024

#: Bytes read from a body at a time.
_CHUNK = 64 * 1024

#: The link kinds ``wait_for_link(kind=None)`` takes: the ones a sign-up or sign-in test follows.
ACTION_LINK_KINDS = ("verify", "reset_password", "login")

#: Longest ``wait`` the service holds a request (seconds).
_MAX_WAIT = 30


@dataclass(frozen=True)
class Operation:
    """One API call the client makes and what it reads from the answer: ``pointer`` is the path into
    the JSON body (``()`` for a raw-bytes answer), ``result`` the type read there (a model,
    ``List[…]``, ``Optional[…]``, str or int; ``bytes`` for raw answers)."""

    method: str
    path: str
    status: int
    pointer: Tuple[str, ...]
    result: Any


#: Every operation the client performs: the only places it reads a response from.
#: ``tests/test_contract.py`` checks each against the live OpenAPI document.
OPERATIONS: Dict[str, Operation] = {
    "mint_key": Operation("POST", "/api/v1/keys", 201, ("data", "api_key"), str),
    "create_inbox": Operation("POST", "/api/v1/inboxes", 201, ("data", "address"), str),
    "list_emails": Operation("GET", "/api/v1/inboxes/{address}/emails", 200, ("data",), List[EmailSummary]),
    "latest": Operation("GET", "/api/v1/inboxes/{address}/latest", 200, ("data",), Optional[Email]),
    "clear": Operation("DELETE", "/api/v1/inboxes/{address}/emails", 200, ("data", "deleted"), int),
    "get_email": Operation("GET", "/api/v1/emails/{id}", 200, ("data",), Email),
    "raw_email": Operation("GET", "/api/v1/emails/{id}/raw", 200, (), bytes),
    "download_attachment": Operation("GET", "/api/v1/emails/{id}/attachments/{attachment_id}", 200, (), bytes),
}

#: What the client reads from an error answer (the ``Error`` component), and the header it honours on 429.
ERROR_FIELDS: Tuple[Tuple[str, ...], ...] = (("error", "type"), ("error", "message"))
RETRY_AFTER = "retry-after"


def id_at(when: Union[float, datetime, None] = None) -> str:
    """A UUIDv7 made from a time (epoch seconds or a datetime; default now): a ``since`` cursor
    meaning "only mail from then on". The service compares ids by order, so any UUIDv7 works."""
    if when is None:
        seconds = time.time()
    elif isinstance(when, datetime):
        seconds = (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()
    else:
        seconds = float(when)
    t = format(max(0, int(seconds * 1000)), "012x")
    return f"{t[:8]}-{t[8:]}-7000-8000-000000000000"


Since = Union[str, datetime, EmailSummary, Email, None]


def _cursor(since: Since) -> Optional[str]:
    if since is None or isinstance(since, str):
        return since
    if isinstance(since, (Email, EmailSummary)):
        return since.id
    return id_at(since)


def _origin(url: str) -> Tuple[str, str, Optional[int]]:
    """(scheme, host, port) of a URL, the port made explicit: what "the same origin" compares."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port if port is not None else {"http": 80, "https": 443}.get(scheme)


def _size(n: int) -> str:
    mib, kib = 1024 * 1024, 1024
    return f"{n // mib} MiB" if n % mib == 0 else f"{n // kib} KiB" if n % kib == 0 else f"{n} bytes"


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to the origin of the request it answers; raises
    ``RedirectRefusedError`` for any other, before anything (the key above all) is sent there."""

    max_redirections = 5

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Optional[urllib.request.Request]:
        if _origin(newurl) != _origin(req.full_url):
            fp.close()
            target = urllib.parse.urlsplit(newurl)
            where = f"{target.scheme}://{target.netloc}"
            raise RedirectRefusedError(
                f"{req.get_method()} {urllib.parse.urlsplit(req.full_url).path}: the service redirected to another origin ({where}); "
                "refused, so the API key is not sent there (point the client at the address the service answers on)",
                status=code,
                location=newurl,
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _read_capped(res: Any, limit: int, where: str, status: int) -> bytes:
    """The body of ``res`` (a response or an ``HTTPError``), at most ``limit`` bytes: read in chunks,
    refused at once when its ``content-length`` is larger, or as soon as more arrives."""
    too_large = ResponseTooLargeError(f"{where}: the service's answer is larger than {_size(limit)} (max_body_bytes); not read", status=status)
    declared = (res.headers.get("content-length") or "").strip() if res.headers else ""
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: List[bytes] = []
    total = 0
    while True:
        try:
            chunk = res.read(min(_CHUNK, limit + 1 - total))
        except (http.client.IncompleteRead, ConnectionError, socket.timeout) as e:
            raise ConnectionFailedError(f"{where}: the service's answer was cut off ({type(e).__name__})") from None
        if not chunk:
            if declared.isdigit() and total < int(declared):
                # read(amt) ends quietly at a closed connection: the length it promised says it was cut
                raise ConnectionFailedError(f"{where}: the service's answer was cut off ({total} of {declared} bytes)")
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise too_large
        chunks.append(chunk)


class Ephemail:
    """A client for one ephemail service.

    ``api_key``: a free key (``POST /api/v1/keys``); without one, the first wait uses the key minted
    for this base URL before (the user's key cache, ``ephemail.key_cache``), else mints one, reuses it
    and remembers it (``api_key`` then shows it). ``key_cache``: where minted keys are remembered
    (default: the user's cache file; ``False``: nowhere; or a ``KeyCache``). ``timeout``: seconds one HTTP request may take
    (a held wait adds its own seconds). ``max_body_bytes``: the largest answer body read (default
    64 MiB); a larger one raises ``ResponseTooLargeError``.

    Redirects are followed only within the service's origin (scheme, host, port); one to another
    origin raises ``RedirectRefusedError`` and nothing is sent there."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        api_key: Optional[str] = None,
        timeout: float = 30.0,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        key_cache: Union[bool, KeyCache] = True,
    ) -> None:
        if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes <= 0:
            raise ValueError(f"max_body_bytes wants a whole number of bytes above 0, got {max_body_bytes!r}")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_body_bytes = max_body_bytes
        self._api_key = api_key or None
        self._minting = threading.Lock()
        #: The key came from the key cache: a 401 to it means it is gone (revoked, a new store): mint again.
        self._key_from_cache = False
        self._key_cache: Optional[KeyCache] = key_cache if isinstance(key_cache, KeyCache) else KeyCache() if key_cache else None
        self._opener = urllib.request.build_opener(_SameOriginRedirects())

    def __repr__(self) -> str:
        return f"Ephemail({self.base_url!r})"

    @property
    def api_key(self) -> Optional[str]:
        """The key in use: the one given, or the one minted by the first wait; None before that."""
        return self._api_key

    # -- the one HTTP path -------------------------------------------------------------------

    def _request(
        self,
        op: str,
        params: Optional[Mapping[str, str]] = None,
        query: Optional[Mapping[str, Any]] = None,
        body: Optional[Mapping[str, Any]] = None,
        *,
        deadline: Optional[float] = None,
        hold: float = 0,
    ) -> Any:
        """Runs one operation of ``OPERATIONS`` and returns what it reads (``op.result``), retrying a
        429 after its ``retry-after`` when that fits before ``deadline`` (default: 60 s from now)."""
        o = OPERATIONS[op]
        path = o.path
        for name, param in (params or {}).items():
            path = path.replace("{" + name + "}", urllib.parse.quote(param, safe=""))
        url = self.base_url + path
        q = {k: v for k, v in (query or {}).items() if v is not None}
        if q:
            url += "?" + urllib.parse.urlencode(q)
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"accept": "application/json", "user-agent": f"ephemail-python/{__version__}"}
        if data is not None:
            headers["content-type"] = "application/json"
        end = deadline if deadline is not None else time.monotonic() + 60
        while True:
            sent = self._api_key
            if sent:
                headers["authorization"] = f"Bearer {sent}"
            request = urllib.request.Request(url, data=data, headers=headers, method=o.method)
            where = f"{o.method} {o.path}"
            try:
                with self._opener.open(request, timeout=self.timeout + hold) as res:
                    status = res.status
                    payload = _read_capped(res, self.max_body_bytes, where, status)
            except urllib.error.HTTPError as e:
                try:
                    err = self._error(e, _read_capped(e, self.max_body_bytes, where, e.code))
                finally:
                    e.close()  # the rest of a refused body is not read: the connection goes
                if err.status == 401 and sent and self._key_from_cache and sent == self._api_key:
                    # a remembered key this service does not know: forget it, mint a new one, once more
                    self._forget_key(sent)
                    self.ensure_key()
                    continue
                if err.status == 429 and err.retry_after is not None and time.monotonic() + err.retry_after < end:
                    time.sleep(err.retry_after)
                    continue
                raise err from None
            except (urllib.error.URLError, socket.timeout, ConnectionError) as e:
                reason = getattr(e, "reason", e)
                raise ConnectionFailedError(f"cannot reach {self.base_url} ({reason}): is ephemail running there?") from None
            except http.client.HTTPException as e:
                raise InvalidResponseError(f"{where}: {self.base_url} did not answer in HTTP ({type(e).__name__})") from None
            if status != o.status:
                raise InvalidResponseError(f"{o.method} {o.path}: expected HTTP {o.status}, got {status}", status=status)
            if o.result is bytes:
                return payload
            try:
                value: Any = json.loads(payload)
            except ValueError:
                raise InvalidResponseError(f"{where}: the answer is not JSON", status=status) from None
            for step in o.pointer:
                if not isinstance(value, dict) or step not in value:
                    raise InvalidResponseError(f"{where}: the field {step!r} is missing from the service's answer", status=status, body=value)
                value = value[step]
                where += f" {step}"
            return convert(value, o.result, where, self)

    @staticmethod
    def _error(e: urllib.error.HTTPError, raw: bytes) -> EphemailError:
        retry: Optional[float] = None
        header = e.headers.get(RETRY_AFTER) if e.headers else None
        if header:
            try:
                retry = float(header) if float(header) > 0 else None
            except ValueError:
                retry = None
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        found: List[str] = []
        for pointer in ERROR_FIELDS:
            v: Any = body
            for step in pointer:
                v = v.get(step) if isinstance(v, dict) else None
            found.append(v if isinstance(v, str) else "")
        type_, message = found
        if not type_:
            type_ = "internal_error" if e.code >= 500 else "http_error"
            message = message or f"HTTP {e.code} {e.reason}"
        return api_error(e.code, type_, message, retry)

    # -- keys, inboxes, emails ---------------------------------------------------------------

    def ensure_key(self) -> str:
        """The key in use: the one given, else the one minted for this base URL before (the key
        cache), else a free one minted now (once per client) and remembered. A refused mint (429)
        says what to do: set ``EPHEMAIL_API_KEY`` (or pass ``api_key``), or try again after a time."""
        with self._minting:
            if self._api_key:
                return self._api_key
            remembered = self._key_cache.get(self.base_url) if self._key_cache else None
            if remembered:
                self._api_key = remembered
                self._key_from_cache = True
                return remembered
            try:
                key: str = self._request("mint_key", body={"label": "ephemail-python"})
            except EphemailError as e:
                if e.status != 429:
                    raise
                again = datetime.fromtimestamp(time.time() + (e.retry_after or 0), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                raise api_error(429, e.type, f"{e.message.rstrip()} Set EPHEMAIL_API_KEY (or pass api_key) to a key you have, or try again after {again}.", e.retry_after) from None
            self._api_key = key
            self._key_from_cache = False
            if self._key_cache:
                try:
                    self._key_cache.set(self.base_url, key)
                except OSError:
                    pass  # an unwritable cache: the key serves this client; the next run mints again
            return key

    def _forget_key(self, key: str) -> None:
        with self._minting:
            if self._api_key != key:
                return
            self._api_key = None
            self._key_from_cache = False
            if self._key_cache:
                try:
                    self._key_cache.forget(self.base_url, key)
                except OSError:
                    pass

    def create_inbox(self, domain: Optional[str] = None, local_part: Optional[str] = None) -> "Inbox":
        """A new, empty inbox: a random address at the default domain unless given."""
        body: Dict[str, str] = {}
        if domain is not None:
            body["domain"] = domain
        if local_part is not None:
            body["local_part"] = local_part
        return Inbox(self, self._request("create_inbox", body=body))

    def inbox(self, address: str) -> "Inbox":
        """An inbox by address (inboxes are implicit: any address at an active domain). Its waits look
        at mail from now on (less a second) unless given a ``since``."""
        return Inbox(self, address)

    def get_email(self, id: str) -> Email:
        """One email in full (``NotFoundError`` once it expired)."""
        return cast(Email, self._request("get_email", {"id": id}))

    def raw_email(self, id: str) -> bytes:
        """The message as received (the bytes of its ``.eml``)."""
        return cast(bytes, self._request("raw_email", {"id": id}))

    def download_attachment(self, email_id: str, attachment_id: str) -> bytes:
        """One attachment's bytes."""
        return cast(bytes, self._request("download_attachment", {"id": email_id, "attachment_id": attachment_id}))


class Inbox:
    """One address. ``str(inbox)`` is the address."""

    def __init__(self, client: Ephemail, address: str) -> None:
        self.client = client
        self.address = address
        #: When this object was made (epoch seconds): waits look at mail from then on (less a second).
        self.created = time.time()

    def __repr__(self) -> str:
        return f"Inbox({self.address!r})"

    def __str__(self) -> str:
        return self.address

    def emails(self, limit: Optional[int] = None, since: Since = None, before: Optional[str] = None) -> List[EmailSummary]:
        """The emails of the inbox (summaries, no bodies): newest first, or oldest first after ``since``."""
        query = {"limit": limit, "since": _cursor(since), "before": before}
        return cast(List[EmailSummary], self.client._request("list_emails", {"address": self.address}, query))

    def _latest(self, wait: int, since: str, subject: Optional[str], sender: Optional[str], deadline: float) -> Optional[Email]:
        query = {"wait": wait, "since": since, "subject": subject, "from": sender}
        return cast(Optional[Email], self.client._request("latest", {"address": self.address}, query, deadline=deadline, hold=wait))

    def wait_for_email(self, subject: Optional[str] = None, sender: Optional[str] = None, since: Since = None, timeout: float = 60) -> Email:
        """The newest email whose Subject / From contain ``subject`` / ``sender`` (case-insensitive)
        and that arrived after ``since`` (an email id, an email, or a datetime; default: when this
        inbox object was made, less a second), waiting up to ``timeout`` seconds for one."""
        self.client.ensure_key()
        deadline = time.monotonic() + timeout
        cursor = _cursor(since) or id_at(self.created - 1)
        while True:
            left = deadline - time.monotonic()
            wait = max(0, min(_MAX_WAIT, int(left)))
            email = self._latest(wait, cursor, subject, sender, deadline)
            if email is not None:
                return email
            if wait == 0 or time.monotonic() >= deadline:
                what = (f' from "{sender}"' if sender else "") + (f' with subject "{subject}"' if subject else "")
                raise EphemailTimeoutError(f"no email{what} at {self.address} within {timeout:g} s")

    def wait_for_code(self, subject: Optional[str] = None, sender: Optional[str] = None, since: Since = None, timeout: float = 60) -> str:
        """The verification code (the best one: what a user would type) of the next matching email."""
        email = self.wait_for_email(subject=subject, sender=sender, since=since, timeout=timeout)
        if not email.codes:
            raise NoCodeError(f'the email {email.id} ("{email.subject}") has no verification code', email)
        return email.codes[0].value

    def wait_for_link(
        self,
        kind: Optional[str] = "verify",
        subject: Optional[str] = None,
        sender: Optional[str] = None,
        since: Since = None,
        timeout: float = 60,
    ) -> str:
        """The URL of the first link of ``kind`` (verify, reset_password, login, unsubscribe,
        view_online, other; None: any of verify, reset_password, login) of the next matching email."""
        email = self.wait_for_email(subject=subject, sender=sender, since=since, timeout=timeout)
        kinds = (kind,) if kind else ACTION_LINK_KINDS
        for link in email.links:
            if link.kind in kinds:
                return link.url
        raise NoLinkError(f'the email {email.id} ("{email.subject}") has no {"/".join(kinds)} link', email)

    def expect_no_email(self, seconds: float, subject: Optional[str] = None, sender: Optional[str] = None) -> None:
        """Returns when no matching email arrives within ``seconds`` (from now); raises
        ``UnexpectedEmailError`` (an ``AssertionError``) with the email otherwise."""
        self.client.ensure_key()
        since = id_at()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            wait = max(0, min(_MAX_WAIT, math.ceil(deadline - time.monotonic())))
            email = self._latest(wait, since, subject, sender, deadline)
            if email is not None:
                raise UnexpectedEmailError(f'expected no email at {self.address}, got "{email.subject}" from {email.sender}', email)
            if wait == 0:
                break

    def clear(self) -> int:
        """Deletes every email of the inbox; returns how many."""
        return cast(int, self.client._request("clear", {"address": self.address}))
