"""Every answer of the memory API checked against its OpenAPI document.

The document is the one the hosts serve at `/openapi.json` (generated from the route
table). `check_answer` finds the path template the request hit (a matcher of its own, not
the engine's pipeline), takes the schema of the status it answered and validates the JSON
with `jsonschema` (Draft 2020-12, the dialect of OpenAPI 3.1). A status the document does
not declare for that route (507 disk full, 503, a 404 of an unknown path) must still be
an `ErrorAnswer`. Validators are cached per schema: a contract run makes thousands of calls.
"""

from __future__ import annotations

import functools
import json
from typing import Any
from urllib.parse import urlsplit

from jsonschema import Draft202012Validator

from memory_engine.api.openapi import document

DOC: dict[str, Any] = document()  # type: ignore[assignment]
_COMPONENTS = DOC["components"]
_ERROR = {"$ref": "#/components/schemas/ErrorAnswer"}


@functools.cache
def _validator(schema_json: str) -> Draft202012Validator:
    schema = dict(json.loads(schema_json), components=_COMPONENTS)
    return Draft202012Validator(schema)


def template_of(path: str) -> str | None:
    """The document's path template a raw request path falls under, else None."""
    parts = urlsplit(path).path.split("/")
    for template in DOC["paths"]:
        want = template.split("/")
        if len(want) != len(parts):
            continue
        if all(w.startswith("{") or w == p for w, p in zip(want, parts, strict=True)):
            return template
    return None


def schema_for(method: str, path: str, status: int) -> dict[str, Any]:
    """The schema the answer to `method path` with `status` must satisfy."""
    template = template_of(path)
    operation = DOC["paths"].get(template or "", {}).get(method.lower())
    if operation is not None and str(status) in operation["responses"]:
        return operation["responses"][str(status)]["content"]["application/json"]["schema"]
    assert status >= 400, f"{method} {path} answered {status}, which the OpenAPI document does not declare"
    return _ERROR


def check_answer(method: str, path: str, status: int, data: Any) -> None:
    """Fail when `data` is not what the OpenAPI document says `method path` answers with `status`."""
    if method.upper() == "HEAD":
        return  # no body
    schema = schema_for(method, path, status)
    errors = sorted(_validator(json.dumps(schema, sort_keys=True)).iter_errors(data), key=str)
    assert not errors, f"{method} {path} -> {status}: {errors[0].message} at {list(errors[0].absolute_path)}"
