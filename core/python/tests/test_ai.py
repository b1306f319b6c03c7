"""generate, edit and alt_text (sync and async) against the real server: with no AI provider (the
shared server), and with an OpenAI-compatible provider — a loopback fake of its API that answers
real PNGs of the size asked, as the real images API does."""

from __future__ import annotations

import asyncio
import base64
import http.server
import json
import os
import shutil
import struct
import tempfile
import threading
import unittest
import urllib.request
import uuid
import zlib
from typing import Any, Dict, List

from _support import RealServer, corpus, shared_key, shared_server

from compresso import (
    AltTextResult,
    AsyncCompresso,
    BadRequestError,
    Compresso,
    EditResult,
    GenerateResult,
    ServerError,
)

OPENAI_KEY = "sk-python-test"


def png(width: int, height: int) -> bytes:
    """A real RGB PNG, a gradient, written with zlib: the standard library has no image encoder."""
    rows = b"".join(
        b"\x00" + bytes(v for x in range(width) for v in ((x * 255) // width, (y * 255) // height, 128))
        for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def png_size(data: bytes) -> tuple:
    return struct.unpack(">II", data[16:24])


class FakeOpenAI:
    """POST /v1/images/generations (JSON; the sizes of gpt-image models), /v1/images/edits
    (multipart) and /v1/chat/completions (an image_url part required), with Bearer auth."""

    def __init__(self) -> None:
        self.requests: List[Dict[str, Any]] = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _json(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                fake.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                if self.headers.get("Authorization") != f"Bearer {OPENAI_KEY}":
                    return self._json(401, {"error": {"message": "Incorrect API key provided.", "code": "invalid_api_key"}})
                if self.path == "/v1/images/generations":
                    request = json.loads(body)
                    sizes = {"1024x1024", "1536x1024", "1024x1536"}
                    if request.get("size") not in sizes:
                        return self._json(400, {"error": {"message": "Invalid size", "code": "invalid_value"}})
                    width, height = (int(n) // 8 for n in request["size"].split("x"))
                    return self._json(200, {"created": 1, "data": [{"b64_json": base64.b64encode(png(width, height)).decode()}]})
                if self.path == "/v1/images/edits":
                    if b'name="image"' not in body or b'name="prompt"' not in body:
                        return self._json(400, {"error": {"message": "image and prompt are required"}})
                    return self._json(200, {"created": 1, "data": [{"b64_json": base64.b64encode(png(64, 64)).decode()}]})
                if self.path == "/v1/chat/completions":
                    if b"data:image/jpeg;base64," not in body:
                        return self._json(400, {"error": {"message": "Expected an image_url part."}})
                    return self._json(
                        200,
                        {
                            "object": "chat.completion",
                            "model": "gpt-4o-mini-2024-07-18",
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": "A rocket on its launch pad."}, "finish_reason": "stop"}],
                        },
                    )
                return self._json(404, {"error": {"message": "no such path"}})

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def raw_edit(url: str, key: str, image: bytes, instruction: str) -> bytes:
    """The edit request made by hand (multipart with urllib), as curl would send it."""
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="instruction"\r\n\r\n{instruction}\r\n'.encode(),
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="photo.jpg"\r\n'
        "Content-Type: image/jpeg\r\n\r\n".encode()
        + image
        + b"\r\n",
        f"--{boundary}--\r\n".encode(),
    ]
    request = urllib.request.Request(
        f"{url}/api/v1/edit",
        data=b"".join(parts),
        headers={"Authorization": f"Bearer {key}", "Content-Type": f"multipart/form-data; boundary={boundary}"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read()


class WithoutProviderTests(unittest.TestCase):
    def setUp(self) -> None:
        self.client = Compresso(shared_key(), shared_server().url)
        self.dir = tempfile.mkdtemp(prefix="compresso-ai-")

    def tearDown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_generate_is_provider_not_configured(self) -> None:
        with self.assertRaises(ServerError) as caught:
            self.client.generate("a red bicycle", model="photo", format="webp")
        self.assertEqual((caught.exception.code, caught.exception.status), ("PROVIDER_NOT_CONFIGURED", 501))
        self.assertIn("OPENAI_API_KEY", str(caught.exception))

    def test_edit_applies_the_instruction_with_the_same_bytes_as_a_hand_made_request(self) -> None:
        photo = corpus("photo-skimage-rocket.jpg")
        result = self.client.edit(photo, "make it 200 wide and black and white, groovy")
        self.assertIsInstance(result, EditResult)
        self.assertEqual(result.operations, ({"op": "resize", "width": 200}, {"op": "grayscale"}))
        self.assertEqual(result.unrecognized, ("groovy",))
        self.assertEqual((result.width, result.format, result.output_path), (200, "jpeg", None))
        by_hand = raw_edit(shared_server().url, shared_key(), photo.read_bytes(), "make it 200 wide and black and white, groovy")
        self.assertEqual(result.data, by_hand)
        out = os.path.join(self.dir, "rotated.webp")
        rotated = self.client.edit(str(photo), "rotate left and convert to webp", output=out)
        self.assertEqual(rotated.output_path, out)
        self.assertEqual((rotated.width, rotated.height), (result.input_height, result.input_width))

    def test_edit_refusals_are_typed(self) -> None:
        photo = corpus("photo-skimage-rocket.jpg")
        with self.assertRaises(BadRequestError) as pop:
            self.client.edit(photo, "make it pop")
        self.assertEqual(pop.exception.code, "INSTRUCTION_NOT_UNDERSTOOD")
        with self.assertRaises(ServerError) as generative:
            self.client.edit(photo, "blur the background")
        self.assertEqual(generative.exception.code, "PROVIDER_NOT_CONFIGURED")

    def test_alt_text_offline(self) -> None:
        result = self.client.alt_text(corpus("graphic-skimage-text.png"), product_title="Text sample", vendor="scikit-image")
        self.assertIsInstance(result, AltTextResult)
        self.assertEqual((result.source, result.language), ("offline", "en"))
        self.assertTrue(result.alt.startswith("Text sample by scikit-image — "))
        self.assertIn("dominant_color", result.basis)
        self.assertIn(result.facts.orientation, ("landscape", "portrait", "square"))

    def test_async_edit_and_alt_text(self) -> None:
        async def main() -> tuple:
            async with AsyncCompresso(shared_key(), shared_server().url) as client:
                return (
                    await client.edit(corpus("photo-skimage-rocket.jpg"), "crop to square"),
                    await client.alt_text(corpus("photo-skimage-rocket.jpg"), page_title="Launch day"),
                )

        edited, alt = asyncio.run(main())
        self.assertEqual(edited.width, edited.height)
        self.assertEqual(alt.basis[0], "page_title")


class WithProviderTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.fake = FakeOpenAI()
        cls.server = RealServer({"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": cls.fake.url})
        cls.key = cls.server.account("ai@example.com")
        cls.server.start()
        cls.dir = tempfile.mkdtemp(prefix="compresso-ai-")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()
        cls.fake.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_generate_writes_the_format_and_ratio_asked(self) -> None:
        client = Compresso(self.key, self.server.url)
        out = os.path.join(self.dir, "boat.png")
        result = client.generate("a paper boat", model="photo", format="png", aspect_ratio="16:9", output_path=out)
        self.assertIsInstance(result, GenerateResult)
        self.assertEqual(
            (result.provider, result.model, result.aspect_ratio, result.aspect_ratio_requested, result.output_path),
            ("openai", "gpt-image-1", "3:2", "16:9", out),
        )
        with open(out, "rb") as f:
            self.assertEqual(png_size(f.read()), (192, 128))
        sent = json.loads(self.fake.requests[-1]["body"])
        self.assertEqual(sent, {"model": "gpt-image-1", "prompt": "a paper boat", "n": 1, "size": "1536x1024"})
        self.assertEqual(self.fake.requests[-1]["auth"], f"Bearer {OPENAI_KEY}")

    def test_async_generate_and_provider_alt_text(self) -> None:
        async def main() -> tuple:
            async with AsyncCompresso(self.key, self.server.url) as client:
                return (
                    await client.generate("an icon of a kite", model="icon", format="webp"),
                    await client.alt_text(corpus("photo-skimage-rocket.jpg"), product_title="Rocket", language="fr"),
                )

        image, alt = asyncio.run(main())
        self.assertEqual((image.format, image.output_path, image.model), ("webp", None, "gpt-image-1-mini"))
        self.assertTrue(image.data and image.data[8:12] == b"WEBP")
        self.assertEqual((alt.source, alt.language, alt.provider, alt.alt), ("provider", "fr", "openai", "A rocket on its launch pad."))

    def test_generative_edit_goes_to_the_provider(self) -> None:
        client = Compresso(self.key, self.server.url)
        result = client.edit(corpus("photo-skimage-rocket.jpg"), "remove the background and convert to png")
        self.assertEqual((result.generated, result.provider, result.format), (("remove the background",), "openai", "png"))
        self.assertEqual(self.fake.requests[-1]["path"], "/v1/images/edits")


if __name__ == "__main__":
    unittest.main()
