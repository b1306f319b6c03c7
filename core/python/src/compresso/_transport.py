"""The transport: one HTTP request on urllib, retried with backoff where that is safe, and the
connection classes that still read an early answer after the server stopped reading the upload."""

from __future__ import annotations

import http.client
import json
import random
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any, Dict, Mapping, Optional, Tuple

from .errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    CompressoError,
    RateLimitError,
    _retry_after_seconds,
    error_from_response,
)

DEFAULT_BASE_URL = "http://localhost:3000"

_INITIAL_BACKOFF = 0.5
_MAX_BACKOFF = 8.0


class _Response:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise APIError(
                f"The server answered {self.status} with a body that is not JSON.",
                code="INVALID_RESPONSE",
                status=self.status,
                request_id=self.headers.get("x-request-id"),
                headers=self.headers,
            ) from exc


def _normalize_base_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if url.endswith("/api/v1"):
        url = url[: -len("/api/v1")]
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"base_url: expected an http(s) URL such as {DEFAULT_BASE_URL}, received {url!r}.")
    return url


class _Transport:
    """The request machinery of :class:`~compresso.client.Compresso` (a base class of it): reads
    ``api_key``, ``base_url``, ``user_agent``, ``timeout``, ``max_retries``, ``max_retry_after``,
    ``_opener`` and ``_closed`` from the client."""

    api_key: str
    base_url: str
    user_agent: str
    timeout: float
    max_retries: int
    max_retry_after: float
    _opener: urllib.request.OpenerDirector
    _closed: bool

    def _url(self, path: str) -> str:
        return self.base_url + path

    def _request(
        self,
        method: str,
        path: str,
        *,
        body: Optional[bytes] = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        idempotent: bool = True,
        idempotency_key: Optional[str] = None,
    ) -> _Response:
        if self._closed:
            raise CompressoError("This client is closed.")
        all_headers = {
            "Authorization": f"Bearer {self.api_key}",
            "User-Agent": self.user_agent,
            "Accept": "application/json, image/*",
        }
        all_headers.update(headers or {})
        if idempotency_key is not None:
            # The same key on every attempt below: the server answers a retry with the first answer.
            all_headers["Idempotency-Key"] = idempotency_key
        attempt = 0
        while True:
            error: CompressoError
            wait: Optional[float] = None
            try:
                response = self._send(method, path, body, all_headers, timeout or self.timeout)
            except _NothingSent as exc:
                error, retry = exc.error, True
            except APIConnectionError as exc:
                # After a reset or a timeout the server may have done the work: only idempotent calls
                # are sent again.
                error, retry = exc, idempotent
            else:
                if response.status < 400:
                    return response
                error = error_from_response(response.status, response.body, response.headers)
                retry, wait = self._should_retry(error, response, idempotent)
            if not retry or attempt >= self.max_retries:
                raise error
            time.sleep(wait if wait is not None else self._backoff(attempt))
            attempt += 1

    def _should_retry(
        self, error: CompressoError, response: _Response, idempotent: bool
    ) -> Tuple[bool, Optional[float]]:
        status = response.status
        should = response.headers.get("x-should-retry", "").strip().lower()
        if should == "false":
            return False, None
        if isinstance(error, RateLimitError) and error.is_quota_exceeded:
            # The daily quota comes back at 00:00 UTC: retrying before then only burns requests.
            return False, None
        retry_after = _retry_after_seconds(response.headers)
        wait = min(retry_after, self.max_retry_after) if retry_after is not None else None
        if error.code == "IDEMPOTENCY_KEY_IN_USE":
            # The first request with this key is still running: its answer comes on a retry.
            return True, wait
        if status == 429:
            return retry_after is not None, wait
        if status in (408, 503):
            # Not processed: safe whatever the method.
            return True, wait
        if status >= 500:
            return idempotent, wait
        return False, None

    def _backoff(self, attempt: int) -> float:
        base = min(_MAX_BACKOFF, _INITIAL_BACKOFF * (2**attempt))
        # Jitter spreads clients that failed together, so they do not come back together.
        return base * (1 - 0.25 * random.random())

    def _send(
        self, method: str, path: str, body: Optional[bytes], headers: Mapping[str, str], timeout: float
    ) -> _Response:
        request = urllib.request.Request(self._url(path), data=body, method=method, headers=dict(headers))
        try:
            with self._opener.open(request, timeout=timeout) as answer:
                return _Response(answer.status, _lower(answer.headers), answer.read())
        except urllib.error.HTTPError as answer:
            try:
                content = answer.read()
            except (OSError, http.client.HTTPException):
                content = b""
            finally:
                answer.close()
            return _Response(answer.code, _lower(answer.headers), content)
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (socket.timeout, TimeoutError)):
                raise _timeout(timeout) from exc
            if isinstance(reason, ConnectionRefusedError):
                raise _NothingSent(
                    APIConnectionError(f"Could not connect to {self.base_url}: connection refused.")
                ) from exc
            raise APIConnectionError(f"Could not reach {self.base_url}: {reason}.") from exc
        except (socket.timeout, TimeoutError) as exc:
            raise _timeout(timeout) from exc
        except (http.client.HTTPException, OSError) as exc:
            raise APIConnectionError(
                f"The connection to {self.base_url} broke before a whole answer arrived "
                f"({type(exc).__name__}: {exc})."
            ) from exc


class _EarlyAnswerMixin:
    """A server may refuse an upload before reading it (too large, bad key, over quota) and close the
    connection; sending the rest of the body then fails with a broken pipe. The answer is what the
    caller needs, so a failed body write is remembered and the response read anyway; only when no
    answer can be read does the write error surface (as a connection error)."""

    _body_error: Optional[BaseException] = None

    def send(self, data: Any) -> None:
        if self._body_error is not None:
            return
        try:
            super().send(data)  # type: ignore[misc]
        except (BrokenPipeError, ConnectionResetError) as exc:
            self._body_error = exc

    def getresponse(self) -> http.client.HTTPResponse:
        try:
            return super().getresponse()  # type: ignore[misc]
        except (http.client.HTTPException, OSError) as exc:
            if self._body_error is not None:
                raise ConnectionResetError(
                    f"the server closed the connection while the request was sent ({self._body_error})"
                ) from exc
            raise


class _EarlyAnswerHTTPConnection(_EarlyAnswerMixin, http.client.HTTPConnection):
    pass


class _EarlyAnswerHTTPSConnection(_EarlyAnswerMixin, http.client.HTTPSConnection):
    pass


class _EarlyAnswerHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_EarlyAnswerHTTPConnection, req)


class _EarlyAnswerHTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_EarlyAnswerHTTPSConnection, req, context=self._context)  # type: ignore[attr-defined]


class _NothingSent(Exception):
    """The connection was refused: the request never left, so any method may be sent again."""

    def __init__(self, error: CompressoError) -> None:
        super().__init__(str(error))
        self.error = error


_VISIBLE_ASCII = re.compile(r"[\x21-\x7e]{1,255}")


def _idempotency_key(given: Optional[str]) -> str:
    """The caller's Idempotency-Key, checked as the server checks it, else a new one for this call."""
    if given is None:
        return str(uuid.uuid4())
    if not isinstance(given, str) or not _VISIBLE_ASCII.fullmatch(given):
        raise ValueError(f"idempotency_key: expected 1 to 255 visible ASCII characters, received {given!r}.")
    return given


def _timeout(seconds: float) -> APITimeoutError:
    return APITimeoutError(f"No answer within {seconds:g} s (timeout).")


def _lower(headers: Any) -> Dict[str, str]:
    return {k.lower(): v for k, v in headers.items()} if headers is not None else {}


