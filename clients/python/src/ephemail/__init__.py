"""ephemail: throwaway inboxes for tests. Create an inbox, wait for the email, get its code or link.

    from ephemail import Ephemail

    mail = Ephemail("http://localhost:8025")        # api_key optional: one is minted for waits
    inbox = mail.create_inbox()
    ...                                             # your app sends a verification email to inbox.address
    code = inbox.wait_for_code(subject="verify")    # "559120"

Standard library only. The pytest fixtures ``ephemail`` and ``ephemail_inbox`` are in
``ephemail.pytest_plugin`` (loaded by pytest when the package is installed).
"""

__version__ = "0.2.0"

from .client import DEFAULT_MAX_BODY_BYTES, DEFAULT_URL, Ephemail, Inbox, id_at  # noqa: E402
from .errors import (  # noqa: E402
    ApiError,
    ConflictError,
    ConnectionFailedError,
    EphemailError,
    EphemailTimeoutError,
    InvalidRequestError,
    InvalidResponseError,
    NoCodeError,
    NoLinkError,
    NotFoundError,
    RateLimitedError,
    RedirectRefusedError,
    ResponseTooLargeError,
    ServerError,
    UnauthorizedError,
    UnexpectedEmailError,
)
from .key_cache import KeyCache, key_cache_path  # noqa: E402
from .models import Attachment, Code, Email, EmailSummary, Header, Link  # noqa: E402

__all__ = [
    "__version__",
    "DEFAULT_URL",
    "DEFAULT_MAX_BODY_BYTES",
    "Ephemail",
    "Inbox",
    "id_at",
    "KeyCache",
    "key_cache_path",
    "Email",
    "EmailSummary",
    "Attachment",
    "Code",
    "Header",
    "Link",
    "EphemailError",
    "ApiError",
    "InvalidRequestError",
    "UnauthorizedError",
    "NotFoundError",
    "ConflictError",
    "RateLimitedError",
    "ServerError",
    "EphemailTimeoutError",
    "NoCodeError",
    "NoLinkError",
    "UnexpectedEmailError",
    "ConnectionFailedError",
    "InvalidResponseError",
    "ResponseTooLargeError",
    "RedirectRefusedError",
]
