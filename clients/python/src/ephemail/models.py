"""The service's JSON objects as plain dataclasses.

Each class names its OpenAPI component (``SCHEMA``) and each field is the wire field of the same name,
with the type the client expects (``Optional`` where the contract allows ``null``). ``from_wire`` reads
them field by field and raises ``InvalidResponseError`` when one is missing or of another type;
``tests/test_contract.py`` checks every class against the live ``/api/v1/openapi.json``, so a field
renamed on the server fails the client's tests, not a user's. Fields the client does not model (later
additions) stay reachable in ``.data``, the object as received.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Dict, List, Optional, Tuple, Type, TypeVar, Union, get_type_hints

from .errors import InvalidResponseError

if TYPE_CHECKING:  # pragma: no cover
    from .client import Ephemail

__all__ = [
    "Header",
    "Code",
    "Link",
    "Attachment",
    "EmailSummary",
    "Email",
    "MODELS",
    "wire_fields",
    "from_wire",
    "convert",
]

T = TypeVar("T")

# Not wire fields: set by the client after reading (the object as received, the client to fetch more).
_LOCAL = {"local": True}


@dataclass
class Header:
    """One header line of an email, decoded, in the order received."""

    SCHEMA: ClassVar[str] = "Header"
    name: str
    value: str


@dataclass
class Code:
    """A verification code found in an email: ``value`` is what a user types (``"559 120"`` → ``"559120"``)."""

    SCHEMA: ClassVar[str] = "Code"
    value: str
    context: str


@dataclass
class Link:
    """A link of an email. ``kind``: verify, reset_password, login, unsubscribe, view_online or other;
    ``destination``: the real target of a click-tracking redirect, when its URL carries it."""

    SCHEMA: ClassVar[str] = "Link"
    url: str
    text: str
    kind: str
    destination: Optional[str]


@dataclass
class Attachment:
    """Attachment metadata; ``download()`` fetches the bytes."""

    SCHEMA: ClassVar[str] = "Attachment"
    id: str
    filename: str
    content_type: str
    size_bytes: int
    download_url: str
    content_id: Optional[str]
    email_id: str = field(default="", repr=False, metadata=_LOCAL)
    _client: Any = field(default=None, repr=False, compare=False, metadata=_LOCAL)

    def download(self) -> bytes:
        """The attachment's bytes, as stored."""
        return _need_client(self._client).download_attachment(self.email_id, self.id)


@dataclass
class EmailSummary:
    """An email in a list (no bodies): ``Ephemail.get_email(summary.id)`` reads it in full."""

    SCHEMA: ClassVar[str] = "EmailSummary"
    id: str
    address: str
    sender: str
    mailed_by: Optional[str]
    subject: str
    has_attachments: bool
    received_at: str
    expires_at: str
    data: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=_LOCAL)


@dataclass
class Email:
    """An email in full: bodies (``html_body`` sanitized by the service), headers, attachments, and
    the ``codes`` and ``links`` the service found in it (best code first, main action link first).
    ``raw()`` is the message as received."""

    SCHEMA: ClassVar[str] = "Email"
    id: str
    address: str
    sender: str
    mailed_by: Optional[str]
    subject: str
    has_attachments: bool
    received_at: str
    expires_at: str
    to: str
    cc: str
    message_id: Optional[str]
    headers: List[Header]
    text_body: Optional[str]
    html_body: Optional[str]
    attachments: List[Attachment]
    attachments_dropped: int
    raw_url: str
    codes: List[Code]
    links: List[Link]
    data: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=_LOCAL)
    _client: Any = field(default=None, repr=False, compare=False, metadata=_LOCAL)

    def raw(self) -> bytes:
        """The message as received (the bytes of its ``.eml``)."""
        return _need_client(self._client).raw_email(self.id)


#: Every model, for the contract test.
MODELS: Tuple[type, ...] = (Header, Code, Link, Attachment, EmailSummary, Email)


def _need_client(client: Optional["Ephemail"]) -> "Ephemail":
    if client is None:
        raise RuntimeError("this object was not read by an Ephemail client, so it cannot fetch more")
    return client


def _hints(cls: type) -> Dict[str, Any]:
    return get_type_hints(cls, vars(sys.modules[cls.__module__]))


def wire_fields(cls: type) -> Dict[str, Any]:
    """The wire fields a model reads, with their expected types (field name → type hint)."""
    hints = _hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if not f.metadata.get("local")}


def _origin(hint: Any) -> Any:
    return getattr(hint, "__origin__", None)


def _args(hint: Any) -> Tuple[Any, ...]:
    return tuple(getattr(hint, "__args__", ()))


def convert(value: Any, hint: Any, where: str, client: Optional["Ephemail"] = None) -> Any:
    """``value`` (parsed JSON) as ``hint``: a model, ``List[…]``, ``Optional[…]``, str, int or bool.
    Raises ``InvalidResponseError`` naming ``where`` when it does not fit."""
    if _origin(hint) is Union:
        options = _args(hint)
        if value is None and type(None) in options:
            return None
        rest = [a for a in options if a is not type(None)]
        if len(rest) == 1:
            return convert(value, rest[0], where, client)
        raise TypeError(f"unsupported type {hint!r}")  # pragma: no cover - models use Optional only
    if _origin(hint) in (list, List):
        if not isinstance(value, list):
            raise InvalidResponseError(f"{where}: expected an array, got {_kind(value)}", body=value)
        (item,) = _args(hint)
        return [convert(v, item, f"{where}[{i}]", client) for i, v in enumerate(value)]
    if dataclasses.is_dataclass(hint):
        return from_wire(hint, value, client, where)
    if hint is bool:
        ok = isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint is str:
        ok = isinstance(value, str)
    elif hint is Any:
        ok = True
    else:  # pragma: no cover - models use the types above only
        raise TypeError(f"unsupported type {hint!r}")
    if not ok:
        raise InvalidResponseError(f"{where}: expected {hint.__name__}, got {_kind(value)}", body=value)
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def from_wire(cls: Type[T], obj: Any, client: Optional["Ephemail"] = None, where: Optional[str] = None) -> T:
    """Reads one model from its JSON object, checking each field it reads is there with its type."""
    where = where or getattr(cls, "SCHEMA", cls.__name__)
    if not isinstance(obj, dict):
        raise InvalidResponseError(f"{where}: expected an object, got {_kind(obj)}", body=obj)
    values: Dict[str, Any] = {}
    for name, hint in wire_fields(cls).items():
        if name not in obj:
            raise InvalidResponseError(
                f"{where}: the field {name!r} is missing from the service's answer (a service or client of another version?)",
                body=obj,
            )
        values[name] = convert(obj[name], hint, f"{where}.{name}", client)
    local = {f.name for f in dataclasses.fields(cls) if f.metadata.get("local")}
    if "data" in local:
        values["data"] = obj
    if "_client" in local:
        values["_client"] = client
    made = cls(**values)
    if isinstance(made, Email):
        for a in made.attachments:
            a.email_id = made.id
    return made
