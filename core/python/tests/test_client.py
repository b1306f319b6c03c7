"""Compresso against the real server: every operation, every input kind, every error the server gives."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

from _support import MAX_UPLOAD_BYTES, corpus, recorded_sleeps, shared_key, shared_server

import compresso
from compresso import (
    AuthenticationError,
    BadRequestError,
    Compresso,
    CompressoError,
    CompressResult,
    InfoResult,
    NotFoundError,
    PermissionDeniedError,
    TooLargeError,
    UnsupportedImageError,
)

PHOTO = "photo-skimage-rocket.jpg"
ICON = "icon-oxygen-folder-red.png"


class RealServerCase(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = shared_server()
        cls.key = shared_key("pro")

    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="compresso-py-case-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.client = Compresso(self.key, base_url=self.server.url)

    def copy(self, name: str, as_name: str = "") -> Path:
        target = self.tmp / (as_name or name)
        shutil.copyfile(corpus(name), target)
        return target


class CompressTests(RealServerCase):
    def test_path_input_written_beside_it_as_min_and_input_untouched(self) -> None:
        src = self.copy(PHOTO)
        before = src.read_bytes()
        result = self.client.compress(src)
        self.assertIsInstance(result, CompressResult)
        self.assertEqual(result.output_path, str(self.tmp / "photo-skimage-rocket.min.jpg"))
        written = Path(result.output_path).read_bytes()
        self.assertEqual(len(written), result.output_size)
        self.assertEqual(written[:3], b"\xff\xd8\xff")
        self.assertEqual(src.read_bytes(), before)
        self.assertEqual(result.input_size, len(before))
        self.assertLess(result.output_size, result.input_size)
        self.assertAlmostEqual(
            result.savings_percent, round(100 * (1 - result.output_size / result.input_size), 1), delta=0.1
        )
        self.assertEqual((result.input_format, result.output_format, result.format), ("jpeg", "jpeg", "jpeg"))
        self.assertEqual(result.dimensions, (result.width, result.height))
        self.assertGreater(result.width, 0)
        self.assertEqual(result.quality, 80)
        self.assertTrue(result.metadata_stripped)
        self.assertEqual(result.input_path, str(src))
        self.assertIsNone(result.data)
        self.assertTrue(result.request_id)

    def test_options_reach_the_server_format_quality_max_dimension(self) -> None:
        src = self.copy(PHOTO)
        result = self.client.compress(src, quality=60, max_dimension=128, format="WEBP")
        self.assertEqual(result.output_format, "webp")
        self.assertEqual(result.quality, 60)
        self.assertLessEqual(max(result.width, result.height), 128)
        self.assertEqual(result.output_path, str(self.tmp / "photo-skimage-rocket.min.webp"))
        data = Path(result.output_path).read_bytes()
        self.assertEqual((data[:4], data[8:12]), (b"RIFF", b"WEBP"))
        self.assertEqual(result.content_type, "image/webp")

    def test_strip_exif_false_is_sent(self) -> None:
        src = self.copy("photo-mate-LadyBird.jpg")
        kept = self.client.compress(src, self.tmp / "kept.jpg", strip_exif=False, max_dimension=256)
        stripped = self.client.compress(src, self.tmp / "stripped.jpg", max_dimension=256)
        self.assertFalse(kept.metadata_stripped)
        self.assertTrue(stripped.metadata_stripped)

    def test_explicit_output_file_and_output_folder(self) -> None:
        src = self.copy(ICON)
        out_file = self.tmp / "deep" / "er" / "icon.avif"
        result = self.client.compress(src, out_file, format="avif", max_dimension=64)
        self.assertEqual(result.output_path, str(out_file))
        self.assertEqual(out_file.read_bytes()[4:12], b"ftypavif")
        new_folder = self.client.compress(src, str(self.tmp / "fresh") + os.sep, format="png", max_dimension=32)
        self.assertEqual(new_folder.output_path, str(self.tmp / "fresh" / "icon-oxygen-folder-red.png"))
        folder = self.tmp / "out"
        folder.mkdir()
        in_folder = self.client.compress(str(src), folder, format="webp", max_dimension=64)
        self.assertEqual(in_folder.output_path, str(folder / "icon-oxygen-folder-red.webp"))
        self.assertTrue(os.path.isfile(in_folder.output_path))

    def test_input_spelling_kept_when_format_unchanged(self) -> None:
        src = self.copy(PHOTO, "Holiday.JPEG")
        result = self.client.compress(src, max_dimension=64)
        self.assertEqual(os.path.basename(result.output_path), "Holiday.min.JPEG")

    def test_filename_cannot_steer_the_output_out_of_its_folder(self) -> None:
        out = self.tmp / "out"
        out.mkdir()
        result = self.client.compress(
            corpus(ICON).read_bytes(), out, filename="../../escape.png", format="webp", max_dimension=32
        )
        self.assertEqual(result.output_path, str(out / "escape.webp"))
        self.assertEqual(os.listdir(self.tmp), ["out"])

    def test_bytes_input_returns_data_and_writes_nothing_without_output(self) -> None:
        data = corpus(PHOTO).read_bytes()
        result = self.client.compress(data, format="png", max_dimension=64)
        self.assertIsNone(result.output_path)
        self.assertEqual(result.data[:8], b"\x89PNG\r\n\x1a\n")
        self.assertEqual(len(result.data), result.output_size)
        self.assertEqual(result.input_size, len(data))
        self.assertEqual(os.listdir(self.tmp), [])
        as_bytearray = self.client.compress(bytearray(data), self.tmp / "from-bytearray.jpg", max_dimension=64)
        self.assertTrue(os.path.isfile(as_bytearray.output_path))
        self.assertIsNone(as_bytearray.data)

    def test_binary_file_object_input(self) -> None:
        src = self.copy(ICON)
        with open(src, "rb") as f:
            result = self.client.compress(f, format="webp", max_dimension=48)
        # A real file object has a path: it is treated like the path.
        self.assertEqual(result.output_path, str(self.tmp / "icon-oxygen-folder-red.min.webp"))
        stream = io.BytesIO(src.read_bytes())
        in_memory = self.client.compress(stream, format="webp", max_dimension=48, filename="logo.png")
        self.assertIsNone(in_memory.output_path)
        self.assertEqual(in_memory.data[8:12], b"WEBP")
        with open(src, "r") as text:  # noqa: UP015 — the mistake under test is text mode
            with self.assertRaises(TypeError):
                self.client.compress(text)

    def test_never_overwrites_the_input_unless_asked(self) -> None:
        src = self.copy(PHOTO)
        before = src.read_bytes()
        with self.assertRaises(CompressoError) as caught:
            self.client.compress(src, src)
        self.assertEqual(caught.exception.code, "INVALID_OPTION")
        self.assertIn("overwrite=True", str(caught.exception))
        with self.assertRaises(CompressoError):
            self.client.compress(src, self.tmp)  # the folder holding it: same name, same format
        self.assertEqual(src.read_bytes(), before)
        replaced = self.client.compress(src, src, overwrite=True, max_dimension=64)
        self.assertEqual(replaced.output_path, str(src))
        self.assertEqual(len(src.read_bytes()), replaced.output_size)
        self.assertLess(replaced.output_size, len(before))
        self.assertEqual([p.name for p in self.tmp.iterdir()], [src.name])  # no temporary file left

    def test_written_file_mode_follows_the_umask_as_the_node_client_and_cli_do(self) -> None:
        # 0o666 & ~umask is what open(2), Node's writeFile and the CLI give; a private 0600 file (what
        # tempfile.mkstemp makes) is one a web server in another account cannot serve. Two umasks, each
        # giving a mode other than 0600 and than the other's, so neither a fixed mode nor the runner's own
        # umask can pass; the umask is process-wide, so it is restored at once (the server is another process).
        src = self.copy(ICON)
        for umask in (0o022, 0o007):
            with self.subTest(umask=oct(umask)):
                previous = os.umask(umask)
                try:
                    result = self.client.compress(src, self.tmp / f"out-{umask:o}.webp", format="webp")
                finally:
                    os.umask(previous)
                mode = os.stat(result.output_path).st_mode & 0o777
                self.assertEqual(oct(mode), oct(0o666 & ~umask))

    def test_same_bytes_as_curl_for_the_same_options(self) -> None:
        curl = shutil.which("curl")
        self.assertIsNotNone(curl, "curl is needed for the cross-client check (apt-get install -y curl)")
        src = self.copy(PHOTO)
        by_curl = self.tmp / "curl.webp"
        subprocess.run(
            [curl, "-fsS", "-H", f"Authorization: Bearer {self.key}", "-F", f"file=@{src}",
             "-F", "output_format=webp", "-F", "quality=70", "-o", str(by_curl), f"{self.server.url}/api/v1/compress"],
            check=True,
            timeout=60,
        )
        a = self.client.compress(src, self.tmp / "a.webp", format="webp", quality=70)
        b = self.client.compress(src.read_bytes(), format="webp", quality=70)
        self.assertEqual(Path(a.output_path).read_bytes(), by_curl.read_bytes())
        self.assertEqual(b.data, by_curl.read_bytes())

    def test_missing_file_is_an_os_error_before_any_request(self) -> None:
        with self.assertRaises(FileNotFoundError):
            self.client.compress(self.tmp / "nope.jpg")


class InfoTests(RealServerCase):
    def test_info_saves_nothing_and_matches_compress(self) -> None:
        src = self.copy(PHOTO)
        info = self.client.info(src, quality=70, format="webp", max_dimension=200)
        self.assertIsInstance(info, InfoResult)
        self.assertEqual(os.listdir(self.tmp), [src.name])
        self.assertEqual(info.output_format, "webp")
        self.assertEqual(info.quality, 70)
        self.assertEqual(info.frames, 1)
        self.assertLessEqual(max(info.dimensions), 200)
        self.assertEqual(info.input_size, src.stat().st_size)
        done = self.client.compress(src, quality=70, format="webp", max_dimension=200)
        self.assertEqual(
            (done.output_size, done.width, done.height, done.savings_percent),
            (info.output_size, info.width, info.height, info.savings_percent),
        )
        self.assertEqual(set(info.to_dict()) - {"score"}, set(done.to_dict()) & set(info.to_dict()) - {"score"})

    def test_info_of_bytes_and_file_object(self) -> None:
        data = corpus(ICON).read_bytes()
        from_bytes = self.client.info(data)
        from_stream = self.client.info(io.BytesIO(data))
        self.assertEqual(from_bytes.output_size, from_stream.output_size)
        self.assertEqual(from_bytes.input_format, "png")

    def test_auto_quality(self) -> None:
        info = self.client.info(corpus(ICON), quality="auto", max_dimension=64, format="webp")
        self.assertTrue(info.auto_quality)
        self.assertTrue(1 <= info.quality <= 100)
        self.assertIsNotNone(info.score)


class KeysAndUsageTests(RealServerCase):
    def test_create_list_use_revoke(self) -> None:
        created = self.client.keys.create("ci")
        self.assertTrue(created.key.startswith("cmp_live_"))
        self.assertEqual(created.name, "ci")
        self.assertTrue(created.key.startswith(created.prefix))
        self.assertNotIn(created.key, repr(created))
        listed = self.client.keys.list()
        self.assertIn(created.id, [k.id for k in listed])
        self.assertTrue(all(not hasattr(k, "key") for k in listed))
        with Compresso(created.key, self.server.url) as second:
            self.assertEqual(second.usage().plan, "pro")
        revoked = self.client.keys.revoke(created.id)
        self.assertEqual((revoked.id, revoked.revoked), (created.id, True))
        self.assertNotIn(created.id, [k.id for k in self.client.keys.list()])
        with self.assertRaises(AuthenticationError) as caught:
            Compresso(created.key, self.server.url, max_retries=0).usage()
        self.assertEqual((caught.exception.status, caught.exception.code), (401, "INVALID_API_KEY"))

    def test_create_without_name(self) -> None:
        created = self.client.keys.create()
        self.addCleanup(self.client.keys.revoke, created.id)
        self.assertTrue(created.key.startswith("cmp_live_"))

    def test_unknown_key_id_is_not_found(self) -> None:
        with self.assertRaises(NotFoundError) as caught:
            self.client.keys.revoke("key_doesnotexist")
        e = caught.exception
        self.assertEqual((e.status, e.code), (404, "NOT_FOUND"))
        self.assertTrue(e.request_id)
        with self.assertRaises(NotFoundError):
            self.client.keys.revoke("../usage")  # quoted into one path segment, not a traversal

    def test_usage(self) -> None:
        first = self.client.usage()
        second = self.client.usage()
        self.assertEqual(second.used, first.used + 1)
        self.assertEqual(first.plan, "pro")
        self.assertEqual(first.limit, 100000)
        self.assertEqual(first.remaining, first.limit - first.used)
        self.assertRegex(first.day, r"^\d{4}-\d{2}-\d{2}$")
        self.assertGreater(first.resets_in_seconds, 0)


class ErrorTests(RealServerCase):
    def test_bad_key_is_authentication_error(self) -> None:
        bad = Compresso("cmp_live_" + "x" * 43, self.server.url)
        with recorded_sleeps() as waits, self.assertRaises(AuthenticationError) as caught:
            bad.compress(corpus(ICON).read_bytes())
        self.assertEqual(waits, [], "401 must not be retried")
        e = caught.exception
        self.assertEqual((e.status, e.code), (401, "INVALID_API_KEY"))
        self.assertTrue(e.request_id)
        self.assertIn("INVALID_API_KEY", str(e))
        self.assertIsInstance(e, CompressoError)

    def test_free_plan_is_permission_denied(self) -> None:
        with self.assertRaises(PermissionDeniedError) as caught:
            Compresso(shared_key("free"), self.server.url).usage()
        self.assertEqual((caught.exception.status, caught.exception.code), (403, "PLAN_REQUIRED"))
        self.assertEqual(caught.exception.details["required"], "pro")

    def test_bad_option_names_the_field(self) -> None:
        with self.assertRaises(BadRequestError) as caught:
            self.client.compress(corpus(ICON).read_bytes(), quality=500)
        e = caught.exception
        self.assertEqual((e.status, e.code), (400, "INVALID_OPTION"))
        self.assertEqual(e.fields, ["quality"])
        self.assertIn("quality", e.message)
        with self.assertRaises(BadRequestError) as fmt:
            self.client.info(corpus(ICON), format="bmp")
        self.assertEqual(fmt.exception.fields, ["output_format"])
        with self.assertRaises(BadRequestError) as dim:
            self.client.info(corpus(ICON), max_dimension=0)
        self.assertEqual(dim.exception.details[0]["field"], "max_dimension")
        self.assertEqual(dim.exception.details[0]["received"], '"0"')

    def test_not_an_image_is_unsupported_image(self) -> None:
        with self.assertRaises(UnsupportedImageError) as caught:
            self.client.compress(b"hello, this is text and not an image\n" * 20, filename="notes.txt")
        self.assertEqual((caught.exception.status, caught.exception.code), (415, "NOT_AN_IMAGE"))

    def test_truncated_image_is_unsupported_image_422(self) -> None:
        data = corpus("photo-mate-LadyBird.jpg").read_bytes()
        src = self.tmp / "cut.jpg"
        src.write_bytes(data[: len(data) // 3])
        with self.assertRaises(UnsupportedImageError) as caught:
            self.client.compress(src)
        self.assertEqual((caught.exception.status, caught.exception.code), (422, "CORRUPT_IMAGE"))
        self.assertFalse((self.tmp / "cut.min.jpg").exists(), "nothing is written for a failed compress")

    def test_empty_file(self) -> None:
        with self.assertRaises(UnsupportedImageError) as caught:
            self.client.info(b"")
        self.assertEqual((caught.exception.status, caught.exception.code), (422, "EMPTY_FILE"))

    def test_too_large_upload(self) -> None:
        blob = corpus(PHOTO).read_bytes()
        big = blob + b"\0" * (MAX_UPLOAD_BYTES + 200_000 - len(blob))
        with self.assertRaises(TooLargeError) as caught:
            self.client.compress(big)
        self.assertEqual((caught.exception.status, caught.exception.code), (413, "FILE_TOO_LARGE"))

    def test_unrecognised_filename_characters_travel_safely(self) -> None:
        # Quotes, CR/LF and non-ASCII in a filename must not break the multipart framing.
        weird = 'My "best"\r\nshot ☀.jpg'
        result = self.client.compress(corpus(PHOTO).read_bytes(), filename=weird, max_dimension=32)
        self.assertEqual(result.output_format, "jpeg")


class ConstructionTests(unittest.TestCase):
    def test_no_key_is_a_clear_error(self) -> None:
        saved = os.environ.pop("COMPRESSO_API_KEY", None)
        self.addCleanup(lambda: saved is not None and os.environ.__setitem__("COMPRESSO_API_KEY", saved))
        with self.assertRaises(CompressoError) as caught:
            Compresso()
        self.assertIn("COMPRESSO_API_KEY", str(caught.exception))
        self.assertEqual(caught.exception.code, "MISSING_API_KEY")
        self.assertIn("compresso keys create", str(caught.exception))

    def test_environment_and_base_url_forms(self) -> None:
        old = {k: os.environ.get(k) for k in ("COMPRESSO_API_KEY", "COMPRESSO_BASE_URL")}

        def restore() -> None:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

        self.addCleanup(restore)
        os.environ["COMPRESSO_API_KEY"] = "cmp_live_fromenv"
        os.environ["COMPRESSO_BASE_URL"] = "http://127.0.0.1:9/api/v1/"
        client = Compresso()
        self.assertEqual((client.api_key, client.base_url), ("cmp_live_fromenv", "http://127.0.0.1:9"))
        self.assertNotIn("fromenv", repr(client)[30:])
        explicit = Compresso("cmp_live_explicit", "https://api.example.com")
        self.assertEqual((explicit.api_key, explicit.base_url), ("cmp_live_explicit", "https://api.example.com"))
        os.environ.pop("COMPRESSO_BASE_URL")
        self.assertEqual(Compresso("k").base_url, compresso.DEFAULT_BASE_URL)
        with self.assertRaises(ValueError):
            Compresso("k", "ftp://example.com")

    def test_context_manager_closes(self) -> None:
        server = shared_server()
        with Compresso(shared_key(), server.url) as client:
            self.assertEqual(client.usage().plan, "pro")
        with self.assertRaises(CompressoError) as caught:
            client.usage()
        self.assertIn("closed", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
