"""Compresso: the Python client of the Compresso image-optimization API.

    from compresso import Compresso

    with Compresso() as client:            # key from COMPRESSO_API_KEY, server from COMPRESSO_BASE_URL
        result = client.compress("photo.jpg", format="webp")
        print(result.output_path, result.savings_percent)
"""

from __future__ import annotations

from ._version import __version__
from ._jobs import Jobs
from .async_client import AsyncCompresso, AsyncJobs, AsyncKeys
from .client import DEFAULT_BASE_URL, DEFAULT_TIMEOUT, Compresso, ImageInput, Keys, ProgressCallback
from .errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    CompressoError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
    TooLargeError,
    UnsupportedImageError,
)
from .models import (
    AI_MODELS,
    AltTextResult,
    EditResult,
    GenerateResult,
    ImageFacts,
    COMPRESS_OPTION_FIELDS,
    DEFAULT_QUALITY,
    ERROR_STATUS,
    INPUT_FORMATS,
    MAX_DIMENSION_LIMIT,
    OUTPUT_FORMATS,
    ApiKey,
    BatchItem,
    BatchResult,
    CompressResult,
    CreatedApiKey,
    InfoResult,
    Job,
    JobDownload,
    JobItem,
    JobProgress,
    KeyRevocation,
    Usage,
)

__all__ = [
    "__version__",
    "Compresso",
    "AsyncCompresso",
    "Keys",
    "AsyncKeys",
    "Jobs",
    "AsyncJobs",
    "Job",
    "JobItem",
    "JobProgress",
    "JobDownload",
    "ImageInput",
    "ProgressCallback",
    "DEFAULT_BASE_URL",
    "DEFAULT_TIMEOUT",
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
    "InfoResult",
    "CompressResult",
    "GenerateResult",
    "EditResult",
    "AltTextResult",
    "ImageFacts",
    "AI_MODELS",
    "BatchItem",
    "BatchResult",
    "ApiKey",
    "CreatedApiKey",
    "KeyRevocation",
    "Usage",
    "OUTPUT_FORMATS",
    "INPUT_FORMATS",
    "DEFAULT_QUALITY",
    "MAX_DIMENSION_LIMIT",
    "COMPRESS_OPTION_FIELDS",
    "ERROR_STATUS",
]
