"""The synchronous client, on urllib: one request per call, retried with backoff where that is safe."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple

from ._files import (
    ImageInput,
    PathLike,
    _Claims,
    _conflict,
    _is_folder,
    _label,
    _onto_input,
    _output_name,
    _read_input,
    _same_file,
    _Source,
    _write_atomically,
)
from ._jobs import Jobs
from ._multipart import encode_multipart
from ._transport import (
    DEFAULT_BASE_URL,
    _EarlyAnswerHTTPHandler,
    _EarlyAnswerHTTPSHandler,
    _normalize_base_url,
    _idempotency_key,
    _Response,
    _Transport,
)
from ._version import __version__
from ._wire import _SAFE_EXTENSION, _option_fields, _result_from_headers
from .errors import APIConnectionError, APIError, CompressoError
from .models import (
    AltTextResult,
    ApiKey,
    BatchItem,
    BatchResult,
    CompressResult,
    CreatedApiKey,
    EditResult,
    GenerateResult,
    InfoResult,
    KeyRevocation,
    Quality,
    Usage,
)

__all__ = ["Compresso", "Keys", "ImageInput", "ProgressCallback", "DEFAULT_BASE_URL", "DEFAULT_TIMEOUT"]

#: Called after each batch item with (done, total, item).
ProgressCallback = Callable[[int, int, BatchItem], Any]

#: Seconds to connect and for each read: an AVIF encode of a large photo keeps the socket quiet a while.
DEFAULT_TIMEOUT = 120.0
DEFAULT_MAX_RETRIES = 2
#: The longest Retry-After honoured before a retry; a longer one is waited this long.
DEFAULT_MAX_RETRY_AFTER = 60.0
DEFAULT_BATCH_CONCURRENCY = 4


class Compresso(_Transport):
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
        #: Server-side batch jobs (POST /api/v1/jobs): create, get, wait, download.
        self.jobs = Jobs(self)
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
        idempotency_key: Optional[str] = None,
    ) -> CompressResult:
        """Compress one image and write it.

        ``output`` is a file path, or an existing folder (the file keeps the input's name with the new
        format's extension). Without it, a path input is written beside itself as ``NAME.min.EXT``;
        bytes and file objects without a path are not written and the result carries ``data``. The
        input is never written over unless ``overwrite=True``. Sent with an Idempotency-Key (yours, or
        one made for this call, the same on each retry): a retry is answered once and counted once.
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
            idempotency_key,
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
        idempotency_key: Optional[str] = None,
    ) -> InfoResult:
        """What compressing would give (sizes, dimensions, savings); nothing is saved anywhere."""
        source = _read_input(path, filename)
        response = self._post_image(
            "/api/v1/info",
            source,
            _option_fields(quality, format, max_dimension, strip_exif, png_to_jpeg),
            timeout,
            idempotency_key,
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

    def generate(
        self,
        prompt: str,
        model: Optional[str] = None,
        format: Optional[str] = None,
        aspect_ratio: Optional[str] = None,
        quality: Optional[Quality] = None,
        *,
        max_dimension: Optional[int] = None,
        output_path: Optional[PathLike] = None,
        overwrite: bool = True,
        timeout: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> GenerateResult:
        """An image from a text prompt, made by the server's AI provider (``model``: fast, photo,
        design or icon) and compressed like :meth:`compress`. Written to ``output_path`` (a file, or a
        folder for ``generated.EXT``) when given; otherwise the bytes are in ``data``. Without a
        provider on the server: ServerError PROVIDER_NOT_CONFIGURED, never a placeholder image."""
        body: dict = {"prompt": prompt}
        for name, value in (
            ("model", model),
            ("output_format", format),
            ("aspect_ratio", aspect_ratio),
            ("quality", quality),
            ("max_dimension", max_dimension),
        ):
            if value is not None:
                body[name] = value
        response = self._request(
            "POST",
            "/api/v1/generate",
            body=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json"},
            timeout=timeout,
            idempotency_key=_idempotency_key(idempotency_key),
        )
        source = _Source(b"", "generated", None, "generated")
        result = self._finish_compress(response, source, output_path, overwrite=overwrite, output_dir=None)
        h = response.headers
        return GenerateResult(
            **_fields_of(result),
            provider=h.get("x-ai-provider", ""),
            model=h.get("x-ai-model", ""),
            aspect_ratio=h.get("x-aspect-ratio", ""),
            aspect_ratio_requested=h.get("x-aspect-ratio-requested"),
        )

    def edit(
        self,
        path: ImageInput,
        instruction: str,
        output: Optional[PathLike] = None,
        quality: Optional[Quality] = None,
        format: Optional[str] = None,
        max_dimension: Optional[int] = None,
        *,
        overwrite: bool = False,
        filename: Optional[str] = None,
        timeout: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> EditResult:
        """Edit an image by a plain-language instruction ("make it 800 wide and black and white").
        The result lists the ``operations`` applied and the words ``unrecognized``; it is written to
        ``output`` when given (nothing is written beside the input by default)."""
        source = _read_input(path, filename)
        if output is not None and not overwrite and not _is_folder(output):
            if _same_file(os.fspath(output), source.path):
                raise _onto_input(
                    f"output: {os.fspath(output)!r} is the input itself; pass overwrite=True to replace it."
                )
        fields = _option_fields(quality, format, max_dimension, None, None)
        fields.append(("instruction", instruction))
        response = self._post_image("/api/v1/edit", source, fields, timeout, idempotency_key)
        if "x-edit-operations" not in response.headers:
            raise APIError(
                "The server's answer lacks the X-Edit-Operations header.",
                status=response.status,
                request_id=response.headers.get("x-request-id"),
                headers=response.headers,
            )
        target = source if output is not None else _Source(source.content, source.filename, None, source.label)
        result = self._finish_compress(response, target, output, overwrite=overwrite, output_dir=None)
        h = response.headers
        return EditResult(
            **_fields_of(result),
            operations=tuple(_json_list(h.get("x-edit-operations"))),
            unrecognized=tuple(_json_list(h.get("x-edit-unrecognized"))),
            generated=tuple(_json_list(h.get("x-edit-generated"))),
            provider=h.get("x-ai-provider"),
            model=h.get("x-ai-model"),
        )

    def alt_text(
        self,
        path: ImageInput,
        product_title: Optional[str] = None,
        vendor: Optional[str] = None,
        page_title: Optional[str] = None,
        language: Optional[str] = None,
        *,
        filename: Optional[str] = None,
        timeout: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> AltTextResult:
        """Alt text for an image: written by the server's vision provider (``source == "provider"``)
        or composed offline from the context and measured facts (``source == "offline"``)."""
        source = _read_input(path, filename)
        fields = [
            (name, value)
            for name, value in (
                ("product_title", product_title),
                ("vendor", vendor),
                ("page_title", page_title),
                ("language", language),
            )
            if value is not None
        ]
        response = self._post_image("/api/v1/alt-text", source, fields, timeout, idempotency_key)
        return AltTextResult.from_json(response.json())

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
        self,
        path: str,
        source: _Source,
        fields: Sequence[Tuple[str, str]],
        timeout: Optional[float],
        idempotency_key: Optional[str] = None,
    ) -> _Response:
        body, content_type = encode_multipart(fields, "file", source.filename, source.content)
        # compress and info change nothing on the server but the day's count, and with one
        # Idempotency-Key for all attempts not even that twice: safe to send again.
        return self._request(
            "POST",
            path,
            body=body,
            headers={"Content-Type": content_type},
            timeout=timeout,
            idempotency_key=_idempotency_key(idempotency_key),
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


def _fields_of(result: CompressResult) -> dict:
    return {f.name: getattr(result, f.name) for f in dataclasses.fields(CompressResult)}


def _json_list(text: Optional[str]) -> list:
    # The edit headers are JSON arrays (non-ASCII as \\u escapes); anything else reads as empty.
    if text is None:
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return value if isinstance(value, list) else []


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
