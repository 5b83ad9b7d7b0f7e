"""Spec 08 §8.11.3: ``/openapi.json`` describes every operation as the server runs it —
stable operation ids, query parameters, named request and response schemas, the error
statuses really answered (C08-135 … C08-138; C08-139, the schemathesis run with response
conformance checks, is ``tests/attack/test_schemathesis.py``)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute

from threadloom.server.app import _build
from threadloom.server.settings import ServerSettings
from threadloom.wire.routes import OPERATIONS

APP = _build(ServerSettings())
DOC = APP.openapi()
REF = re.compile(r"^#/components/schemas/\w+$")
READS = re.compile(
    r"""(?:\bq|Query\(request\))\.(?:raw|int|bool|enum|enum_list|items|has)\(\s*"(\w+)"|"""
    r"""\bflag\(q,\s*"(\w+)"\)"""
)
"""A query parameter a route's code reads: ``q.int("limit", …)``, ``flag(q, "stats")``."""


def operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, ops in DOC["paths"].items():
        for method, operation in ops.items():
            yield path, method, operation


def routes(items: list[Any] | None = None) -> list[APIRoute]:
    """The app's documented routes, those of included routers too."""
    out: list[APIRoute] = []
    for route in APP.routes if items is None else items:
        included = getattr(route, "original_router", None)
        if included is not None:
            out.extend(routes(included.routes))
        elif isinstance(route, APIRoute) and route.include_in_schema:
            out.append(route)
    return out


def resolves(schema: dict[str, Any]) -> bool:
    """A ``$ref`` to a named schema that exists, or ``anyOf`` of them."""
    if "anyOf" in schema:
        return all(resolves(s) for s in schema["anyOf"])
    ref = schema.get("$ref", "")
    return bool(REF.match(ref)) and ref.rsplit("/", 1)[1] in DOC["components"]["schemas"]


def test_c08_135_operation_ids_are_route_names() -> None:
    ids = [operation["operationId"] for _, _, operation in operations()]
    assert len(ids) == len(set(ids))
    assert sorted(ids) == sorted(r.name for r in routes())
    assert set(ids) == set(OPERATIONS)
    by_path = {(p, m): o["operationId"] for p, m, o in operations()}
    assert by_path[("/api/threads", "get")] == "list_threads"
    assert by_path[("/api/threads/{id}/messages", "get")] == "get_messages"
    assert by_path[("/api/threads/{id}/messages", "post")] == "send_message"
    assert by_path[("/api/threads/{id}/fs/{path}", "post")] == "write_path"
    assert _build(ServerSettings()).openapi() == DOC  # the same document in every build


def _query(operation: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p["schema"] for p in operation.get("parameters", ()) if p["in"] == "query"}


def test_c08_136_query_parameters_are_declared() -> None:
    declared = _query(DOC["paths"]["/api/threads/{id}/messages"]["get"])
    for name in ("limit", "offset", "depth"):
        assert declared[name] == {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}
    assert declared["order"]["enum"] == ["asc", "desc"]
    assert declared["includeSilent"]["type"] == declared["includeWorkblocks"]["type"] == "boolean"
    assert declared["ids"]["type"] == "string"
    by_name = {o["operationId"]: o for _, _, o in operations()}
    for route in routes():
        source = inspect.getsource(route.endpoint)
        read = {a or b for a, b in READS.findall(source)}
        missing = read - set(_query(by_name[route.name]))
        assert not missing, f"{route.name} reads undeclared query parameters {missing}"


@pytest.mark.parametrize("where", ["requests", "answers"])
def test_c08_137_bodies_are_named_schemas(where: str) -> None:
    for path, method, operation in operations():
        if where == "requests":
            contents = [operation.get("requestBody", {}).get("content", {})]
        else:
            answers = operation["responses"]
            contents = [a.get("content", {}) for s, a in answers.items() if s.startswith("2")]
        for content in contents:
            for media, item in content.items():
                if media == "application/json" or media == "text/event-stream":
                    assert resolves(item["schema"]), (path, method, item)
    answers = {(p, m): o["responses"] for p, m, o in operations()}
    created = answers[("/api/users", "post")]["201"]["content"]["application/json"]
    assert created["schema"]["$ref"].endswith("/UserAnswer")
    sent = answers[("/api/threads/{id}/messages", "post")]
    assert {"200", "202"} <= set(sent)
    assert sent["202"]["content"]["application/json"]["schema"]["$ref"].endswith("/SendAccepted")
    deleted = answers[("/api/threads/{id}/fs/{path}", "delete")]
    assert "content" not in deleted["204"] and "200" not in deleted


def test_c08_138_error_answers_are_the_error_shape() -> None:
    schemas = DOC["components"]["schemas"]
    assert "HTTPValidationError" not in schemas and "ValidationError" not in schemas
    for path, method, operation in operations():
        answers = operation["responses"]
        assert "422" not in answers, (path, method)
        for status, answer in answers.items():
            if status.startswith(("4", "5")) and not (path == "/api/health" and status == "503"):
                ref = answer["content"]["application/json"]["schema"]["$ref"]
                error = schemas[ref.rsplit("/", 1)[1]]
                assert {"error", "code"} <= set(error["required"]), (path, method, status)
                assert "details" in error["properties"]
        if "requestBody" in operation or _query(operation):
            assert "400" in answers, (path, method)
        if operation["operationId"] not in ("health", "config"):
            assert "401" in answers or operation["operationId"] == "health", (path, method)
        assert {"500", "503"} <= set(answers), (path, method)


def test_c08_170_security_schemes_and_who_needs_them() -> None:
    """C08-170: the two ways a request says who it is, and on each operation whether it
    needs one (generated clients' auth hook, the docs page's Authorize button)."""
    schemes = DOC["components"]["securitySchemes"]
    assert schemes["bearer"]["type"] == "http" and schemes["bearer"]["scheme"] == "bearer"
    assert schemes["session"] == {
        **schemes["session"],
        "type": "apiKey",
        "in": "cookie",
        "name": "threadloom_session",
    }
    either = [{"bearer": []}, {"session": []}]
    by_id = {op["operationId"]: op for _, _, op in operations()}
    for name in ("list_threads", "send_message", "logout", "agui_run"):
        if name in by_id:
            assert by_id[name]["security"] == either, name
    for name in ("health", "login", "config", "fire_trigger"):
        assert by_id[name]["security"] == [], name
    for name, op in by_id.items():
        declared = OPERATIONS[name]
        assert op["security"] == (either if declared.needs_principal else []), name
        # login answers 401 for bad credentials, a trigger's call for a wrong secret (spec
        # 22 §22.3): neither needs a principal
        if "401" in op["responses"] and name not in ("login", "fire_trigger"):
            assert op["security"] == either, name


def _reached_by_requests() -> set[str]:
    """The named schemas a request body reaches, at any depth."""
    names: set[str] = set()
    todo = [
        m.group(1)
        for _, _, op in operations()
        for m in re.finditer(r"#/components/schemas/(\w+)", str(op.get("requestBody", {})))
    ]
    while todo:
        name = todo.pop()
        if name not in names:
            names.add(name)
            todo.extend(
                re.findall(r"#/components/schemas/(\w+)", str(DOC["components"]["schemas"][name]))
            )
    return names


def test_c08_171_request_properties_with_defaults_are_optional() -> None:
    """C08-171: no property of a schema a request body reaches declares a ``default`` (code
    generators would make it required); the default is in its description. Answers keep
    theirs. (openapi-typescript on this document: tests/interop/test_c08_openapi_typescript.py.)"""
    reached = _reached_by_requests()
    assert "SendMessage" in reached
    for name in reached:
        schema = DOC["components"]["schemas"][name]
        for branch in (schema, *schema.get("anyOf", ()), *schema.get("allOf", ())):
            for prop_name, prop in (branch.get("properties") or {}).items():
                assert "default" not in prop, (name, prop_name)
    send = DOC["components"]["schemas"]["SendMessage"]
    assert not {"role", "silent"} & set(send.get("required", ()))
    assert 'Defaults to `"user"`' in send["properties"]["role"]["description"]
    assert "Defaults to `false`" in send["properties"]["silent"]["description"]
    answers = set(DOC["components"]["schemas"]) - reached
    assert any(
        "default" in prop
        for name in answers
        for prop in (DOC["components"]["schemas"][name].get("properties") or {}).values()
    ), "answer schemas keep their defaults"
