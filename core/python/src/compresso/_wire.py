"""The wire: compress options as form fields, and a compress answer's X-* headers as a result."""

from __future__ import annotations

import re
from typing import List, Mapping, Optional, Tuple

from ._files import _Source
from ._transport import _Response
from .errors import APIError
from .models import CompressResult, Quality

# Names that come from the server are chosen by whoever runs it. Output names here are always derived
# from the input (the server's Content-Disposition is never read), and the one server-chosen part of a
# path, the extension from X-Output-Format, must be a short run of letters and digits: the same rule as
# the Node client's safeExtension.
_SAFE_EXTENSION = re.compile(r"[a-z0-9]{1,16}")


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


