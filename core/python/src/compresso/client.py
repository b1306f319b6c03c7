"""The synchronous client, on urllib: one request per call, retried with backoff where that is safe."""

from __future__ import annotations

import http.client
import io
import json
import os
import platform
import random
import re
import secrets
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import (
    IO,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
)

from ._version import __version__
from ._multipart import encode_multipart
from .errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    CompressoError,
    RateLimitError,
    _retry_after_seconds,
    error_from_response,
)
from .models import (
    FILE_EXTENSIONS,
    ApiKey,
    BatchItem,
    BatchResult,
    CompressResult,
    CreatedApiKey,
    InfoResult,
    KeyRevocation,
    Quality,
    Usage,
)

__all__ = ["Compresso", "Keys", "ImageInput", "ProgressCallback", "DEFAULT_BASE_URL", "DEFAULT_TIMEOUT"]

PathLike = Union[str, "os.PathLike[str]"]
#: A path, the image's bytes, or a binary file object opened for reading.
ImageInput = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, IO[bytes]]
#: Called after each batch item with (done, total, item).
ProgressCallback = Callable[[int, int, BatchItem], Any]

DEFAULT_BASE_URL = "http://localhost:3000"
#: Seconds to connect and for each read: an AVIF encode of a large photo keeps the socket quiet a while.
DEFAULT_TIMEOUT = 120.0
DEFAULT_MAX_RETRIES = 2
#: The longest Retry-After honoured before a retry; a longer one is waited this long.
DEFAULT_MAX_RETRY_AFTER = 60.0
DEFAULT_BATCH_CONCURRENCY = 4

_INITIAL_BACKOFF = 0.5
_MAX_BACKOFF = 8.0

# The spelling of an input's extension is kept when the format does not change (photo.JPEG stays .JPEG).
_EXTENSION_FORMATS = {
    "jpg": "jpeg",
    "jpeg": "jpeg",
    "jpe": "jpeg",
    "jfif": "jpeg",
    "png": "png",
    "webp": "webp",
    "avif": "avif",
    "gif": "gif",
}


# Names that come from the server are chosen by whoever runs it. Output names here are always derived
# from the input (the server's Content-Disposition is never read), and the one server-chosen part of a
# path, the extension from X-Output-Format, must be a short run of letters and digits: the same rule as
# the Node client's safeExtension.
_SAFE_EXTENSION = re.compile(r"[a-z0-9]{1,16}")


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


class _Source:
    """An input read into memory (the server needs the whole image in one part)."""

    __slots__ = ("content", "filename", "path", "label")

    def __init__(self, content: bytes, filename: str, path: Optional[str], label: str) -> None:
        self.content = content
        self.filename = filename
        self.path = path
        self.label = label


def _read_input(image: ImageInput, filename: Optional[str] = None) -> _Source:
    if isinstance(image, (str, os.PathLike)):
        path = os.path.abspath(os.fspath(image))
        with open(path, "rb") as f:
            content = f.read()
        return _Source(content, filename or os.path.basename(path), path, os.fspath(image))
    if isinstance(image, (bytes, bytearray, memoryview)):
        return _Source(bytes(image), filename or "image", None, "<bytes>")
    if isinstance(image, io.TextIOBase):
        raise TypeError("The file object is open in text mode; open it with 'rb'.")
    read = getattr(image, "read", None)
    if callable(read):
        content = read()
        if isinstance(content, str):
            raise TypeError("The file object is open in text mode; open it with 'rb'.")
        name = getattr(image, "name", None)
        path = os.path.abspath(name) if isinstance(name, str) and os.path.isfile(name) else None
        shown = filename or (os.path.basename(name) if isinstance(name, str) else None)
        return _Source(bytes(content), shown or "image", path, name if isinstance(name, str) else "<file>")
    raise TypeError(
        f"Expected a path, bytes or a binary file object, received {type(image).__name__}."
    )


def _bool_field(value: bool) -> str:
    return "true" if value else "false"


def _option_fields(
    quality: Optional[Quality],
    output_format: Optional[str],
    max_dimension: Optional[int],
    strip_exif: Optional[bool],
    png_to_jpeg: Optional[bool],
) -> List[Tuple[str, str]]:
    # Values are sent as the user gave them: the server validates once and names the field when wrong.
    fields: List[Tuple[str, str]] = []
    if quality is not None:
        fields.append(("quality", str(quality)))
    if output_format is not None:
        fields.append(("output_format", str(output_format)))
    if max_dimension is not None:
        fields.append(("max_dimension", str(max_dimension)))
    if strip_exif is not None:
        fields.append(("strip_exif", _bool_field(strip_exif) if isinstance(strip_exif, bool) else str(strip_exif)))
    if png_to_jpeg is not None:
        fields.append(
            ("png_to_jpeg", _bool_field(png_to_jpeg) if isinstance(png_to_jpeg, bool) else str(png_to_jpeg))
        )
    return fields


def _header_int(headers: Mapping[str, str], name: str) -> int:
    return int(headers[name])


def _header_bool(headers: Mapping[str, str], name: str) -> bool:
    return headers[name].strip().lower() == "true"


def _optional_bool(headers: Mapping[str, str], name: str) -> Optional[bool]:
    return _header_bool(headers, name) if name in headers else None


def _optional_int(headers: Mapping[str, str], name: str) -> Optional[int]:
    return _header_int(headers, name) if name in headers else None


def _result_from_headers(
    response: _Response, source: _Source, output_path: Optional[str], keep_data: bool
) -> CompressResult:
    h = response.headers
    try:
        score = h.get("x-score")
        frames = h.get("x-frames")
        return CompressResult(
            input_size=_header_int(h, "x-input-size"),
            output_size=_header_int(h, "x-output-size"),
            savings_percent=float(h["x-savings-percent"]),
            input_format=h["x-input-format"],  # type: ignore[arg-type]
            output_format=h["x-output-format"],  # type: ignore[arg-type]
            input_width=_header_int(h, "x-input-width"),
            input_height=_header_int(h, "x-input-height"),
            width=_header_int(h, "x-width"),
            height=_header_int(h, "x-height"),
            quality=_header_int(h, "x-quality"),
            auto_quality=_header_bool(h, "x-auto-quality"),
            optimized=_header_bool(h, "x-optimized"),
            metadata_stripped=_header_bool(h, "x-metadata-stripped"),
            frames=int(frames) if frames is not None else None,
            score=float(score) if score is not None else None,
            chroma_subsampling=h.get("x-chroma-subsampling"),  # type: ignore[arg-type]
            lossless=_optional_bool(h, "x-lossless"),
            near_lossless=_optional_bool(h, "x-near-lossless"),
            effort=_optional_int(h, "x-effort"),
            auto_steps=_optional_int(h, "x-auto-steps"),
            output_path=output_path,
            input_path=source.path,
            content_type=h.get("content-type"),
            request_id=h.get("x-request-id"),
            data=response.body if keep_data else None,
        )
    except (KeyError, ValueError) as exc:
        raise APIError(
            f"The server's compress answer lacks a valid {exc} header; is {h.get('server', 'it')} a Compresso server?",
            code="INVALID_RESPONSE",
            status=response.status,
            request_id=h.get("x-request-id"),
            headers=h,
        ) from exc


def _output_name(
    source: _Source, output_format: str, beside_input: bool, stem_override: Optional[str] = None
) -> str:
    """``photo.min.jpg`` beside the input (never the input itself), ``photo.webp`` in another folder."""
    # Only the last component: a filename= such as "../x.jpg" must not steer the write elsewhere.
    stem, dot_ext = os.path.splitext(os.path.basename(source.filename.replace("\\", "/")))
    ext = dot_ext[1:]
    stem = stem_override or stem or "image"
    keep = _EXTENSION_FORMATS.get(ext.lower()) == output_format
    new_ext = ext if keep else FILE_EXTENSIONS.get(output_format, output_format)
    return f"{stem}.min.{new_ext}" if beside_input else f"{stem}.{new_ext}"


def _is_folder(path: PathLike) -> bool:
    """An existing folder, or a path written as one (``out/``), which is then created."""
    text = os.fspath(path)
    return os.path.isdir(text) or text.endswith(("/", os.sep))


def _same_file(a: str, b: Optional[str]) -> bool:
    if b is None:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


# O_EXCL: a name another writer (a batch thread, another process) already holds is never shared, and a
# symlink planted at the name is not followed. O_BINARY: on Windows each \n byte would otherwise become \r\n.
_TEMPORARY_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
_TEMPORARY_ATTEMPTS = 100


def _create_temporary(folder: str) -> Tuple[int, str]:
    """A new, empty file in ``folder`` with the mode any other program's new file gets (0666 less the umask).

    Not tempfile.mkstemp: it makes the file 0600 and the rename keeps that, so the result would be
    unreadable to, say, a web server serving the folder, unlike what the Node client and the CLI write.
    The umask is not changed to get there: it is process-wide, and a batch writes from several threads.
    """
    for _ in range(_TEMPORARY_ATTEMPTS):
        tmp = os.path.join(folder, f".compresso-{secrets.token_hex(8)}.tmp")
        try:
            return os.open(tmp, _TEMPORARY_FLAGS, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"No free temporary name in {folder!r} after {_TEMPORARY_ATTEMPTS} attempts.")


def _write_atomically(path: str, data: bytes) -> None:
    # A temporary file in the same folder, renamed into place: an interrupted write never leaves half an
    # image where a good one (perhaps the original, under overwrite=True) used to be.
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = _create_temporary(folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _conflict(message: str) -> CompressoError:
    return CompressoError(message, code="CONFLICT")


def _onto_input(message: str) -> CompressoError:
    # INVALID_OPTION, as the Node client and the MCP server answer it: the output option is the mistake.
    return CompressoError(message, code="INVALID_OPTION")


def _normalize_base_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if url.endswith("/api/v1"):
        url = url[: -len("/api/v1")]
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"base_url: expected an http(s) URL such as {DEFAULT_BASE_URL}, received {url!r}.")
    return url


class Compresso:
    """The Compresso API.

    >>> with Compresso() as client:                      # COMPRESSO_API_KEY, COMPRESSO_BASE_URL
    ...     result = client.compress("photo.jpg", format="webp")
    ...     print(result.output_path, result.savings_percent)
    """

    def __init__(
        self,
        api_key: Optional[str] = None,
        base_url: Optional[str] = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_retry_after: float = DEFAULT_MAX_RETRY_AFTER,
        user_agent: Optional[str] = None,
    ) -> None:
        key = api_key if api_key is not None else os.environ.get("COMPRESSO_API_KEY")
        if not key or not key.strip():
            raise CompressoError(
                code="MISSING_API_KEY",
                message="No API key: pass Compresso(api_key=...) or set COMPRESSO_API_KEY. An operator makes one "
                "with `compresso keys create --account <email>` (the account needs the Pro plan); a key "
                "you already have can make more with client.keys.create().",
            )
        if max_retries < 0:
            raise ValueError(f"max_retries: expected an integer >= 0, received {max_retries!r}.")
        if timeout <= 0:
            raise ValueError(f"timeout: expected a number of seconds > 0, received {timeout!r}.")
        self.api_key = key.strip()
        self.base_url = _normalize_base_url(
            base_url or os.environ.get("COMPRESSO_BASE_URL") or DEFAULT_BASE_URL
        )
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.max_retry_after = float(max_retry_after)
        self.user_agent = user_agent or (
            f"compresso-python/{__version__} Python/{platform.python_version()}"
        )
        self.keys = Keys(self)
        self._closed = False
        # Proxies from the environment are honoured, as with any urllib program.
        self._opener = urllib.request.build_opener(_EarlyAnswerHTTPHandler(), _EarlyAnswerHTTPSHandler())

    def __repr__(self) -> str:
        # Never the key itself: reprs end up in logs and tracebacks.
        return f"Compresso(base_url={self.base_url!r}, key={self.api_key[:12]}…)"

    # -- lifecycle -----------------------------------------------------------------------------------

    def __enter__(self) -> "Compresso":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Refuse further calls. urllib keeps no connection open between calls, so nothing leaks."""
        self._closed = True

    # -- operations ----------------------------------------------------------------------------------

    def compress(
        self,
        path: ImageInput,
        output: Optional[PathLike] = None,
        quality: Optional[Quality] = None,
        max_dimension: Optional[int] = None,
        format: Optional[str] = None,
        strip_exif: bool = True,
        *,
        png_to_jpeg: Optional[bool] = None,
        overwrite: bool = False,
        filename: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> CompressResult:
        """Compress one image and write it.

        ``output`` is a file path, or an existing folder (the file keeps the input's name with the new
        format's extension). Without it, a path input is written beside itself as ``NAME.min.EXT``;
        bytes and file objects without a path are not written and the result carries ``data``. The
        input is never written over unless ``overwrite=True``.
        """
        source = _read_input(path, filename)
        if output is not None and not overwrite and not _is_folder(output):
            if _same_file(os.fspath(output), source.path):
                raise _onto_input(
                    f"output: {os.fspath(output)!r} is the input itself; pass overwrite=True to replace it."
                )
        response = self._post_image(
            "/api/v1/compress",
            source,
            _option_fields(quality, format, max_dimension, strip_exif, png_to_jpeg),
            timeout,
        )
        return self._finish_compress(response, source, output, overwrite=overwrite, output_dir=None)

    def info(
        self,
        path: ImageInput,
        quality: Optional[Quality] = None,
        format: Optional[str] = None,
        max_dimension: Optional[int] = None,
        *,
        strip_exif: Optional[bool] = None,
        png_to_jpeg: Optional[bool] = None,
        filename: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> InfoResult:
        """What compressing would give (sizes, dimensions, savings); nothing is saved anywhere."""
        source = _read_input(path, filename)
        response = self._post_image(
            "/api/v1/info",
            source,
            _option_fields(quality, format, max_dimension, strip_exif, png_to_jpeg),
            timeout,
        )
        return InfoResult.from_json(response.json())

    def compress_batch(
        self,
        paths: Iterable[ImageInput],
        output_dir: Optional[PathLike] = None,
        quality: Optional[Quality] = None,
        format: Optional[str] = None,
        *,
        max_dimension: Optional[int] = None,
        strip_exif: bool = True,
        png_to_jpeg: Optional[bool] = None,
        overwrite: bool = False,
        concurrency: int = DEFAULT_BATCH_CONCURRENCY,
        on_progress: Optional[ProgressCallback] = None,
    ) -> BatchResult:
        """Compress many images, ``concurrency`` at a time. Each input gets its own item, in input
        order, with its result or its error: one bad file never costs the others.

        With ``output_dir`` each output is ``output_dir/NAME.EXT``; without it, ``NAME.min.EXT`` beside
        its input. Two inputs that would land on the same output: the second fails with CONFLICT.
        ``on_progress(done, total, item)`` is called in this thread after each item.
        """
        inputs = list(paths)
        if concurrency < 1:
            raise ValueError(f"concurrency: expected an integer >= 1, received {concurrency!r}.")
        if output_dir is not None:
            os.makedirs(output_dir, exist_ok=True)
        fields = _option_fields(quality, format, max_dimension, strip_exif, png_to_jpeg)
        claims = _Claims(inputs)
        items: List[Optional[BatchItem]] = [None] * len(inputs)

        def one(index: int, image: ImageInput) -> BatchItem:
            return self._batch_item(index, image, fields, output_dir, overwrite, claims)

        with ThreadPoolExecutor(max_workers=min(concurrency, max(1, len(inputs)))) as pool:
            futures = [pool.submit(one, i, image) for i, image in enumerate(inputs)]
            done = 0
            for future in as_completed(futures):
                item = future.result()
                items[item.index] = item
                done += 1
                if on_progress is not None:
                    on_progress(done, len(inputs), item)
        return BatchResult(items=tuple(i for i in items if i is not None))

    def usage(self, *, timeout: Optional[float] = None) -> Usage:
        """The account's requests today (this one included), its limit and when it resets."""
        return Usage.from_json(self._request("GET", "/api/v1/usage", timeout=timeout).json())

    # -- internals -----------------------------------------------------------------------------------

    def _batch_item(
        self,
        index: int,
        image: ImageInput,
        fields: Sequence[Tuple[str, str]],
        output_dir: Optional[PathLike],
        overwrite: bool,
        claims: "_Claims",
    ) -> BatchItem:
        label = _label(image, index)
        try:
            source = _read_input(image)
            response = self._post_image("/api/v1/compress", source, fields, None)
            result = self._finish_compress(
                response,
                source,
                None,
                overwrite=overwrite,
                output_dir=output_dir,
                claims=claims,
                stem=claims.stem(index) if output_dir is not None else None,
            )
            return BatchItem(index=index, input=label, result=result)
        except Exception as exc:  # each item carries its own failure; the batch goes on
            return BatchItem(index=index, input=label, error=exc)

    def _post_image(
        self, path: str, source: _Source, fields: Sequence[Tuple[str, str]], timeout: Optional[float]
    ) -> _Response:
        body, content_type = encode_multipart(fields, "file", source.filename, source.content)
        # compress and info change nothing on the server but the day's count: safe to send again.
        return self._request(
            "POST", path, body=body, headers={"Content-Type": content_type}, timeout=timeout
        )

    def _finish_compress(
        self,
        response: _Response,
        source: _Source,
        output: Optional[PathLike],
        *,
        overwrite: bool,
        output_dir: Optional[PathLike],
        claims: Optional["_Claims"] = None,
        stem: Optional[str] = None,
    ) -> CompressResult:
        declared = response.headers.get("x-output-size")
        if declared is not None and declared.isdigit() and int(declared) != len(response.body):
            raise APIConnectionError(
                f"The answer was cut short: {len(response.body)} of {declared} bytes arrived.",
                request_id=response.headers.get("x-request-id"),
            )
        output_format = (response.headers.get("x-output-format") or "").lower()
        # The format names the extension of every path written below: one that could carry a path
        # ("../../x" from a hostile or compromised server) fails the call before anything is written.
        if not _SAFE_EXTENSION.fullmatch(output_format):
            raise APIError(
                f"The server's answer names no usable output format (X-Output-Format: {output_format[:40]!r}).",
                status=response.status,
                request_id=response.headers.get("x-request-id"),
                headers=response.headers,
            )
        destination: Optional[str] = None
        if output is not None:
            destination = os.fspath(output)
            if _is_folder(destination):
                destination = os.path.join(destination, _output_name(source, output_format, False))
        elif output_dir is not None:
            destination = os.path.join(os.fspath(output_dir), _output_name(source, output_format, False, stem))
        elif source.path is not None:
            destination = os.path.join(
                os.path.dirname(source.path), _output_name(source, output_format, True)
            )
        if destination is not None:
            destination = os.path.abspath(destination)
            if not overwrite and _same_file(destination, source.path):
                raise _onto_input(
                    f"{source.label}: the output {destination!r} is the input itself; pass overwrite=True "
                    "to replace it."
                )
            if claims is not None and not claims.claim(destination):
                raise _conflict(
                    f"{source.label}: another input of this batch already writes {destination!r}."
                )
            _write_atomically(destination, response.body)
        return _result_from_headers(response, source, destination, keep_data=destination is None)

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
    ) -> _Response:
        if self._closed:
            raise CompressoError("This client is closed.")
        all_headers = {
            "Authorization": f"Bearer {self.api_key}",
            "User-Agent": self.user_agent,
            "Accept": "application/json, image/*",
        }
        all_headers.update(headers or {})
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


class Keys:
    """``client.keys``: the API keys of the caller's account."""

    def __init__(self, client: Compresso) -> None:
        self._client = client

    def create(self, name: Optional[str] = None, *, timeout: Optional[float] = None) -> CreatedApiKey:
        """A new key for the same account. The secret is in ``.key``, shown only now."""
        payload = json.dumps({"name": name} if name is not None else {}).encode("utf-8")
        # Not idempotent: a request lost after it arrived may have made a key; it is not sent twice.
        response = self._client._request(
            "POST",
            "/api/v1/key",
            body=payload,
            headers={"Content-Type": "application/json"},
            timeout=timeout,
            idempotent=False,
        )
        return CreatedApiKey.from_json(response.json())

    def list(self, *, timeout: Optional[float] = None) -> List[ApiKey]:
        """The account's active keys (never a secret)."""
        data = self._client._request("GET", "/api/v1/keys", timeout=timeout).json()
        return [ApiKey.from_json(k) for k in data.get("keys", [])]

    def revoke(self, key_id: str, *, timeout: Optional[float] = None) -> KeyRevocation:
        """Revoke a key of this account; it fails from the next request on. Unknown ids raise
        NotFoundError. Answered even over the daily quota, so a leaked key can always be revoked."""
        if not isinstance(key_id, str) or not key_id:
            raise ValueError(f"key_id: expected a key id such as keys.list()[0].id, received {key_id!r}.")
        path = "/api/v1/keys/" + urllib.parse.quote(key_id, safe="")
        data = self._client._request("DELETE", path, timeout=timeout).json()
        return KeyRevocation(id=data["id"], revoked=bool(data["revoked"]))


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


class _Claims:
    """Output names of a batch, so two inputs never write the same file.

    Into ``output_dir`` each input gets a stem decided up front, in input order: a stem seen before
    gets ``-2``, ``-3``… (as the Node client and the MCP server name them), so ``a/logo.png`` and
    ``b/logo.png`` become ``logo.webp`` and ``logo-2.webp`` whichever finishes first. Beside their
    inputs, two items that would still land on one path (``x.png`` and ``x.jpg`` to WebP): the second
    to finish fails with CONFLICT rather than replace the first's output.
    """

    def __init__(self, inputs: Sequence[Any] = ()) -> None:
        self._lock = threading.Lock()
        self._taken: Set[str] = set()
        natural: List[str] = []
        for index, image in enumerate(inputs):
            name = _label(image, index) if not _unnamed(image) else f"image-{index + 1}"
            natural.append(os.path.splitext(os.path.basename(name.replace("\\", "/")))[0] or f"image-{index + 1}")
        # A suffixed name must be free in this batch and not another input's own name
        # (a/logo.png, b/logo.png, logo-2.png -> logo, logo-3, logo-2).
        reserved = {stem.lower() for stem in natural}
        used: Set[str] = set()
        self._stems: List[str] = []
        for stem in natural:
            name, n = stem, 2
            while name.lower() in used:
                candidate = f"{stem}-{n}"
                if candidate.lower() not in reserved:
                    name = candidate
                n += 1
            used.add(name.lower())
            self._stems.append(name)

    def stem(self, index: int) -> str:
        return self._stems[index]

    def claim(self, path: str) -> bool:
        key = os.path.normcase(path)
        with self._lock:
            if key in self._taken:
                return False
            self._taken.add(key)
            return True


def _timeout(seconds: float) -> APITimeoutError:
    return APITimeoutError(f"No answer within {seconds:g} s (timeout).")


def _lower(headers: Any) -> Dict[str, str]:
    return {k.lower(): v for k, v in headers.items()} if headers is not None else {}


def _unnamed(image: Any) -> bool:
    return not isinstance(image, (str, os.PathLike)) and not isinstance(getattr(image, "name", None), str)


def _label(image: Any, index: int) -> str:
    if isinstance(image, (str, os.PathLike)):
        return os.fspath(image)
    name = getattr(image, "name", None)
    return name if isinstance(name, str) else f"<input {index}>"
