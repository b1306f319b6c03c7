"""``client.jobs``: server-side batch jobs (POST /api/v1/jobs) — submit files or URLs once, poll,
download the results. Compare ``compress_batch``, which sends one compress request per input."""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Tuple, Union

from ._files import ImageInput, PathLike, _read_input, _write_atomically
from ._multipart import encode_multipart_files
from ._transport import _idempotency_key
from ._wire import _SAFE_EXTENSION, _option_fields
from .errors import BadRequestError, CompressoError, _BY_CODE, _retry_after_seconds
from .models import Job, JobDownload, JobItem, Quality

if TYPE_CHECKING:
    from .client import Compresso

#: Called with the job after each change of its progress (and with the first state seen).
JobProgressCallback = Callable[[Job], Any]

DEFAULT_POLL_INTERVAL = 1.0
DEFAULT_DOWNLOAD_CONCURRENCY = 4

# A name the server chose is used only when it already is one plain file name: no path separator,
# drive or stream colon, control character, or a name of dots only (as the Node client's safeFileName).
_UNSAFE_NAME = re.compile(r"[/\\:\x00-\x1f\x7f-\x9f]|^\.+$")


def _job_id(job: Union[str, Job]) -> str:
    job_id = job.id if isinstance(job, Job) else job
    if not isinstance(job_id, str) or not job_id:
        raise ValueError(f"job: expected a job id or a Job, received {job!r}.")
    return job_id


def _plain_name(name: Optional[str]) -> Optional[str]:
    if not name or _UNSAFE_NAME.search(name) or len(name.encode("utf-8")) > 255:
        return None
    return name


def _file_names(items: Sequence[JobItem]) -> List[str]:
    used = set()
    names = []
    for item in items:
        fmt = (item.output_format or "").lower()
        ext = fmt if _SAFE_EXTENSION.fullmatch(fmt) else "bin"
        stem = os.path.splitext(os.path.basename(item.name.replace("\\", "/")))[0]
        name = _plain_name(item.output_name) or _plain_name(f"{stem}.{ext}") or f"image-{item.index}.{ext}"
        base, dot_ext = os.path.splitext(name)
        candidate, n = name, 2
        while candidate.lower() in used:
            candidate = f"{base}-{n}{dot_ext}"
            n += 1
        used.add(candidate.lower())
        names.append(candidate)
    return names


def _item_error(item: JobItem) -> CompressoError:
    if item.error:
        code = str(item.error.get("code", "INTERNAL_ERROR"))
        cls = _BY_CODE.get(code, CompressoError)
        status = item.error.get("status")
        return cls(
            f"Item {item.index} ({item.name}): {item.error.get('message', '')}",
            code=code,
            status=int(status) if isinstance(status, int) else None,
        )
    return BadRequestError(f"Item {item.index} ({item.name}) is not finished yet ({item.status}).", code="CONFLICT")


class Jobs:
    """``client.jobs``: batch jobs the server runs. A job is counted as one request per item, at
    submission; polling and downloading are not counted."""

    def __init__(self, client: "Compresso") -> None:
        self._client = client

    def create(
        self,
        files: Optional[Sequence[ImageInput]] = None,
        urls: Optional[Sequence[str]] = None,
        *,
        quality: Optional[Quality] = None,
        format: Optional[str] = None,
        max_dimension: Optional[int] = None,
        strip_exif: Optional[bool] = None,
        png_to_jpeg: Optional[bool] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> Job:
        """Submit ``files`` (paths, bytes, binary file objects) or ``urls`` for the server to fetch,
        with one set of options for every item; answered at once with the queued job. Sent with an
        Idempotency-Key (yours, or one made for this call): a retry never makes a second job."""
        if (files is None) == (urls is None):
            raise ValueError("files / urls: give exactly one of them (a list of images, or a list of URLs).")
        listed = list(files if files is not None else urls)  # type: ignore[arg-type]
        if not listed:
            raise ValueError(f"{'files' if files is not None else 'urls'}: expected a non-empty list.")
        fields = _option_fields(quality, format, max_dimension, strip_exif, png_to_jpeg)
        key = _idempotency_key(idempotency_key)
        if files is not None:
            sources = [_read_input(image) for image in listed]
            body, content_type = encode_multipart_files(
                fields, "file", [(s.filename, s.content, None) for s in sources]
            )
        else:
            body = json.dumps({"urls": listed, "options": dict(fields)}).encode("utf-8")
            content_type = "application/json"
        response = self._client._request(
            "POST",
            "/api/v1/jobs",
            body=body,
            headers={"Content-Type": content_type},
            timeout=timeout,
            idempotency_key=key,
        )
        return Job.from_json(response.json())

    def get(self, job: Union[str, Job], *, timeout: Optional[float] = None) -> Job:
        """The job's progress and every item."""
        return self._get(_job_id(job), timeout)[0]

    def _get(self, job_id: str, timeout: Optional[float]) -> Tuple[Job, Optional[float]]:
        path = "/api/v1/jobs/" + urllib.parse.quote(job_id, safe="")
        response = self._client._request("GET", path, timeout=timeout)
        return Job.from_json(response.json()), _retry_after_seconds(response.headers)

    def wait(
        self,
        job: Union[str, Job],
        *,
        on_progress: Optional[JobProgressCallback] = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        timeout: Optional[float] = None,
    ) -> Job:
        """Poll until every item is done or failed, and return the job (failed items included: see
        ``item.error``). Between polls it waits the server's Retry-After when one comes (capped by
        ``max_retry_after``), else ``poll_interval`` seconds. ``on_progress(job)`` is called with the
        first state and after every change. ``timeout`` is per request, as everywhere."""
        job_id = _job_id(job)
        if poll_interval < 0:
            raise ValueError(f"poll_interval: expected seconds >= 0, received {poll_interval!r}.")
        seen = None
        while True:
            current, retry_after = self._get(job_id, timeout)
            state = (current.status, current.progress.done, current.progress.failed)
            if state != seen:
                seen = state
                if on_progress is not None:
                    on_progress(current)
            if current.completed:
                return current
            time.sleep(
                min(retry_after, self._client.max_retry_after) if retry_after is not None else poll_interval
            )

    def download(
        self,
        job: Union[str, Job],
        output_dir: PathLike,
        *,
        concurrency: int = DEFAULT_DOWNLOAD_CONCURRENCY,
        timeout: Optional[float] = None,
    ) -> List[JobDownload]:
        """Write each finished item's result into ``output_dir`` (created when missing); one entry per
        item, in item order, with the path written or the item's error. Names are the server's
        ``output_name`` when it is one plain file name, else ``STEM.FORMAT``; a name used twice gets
        ``-2``, ``-3``…."""
        if concurrency < 1:
            raise ValueError(f"concurrency: expected an integer >= 1, received {concurrency!r}.")
        current = job if isinstance(job, Job) else self.get(job, timeout=timeout)
        folder = os.path.abspath(os.fspath(output_dir))
        os.makedirs(folder, exist_ok=True)
        names = _file_names(current.items)

        def one(position: int) -> JobDownload:
            item = current.items[position]
            if item.status != "done":
                return JobDownload(index=item.index, name=item.name, item=item, error=_item_error(item))
            try:
                path = f"/api/v1/jobs/{urllib.parse.quote(current.id, safe='')}/items/{item.index}"
                response = self._client._request("GET", path, timeout=timeout)
                target = os.path.join(folder, names[position])
                _write_atomically(target, response.body)
                return JobDownload(index=item.index, name=item.name, item=item, path=target)
            except Exception as exc:  # each item carries its own failure; the others go on
                return JobDownload(index=item.index, name=item.name, item=item, error=exc)

        with ThreadPoolExecutor(max_workers=min(concurrency, max(1, len(current.items)))) as pool:
            return list(pool.map(one, range(len(current.items))))
