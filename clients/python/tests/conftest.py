"""The test harness: a live ephemail service for the session.

With ``EPHEMAIL_URL`` set, the tests use that service (and ``EPHEMAIL_SMTP``, ``host:port``, default
``127.0.0.1:1025``, to send it mail). Otherwise they start their own from this repository:
``node bin/ephemail.js serve`` (``EPHEMAIL_NODE`` names the node binary, default ``node`` on PATH;
Node 22 or later) on free ports, with a fresh SQLite file, and stop it at the end.

The client's own fixtures come from ``ephemail.pytest_plugin``; ``ephemail_url`` is overridden here to
point at the service of the session.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import smtplib
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

pytest_plugins = ["ephemail.pytest_plugin", "pytester"]

# No test reads or writes the user's remembered keys (ephemail.key_cache): the cache is off; the tests
# of the cache name their own file.
os.environ["EPHEMAIL_KEY_CACHE"] = "off"

ROOT = Path(__file__).resolve().parents[3]
PYTHON_DIR = Path(__file__).resolve().parents[1]


@dataclass
class Service:
    http: str
    smtp_host: str
    smtp_port: int
    #: Every line the process wrote (empty for a service given by EPHEMAIL_URL).
    output: List[str]


def _start(tmp: str) -> Tuple[subprocess.Popen[str], Service]:
    node = os.environ.get("EPHEMAIL_NODE") or shutil.which("node") or "node"
    env = dict(os.environ)
    env.update(
        EPHEMAIL_HTTP_HOST="127.0.0.1",
        EPHEMAIL_SMTP_HOST="127.0.0.1",
        EPHEMAIL_HTTP_PORT="0",
        EPHEMAIL_SMTP_PORT="0",
        EPHEMAIL_STORE=f"sqlite:{os.path.join(tmp, 'ephemail.db')}",
        EPHEMAIL_LOG_LEVEL="info",
        # every test may mint its own key (a client without one mints on its first wait)
        EPHEMAIL_LIMIT_KEYS_PER_IP_PER_DAY="1000",
    )
    for name in ("EPHEMAIL_PUBLIC_URL", "EPHEMAIL_DOMAINS"):
        env.pop(name, None)
    proc = subprocess.Popen(
        [node, str(ROOT / "bin" / "ephemail.js"), "serve"],
        cwd=str(ROOT),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    output: List[str] = []
    started: List[Dict[str, Any]] = []
    ready = threading.Event()

    def read() -> None:
        # read to the end: an unread pipe would stall the process
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line.rstrip("\n"))
            if not started:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and rec.get("msg") == "ephemail started":
                    started.append(rec)
                    ready.set()
        ready.set()

    threading.Thread(target=read, name="ephemail-stdout", daemon=True).start()
    if not ready.wait(60) or not started:
        _stop(proc)
        raise RuntimeError(f"ephemail did not start ({node} {ROOT / 'bin' / 'ephemail.js'} serve):\n" + "\n".join(output[-40:]))
    host, _, port = str(started[0]["smtp"]).rpartition(":")
    return proc, Service(http=str(started[0]["http"]), smtp_host=host, smtp_port=int(port), output=output)


def _stop(proc: "subprocess.Popen[str]") -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture(scope="session")
def service() -> Iterator[Service]:
    url = os.environ.get("EPHEMAIL_URL")
    if url:
        host, _, port = os.environ.get("EPHEMAIL_SMTP", "127.0.0.1:1025").rpartition(":")
        yield Service(http=url.rstrip("/"), smtp_host=host, smtp_port=int(port), output=[])
        return
    tmp = tempfile.mkdtemp(prefix="ephemail-pytest-")
    proc, svc = _start(tmp)
    try:
        yield svc
    finally:
        _stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def ephemail_url(service: Service) -> str:
    """The plugin's fixture, pointed at the session's service."""
    return service.http


Attachment = Tuple[str, str, bytes]  # filename, content type, bytes


@pytest.fixture(scope="session")
def send_mail(service: Service) -> Callable[..., None]:
    """Sends one message to the service over real SMTP with smtplib (the app under test's part)."""

    def send(
        to: str,
        subject: str,
        text: Optional[str] = None,
        html: Optional[str] = None,
        sender: str = "Example App <no-reply@app.example>",
        attachments: Sequence[Attachment] = (),
    ) -> None:
        msg = EmailMessage()
        msg["From"] = sender
        msg["To"] = to
        msg["Subject"] = subject
        msg.set_content(text if text is not None else "")
        if html is not None:
            msg.add_alternative(html, subtype="html")
        for filename, content_type, data in attachments:
            maintype, _, subtype = content_type.partition("/")
            msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=filename)
        with smtplib.SMTP(service.smtp_host, service.smtp_port, timeout=30) as smtp:
            smtp.send_message(msg)

    return send

