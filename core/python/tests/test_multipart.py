"""The multipart encoder, checked by parsing its output with the standard library's MIME parser."""

from __future__ import annotations

import email.parser
import email.policy
import unittest
from unittest import mock

from _support import corpus

from compresso import _multipart
from compresso._multipart import encode_multipart, sniff_content_type


def parse(body: bytes, content_type: str):  # type: ignore[no-untyped-def]
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body
    )
    return list(message.iter_parts())


class MultipartTests(unittest.TestCase):
    def test_round_trip_fields_and_file(self) -> None:
        image = corpus("photo-skimage-rocket.jpg").read_bytes()
        body, content_type = encode_multipart(
            [("quality", "75"), ("output_format", "webp")], "file", "rocket.jpg", image
        )
        self.assertTrue(content_type.startswith("multipart/form-data; boundary=compresso-"))
        boundary = content_type.split("boundary=")[1].encode()
        self.assertTrue(body.startswith(b"--" + boundary + b"\r\n"))
        self.assertTrue(body.endswith(b"\r\n--" + boundary + b"--\r\n"))
        parts = parse(body, content_type)
        self.assertEqual([p.get_param("name", header="content-disposition") for p in parts],
                         ["quality", "output_format", "file"])
        self.assertEqual(parts[0].get_payload(decode=True), b"75")
        self.assertEqual(parts[2].get_filename(), "rocket.jpg")
        self.assertEqual(parts[2].get_content_type(), "image/jpeg")
        self.assertEqual(parts[2].get_payload(decode=True), image)

    def test_boundary_never_occurs_in_the_content(self) -> None:
        colliding = bytes.fromhex("00" * 16)
        content = b"prefix compresso-" + colliding.hex().encode() + b" suffix"
        draws = iter([colliding, bytes.fromhex("11" * 16)])
        with mock.patch.object(_multipart.os, "urandom", lambda n: next(draws)):
            body, content_type = encode_multipart([], "file", "a.bin", content)
        self.assertIn("boundary=compresso-" + "11" * 16, content_type)
        self.assertEqual(body.count(("--compresso-" + "11" * 16).encode()), 2)
        self.assertEqual(parse(body, content_type)[0].get_payload(decode=True), content)

    def test_filename_quotes_and_line_breaks_are_escaped(self) -> None:
        body, content_type = encode_multipart([], "file", 'a "b"\r\nc ☀.png', b"\x89PNG\r\n\x1a\n")
        header = body.split(b"\r\n")[1].decode("utf-8")
        self.assertEqual(header, 'Content-Disposition: form-data; name="file"; filename="a %22b%22%0D%0Ac ☀.png"')
        self.assertEqual(len(parse(body, content_type)), 1)

    def test_content_type_sniffing(self) -> None:
        self.assertEqual(sniff_content_type(corpus("icon-oxygen-folder-red.png").read_bytes()[:16]), "image/png")
        self.assertEqual(sniff_content_type(corpus("photo-heic-rocket.heic").read_bytes()[:16]), "image/heic")
        self.assertEqual(sniff_content_type(b"RIFF\0\0\0\0WEBPVP8 "), "image/webp")
        self.assertEqual(sniff_content_type(b"\0\0\0\x1cftypavif"), "image/avif")
        self.assertEqual(sniff_content_type(b"hello"), "application/octet-stream")


if __name__ == "__main__":
    unittest.main()
