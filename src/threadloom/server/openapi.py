"""``/openapi.json``, generated from the route table ``wire.routes.OPERATIONS`` (spec 08
§8.11.2): each operation's query parameters, request body and answers — the 2xx bodies and
the error statuses the server really gives, each a named schema.

FastAPI describes what a route declares; the routes read bodies and query strings through
their own checks (spec 08's texts and status 400, never 422), so the description FastAPI
generates (paths, operation ids, path parameters) is completed from the table once, when
``/openapi.json`` is first asked for. Every operation must have a row whose method and
path are the route's (``describe`` refuses the description otherwise), and the schemathesis
test checks the server's answers against it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from threadloom.wire.model import ERROR_TEXTS, ErrorBody
from threadloom.wire.routes import OPERATIONS, Content, Model, Operation

REF = "#/components/schemas/{model}"


def _json(body: Content) -> Mapping[str, Any] | None:
    if body is None or isinstance(body, Mapping):
        return body
    return {"application/json": body}


_STATUS_TEXT = {200: "OK", 201: "Created", 202: "Accepted", 204: "No content"}


# -- the description -------------------------------------------------------------------------


def _models(answer: Content) -> list[Model]:
    """The models of an answer (a media type's literal content object has none)."""
    if answer is None:
        return []
    if isinstance(answer, Mapping):
        media = answer.values()
        return [m for v in media if not isinstance(v, Mapping) for m in _models(v)]
    if isinstance(answer, tuple):
        return list(answer)
    return [answer]


class _Refs:
    """Every model of the table as a named schema, and the reference to each."""

    def __init__(self) -> None:
        wanted: dict[tuple[Model, JsonSchemaMode], None] = {}
        for op in OPERATIONS.values():
            for answer in (*op.ok.values(), *op.extra.values()):
                for model in _models(answer):
                    wanted[(model, "serialization")] = None
            for model in _models(op.body):
                wanted[(model, "validation")] = None
        wanted[(ErrorBody, "serialization")] = None
        keys = list(wanted)
        refs, defs = models_json_schema(keys, ref_template=REF)
        self.refs = refs
        self.schemas: dict[str, Any] = defs.get("$defs", {})

    def schema(self, answer: Content, mode: JsonSchemaMode) -> dict[str, Any]:
        if isinstance(answer, tuple):
            return {"anyOf": [self.schema(m, mode) for m in answer]}
        if isinstance(answer, Mapping):
            return dict(answer)
        assert answer is not None
        return dict(self.refs[(answer, mode)])

    def content(self, answer: Content, mode: JsonSchemaMode) -> dict[str, Any]:
        media = _json(answer) or {}
        out: dict[str, Any] = {}
        for kind, value in media.items():
            if isinstance(value, Mapping):
                out[kind] = dict(value)
            else:
                out[kind] = {"schema": self.schema(value, mode)}
        return out


def _responses(op: Operation, refs: _Refs) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for status, answer in sorted(op.ok.items()):
        item: dict[str, Any] = {"description": _STATUS_TEXT.get(status, "OK")}
        if answer is not None:
            item["content"] = refs.content(answer, "serialization")
        out[str(status)] = item
    for status, model in op.extra.items():
        out[str(status)] = {
            "description": ERROR_TEXTS[status],
            "content": refs.content(model, "serialization"),
        }
    error = {"application/json": {"schema": refs.schema(ErrorBody, "serialization")}}
    for status in set(op.errors):
        out[str(status)] = {"description": ERROR_TEXTS[status], "content": error}
    return dict(sorted(out.items()))


def _media_examples(content: dict[str, Any], refs: _Refs) -> None:
    """A JSON body's examples also on its media type, as ``examples`` the docs page offers
    in "Try it out" (a body schema's own ``examples`` are not shown there): every example
    of each named schema of the body, each one the server accepts (§8.11.3 rule 3)."""
    media = content.get("application/json")
    if media is None:
        return
    schema = media.get("schema", {})
    named = [s.get("$ref", "") for s in schema.get("anyOf", [schema])]
    found: dict[str, Any] = {}
    for ref in named:
        model = ref.rsplit("/", 1)[-1]
        for i, value in enumerate(refs.schemas.get(model, {}).get("examples", ()), 1):
            found[f"{model} {i}"] = {"value": value}
    if found:
        media["examples"] = found


def describe(schema: dict[str, Any]) -> dict[str, Any]:
    """Complete FastAPI's description of the API routes from ``OPERATIONS`` (in place)."""
    refs = _Refs()
    seen: set[str] = set()
    for route_path, ops in schema.get("paths", {}).items():
        for method, operation in ops.items():
            name = operation["operationId"]
            op = OPERATIONS.get(name)
            if op is None:
                raise LookupError(f"operation {name} has no entry in wire.routes.OPERATIONS")
            if (op.method, op.path) != (method.upper(), route_path):
                raise LookupError(
                    f"operation {name} is {method.upper()} {route_path},"
                    f" wire.routes.OPERATIONS says {op.method} {op.path}"
                )
            seen.add(name)
            path_params = [p for p in operation.get("parameters", ()) if p["in"] == "path"]
            params = [*path_params, *op.query]
            if params:
                operation["parameters"] = params
            else:
                operation.pop("parameters", None)
            operation.pop("requestBody", None)
            if op.body is not None:
                content = refs.content(op.body, "validation")
                _media_examples(content, refs)
                operation["requestBody"] = {"required": op.body_required, "content": content}
            operation["responses"] = _responses(op, refs)
            operation["security"] = list(SECURITY) if op.needs_principal else []
    stale = set(OPERATIONS) - seen
    if stale:
        raise LookupError(f"wire.routes.OPERATIONS names no route: {sorted(stale)}")
    _tags_required(refs.schemas)
    _request_defaults(refs)
    components = schema.setdefault("components", {})
    components["schemas"] = dict(sorted(refs.schemas.items()))
    components["securitySchemes"] = SECURITY_SCHEMES
    return schema


SECURITY_SCHEMES: dict[str, Any] = {
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key (`tlk_…`), a session token from `POST /api/auth/login`"
        " (`tls_…`), an OAuth access token (`tlo_…`, spec 10 §10.15) or the server's admin"
        " token (spec 10 §10.2).",
    },
    "session": {
        "type": "apiKey",
        "in": "cookie",
        "name": "threadloom_session",
        "description": "The web UI's session cookie; a request that carries it from a browser"
        " must come from an allowed origin (spec 10 §10.8).",
    },
}
"""How a request says who it is (§8.11.3 rule 6): generated clients get an auth hook from
them and the docs page its Authorize button."""
SECURITY: tuple[dict[str, list[str]], ...] = ({"bearer": []}, {"session": []})
"""Either scheme, for every operation that needs a principal (``Operation.needs_principal``);
the others declare ``security: []``."""


def _request_defaults(refs: _Refs) -> None:
    """A property of a request body that may be absent is optional for the client: code
    generators make a property with a ``default`` required (openapi-typescript's
    ``defaultNonNullable``, on by default, turned a send's ``role`` and ``silent`` into
    required fields), so in every schema a request body reaches, the default moves into
    the property's description (§8.11.3 rule 3)."""
    todo = [
        ref for op in OPERATIONS.values() for ref in _refs_of(refs.content(op.body, "validation"))
    ]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in refs.schemas:
            continue
        seen.add(name)
        named = refs.schemas[name]
        todo.extend(_refs_of(named))
        for branch in (named, *named.get("anyOf", ()), *named.get("allOf", ())):
            for prop in (branch.get("properties") or {}).values():
                if isinstance(prop, dict) and "default" in prop:
                    default = prop.pop("default")
                    if default is None:
                        continue
                    said = f"Defaults to `{json.dumps(default)}` when absent."
                    text = prop.get("description")
                    prop["description"] = f"{text} {said}" if text else said


def _refs_of(item: Any) -> list[str]:
    """The names of the schemas ``item`` references, at any depth."""
    found: list[str] = []
    stack = [item]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            ref = value.get("$ref")
            if isinstance(ref, str):
                found.append(ref.rsplit("/", 1)[-1])
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return found


def _tags_required(schemas: dict[str, Any]) -> None:
    """A union told apart by a ``discriminator`` needs its tag in every body (pydantic
    refuses one without it, default or not): the property is required in each schema
    the mapping names (AG-UI's messages, by ``role``)."""
    found: list[dict[str, Any]] = []
    stack: list[Any] = list(schemas.values())
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("discriminator"), dict):
                found.append(item["discriminator"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    for discriminator in found:
        tag = discriminator.get("propertyName")
        for ref in discriminator.get("mapping", {}).values():
            named = schemas.get(str(ref).rsplit("/", 1)[-1])
            if named is not None and tag and tag not in named.setdefault("required", []):
                named["required"].append(tag)


def operation_id(route: APIRoute) -> str:
    """A route's operation id: its name, stable whatever its path."""
    return route.name


def install(app: FastAPI) -> None:
    """Serve the completed description at ``app.openapi_url``."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = describe(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
