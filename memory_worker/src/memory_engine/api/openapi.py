"""The OpenAPI 3.1 document of the memory API, generated from the route table.

Each route of `routes.py` becomes one operation; its body, query and answer TypedDicts
(`wire.py`) become JSON Schemas under `components/schemas`. Answers are closed objects
(`additionalProperties: false`): a field the engine adds without stating it in its wire
type makes the contract tests fail. Served at `GET /openapi.json`; `docs/api.md` is
rendered from it (`python -m memory_worker.api_docs`).
"""

import types
import typing
from typing import Any, Literal, Union, get_args, get_origin, is_typeddict

from memory_engine.api import limits, wire
from memory_engine.api.routes import ROUTES, VERSION, Route
from memory_engine.api.validation import MAX_BODY_BYTES, MAX_FIELD_CHARS, MAX_TEXT_BYTES

Schema = dict[str, Any]
_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
_PATH_PARAMS: dict[str, Schema] = {
    "chat": {"type": "string", "pattern": "^[A-Za-z0-9:_\\-.]{1,128}$", "examples": ["telegram:-1001234"]},
    "author_id": {"type": "string", "minLength": 1, "maxLength": MAX_FIELD_CHARS},
    "fact_id": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
    "reminder_id": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
    "message": {"type": "integer", "minimum": 1, "maximum": 2**62},  # views.MAX_ID
}
_STATUS = {
    400: "Bad JSON, a missing, unknown or invalid field (its limits are stated), or a bad chat key.",
    401: "Missing or wrong bearer token.",
    404: "Unknown route.",
    405: "Wrong method for this path (`Allow` names the right ones).",
    413: "A text over 64 KiB, or a body over 32 MiB.",
}


class _Schemas:
    """Collects the named schemas of the TypedDicts met along the way."""

    def __init__(self) -> None:
        self.named: dict[str, Schema] = {}

    def of(self, tp: Any) -> Schema:
        """The JSON Schema of a type hint (TypedDicts by reference)."""
        if tp in _SIMPLE:
            return {"type": _SIMPLE[tp]}
        if tp is object or tp is Any:
            return {}
        if tp is dict:
            return {"type": "object"}
        if is_typeddict(tp):
            if tp.__name__ not in self.named:
                self.named[tp.__name__] = {}  # placeholder: a type may refer to itself
                self.named[tp.__name__] = self._object(tp)
            return {"$ref": f"#/components/schemas/{tp.__name__}"}
        origin, args = get_origin(tp), get_args(tp)
        if origin is Literal:
            return {"type": _SIMPLE[type(args[0])], "enum": list(args)}
        if origin in (Union, types.UnionType):
            members = [self.of(a) for a in args]
            if all(set(m) == {"type"} for m in members):
                return {"type": [m["type"] for m in members]}
            return {"anyOf": members}
        if origin is list:
            return {"type": "array", "items": self.of(args[0])}
        if origin is dict:
            return {"type": "object", "additionalProperties": self.of(args[1])}
        raise TypeError(f"no JSON Schema for {tp!r}")

    def _object(self, td: Any) -> Schema:
        hints = typing.get_type_hints(td)
        schema: Schema = {
            "type": "object",
            "description": _first_line(td.__doc__),
            "properties": {name: self.of(hint) for name, hint in hints.items()},
            "additionalProperties": td is wire.Health,  # the host may add its storage state
        }
        required = [n for n in hints if n in td.__required_keys__]
        if required:
            schema["required"] = required
        return limits.refine(td.__name__, schema)


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if doc else ""


def _operation(route: Route[Any, Any], schemas: _Schemas) -> Schema:
    op: Schema = {"operationId": route.name, "summary": route.summary}
    params = [
        {"name": name[1:-1], "in": "path", "required": True, "schema": _PATH_PARAMS[name[1:-1]]}
        for name in route.segments
        if name.startswith("{")
    ]
    if route.query is not None:
        hints = typing.get_type_hints(route.query)
        stated = limits.PROPERTIES.get(route.query.__name__, {})
        params += [
            {
                "name": n,
                "in": "query",
                "required": n in getattr(route.query, "__required_keys__", ()),
                "schema": {**schemas.of(h), **stated.get(n, {})},
            }
            for n, h in hints.items()
        ]
    if params:
        op["parameters"] = params
    if route.body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": schemas.of(route.body)}},
        }
    answers: Schema = {
        "200": {
            "description": _first_line(route.answer.__doc__) or "The answer.",
            "content": {"application/json": {"schema": schemas.of(route.answer)}},
        }
    }
    # Every route with a token reads its path, query and body: 400 and 413 are its answers too.
    codes = {404, 405} | ({400, 401, 413} if route.auth and route.static is None else set())
    described = {code: _STATUS[code] for code in codes}
    for code, meaning in route.errors:
        described[code] = f"{described[code]} Or: {meaning}" if code in described else meaning
    error = {"application/json": {"schema": schemas.of(wire.ErrorAnswer)}}
    for code in sorted(described):
        answers[str(code)] = {"description": described[code], "content": error}
    if not route.auth:
        op["security"] = []
    op["responses"] = answers
    return op


def document() -> dict[str, object]:
    """The OpenAPI 3.1 document of every route in the table."""
    schemas = _Schemas()
    paths: dict[str, Schema] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, schemas)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Chat memory worker API",
            "version": VERSION,
            "description": (
                "The memory of the chatbot, one Durable Object (or one SQLite file) per chat key. "
                "Every route but /health needs `Authorization: Bearer <MEMORY_API_TOKEN>`; without "
                'it every path answers 401. Errors are `{"error": "..."}`. Texts are limited to '
                f"{MAX_TEXT_BYTES} bytes, request bodies to {MAX_BODY_BYTES} bytes."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": dict(sorted(schemas.named.items())),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
