"""The client against a service that answers badly, over real sockets: a redirect to another origin
(another 127.0.0.x port, where a second server records whatever reaches it: the API key must not),
bodies larger than the cap (streamed, or declared), an answer cut off. Each is the client's own error,
and the client stops reading a body at its cap."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator, List, Optional, Tuple

import pytest

from ephemail import (
    DEFAULT_MAX_BODY_BYTES,
    ConnectionFailedError,
    EphemailError,
    Ephemail,
    InvalidResponseError,
    RedirectRefusedError,
    ResponseTooLargeError,
    ServerError,
)

KEY = "eph_" + "k" * 40
MiB = 1024 * 1024
ID = "01a20000-0000-7000-8000-000000000000"
EMAIL = {
    "id": ID,
    "inbox": "a@ephemail.test",
    "subject": "s",
}

Answer = Callable[[BaseHTTPRequestHandler], None]


class Stand:
    """A stand-in server on ``host``: answers each request with ``answer`` (set by each test),
    records (method, path, authorization) of each, and counts the body bytes it wrote."""

    def __init__(self, host: str) -> None:
        self.seen: List[Tuple[str, str, Optional[str]]] = []
        self.answer: Answer = lambda h: h.send_response(204)
        self.written = 0
        stand = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def handle_one_request(self) -> None:
                try:
                    super().handle_one_request()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def _any(self) -> None:
                stand.seen.append((self.command, self.path, self.headers.get("authorization")))
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                stand.answer(self)

            do_GET = do_POST = do_DELETE = _any

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stands() -> Iterator[Tuple[Stand, Stand]]:
    """(the service at 127.0.0.1, another origin at 127.0.0.2): IP literals only."""
    service, other = Stand("127.0.0.1"), Stand("127.0.0.2")

    def elsewhere(h: BaseHTTPRequestHandler) -> None:
        json_answer(201 if h.command == "POST" else 200, {"data": {"address": "stolen@ephemail.test", "api_key": KEY, **EMAIL}})(h)

    other.answer = elsewhere
    try:
        yield service, other
    finally:
        service.close()
        other.close()


def json_answer(status: int, body: object) -> Answer:
    def answer(h: BaseHTTPRequestHandler) -> None:
        data = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    return answer


def redirect(status: int, to: Callable[[], str]) -> Answer:
    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        h.send_header("location", to() + h.path)
        h.send_header("content-length", "0")
        h.end_headers()

    return answer


def stream(stand: Stand, size: int, status: int = 200, declare: bool = False) -> Answer:
    """A JSON body of about ``size`` bytes, written 1 MiB at a time (no length said unless ``declare``;
    then the connection ends the body); counts what was written in ``stand.written``."""

    def answer(h: BaseHTTPRequestHandler) -> None:
        head = json.dumps({"data": {"address": "big@ephemail.test", **EMAIL}})[:-2].encode() + b', "pad": "'
        chunk = b"a" * MiB
        chunks = -(-size // MiB)
        stand.written = 0
        h.send_response(status)
        h.send_header("content-type", "application/json")
        if declare:
            h.send_header("content-length", str(len(head) + chunks * MiB + 3))
        h.send_header("connection", "close")
        h.end_headers()
        h.close_connection = True
        h.wfile.write(head)
        for _ in range(chunks):
            h.wfile.write(chunk)
            stand.written += MiB
        h.wfile.write(b'"}}')

    return answer


def test_a_redirect_to_another_origin_is_refused_and_nothing_reaches_it(stands: Tuple[Stand, Stand]) -> None:
    service, other = stands
    mail = Ephemail(service.url, api_key=KEY)
    for status in (301, 302, 303, 307, 308):
        service.answer = redirect(status, lambda: other.url)
        with pytest.raises(EphemailError) as got:
            mail.get_email(ID)
        assert other.seen == [], f"HTTP {status}: nothing reaches the other origin, least of all the key"
        assert isinstance(got.value, RedirectRefusedError), repr(got.value)
        assert got.value.type == "redirect_refused" and got.value.status == status
        assert got.value.location == f"{other.url}/api/v1/emails/{ID}"
        assert "another origin (http://127.0.0.2:" in str(got.value)
        assert isinstance(got.value, InvalidResponseError) and isinstance(got.value, EphemailError)
        with pytest.raises(RedirectRefusedError):
            mail.create_inbox()
        with pytest.raises(RedirectRefusedError):
            mail.raw_email(ID)
    # the same host on another port is another origin too
    service.answer = redirect(302, lambda: other.url.replace("127.0.0.2", "127.0.0.1"))
    with pytest.raises(RedirectRefusedError):
        mail.inbox("a@ephemail.test").emails()
    # minting a key through a redirect: refused the same way
    service.answer = redirect(307, lambda: other.url)
    with pytest.raises(RedirectRefusedError):
        Ephemail(service.url).ensure_key()
    assert other.seen == [], "nothing reaches the other origin, least of all the key"


def test_a_redirect_within_the_service_origin_is_followed_with_the_key(stands: Tuple[Stand, Stand]) -> None:
    service, _ = stands

    def moved(h: BaseHTTPRequestHandler) -> None:
        if h.path.startswith("/old/"):
            h.send_response(308)
            h.send_header("location", h.path[len("/old") :])
            h.send_header("content-length", "0")
            h.end_headers()
        else:
            data = b'"moved"'
            h.send_response(200)
            h.send_header("content-length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)

    service.answer = moved
    assert Ephemail(service.url + "/old", api_key=KEY).raw_email(ID) == b'"moved"'
    assert service.seen == [("GET", f"/old/api/v1/emails/{ID}/raw", f"Bearer {KEY}"), ("GET", f"/api/v1/emails/{ID}/raw", f"Bearer {KEY}")]


def test_a_body_over_the_default_cap_is_refused_and_the_client_stops_reading(stands: Tuple[Stand, Stand]) -> None:
    service, _ = stands
    mail = Ephemail(service.url, api_key=KEY)
    # 200 MiB streamed with no length said in advance: as raw bytes, and as JSON
    service.answer = stream(service, 200 * MiB)
    with pytest.raises(ResponseTooLargeError) as got:
        mail.raw_email(ID)
    assert got.value.type == "response_too_large" and got.value.status == 200
    assert str(got.value) == "GET /api/v1/emails/{id}/raw: the service's answer is larger than 64 MiB (max_body_bytes); not read"
    assert service.written < 112 * MiB, f"the client stopped reading near its cap: the service wrote {service.written // MiB} MiB of 200"
    assert DEFAULT_MAX_BODY_BYTES == 64 * MiB and mail.max_body_bytes == DEFAULT_MAX_BODY_BYTES
    with pytest.raises(ResponseTooLargeError):
        mail.get_email(ID)
    assert service.written < 112 * MiB
    # an error answer's body is capped the same way
    service.answer = stream(service, 200 * MiB, status=500)
    with pytest.raises(ResponseTooLargeError) as err:
        mail.inbox("a@ephemail.test").clear()
    assert err.value.status == 500
    assert service.written < 112 * MiB
    # a declared length above the cap: refused before reading
    service.answer = stream(service, 200 * MiB, status=201, declare=True)
    with pytest.raises(ResponseTooLargeError):
        mail.create_inbox()
    assert service.written < 112 * MiB


def test_max_body_bytes_sets_the_cap(stands: Tuple[Stand, Stand]) -> None:
    service, _ = stands
    mail = Ephemail(service.url, api_key=KEY, max_body_bytes=4096)

    def raw(size: int) -> Answer:
        def answer(h: BaseHTTPRequestHandler) -> None:
            h.send_response(200)
            h.send_header("content-type", "message/rfc822")
            h.end_headers()  # no length: the end of the connection ends the body
            h.close_connection = True
            h.wfile.write(b"x" * size)

        return answer

    service.answer = raw(4096)
    assert len(mail.raw_email(ID)) == 4096
    service.answer = raw(4097)
    with pytest.raises(ResponseTooLargeError, match=r"larger than 4 KiB \(max_body_bytes\)"):
        mail.raw_email(ID)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            Ephemail(service.url, max_body_bytes=bad)  # type: ignore[arg-type]


def test_bad_answers_are_the_clients_own_errors(stands: Tuple[Stand, Stand]) -> None:
    service, _ = stands
    mail = Ephemail(service.url, api_key=KEY)

    def plain(status: int, body: bytes) -> Answer:
        def answer(h: BaseHTTPRequestHandler) -> None:
            h.send_response(status)
            h.send_header("content-type", "text/html")
            h.send_header("content-length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)

        return answer

    service.answer = plain(201, b"<html>proxy login</html>")
    with pytest.raises(InvalidResponseError, match="the answer is not JSON"):
        mail.create_inbox()
    service.answer = plain(502, b"<html>bad gateway</html>")
    with pytest.raises(ServerError) as bad_gateway:
        mail.create_inbox()
    assert bad_gateway.value.status == 502 and bad_gateway.value.type == "internal_error"

    def cut(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", "1000")
        h.end_headers()
        h.wfile.write(b'{"data": {"id": "')
        h.close_connection = True

    service.answer = cut
    with pytest.raises(ConnectionFailedError, match="was cut off"):
        mail.get_email(ID)
