"""Typed errors. Every API error carries the server's stable ``code`` (from @compresso/schema's table),
the HTTP ``status``, the server's ``message``, ``details`` and the ``request_id`` to quote in a report.

The classes mirror the Node client's: match on the class for the kind of failure, on ``code`` for the
exact reason.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Mapping, Optional, Type, Union

__all__ = [
    "CompressoError",
    "APIError",
    "AuthenticationError",
    "PermissionDeniedError",
    "BadRequestError",
    "NotFoundError",
    "TooLargeError",
    "UnsupportedImageError",
    "RateLimitError",
    "ServerError",
    "APIConnectionError",
    "APITimeoutError",
    "error_from_response",
]


class CompressoError(Exception):
    """Base class of every error this library raises about a request.

    ``status`` is None when no HTTP answer arrived (connection, timeout, a client-side refusal).
    """

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        code: Optional[str] = None,
        request_id: Optional[str] = None,
        details: Any = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.request_id = request_id
        self.details = details
        self.headers: Dict[str, str] = {k.lower(): v for k, v in (headers or {}).items()}

    def __str__(self) -> str:
        parts = []
        if self.status is not None:
            parts.append(str(self.status))
        if self.code:
            parts.append(self.code)
        prefix = " ".join(parts)
        text = f"{prefix}: {self.message}" if prefix else self.message
        if self.request_id:
            text += f" (request id {self.request_id})"
        return text

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, "
            f"message={self.message!r}, request_id={self.request_id!r})"
        )


class APIError(CompressoError):
    """The server answered with an error status."""


class AuthenticationError(APIError):
    """401: no key, a malformed key, or an unknown or revoked key (UNAUTHENTICATED, INVALID_API_KEY)."""


class PermissionDeniedError(APIError):
    """403: the account's plan does not include the API (PLAN_REQUIRED), or FORBIDDEN."""


class BadRequestError(APIError):
    """400 and other refusals of the request itself: INVALID_OPTION (``details`` names each field,
    what it accepts and what was received), MISSING_FILE, INVALID_REQUEST, URL_NOT_ALLOWED,
    URL_FETCH_FAILED, METHOD_NOT_ALLOWED, CONFLICT, IDEMPOTENCY_KEY_IN_USE, IDEMPOTENCY_KEY_REUSED."""

    @property
    def fields(self) -> list:
        """The names of the invalid fields, when the server listed them."""
        if isinstance(self.details, list):
            return [d.get("field") for d in self.details if isinstance(d, dict) and "field" in d]
        return []


class NotFoundError(APIError):
    """404: an unknown route, or a key id that is not in the caller's account."""


class TooLargeError(APIError):
    """413 FILE_TOO_LARGE: the file is over the server's upload limit."""


class UnsupportedImageError(APIError):
    """415/422, the input is not a usable image: NOT_AN_IMAGE, UNSUPPORTED_FORMAT, EMPTY_FILE,
    CORRUPT_IMAGE, IMAGE_TOO_LARGE (too many pixels), TOO_MANY_FRAMES, PROCESSING_TIMEOUT."""


class RateLimitError(APIError):
    """429. ``is_quota_exceeded`` is True for the daily quota (QUOTA_EXCEEDED), which is never retried:
    ``retry_after`` is then the seconds until 00:00 UTC and ``reset_at`` that moment (an aware UTC
    datetime). ``should_retry`` is False when the server said so (``X-Should-Retry: false``)."""

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after: Optional[float] = _retry_after_seconds(self.headers)
        self.reset_at: Optional[datetime] = None
        reset = self.headers.get("ratelimit-reset")
        seconds = _number(reset) if reset is not None else self.retry_after
        if seconds is not None:
            self.reset_at = datetime.now(timezone.utc) + timedelta(seconds=seconds)
        self.should_retry = self.headers.get("x-should-retry", "").lower() != "false"

    @property
    def is_quota_exceeded(self) -> bool:
        return self.code == "QUOTA_EXCEEDED"


class ServerError(APIError):
    """5xx: a bug (INTERNAL_ERROR, quote the request id) or an outage (SERVICE_UNAVAILABLE). Retried."""


class APIConnectionError(CompressoError):
    """The server could not be reached, or the connection broke before a whole answer arrived
    (code ``CONNECTION_ERROR``, status None)."""

    def __init__(self, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("code", "CONNECTION_ERROR")
        super().__init__(message, **kwargs)


class APITimeoutError(APIConnectionError):
    """No answer (or no progress on one) within ``timeout`` seconds (code ``TIMEOUT``), or the server's
    408 REQUEST_TIMEOUT (an upload that stalled). Both are retried before this is raised."""

    def __init__(self, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("code", "TIMEOUT")
        super().__init__(message, **kwargs)


#: How this client reports each client-side code of the contract (``CLIENT_ERROR_CODES`` in
#: @compresso/schema, shared with the Node client): the class raised with that code, or why the
#: situation never arises here. The drift test fails when the contract gains a code this table lacks.
CLIENT_CODES: Dict[str, Union[Type[CompressoError], str]] = {
    "CONNECTION_ERROR": APIConnectionError,
    "TIMEOUT": APITimeoutError,
    "ABORTED": "this API takes no abort signal: an interrupted call raises the interrupt itself",
    "MISSING_API_KEY": CompressoError,
    "INVALID_INPUT": "an unreadable input raises Python's own OSError or TypeError, as open() does",
    "INVALID_RESPONSE": APIError,
    "MISSING_DEPENDENCY": "standard library only: there is no optional package to miss",
    "CLIENT_ERROR": "a failure inside the client propagates as the Python exception it is",
}

_BY_CODE: Dict[str, Type[CompressoError]] = {
    "UNAUTHENTICATED": AuthenticationError,
    "INVALID_API_KEY": AuthenticationError,
    "PLAN_REQUIRED": PermissionDeniedError,
    "FORBIDDEN": PermissionDeniedError,
    "INVALID_OPTION": BadRequestError,
    "INVALID_REQUEST": BadRequestError,
    "MISSING_FILE": BadRequestError,
    "METHOD_NOT_ALLOWED": BadRequestError,
    "CONFLICT": BadRequestError,
    "URL_NOT_ALLOWED": BadRequestError,
    # 422 like the image failures, but no image arrived: the request (its URL) is what to fix.
    "URL_FETCH_FAILED": BadRequestError,
    # 409: the first request with this Idempotency-Key is still running; the client retries it.
    "IDEMPOTENCY_KEY_IN_USE": BadRequestError,
    # 422 like the image failures, but the request (a key reused for another one) is what to fix.
    "IDEMPOTENCY_KEY_REUSED": BadRequestError,
    # 422: the prompt, instruction or image is what to change, not the image's bytes.
    "CONTENT_POLICY_VIOLATION": BadRequestError,
    "INSTRUCTION_NOT_UNDERSTOOD": BadRequestError,
    "REQUEST_TIMEOUT": APITimeoutError,
    "NOT_FOUND": NotFoundError,
    "FILE_TOO_LARGE": TooLargeError,
    "NOT_AN_IMAGE": UnsupportedImageError,
    "UNSUPPORTED_FORMAT": UnsupportedImageError,
    "EMPTY_FILE": UnsupportedImageError,
    "CORRUPT_IMAGE": UnsupportedImageError,
    "TOO_MANY_FRAMES": UnsupportedImageError,
    "PROCESSING_TIMEOUT": UnsupportedImageError,
    "IMAGE_TOO_LARGE": UnsupportedImageError,
    "QUOTA_EXCEEDED": RateLimitError,
    "RATE_LIMITED": RateLimitError,
    "INTERNAL_ERROR": ServerError,
    "SERVICE_UNAVAILABLE": ServerError,
    "PROVIDER_ERROR": ServerError,
    "PROVIDER_NOT_CONFIGURED": ServerError,
    # 503 with Retry-After: retried like SERVICE_UNAVAILABLE.
    "PROVIDER_RATE_LIMITED": ServerError,
    "PROVIDER_TIMEOUT": ServerError,
}


def _class_for_status(status: int) -> Type[CompressoError]:
    if status == 401:
        return AuthenticationError
    if status == 403:
        return PermissionDeniedError
    if status == 404:
        return NotFoundError
    if status == 408:
        return APITimeoutError
    if status == 413:
        return TooLargeError
    if status in (415, 422):
        return UnsupportedImageError
    if status == 429:
        return RateLimitError
    if status >= 500:
        return ServerError
    if 400 <= status < 500:
        return BadRequestError
    return APIError


def _number(value: Optional[str]) -> Optional[float]:
    if value is None:
        return None
    try:
        n = float(value.strip())
    except ValueError:
        return None
    return n if n >= 0 else None


def _retry_after_seconds(headers: Mapping[str, str]) -> Optional[float]:
    """Retry-After as seconds; the HTTP-date form is accepted too."""
    value = headers.get("retry-after")
    if value is None:
        return None
    n = _number(value)
    if n is not None:
        return n
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_from_response(status: int, body: bytes, headers: Mapping[str, str]) -> CompressoError:
    """Build the typed error for an error answer: by the server's code first, by status second.

    A body that is not ours (a proxy's HTML page, Node's bare 408) still gives a typed error by status.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    code: Optional[str] = None
    message: Optional[str] = None
    details: Any = None
    request_id: Optional[str] = lower.get("x-request-id")
    try:
        parsed = json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        err = parsed["error"]
        code = err.get("code") if isinstance(err.get("code"), str) else None
        message = err.get("message") if isinstance(err.get("message"), str) else None
        details = err.get("details")
        request_id = err.get("request_id") or request_id
    if message is None:
        snippet = body[:200].decode("utf-8", "replace").strip() if body else ""
        message = f"HTTP {status}" + (f": {snippet}" if snippet else "")
    cls = _BY_CODE.get(code or "") or _class_for_status(status)
    return cls(message, status=status, code=code, request_id=request_id, details=details, headers=lower)
