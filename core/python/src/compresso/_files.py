"""Inputs and outputs on this machine: reading an image into memory, naming and writing results
atomically, and the output names of a batch."""

from __future__ import annotations

import io
import os
import secrets
import threading
from typing import IO, Any, List, Optional, Sequence, Set, Tuple, Union

from .errors import CompressoError
from .models import FILE_EXTENSIONS

PathLike = Union[str, "os.PathLike[str]"]
#: A path, the image's bytes, or a binary file object opened for reading.
ImageInput = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, IO[bytes]]

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


def _unnamed(image: Any) -> bool:
    return not isinstance(image, (str, os.PathLike)) and not isinstance(getattr(image, "name", None), str)


def _label(image: Any, index: int) -> str:
    if isinstance(image, (str, os.PathLike)):
        return os.fspath(image)
    name = getattr(image, "name", None)
    return name if isinstance(name, str) else f"<input {index}>"
