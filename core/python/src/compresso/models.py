"""The contract, in Python: option names, formats, ranges, error codes and result types.

These mirror @compresso/schema. ``tests/test_schema_drift.py`` loads the JSON Schema that package
exports and fails when anything here drifts from it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple, Union

from typing import Literal  # in typing since 3.8, the oldest Python pyproject.toml allows

__all__ = [
    "OUTPUT_FORMATS",
    "INPUT_FORMATS",
    "OutputFormat",
    "InputFormat",
    "Quality",
    "QUALITY_MIN",
    "QUALITY_MAX",
    "DEFAULT_QUALITY",
    "MAX_DIMENSION_LIMIT",
    "COMPRESS_OPTION_FIELDS",
    "FILE_EXTENSIONS",
    "ERROR_STATUS",
    "InfoResult",
    "CompressResult",
    "ApiKey",
    "CreatedApiKey",
    "KeyRevocation",
    "Usage",
    "BatchItem",
    "BatchResult",
]

OutputFormat = Literal["jpeg", "png", "webp", "avif", "gif"]
InputFormat = Literal["jpeg", "png", "webp", "avif", "gif", "tiff", "heif"]
#: An integer from 1 to 100 on Compresso's one quality scale, or "auto".
Quality = Union[int, Literal["auto"]]
ChromaSubsampling = Literal["4:2:0", "4:4:4"]

OUTPUT_FORMATS: Tuple[str, ...] = ("jpeg", "png", "webp", "avif", "gif")
INPUT_FORMATS: Tuple[str, ...] = ("jpeg", "png", "webp", "avif", "gif", "tiff", "heif")
QUALITY_MIN = 1
QUALITY_MAX = 100
DEFAULT_QUALITY = 80
MAX_DIMENSION_LIMIT = 65535
#: The multipart field names of the compress and info requests.
COMPRESS_OPTION_FIELDS: Tuple[str, ...] = (
    "quality",
    "output_format",
    "max_dimension",
    "strip_exif",
    "png_to_jpeg",
)
FILE_EXTENSIONS: Dict[str, str] = {"jpeg": "jpg", "png": "png", "webp": "webp", "avif": "avif", "gif": "gif"}

#: Every error code the server can answer with, and its HTTP status.
ERROR_STATUS: Dict[str, int] = {
    "INVALID_OPTION": 400,
    "INVALID_REQUEST": 400,
    "MISSING_FILE": 400,
    "URL_NOT_ALLOWED": 400,
    "UNAUTHENTICATED": 401,
    "INVALID_API_KEY": 401,
    "PLAN_REQUIRED": 403,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "REQUEST_TIMEOUT": 408,
    "CONFLICT": 409,
    "IDEMPOTENCY_KEY_IN_USE": 409,
    "FILE_TOO_LARGE": 413,
    "UNSUPPORTED_FORMAT": 415,
    "NOT_AN_IMAGE": 415,
    "EMPTY_FILE": 422,
    "CORRUPT_IMAGE": 422,
    "IMAGE_TOO_LARGE": 422,
    "TOO_MANY_FRAMES": 422,
    "PROCESSING_TIMEOUT": 422,
    "URL_FETCH_FAILED": 422,
    "IDEMPOTENCY_KEY_REUSED": 422,
    "CONTENT_POLICY_VIOLATION": 422,
    "INSTRUCTION_NOT_UNDERSTOOD": 422,
    "QUOTA_EXCEEDED": 429,
    "RATE_LIMITED": 429,
    "INTERNAL_ERROR": 500,
    "PROVIDER_NOT_CONFIGURED": 501,
    "SERVICE_UNAVAILABLE": 503,
    "PROVIDER_ERROR": 502,
    "PROVIDER_RATE_LIMITED": 503,
    "PROVIDER_TIMEOUT": 504,
}


def _known(cls: type, data: Mapping[str, Any]) -> Dict[str, Any]:
    # A newer server may add members; an older client keeps working and ignores them.
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass(frozen=True)
class InfoResult:
    """What a compression did, or would do: the server's ``InfoResult``, member for member."""

    input_size: int
    output_size: int
    savings_percent: float
    input_format: InputFormat
    output_format: OutputFormat
    input_width: int
    input_height: int
    width: int
    height: int
    quality: int
    auto_quality: bool
    optimized: bool
    metadata_stripped: bool
    frames: int
    score: Optional[float] = None
    chroma_subsampling: Optional[ChromaSubsampling] = None
    lossless: Optional[bool] = None
    near_lossless: Optional[bool] = None
    effort: Optional[int] = None
    auto_steps: Optional[int] = None

    @property
    def dimensions(self) -> Tuple[int, int]:
        """(width, height) of the output in pixels."""
        return (self.width, self.height)

    @property
    def format(self) -> str:
        return self.output_format

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "InfoResult":
        return cls(**_known(cls, data))

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class CompressResult:
    """One compressed image: the same facts as :class:`InfoResult` (read from the answer's ``X-*``
    headers) plus where it was written.

    ``output_path`` is None only when the input had no path and no ``output`` was given; the bytes are
    then in ``data`` (``data`` is None once written, so a large batch does not hold every image).
    ``frames`` is None when the server did not report it on the compress answer.
    """

    input_size: int
    output_size: int
    savings_percent: float
    input_format: InputFormat
    output_format: OutputFormat
    input_width: int
    input_height: int
    width: int
    height: int
    quality: int
    auto_quality: bool
    optimized: bool
    metadata_stripped: bool
    output_path: Optional[str] = None
    frames: Optional[int] = None
    score: Optional[float] = None
    chroma_subsampling: Optional[ChromaSubsampling] = None
    lossless: Optional[bool] = None
    near_lossless: Optional[bool] = None
    effort: Optional[int] = None
    auto_steps: Optional[int] = None
    input_path: Optional[str] = None
    content_type: Optional[str] = None
    request_id: Optional[str] = None
    data: Optional[bytes] = field(default=None, repr=False)

    @property
    def dimensions(self) -> Tuple[int, int]:
        """(width, height) of the output in pixels."""
        return (self.width, self.height)

    @property
    def format(self) -> str:
        return self.output_format

    def to_dict(self) -> Dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("data", None)
        return out


@dataclass(frozen=True)
class ApiKey:
    """An API key as listed: never its secret."""

    id: str
    name: Optional[str]
    prefix: str
    created_at: str
    last_used_at: Optional[str] = None
    revoked_at: Optional[str] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ApiKey":
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class CreatedApiKey(ApiKey):
    """A new key. ``key`` is the secret: shown only in this answer, store it now."""

    key: str = field(default="", repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CreatedApiKey":
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class KeyRevocation:
    id: str
    revoked: bool


@dataclass(frozen=True)
class Usage:
    """The account's day: ``used`` includes the request that asked."""

    plan: str
    day: str
    used: int
    limit: int
    remaining: int
    resets_at: str
    resets_in_seconds: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Usage":
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class BatchItem:
    """One input of a batch, in input order: either ``result`` or ``error`` is set."""

    index: int
    input: str
    result: Optional[CompressResult] = None
    error: Optional[BaseException] = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class BatchResult:
    """Everything a batch did. Iterating gives every :class:`BatchItem` in input order; ``results``
    holds the successes and ``errors`` the failures, each failure with its own exception."""

    items: Tuple[BatchItem, ...]

    @property
    def results(self) -> Tuple[CompressResult, ...]:
        return tuple(i.result for i in self.items if i.result is not None)

    @property
    def errors(self) -> Tuple[BatchItem, ...]:
        return tuple(i for i in self.items if i.error is not None)

    @property
    def ok(self) -> bool:
        return all(i.ok for i in self.items)

    @property
    def input_size(self) -> int:
        return sum(r.input_size for r in self.results)

    @property
    def output_size(self) -> int:
        return sum(r.output_size for r in self.results)

    @property
    def savings_percent(self) -> float:
        """Share of the successful inputs' bytes saved, in percent, rounded to 0.1."""
        total = self.input_size
        return round(100.0 * (total - self.output_size) / total, 1) if total else 0.0

    def __iter__(self) -> Iterator[BatchItem]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> BatchItem:
        return self.items[index]


@dataclass(frozen=True)
class JobProgress:
    """How far a batch job is: items in all, done, failed, still queued, and the percentage finished."""

    total: int
    done: int
    failed: int
    queued: int
    percent: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "JobProgress":
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class JobItem:
    """One item of a batch job, as the server reports it (snake_case, member for member)."""

    index: int
    name: str
    #: ``queued``, ``done`` or ``failed``.
    status: str
    input_size: Optional[int] = None
    output_size: Optional[int] = None
    savings_percent: Optional[float] = None
    output_format: Optional[str] = None
    #: The server's file name for the result (``NAME.EXT``).
    output_name: Optional[str] = None
    width: Optional[int] = None
    height: Optional[int] = None
    #: Why the item failed: ``{"code": ..., "message": ..., "status": ...}`` (the status a single
    #: request would have answered with).
    error: Optional[Dict[str, Any]] = None
    download_url: Optional[str] = None
    finished_at: Optional[str] = None
    #: The source URL, for jobs made from URLs.
    url: Optional[str] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "JobItem":
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class Job:
    """A server-side batch job (POST /api/v1/jobs): "job" is work the server runs for you, where
    ``compress_batch`` is this client sending one compress request per input."""

    id: str
    #: ``queued``, ``running``, or ``completed`` once every item is done or failed.
    status: str
    created_at: str
    status_url: str
    options: Dict[str, Any]
    progress: JobProgress
    items: Tuple[JobItem, ...]

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Job":
        return cls(
            id=str(data["id"]),
            status=str(data["status"]),
            created_at=str(data.get("created_at", "")),
            status_url=str(data.get("status_url", "")),
            options=dict(data.get("options") or {}),
            progress=JobProgress.from_json(data["progress"]),
            items=tuple(JobItem.from_json(i) for i in data.get("items", [])),
        )


@dataclass(frozen=True)
class JobDownload:
    """One item of ``jobs.download()``, in item order: ``path`` written, or ``error`` (a failed item,
    or one not finished yet)."""

    index: int
    name: str
    item: JobItem
    path: Optional[str] = None
    error: Optional[BaseException] = None

    @property
    def ok(self) -> bool:
        return self.error is None


#: Our four generation models; the server maps each to a model of its AI provider.
AI_MODELS: Tuple[str, ...] = ("fast", "photo", "design", "icon")


@dataclass(frozen=True)
class GenerateResult(CompressResult):
    """A generated image: the compression facts plus who made it. ``aspect_ratio`` is the ratio made
    (the model's nearest to the one asked); ``aspect_ratio_requested`` is set when it differs."""

    provider: str = ""
    model: str = ""
    aspect_ratio: str = ""
    aspect_ratio_requested: Optional[str] = None


@dataclass(frozen=True)
class EditResult(CompressResult):
    """An edited image: the compression facts, the operations applied in order (each a dict such as
    ``{"op": "resize", "width": 800}``), the words not understood, and the phrases a generative
    provider carried out (with ``provider`` and ``model`` then)."""

    operations: Tuple[Dict[str, Any], ...] = ()
    unrecognized: Tuple[str, ...] = ()
    generated: Tuple[str, ...] = ()
    provider: Optional[str] = None
    model: Optional[str] = None


@dataclass(frozen=True)
class ImageFacts:
    """What the server measured on the image itself."""

    width: int
    height: int
    orientation: Literal["landscape", "portrait", "square"]
    dominant_color: str
    color_name: str
    transparent: bool

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ImageFacts":
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class AltTextResult:
    """Alt text and where it came from: ``source`` is ``"provider"`` when a vision model saw the image,
    ``"offline"`` when it was composed from the context and the measured ``facts`` (never describing
    content nobody saw). ``basis`` lists what it was made from."""

    alt: str
    source: Literal["provider", "offline"]
    language: str
    basis: Tuple[str, ...]
    facts: ImageFacts
    provider: Optional[str] = None
    model: Optional[str] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "AltTextResult":
        known = _known(cls, data)
        known["basis"] = tuple(known.get("basis", ()))
        known["facts"] = ImageFacts.from_json(data["facts"])
        return cls(**known)
