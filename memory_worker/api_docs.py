"""Render the memory API's OpenAPI document into `docs/api.md`.

`python -m memory_worker.api_docs` rewrites the file; `--check` exits 1 when it differs
from what the route table generates (the test suite runs the same comparison).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from memory_engine.api.openapi import document

DOC = Path(__file__).resolve().parent.parent / "docs" / "api.md"


def _type(schema: dict[str, Any]) -> str:
    """A schema as a short phrase with links to the named types."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "enum" in schema:
        return " \\| ".join(f'`"{v}"`' if isinstance(v, str) else f"`{v}`" for v in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        return f"list of {_type(schema['items'])}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"map of string to {_type(schema['additionalProperties'])}"
    return str(kind or "any")


def _fields(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", ()))
    rows = ["| field | type | |", "| --- | --- | --- |"]
    for name, prop in schema.get("properties", {}).items():
        rows.append(f"| `{name}` | {_type(prop)} | {'required' if name in required else 'optional'} |")
    return rows


def render(doc: dict[str, Any]) -> str:
    """The Markdown reference of an OpenAPI document."""
    info = doc["info"]
    out = [
        f"# {info['title']} (v{info['version']})",
        "",
        "<!-- Generated from the route table (memory_engine/api/routes.py) by "
        "`python -m memory_worker.api_docs`; do not edit by hand. -->",
        "",
        info["description"],
        "",
        "Both hosts serve this reference as an OpenAPI 3.1 document at `GET /openapi.json` "
        "(with the token). Run `python -m memory_worker.api_docs` after changing a route.",
        "",
        "| method | path | what it does |",
        "| --- | --- | --- |",
    ]
    operations = [
        (method.upper(), path, op) for path, item in doc["paths"].items() for method, op in item.items()
    ]
    for method, path, op in operations:
        anchor = "route-" + op["operationId"].replace("_", "-")
        out.append(f"| `{method}` | [`{path}`](#{anchor}) | {op['summary']} |")
    out.append("")
    for method, path, op in operations:
        name = op["operationId"].replace("_", "-")
        out += [f"## route: {name}", "", f"`{method} {path}`: {op['summary']}", ""]
        if op.get("security") == []:
            out += ["No token needed.", ""]
        params = op.get("parameters", [])
        if params:
            out += ["| parameter | in | type |", "| --- | --- | --- |"]
            out += [f"| `{p['name']}` | {p['in']} | {_type(p['schema'])} |" for p in params]
            out.append("")
        if "requestBody" in op:
            body = op["requestBody"]["content"]["application/json"]["schema"]
            out += [f"Body (JSON): {_type(body)}", ""]
        answers = op["responses"]
        ok = answers["200"]["content"]["application/json"]["schema"]
        out += [f"Answer 200: {_type(ok)}", ""]
        out += ["| status | meaning |", "| --- | --- |"]
        out += [f"| {code} | {a['description']} |" for code, a in answers.items() if code != "200"]
        out.append("")
    out += ["# Types", ""]
    for name, schema in doc["components"]["schemas"].items():
        out += [f"## {name}", "", schema.get("description", ""), ""]
        if schema.get("properties"):
            out += [*_fields(schema), ""]
        if schema.get("additionalProperties") is True:
            out += ["Other fields may be present.", ""]
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write docs/api.md (or, with --check, say whether it is up to date)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/api.md is out of date")
    args = parser.parse_args(argv)
    text = render(document())
    if args.check:
        if DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC} is out of date: run python -m memory_worker.api_docs", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
