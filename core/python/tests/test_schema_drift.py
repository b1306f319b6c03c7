"""The Python models against the JSON Schema @compresso/schema exports: any drift fails the build.

``export-schema.ts`` runs on the repository's Node and prints the OpenAPI components (JSON Schema
2020-12, exactly what the server publishes) and the tables they come from. The contract's JSON
export (``core/schema/dist/contract.json``: routes, result headers, options, codes) is produced by
the same script the schema package's build runs (``core/schema/scripts/build.ts``), read here from its
``--stdout`` so the test never depends on a build having run first.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import subprocess
import typing
import unittest

from _support import HERE, ROOT, node_binary

from compresso import client as client_module
from compresso import errors, models
from compresso.async_client import AsyncCompresso
from compresso.client import Compresso

#: Each wire field of the compress/info form and the Python parameter that sends it.
PARAMETER_FOR_FIELD = {
    "quality": "quality",
    "output_format": "format",
    "max_dimension": "max_dimension",
    "strip_exif": "strip_exif",
    "png_to_jpeg": "png_to_jpeg",
}

JSON_TO_PYTHON = {"integer": int, "number": float, "boolean": bool, "string": str}


def load_export() -> dict:
    done = subprocess.run(
        [node_binary(), str(HERE / "export-schema.ts")], capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        raise AssertionError(f"export-schema.ts failed ({done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout)


def load_contract() -> dict:
    script = ROOT / "core" / "schema" / "scripts" / "build.ts"
    done = subprocess.run([node_binary(), str(script), "--stdout"], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise AssertionError(f"schema's build.ts --stdout failed ({done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout)


def _sample(spec: dict) -> str:
    """A header value of the spec's type, as the server writes it."""
    if "values" in spec:
        return spec["values"][-1]
    return {"integer": "7", "number": "12.5", "boolean": "true", "string": "webp"}[spec["type"]]


def _decoded(spec: dict, text: str) -> object:
    return {"integer": int, "number": float, "boolean": lambda t: t == "true", "string": str}[spec["type"]](text)


class ContractDriftTests(unittest.TestCase):
    """The Python client against the contract table: options, result headers, codes, routes."""

    contract: dict

    @classmethod
    def setUpClass(cls) -> None:
        cls.contract = load_contract()

    def test_options_and_bounds(self) -> None:
        options = self.contract["options"]
        self.assertEqual(list(options), list(models.COMPRESS_OPTION_FIELDS))
        self.assertEqual(set(PARAMETER_FOR_FIELD), set(options))
        self.assertEqual((options["quality"]["min"], options["quality"]["max"]), (models.QUALITY_MIN, models.QUALITY_MAX))
        self.assertEqual(options["quality"]["default"], models.DEFAULT_QUALITY)
        self.assertEqual(options["max_dimension"]["max"], models.MAX_DIMENSION_LIMIT)

    def test_every_option_is_sent_under_its_wire_name(self) -> None:
        params = inspect.signature(client_module._option_fields).parameters
        values = {"quality": 70, "output_format": "webp", "max_dimension": 64, "strip_exif": False, "png_to_jpeg": True}
        args = {name: values.get(name, "x") for name in params}
        sent = [name for name, _ in client_module._option_fields(**args)]
        self.assertEqual(sorted(sent), sorted(self.contract["options"]))

    def test_every_result_header_is_read_into_its_field(self) -> None:
        specs = self.contract["result_headers"]
        headers = {spec["header"].lower(): _sample(spec) for spec in specs.values()}
        response = client_module._Response(200, headers, b"")
        source = client_module._Source(b"", "x.jpg", None, "x.jpg")
        result = client_module._result_from_headers(response, source, None, False)
        for field, spec in specs.items():
            with self.subTest(field=field):
                self.assertEqual(getattr(result, field), _decoded(spec, _sample(spec)))
        read = set(re.findall(r'"(x-[a-z-]+)"', inspect.getsource(client_module._result_from_headers)))
        known = {spec["header"].lower() for spec in specs.values()} | {"x-request-id", "x-frames"}
        self.assertLessEqual(read, known, "the client reads a header the contract does not define")

    def test_a_required_result_header_missing_is_invalid_response(self) -> None:
        specs = self.contract["result_headers"]
        for field, spec in specs.items():
            if not spec["required"]:
                continue
            with self.subTest(field=field):
                headers = {s["header"].lower(): _sample(s) for f, s in specs.items() if f != field}
                response = client_module._Response(200, headers, b"")
                source = client_module._Source(b"", "x.jpg", None, "x.jpg")
                with self.assertRaises(errors.APIError) as caught:
                    client_module._result_from_headers(response, source, None, False)
                self.assertEqual(caught.exception.code, "INVALID_RESPONSE")

    def test_every_client_code_is_handled(self) -> None:
        self.assertEqual(set(errors.CLIENT_CODES), set(self.contract["client_error_codes"]))
        for code, how in errors.CLIENT_CODES.items():
            with self.subTest(code=code):
                if isinstance(how, str):
                    self.assertGreater(len(how), 20, "say why the code never arises here")
                else:
                    self.assertTrue(issubclass(how, errors.CompressoError))
        self.assertEqual(models.ERROR_STATUS, self.contract["error_status"])

    def test_routes_the_client_calls_are_in_the_table(self) -> None:
        paths = {route["path"] for route in self.contract["routes"].values()}
        source = inspect.getsource(client_module)
        called = set(re.findall(r'"(/api/v1/[a-z/-]+)', source))
        self.assertTrue(called)
        for path in called:
            with self.subTest(path=path):
                self.assertTrue(
                    any(p == path or p.startswith(path.rstrip("/") + "/{") for p in paths), f"{path} is not a route"
                )


class SchemaDriftTests(unittest.TestCase):
    export: dict

    @classmethod
    def setUpClass(cls) -> None:
        cls.export = load_export()
        cls.components = cls.export["components"]
        cls.tables = cls.export["tables"]

    def test_error_codes_and_statuses(self) -> None:
        self.assertEqual(models.ERROR_STATUS, self.tables["ERROR_STATUS"])
        enum = self.components["ErrorBody"]["properties"]["error"]["properties"]["code"]["enum"]
        self.assertEqual(set(enum), set(models.ERROR_STATUS))
        body_fields = set(self.components["ErrorBody"]["properties"]["error"]["properties"])
        self.assertEqual(body_fields, {"code", "message", "details", "request_id"})
        self.assertIn("field", self.components["FieldProblem"]["properties"])

    def test_every_code_has_its_error_class(self) -> None:
        for code, status in self.tables["ERROR_STATUS"].items():
            with self.subTest(code=code):
                self.assertTrue(code in errors._BY_CODE, f"{code} has no error class in errors._BY_CODE")
                body = json.dumps({"error": {"code": code, "message": "m", "request_id": "r"}}).encode()
                error = errors.error_from_response(status, body, {})
                self.assertIsInstance(error, errors._BY_CODE[code])
                self.assertEqual((error.status, error.code, error.request_id), (status, code, "r"))
                if status >= 500:
                    self.assertIsInstance(error, errors.ServerError)
                elif status == 429:
                    self.assertIsInstance(error, errors.RateLimitError)

    def test_formats(self) -> None:
        info = self.components["InfoResult"]["properties"]
        self.assertEqual(list(models.OUTPUT_FORMATS), info["output_format"]["enum"])
        self.assertEqual(list(models.INPUT_FORMATS), info["input_format"]["enum"])
        self.assertEqual(list(models.OUTPUT_FORMATS), self.tables["OUTPUT_FORMATS"])
        self.assertEqual(list(typing.get_args(models.OutputFormat)), info["output_format"]["enum"])
        self.assertEqual(list(typing.get_args(models.InputFormat)), info["input_format"]["enum"])
        self.assertEqual(models.FILE_EXTENSIONS, self.tables["FILE_EXTENSIONS"])

    def test_compress_options(self) -> None:
        options = self.components["CompressOptions"]
        self.assertEqual(list(options["properties"]), list(models.COMPRESS_OPTION_FIELDS))
        self.assertFalse(options["additionalProperties"])
        quality = next(a for a in options["properties"]["quality"]["anyOf"] if a["type"] == "integer")
        self.assertEqual((quality["minimum"], quality["maximum"]), (models.QUALITY_MIN, models.QUALITY_MAX))
        dimension = next(a for a in options["properties"]["max_dimension"]["anyOf"] if a["type"] == "integer")
        self.assertEqual((dimension["minimum"], dimension["maximum"]), (1, models.MAX_DIMENSION_LIMIT))
        self.assertEqual(models.MAX_DIMENSION_LIMIT, self.tables["MAX_DIMENSION_LIMIT"])
        self.assertEqual(models.DEFAULT_QUALITY, self.tables["DEFAULT_QUALITY"])
        self.assertEqual(set(PARAMETER_FOR_FIELD), set(options["properties"]))

    def test_every_option_is_a_parameter_of_every_image_method(self) -> None:
        methods = [
            Compresso.compress,
            Compresso.info,
            Compresso.compress_batch,
            AsyncCompresso.compress,
            AsyncCompresso.info,
            AsyncCompresso.compress_batch,
        ]
        for method in methods:
            with self.subTest(method=method.__qualname__):
                params = set(inspect.signature(method).parameters)
                self.assertLessEqual(set(PARAMETER_FOR_FIELD.values()), params)

    def _check_fields(self, cls: type, schema: dict, optional_extra: typing.Set[str] = frozenset()) -> None:
        hints = typing.get_type_hints(cls)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        required = set(schema["required"])
        for name, prop in schema["properties"].items():
            with self.subTest(cls=cls.__name__, field=name):
                self.assertIn(name, fields, f"{cls.__name__} lacks {name}")
                hint = hints[name]
                if name not in required or name in optional_extra:
                    args = typing.get_args(hint)
                    self.assertEqual(typing.get_origin(hint), typing.Union, f"{name} must be Optional")
                    self.assertIn(type(None), args)
                    hint = next(a for a in args if a is not type(None))
                    has_default = fields[name].default is not dataclasses.MISSING
                    self.assertTrue(has_default, f"{name} is optional in the schema: give it a default")
                else:
                    self.assertIs(fields[name].default, dataclasses.MISSING, f"{name} is required")
                if "enum" in prop:
                    self.assertEqual(typing.get_origin(hint), typing.Literal)
                    self.assertEqual(list(typing.get_args(hint)), prop["enum"])
                else:
                    self.assertIs(hint, JSON_TO_PYTHON[prop["type"]])

    def test_info_result_fields_and_types(self) -> None:
        schema = self.components["InfoResult"]
        self._check_fields(models.InfoResult, schema)
        self.assertEqual({f.name for f in dataclasses.fields(models.InfoResult)}, set(schema["properties"]))

    def test_compress_result_carries_every_info_field(self) -> None:
        # The compress answer reports its facts in X-* headers; frames is not among them, hence Optional.
        self._check_fields(models.CompressResult, self.components["InfoResult"], optional_extra={"frames"})


    def test_keys_usage_and_job_models_have_the_bodies_members(self) -> None:
        # Member for member, snake_case as on the wire: a member added to a body of the contract
        # table fails here until the model follows.
        def members(model: type) -> set:
            return {f.name for f in dataclasses.fields(model)}

        def props(name: str) -> set:
            return set(self.components[name]["properties"])

        self.assertEqual(members(models.Usage), props("Usage"))
        self.assertEqual(members(models.ApiKey), props("ApiKey"))
        self.assertEqual(members(models.CreatedApiKey), props("CreatedApiKey"))
        self.assertEqual(members(models.KeyRevocation), props("RevokedApiKey"))
        job = self.components["BatchJob"]
        self.assertEqual(members(models.Job), set(job["properties"]))
        self.assertEqual(members(models.JobProgress), set(job["properties"]["progress"]["properties"]))
        item = job["properties"]["items"]["items"]
        item = self.components[item["$ref"].rsplit("/", 1)[-1]] if "$ref" in item else item
        self.assertEqual(members(models.JobItem), set(item["properties"]))

if __name__ == "__main__":
    unittest.main()
