"""``AsyncCompresso``: the same API as coroutines, for asyncio programs.

Standard library only, so there is no async HTTP stack to build on: each call runs the synchronous
client's urllib request in this client's own thread pool (``max_workers`` threads) and awaits it. The
event loop never blocks; requests, retries and errors are exactly those of :class:`Compresso`. A
cancelled call stops waiting at once, while its request finishes in its thread.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, List, Optional, Sequence, TypeVar, Union

from .client import (
    DEFAULT_BATCH_CONCURRENCY,
    DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_RETRY_AFTER,
    DEFAULT_TIMEOUT,
    Compresso,
    ImageInput,
    PathLike,
    ProgressCallback,
    _Claims,
    _option_fields,
)
from ._jobs import DEFAULT_DOWNLOAD_CONCURRENCY, DEFAULT_POLL_INTERVAL
from .errors import CompressoError
from .models import (
    AltTextResult,
    ApiKey,
    EditResult,
    GenerateResult,
    Job,
    JobDownload,
    BatchItem,
    BatchResult,
    CompressResult,
    CreatedApiKey,
    InfoResult,
    KeyRevocation,
    Quality,
    Usage,
)

__all__ = ["AsyncCompresso", "AsyncKeys", "AsyncJobs"]

T = TypeVar("T")


class AsyncCompresso:
    """The Compresso API as coroutines.

    >>> async with AsyncCompresso() as client:
    ...     batch = await client.compress_batch(paths, "out", format="webp")
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
        max_workers: int = 8,
    ) -> None:
        self._sync = Compresso(
            api_key,
            base_url,
            timeout=timeout,
            max_retries=max_retries,
            max_retry_after=max_retry_after,
            user_agent=user_agent,
        )
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="compresso")
        self.keys = AsyncKeys(self)
        #: Server-side batch jobs: see :class:`AsyncJobs`.
        self.jobs = AsyncJobs(self)

    @property
    def base_url(self) -> str:
        return self._sync.base_url

    @property
    def timeout(self) -> float:
        return self._sync.timeout

    @property
    def max_retries(self) -> int:
        return self._sync.max_retries

    def __repr__(self) -> str:
        return "Async" + repr(self._sync)

    async def __aenter__(self) -> "AsyncCompresso":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Refuse further calls and let the worker threads end once their requests are done."""
        self._sync.close()
        self._pool.shutdown(wait=False)

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._sync._closed:
            raise CompressoError("This client is closed.")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    async def generate(self, prompt: str, *args: Any, **kwargs: Any) -> GenerateResult:
        """See :meth:`Compresso.generate`."""
        return await self._run(self._sync.generate, prompt, *args, **kwargs)

    async def edit(self, path: ImageInput, instruction: str, *args: Any, **kwargs: Any) -> EditResult:
        """See :meth:`Compresso.edit`."""
        return await self._run(self._sync.edit, path, instruction, *args, **kwargs)

    async def alt_text(self, path: ImageInput, *args: Any, **kwargs: Any) -> AltTextResult:
        """See :meth:`Compresso.alt_text`."""
        return await self._run(self._sync.alt_text, path, *args, **kwargs)

    async def compress(
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
        """See :meth:`Compresso.compress`."""
        return await self._run(
            self._sync.compress,
            path,
            output,
            quality,
            max_dimension,
            format,
            strip_exif,
            png_to_jpeg=png_to_jpeg,
            overwrite=overwrite,
            filename=filename,
            timeout=timeout,
            idempotency_key=idempotency_key,
        )

    async def info(
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
        """See :meth:`Compresso.info`."""
        return await self._run(
            self._sync.info,
            path,
            quality,
            format,
            max_dimension,
            strip_exif=strip_exif,
            png_to_jpeg=png_to_jpeg,
            filename=filename,
            timeout=timeout,
            idempotency_key=idempotency_key,
        )

    async def compress_batch(
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
        """See :meth:`Compresso.compress_batch`; ``on_progress`` may also be a coroutine function."""
        inputs = list(paths)
        if concurrency < 1:
            raise ValueError(f"concurrency: expected an integer >= 1, received {concurrency!r}.")
        if output_dir is not None:
            os.makedirs(output_dir, exist_ok=True)
        fields = _option_fields(quality, format, max_dimension, strip_exif, png_to_jpeg)
        claims = _Claims(inputs)
        gate = asyncio.Semaphore(concurrency)
        items: List[Optional[BatchItem]] = [None] * len(inputs)
        done = 0

        async def one(index: int, image: ImageInput) -> None:
            nonlocal done
            async with gate:
                item = await self._run(
                    self._sync._batch_item, index, image, fields, output_dir, overwrite, claims
                )
            items[index] = item
            done += 1
            if on_progress is not None:
                outcome = on_progress(done, len(inputs), item)
                if inspect.isawaitable(outcome):
                    await outcome

        await asyncio.gather(*(one(i, image) for i, image in enumerate(inputs)))
        return BatchResult(items=tuple(i for i in items if i is not None))

    async def usage(self, *, timeout: Optional[float] = None) -> Usage:
        """See :meth:`Compresso.usage`."""
        return await self._run(self._sync.usage, timeout=timeout)


class AsyncKeys:
    """``client.keys`` of :class:`AsyncCompresso`."""

    def __init__(self, client: AsyncCompresso) -> None:
        self._client = client

    async def create(self, name: Optional[str] = None, *, timeout: Optional[float] = None) -> CreatedApiKey:
        return await self._client._run(self._client._sync.keys.create, name, timeout=timeout)

    async def list(self, *, timeout: Optional[float] = None) -> List[ApiKey]:
        return await self._client._run(self._client._sync.keys.list, timeout=timeout)

    async def revoke(self, key_id: str, *, timeout: Optional[float] = None) -> KeyRevocation:
        return await self._client._run(self._client._sync.keys.revoke, key_id, timeout=timeout)


class AsyncJobs:
    """``client.jobs`` of :class:`AsyncCompresso`: see :class:`compresso._jobs.Jobs`. ``wait`` polls
    with ``asyncio.sleep`` (the loop is free between polls) and ``on_progress`` may be a coroutine
    function."""

    def __init__(self, client: AsyncCompresso) -> None:
        self._client = client

    async def create(
        self,
        files: Optional[Sequence[ImageInput]] = None,
        urls: Optional[Sequence[str]] = None,
        **options: Any,
    ) -> Job:
        return await self._client._run(self._client._sync.jobs.create, files, urls, **options)

    async def get(self, job: Union[str, Job], *, timeout: Optional[float] = None) -> Job:
        return await self._client._run(self._client._sync.jobs.get, job, timeout=timeout)

    async def wait(
        self,
        job: Union[str, Job],
        *,
        on_progress: Optional[Callable[[Job], Any]] = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        timeout: Optional[float] = None,
    ) -> Job:
        jobs = self._client._sync.jobs
        job_id = job.id if isinstance(job, Job) else job
        if poll_interval < 0:
            raise ValueError(f"poll_interval: expected seconds >= 0, received {poll_interval!r}.")
        seen = None
        while True:
            current, retry_after = await self._client._run(jobs._get, job_id, timeout)
            state = (current.status, current.progress.done, current.progress.failed)
            if state != seen:
                seen = state
                if on_progress is not None:
                    outcome = on_progress(current)
                    if inspect.isawaitable(outcome):
                        await outcome
            if current.completed:
                return current
            await asyncio.sleep(
                min(retry_after, self._client._sync.max_retry_after) if retry_after is not None else poll_interval
            )

    async def download(
        self,
        job: Union[str, Job],
        output_dir: PathLike,
        *,
        concurrency: int = DEFAULT_DOWNLOAD_CONCURRENCY,
        timeout: Optional[float] = None,
    ) -> List[JobDownload]:
        return await self._client._run(
            self._client._sync.jobs.download, job, output_dir, concurrency=concurrency, timeout=timeout
        )
