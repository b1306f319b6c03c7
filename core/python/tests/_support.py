"""Test support: the real server (``compresso serve`` on Node), accounts and keys made with the real
``compresso`` CLI, corpus images, and a loopback fake for faults the real server will not produce."""

from __future__ import annotations

import atexit
import http.server
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Callable, Dict, List, Optional

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent
ROOT = PACKAGE.parent.parent

# The tests exercise the source tree, not whatever copy of compresso may be installed.
sys.path.insert(0, str(PACKAGE / "src"))

CLI = ROOT / "core" / "cli" / "src" / "bin.ts"
CORPUS = Path(os.environ.get("COMPRESSO_CORPUS", ROOT.parent / "shared" / "corpus"))


def node_binary() -> str:
    """Node 24, pinned by the repository (the system Node may be older and cannot strip types)."""
    explicit = os.environ.get("COMPRESSO_NODE")
    if explicit:
        return explicit
    pinned = ROOT / "node_modules" / ".bin" / "node"
    if pinned.exists():
        return str(pinned)
    found = shutil.which("node")
    if not found:
        raise RuntimeError("node not found: run `npm ci` at the repository root (it pins Node 24).")
    return found


def corpus(name: str) -> Path:
    path = CORPUS / name
    if not path.is_file():
        raise RuntimeError(f"corpus image {path} is missing (set COMPRESSO_CORPUS to the corpus folder)")
    return path


def _child_env(data_dir: str, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPRESSO_") and k != "DATABASE_URL"}
    env.update({"COMPRESSO_DATA_DIR": data_dir, "LOG_LEVEL": "warn", "MALLOC_ARENA_MAX": "2"})
    env.update(extra or {})
    return env


def cli(data_dir: str, *args: str, env: Optional[Dict[str, str]] = None) -> str:
    done = subprocess.run(
        [node_binary(), str(CLI), *args],
        env=_child_env(data_dir, env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        raise RuntimeError(f"compresso {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return done.stdout.strip()


def _die_with_parent() -> None:
    # Linux: the server gets SIGTERM when this test process dies, even killed, so no `compresso serve`
    # outlives an interrupted run. Elsewhere the atexit hook below is the only cleanup.
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class RealServer:
    """``compresso serve`` on a free port, with its own data folder, accounts and keys."""

    def __init__(self, env: Optional[Dict[str, str]] = None) -> None:
        self.data_dir = tempfile.mkdtemp(prefix="compresso-py-")
        self.env = env or {}
        self.process: Optional[subprocess.Popen] = None
        self.url = ""
        self._log: List[str] = []

    def account(self, email: str, pro: bool = True) -> str:
        """Make an account (on Pro unless told otherwise) and return a fresh API key for it."""
        # With the server's environment: a DATABASE_URL there is where the account must be.
        env = self.env
        cli(self.data_dir, "account", "create", "--email", email, env=env)
        if pro:
            code = "P" + re.sub(r"[^A-Za-z0-9]", "", email).upper()[:20]
            cli(
                self.data_dir, "promo", "create", code, "--plan", "pro", "--uses", "1", "--expires", "2099-01-01", env=env
            )
            cli(self.data_dir, "account", "plan", email, "--promo", code, env=env)
        return cli(self.data_dir, "keys", "create", "--account", email, "--name", "python-tests", env=env)

    def start(self) -> "RealServer":
        self.process = subprocess.Popen(
            [node_binary(), str(CLI), "serve", "--port", "0", "--host", "127.0.0.1"],
            env=_child_env(self.data_dir, self.env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        assert self.process.stderr is not None and self.process.stdout is not None
        # Drain stdout in the background so a chatty log can never fill the pipe and stall the server.
        threading.Thread(target=self._drain, args=(self.process.stdout,), daemon=True).start()
        for line in self.process.stderr:
            self._log.append(line)
            found = re.search(r"serving (http://\S+)/api/v1", line)
            if found:
                self.url = found.group(1)
                break
        if not self.url:
            self.process.wait(timeout=10)
            raise RuntimeError("compresso serve did not start:\n" + "".join(self._log))
        threading.Thread(target=self._drain, args=(self.process.stderr,), daemon=True).start()
        atexit.register(self.stop)
        return self

    def _drain(self, stream) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            if len(self._log) < 2000:
                self._log.append(line)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self.data_dir, ignore_errors=True)


_shared: Optional[RealServer] = None
_shared_keys: Dict[str, str] = {}
_shared_lock = threading.Lock()

#: The main test server refuses uploads over this many bytes (413 FILE_TOO_LARGE).
MAX_UPLOAD_BYTES = 4_000_000


def shared_server() -> RealServer:
    """One real server for the whole run (starting Node costs a second or two)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            server = RealServer(
                {"COMPRESSO_MAX_UPLOAD_BYTES": str(MAX_UPLOAD_BYTES), "COMPRESSO_PRO_DAILY_LIMIT": "100000"}
            )
            _shared_keys["pro"] = server.account("pro@example.com")
            _shared_keys["free"] = server.account("free@example.com", pro=False)
            _shared = server.start()
        return _shared


def shared_key(kind: str = "pro") -> str:
    shared_server()
    return _shared_keys[kind]


# -- loopback fake --------------------------------------------------------------------------------------

Handler = Callable[[http.server.BaseHTTPRequestHandler, int], None]


class FakeServer:
    """A loopback HTTP server whose answer to the n-th request (0-based) is decided by ``script``.

    It stands in for what the real server will not do on demand: reset a connection, answer 503, stall.
    """

    def __init__(self, script: Handler) -> None:
        self.requests: List[Dict[str, object]] = []
        fake = self

        class _Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                n = len(fake.requests)
                fake.requests.append(
                    {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
                )
                script(self, n)

            do_GET = do_POST = do_DELETE = _any

        class _Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                pass  # the faults are deliberate: a reset connection is not news

        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "FakeServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def reset_connection(handler: http.server.BaseHTTPRequestHandler) -> None:
    """Close with RST (SO_LINGER 0), as a crashed process or a dropping proxy would."""
    import struct

    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.connection.close()
    handler.close_connection = True


def answer(
    handler: http.server.BaseHTTPRequestHandler,
    status: int,
    body: bytes = b"",
    headers: Optional[Dict[str, str]] = None,
) -> None:
    handler.send_response(status)
    for k, v in (headers or {}).items():
        handler.send_header(k, v)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def json_error(code: str, status: int, message: str = "fake", headers: Optional[Dict[str, str]] = None):  # type: ignore[no-untyped-def]
    import json

    body = json.dumps({"error": {"code": code, "message": message, "request_id": "req-fake"}}).encode()
    return status, body, {"Content-Type": "application/json", **(headers or {})}


def compress_headers(size: int, fmt: str = "webp") -> Dict[str, str]:
    """The headers of a real compress answer, for fakes that answer a compress successfully."""
    return {
        "Content-Type": f"image/{fmt}",
        "X-Input-Size": "1000",
        "X-Output-Size": str(size),
        "X-Savings-Percent": str(round(100 * (1000 - size) / 1000, 1)),
        "X-Width": "10",
        "X-Height": "8",
        "X-Input-Width": "10",
        "X-Input-Height": "8",
        "X-Input-Format": "jpeg",
        "X-Output-Format": fmt,
        "X-Quality": "80",
        "X-Auto-Quality": "false",
        "X-Optimized": "true",
        "X-Metadata-Stripped": "true",
        "X-Request-Id": "req-fake",
    }


class recorded_sleeps:  # noqa: N801 - used as a context manager, like unittest.mock.patch
    """Replace the client's pause between attempts with a recorder: `with recorded_sleeps() as waits:`.

    What the client chose to wait, and how often, is then asserted exactly (`waits == [1.0]`), instead of
    timing the call, which measured the machine's load as much as the retry policy. Only the client
    module's reference to `time` is replaced, so fake servers' threads keep the real one.
    """

    def __enter__(self) -> List[float]:
        import types

        # The retry loop lives in the transport module (compresso._transport) since client.py was split.
        from compresso import _transport as client_module

        self._module = client_module
        self._time = client_module.time
        waits: List[float] = []
        names = [name for name in dir(self._time) if not name.startswith("__")]
        fake = types.SimpleNamespace(**{name: getattr(self._time, name) for name in names})
        fake.sleep = waits.append
        client_module.time = fake  # type: ignore[assignment]
        return waits

    def __exit__(self, *exc: object) -> None:
        self._module.time = self._time  # type: ignore[assignment]
