"""Errors raised by the ephemail client. Each carries the spec's error ``type`` (``not_found``,
``rate_limited``, ``key_required``, …, or the client's own ``timeout``, ``no_code``, ``no_link``,
``unexpected_email``, ``connection_error``, ``invalid_response``, ``response_too_large``,
``redirect_refused``), the HTTP ``status`` (0 when the
error is the client's own) and ``retry_after`` (seconds, when the service gave one)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Type

if TYPE_CHECKING:  # pragma: no cover
    from .models import Email

__all__ = [
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


class EphemailError(Exception):
    """Base class of every error the client raises."""

    def __init__(self, message: str, *, type: str, status: int = 0, retry_after: Optional[float] = None) -> None:
        super().__init__(message)
        self.message = message
        #: The spec's error type (stable; branch on this, not on the message).
        self.type = type
        #: HTTP status; 0 when the error is the client's own.
        self.status = status
        #: Seconds from the ``retry-after`` header, when the service sent one.
        self.retry_after = retry_after

    def __str__(self) -> str:
        return self.message


class ApiError(EphemailError):
    """An error answered by the service in its error envelope (``{"error": {"type", "message"}}``)."""


class InvalidRequestError(ApiError):
    """400: malformed parameters or body (``invalid_request``)."""


class UnauthorizedError(ApiError):
    """401: the key is invalid or revoked (``unauthorized``), or a feature needs one (``key_required``)."""


class NotFoundError(ApiError):
    """404 ``not_found``: no such email (most often: it expired), or a domain the service does not serve."""


class ConflictError(ApiError):
    """409: ``address_in_use`` (an explicit ``local_part`` whose address already holds mail), …"""


class RateLimitedError(ApiError):
    """429: ``rate_limited``, ``quota_exceeded`` or ``too_many_waiters``; ``retry_after`` says when to retry.

    The client already waits and retries when ``retry-after`` fits in the time it was given."""


class ServerError(ApiError):
    """5xx: a fault on the service (``internal_error``)."""


_BY_STATUS: Dict[int, Type[ApiError]] = {
    400: InvalidRequestError,
    401: UnauthorizedError,
    404: NotFoundError,
    409: ConflictError,
    429: RateLimitedError,
}


def api_error(status: int, type: str, message: str, retry_after: Optional[float]) -> ApiError:
    """The ``ApiError`` subclass for an HTTP status."""
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return cls(message, type=type, status=status, retry_after=retry_after)


class EphemailTimeoutError(EphemailError, TimeoutError):
    """A wait ran out of time with no matching email (``type`` is ``timeout``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, type="timeout")


class NoCodeError(EphemailError):
    """The email that arrived has no verification code (``no_code``); ``email`` is that email."""

    def __init__(self, message: str, email: "Email") -> None:
        super().__init__(message, type="no_code")
        self.email = email


class NoLinkError(EphemailError):
    """The email that arrived has no link of the kind asked for (``no_link``); ``email`` is that email."""

    def __init__(self, message: str, email: "Email") -> None:
        super().__init__(message, type="no_link")
        self.email = email


class UnexpectedEmailError(EphemailError, AssertionError):
    """``expect_no_email`` saw an email arrive (``unexpected_email``); ``email`` is that email.

    Also an ``AssertionError``, so a test runner reports it as a failed expectation."""

    def __init__(self, message: str, email: "Email") -> None:
        super().__init__(message, type="unexpected_email")
        self.email = email


class ConnectionFailedError(EphemailError, ConnectionError):
    """The service could not be reached, did not answer in time, or its answer was cut off
    (``connection_error``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, type="connection_error")


class InvalidResponseError(EphemailError):
    """A response that does not have the shape of the OpenAPI contract (``invalid_response``): a field
    the client reads is missing or of another type. Either the service or the client is out of date."""

    def __init__(self, message: str, *, status: int = 0, body: Any = None) -> None:
        super().__init__(message, type="invalid_response", status=status)
        self.body = body


class ResponseTooLargeError(InvalidResponseError):
    """An answer whose body is larger than the client's ``max_body_bytes`` (``response_too_large``):
    the client stops reading it (at once when its ``content-length`` says so). ``status`` is the
    answer's HTTP status."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message, status=status)
        self.type = "response_too_large"


class RedirectRefusedError(InvalidResponseError):
    """The service answered a redirect to another origin (scheme, host or port): the client does not
    follow it, so the API key is never sent there (``redirect_refused``). ``status`` is the redirect's
    (301, 302, 303, 307, 308); ``location`` where it pointed."""

    def __init__(self, message: str, *, status: int = 0, location: str = "") -> None:
        super().__init__(message, status=status)
        self.type = "redirect_refused"
        self.location = location
