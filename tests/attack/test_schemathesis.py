"""Schemathesis over every operation of ``threadloom serve``'s ``/openapi.json`` (issue 23,
"Keep it attacked"): a real server process serving ``examples/`` on a real store (SQLite
and PostgreSQL), once in local mode (``THREADLOOM_AUTH=local``, no credential) and once
with authentication required (an admin's API key), with a fixed seed and a bounded budget
per operation (``THREADLOOM_FUZZ_EXAMPLES``, default 30, positive and negative data).

Fuzzed path ids are mostly random, so half of the examples (drawn by Hypothesis too) use
ids that exist: a seeded thread with messages, a log row and a file; a fresh thread, message,
file, user or API key for the operations that destroy what they name. Every answer must be
(spec 08 §8.11.3, issue 24 item 5):

- never a 5xx (and the server's output never shows a traceback);
- one the operation declares: its status (``status_code_conformance``), its media type
  (``content_type_conformance``) and its body's schema (``response_schema_conformance``);
- an error body ``{"error", "code"}`` for every 4xx, never FastAPI's ``{"detail"}`` / 422;
- precise (issue 31 item 7): a request the schema allows is accepted
  (``positive_data_acceptance``, with the refusals JSON Schema cannot state excused one by
  one in ``_excused``), one it refuses is refused (``negative_data_rejection``).

Each server prints one line, e.g. ``schemathesis sqlite-local: 44 operations, 1320
requests, 5280 checks, 0 failures``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from pg_support import create_schema, drop_schema, require_postgres, schema_url
from server.conftest import USERS, add_users
from server.test_serve import ROOT, spawn_server
from threadloom import Runtime
from threadloom.server.app import _build
from threadloom.server.settings import ServerSettings

EXAMPLES = int(os.environ.get("THREADLOOM_FUZZ_EXAMPLES", "30"))
"""Examples per operation and server (positive and negative data together)."""
SEED = int(os.environ.get("THREADLOOM_FUZZ_SEED", "23"))
"""Hypothesis's seed: fixed, so a run is repeatable; another one explores further."""

STATIC = _build(ServerSettings()).openapi()
LABELS = [f"{method.upper()} {path}" for path, ops in STATIC["paths"].items() for method in ops]

AGENTS = ("support", "writer_critic", "warranty_research")
"""The agents of ``examples/``: a fuzzed ``agent_id`` is one of them half of the time."""

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
"""Schemathesis's checks run on every answer, besides ``_problem``'s own; and
``positive_data_acceptance``, whose refusals ``_excused`` may excuse."""

CONFIG = SchemathesisConfig.from_dict(
    {
        "checks": {
            "positive_data_acceptance": {
                # 423: the thread is terminated, a state no request schema can say
                "expected-statuses": ["2xx", "401", "403", "404", "409", "423", "429"]
            }
        }
    }
)

_BAD_TEXT = (
    "must not contain a NUL character",
    "must not contain a lone UTF-16 surrogate",
    "must be a finite number (not NaN or Infinity)",
)
"""§8.1.1's refusals of any JSON body, wherever the value sits (deps.json_object)."""
_AGUI_SOURCE = re.compile(r"^messages\[\d+\]\.content\[\d+\]\.source(\.value)?$")
"""The source of an AG-UI media part, refused for its bytes or its kind (spec 13 §13.2.3)."""
_CROSS_ITEM = re.compile(
    r"^initial_messages\[\d+\]\.(tool_call_id: must name a call of an earlier assistant"
    r" item|tool_calls: (repeats call id|is invalid: tool_calls: duplicate call id).*)$"
)

_ACROSS_FIELDS = frozenset(
    {
        # a trigger's target (spec 22 §22.1): exactly one, and what only an agent takes
        "exactly one of agent and thread_id is required",
        "is only for an agent target",
        # a schedule's time rule and target (spec 18 §18.1)
        "or interval_s: exactly one must be set",
        "or thread_id: exactly one must be set",
        "must be null with a thread_id target",
        "must be skip or queue with a thread_id target",
    }
)
"""Rules across the fields of a schedule or a trigger that its body's schema does not state
(which one of two fields is set)."""

_PORTABLE = re.compile(
    r"^(root|threads\[\d+\].*): (appears twice|must name a thread that comes before it"
    r"|must be the id of the first thread|must be null \(the root\)|must not be running"
    r"|must be a normalised path|must be base64|is below |must not be null"
    r"|must be a 64-bit integer|must name a message of the thread|Value error, )"
)
"""The checks across a thread file's parts (spec 21 §21.2.4): ids once, parents first,
paths under directories, base64 content, no running thread, a compaction's range within its
thread's messages (spec 23), 64-bit integers in free records — and the rules across the
fields of the records it carries (pydantic's ``Value error, …`` of a record's own
validator: a budget names a limit, …), which the file's schema does not repeat."""


def _excused(case: Any, response: Any) -> str | None:
    """Why a request the schema allows may still be refused (None: it may not). Each is a
    rule JSON Schema cannot state (spec 08 §8.11.3 rule 3):

    - a WebSocket route (``/api/events``, ``…/stream`` without ``Accept: text/event-stream``)
      refuses a plain GET: OpenAPI cannot describe an upgrade;
    - §8.1.1's rule of every JSON body — no NUL, no lone surrogate, no non-finite number,
      anywhere, free-form values (metadata, arguments, unknown keys) included;
    - a rule between items of a list (an initial tool item names an earlier call; call ids
      unique across items), or about the content of JSON text (``tool_calls`` and
      ``function.arguments`` may be given as text);
    - ``metadata`` of at most 16 KiB as JSON;
    - what depends on the caller, the project or the thread: a key for a system principal
      needs a ``user_id``; an agent assigned to a thread must have a human-backed side; a
      variable typed by ``env_type_patch`` must exist; an AG-UI message the thread does not
      have yet must hold text or a media part, and a media part's source must be inline
      base64 of a type it may have (spec 13 §13.2.3: never a URL to fetch); an AG-UI
      frontend tool may not take the name of one of the agent's tools, nor a name an earlier
      entry of ``tools`` has; a webhook's target, which must resolve, to addresses the
      settings allow (spec 19 §19.6);
    - the rules across a thread file's parts (spec 21 §21.2.4, ``_PORTABLE``);
    - the rules across a schedule's or a trigger's fields (``_ACROSS_FIELDS``: one target).
    """
    if response.status_code != 400:
        return None
    try:
        body = json.loads(response.content)
    except ValueError:
        return None
    error = body.get("error", "")
    if error in (
        "This endpoint requires a WebSocket connection",
        "This endpoint only supports WebSocket connections",
        "user_id is required for this credential",
    ):
        return error
    details = body.get("details") or []
    problems = [f"{d.get('field')}: {d.get('problem')}" for d in details]
    text_form = isinstance(case.body, dict) and any(
        isinstance(m, dict) and isinstance(m.get("tool_calls"), str)
        for m in case.body.get("initial_messages") or []
    )

    def excused(detail: dict[str, Any], problem: str) -> bool:
        said = str(detail.get("problem", ""))
        return (
            said in _BAD_TEXT
            or said.startswith("is nested deeper than")
            or said == "must be at most 16 KiB as JSON"
            or said == "must name an agent with a human-backed side"
            or said == "has no matching env value"
            or said == "must hold text or a media part (a new message)"
            or said == "must have at most 20 media parts"
            or _AGUI_SOURCE.match(str(detail.get("field"))) is not None
            or said.startswith("names the tool ")  # a frontend tool listed twice (items)
            or said.startswith("is the name of a tool of agent ")  # the project's tools
            # a webhook target's host, as DNS resolves it now, and the SSRF policy (spec 19)
            or (detail.get("field") == "url" and said.startswith("url "))
            or _CROSS_ITEM.match(problem) is not None
            or _PORTABLE.match(problem) is not None
            or said in _ACROSS_FIELDS
            or (
                text_form
                and ".tool_calls" in str(detail.get("field"))
                and said.startswith("is invalid")
            )
        )

    if details and all(excused(d, p) for d, p in zip(details, problems, strict=True)):
        return "; ".join(problems)
    return None


CONFIGS = [("sqlite", "local"), ("sqlite", "auth"), ("postgresql", "local"), ("postgresql", "auth")]


@dataclass
class Served:
    """One ``threadloom serve examples`` process and what the fuzzer needs to know of it."""

    base: str
    mode: str
    proc: subprocess.Popen[bytes]
    schema: Any
    key: str | None
    """The admin's API key (auth mode); None in local mode."""
    thread: str = ""
    message: str = ""
    log: str = ""
    file: str = "notes/seed.txt"
    counter: Iterator[int] = field(default_factory=itertools.count)
    client: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=30))
    session: requests.Session = field(default_factory=requests.Session)
    tally: dict[str, int] = field(
        default_factory=lambda: {"operations": 0, "requests": 0, "checks": 0, "failures": 0}
    )

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        return self.client.request(method, f"{self.base}{path}", headers=headers, **kwargs)

    def ok(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        assert response.status_code < 300, (method, path, response.status_code, response.text)
        return response.json() if response.content else None

    def new_thread(self, messages: int = 2) -> str:
        initial = [{"role": "user", "content": f"seed {i}"} for i in range(messages)]
        body = {"agent_id": "support", "initial_messages": initial}
        thread: str = self.ok("POST", "/api/threads", json=body)["threadId"]
        return thread

    def first_message(self, thread: str) -> str:
        page = self.ok("GET", f"/api/threads/{thread}/messages", params={"order": "asc"})
        message: str = page["messages"][0]["id"]
        return message

    def upload(self, thread: str, path: str) -> None:
        self.ok(
            "POST",
            f"/api/threads/{thread}/fs/{path}",
            content=b"seeded file\n",
            headers={"Content-Type": "text/plain"},
        )

    def new_key(self) -> tuple[str, str]:
        """A throwaway API key of the admin: (id, key)."""
        body = self.ok("POST", "/api/api-keys", json={"name": f"throwaway-{next(self.counter)}"})
        return body["id"], body["key"]

    def new_user(self) -> str:
        username = f"victim-{next(self.counter)}-{uuid.uuid4().hex[:6]}"
        body = self.ok("POST", "/api/users", json={"username": username, "role": "user"})
        user: str = body["user"]["id"]
        return user

    def new_schedule(self) -> str:
        """A schedule of the support agent that fires once a year (the fuzzer may change,
        fire or delete it)."""
        schedule = f"fuzz-{next(self.counter)}-{uuid.uuid4().hex[:6]}"
        body = {"id": schedule, "message": "m", "cron": "0 0 1 1 *", "agent": "support"}
        created: str = self.ok("POST", "/api/schedules", json=body)["schedule"]["id"]
        return created

    def new_trigger(self) -> str:
        """A trigger of the support agent (the fuzzer may change, call or delete it)."""
        trigger = f"fuzz-{next(self.counter)}-{uuid.uuid4().hex[:6]}"
        body = {"id": trigger, "agent": "support"}
        created: str = self.ok("POST", "/api/triggers", json=body)["trigger"]["id"]
        return created

    def seed(self) -> None:
        """A thread that ran one turn (messages and a log row) and holds a file."""
        self.thread = self.new_thread(messages=0)
        sent = self.request("POST", f"/api/threads/{self.thread}/messages", json={"content": "hi"})
        assert sent.status_code == 202, sent.text
        wait_settled(self, self.thread)
        self.message = self.first_message(self.thread)
        logs = self.ok("GET", f"/api/threads/{self.thread}/logs")
        self.log = logs["logs"][0]["id"]
        self.upload(self.thread, self.file)

    def ensure_thread(self) -> None:
        """The seeded thread again, when a fuzzed request deleted or terminated it."""
        row = self.request("GET", f"/api/threads/{self.thread}")
        if row.status_code == 404 or (row.status_code == 200 and row.json().get("terminated")):
            self.seed()


def wait_settled(served: Served, thread: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = served.ok("GET", f"/api/threads/{thread}")["status"]
        if status["state"] != "running" and status["reason"] is not None:
            return
        time.sleep(0.05)
    raise AssertionError(f"thread {thread} did not settle")


def _store_url(backend: str, tmp: Path) -> tuple[str, str | None]:
    if backend == "sqlite":
        return f"sqlite:///{tmp / 'fuzz.db'}", None
    require_postgres()
    schema = f"tl_fuzz_{uuid.uuid4().hex[:12]}"
    create_schema(schema)
    return schema_url(schema), schema


async def _admin_key(url: str) -> str:
    """The fixture users of ``tests/server`` as rows of the store; the admin's key."""
    runtime = await Runtime.open(url)
    try:
        keys = await add_users(runtime)
    finally:
        await runtime.close()
    return keys["root"]


@pytest.fixture(scope="module", params=CONFIGS, ids=[f"{b}-{m}" for b, m in CONFIGS])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    backend, mode = request.param
    url, schema_name = _store_url(backend, tmp_path_factory.mktemp(f"fuzz-{backend}-{mode}"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        key = asyncio.run(_admin_key(url)) if mode == "auth" else None
        env = {"THREADLOOM_AUTH": "required" if mode == "auth" else "local"}
        proc, base = spawn_server(ROOT / "examples", url, log_level="error", **env)
        schema = schemathesis.openapi.from_url(
            f"{base}/openapi.json", config=CONFIG, headers={}, timeout=30
        )
        server = Served(base, mode, proc, schema, key)
        server.seed()
        yield server
        server.client.close()
        server.session.close()
        _report(request, f"{backend}-{mode}", server.tally)
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=30)[0].decode(errors="replace") if proc else ""
        if schema_name is not None:
            drop_schema(schema_name)
    assert "Traceback" not in output, output[-4000:]


def _report(request: pytest.FixtureRequest, name: str, tally: dict[str, int]) -> None:
    """The summary line of one server's run, shown whatever pytest's capture and verbosity."""
    line = (
        f"schemathesis {name}: {tally['operations']} operations, {tally['requests']} requests, "
        f"{tally['checks']} checks, {tally['failures']} failures"
    )
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is None or capture is None:  # pragma: no cover - pytest run without them
        print(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(line)


def _declared_json_only(operation: Any, status: int) -> bool:
    """Whether the operation declares only ``application/json`` for ``status``."""
    responses = operation.definition.raw.get("responses", {})
    declared = responses.get(str(status)) or responses.get("default")
    if not declared or "content" not in declared:
        return False
    return set(declared["content"]) == {"application/json"}


def _real_ids(served: Served, case: Any) -> dict[str, str]:
    """Existing ids for the case's path parameters (fresh ones where the operation destroys
    what it names)."""
    path, method = case.operation.path, case.method.upper()
    params: dict[str, str] = {}
    if "{id}" in path:
        served.ensure_thread()
        destroys = (method == "DELETE" and path.endswith("{id}")) or path.endswith("/terminate")
        params["id"] = served.new_thread() if destroys else served.thread
    if "{message_id}" in path:
        if method == "DELETE":
            params["id"] = served.new_thread()
            params["message_id"] = served.first_message(params["id"])
        else:
            params["message_id"] = served.message
    if "{agent}" in path:
        params["agent"] = AGENTS[0]
    if path == "/api/tools/{name}/call":
        params["name"] = "lookup_order"  # a tool of examples/ (the playground, §8.10.7)
    if "{log_id}" in path:
        params["log_id"] = served.log
    if "{path}" in path:
        if method == "DELETE":
            params["id"] = served.new_thread(messages=0)
            served.upload(params["id"], served.file)
        elif method == "GET":
            served.upload(params["id"], served.file)  # again, in case a move took it
        params["path"] = served.file
    if "{key_id}" in path and served.key:
        params["key_id"] = served.new_key()[0]
    if "{grant_id}" in path:  # no host was allowed: the revocation's answer is a 404
        params["grant_id"] = "0" * 64
    if "{user_id}" in path and served.key:
        params["user_id"] = served.new_user() if method == "DELETE" else USERS["bob"].id
    return params


def _prepare(served: Served, case: Any, real: bool) -> dict[str, str]:
    """Put existing ids (and a known agent) into the case when ``real``; the headers."""
    headers = dict(served.headers)
    if served.key and case.operation.path == "/api/auth/current-key":
        headers["Authorization"] = f"Bearer {served.new_key()[1]}"  # never our own key
    if not real:
        return headers
    for name, value in _real_ids(served, case).items():
        case.path_parameters[name] = value
    positive = case.meta is None or case.meta.generation.mode.is_positive
    if positive and isinstance(case.body, dict) and "agent_id" in case.body:
        # a known agent (a negative case keeps its own: it may be what makes it invalid)
        case.body["agent_id"] = AGENTS[len(str(case.body["agent_id"])) % len(AGENTS)]
    if positive and isinstance(case.body, dict) and case.operation.path.endswith("/fork"):
        case.body["message_id"] = served.message  # a fork at the seeded thread's first
    return headers


def _header(response: Any, name: str) -> str:
    """One header of a schemathesis response (its headers map names to lists)."""
    value = {k.lower(): v for k, v in response.headers.items()}.get(name, "")
    return str(value[0] if isinstance(value, list) and value else value or "")


def _problem(case: Any, response: Any) -> str | None:
    """What is wrong with the answer (None: nothing)."""
    status = response.status_code
    if status >= 500:
        return f"{status} server error"
    if status == 204 or not response.content:
        return None
    if _declared_json_only(case.operation, status):
        kind = _header(response, "content-type")
        if not kind.startswith("application/json"):
            return f"{status} declared JSON, answered {kind!r}"
        try:
            body = json.loads(response.content)
        except ValueError:
            return f"{status} declared JSON, body is not JSON"
        if 400 <= status < 500:
            if status == 422 or "detail" in body:
                return f"{status} is FastAPI's validation answer, not the error shape"
            if not (isinstance(body.get("error"), str) and isinstance(body.get("code"), str)):
                return f"{status} error body without error/code"
    return None


@pytest.mark.parametrize("label", LABELS)
def test_c08_139_fuzzed_requests_get_no_5xx_and_the_declared_answer(
    served: Served, label: str
) -> None:
    operation = served.schema.find_operation_by_label(label)
    assert operation is not None, f"{label} is missing from the served /openapi.json"
    strategy = st.one_of(
        *served.schema.get_strategies_from_examples(operation),  # the declared examples
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )
    problems: list[str] = []
    statuses: dict[int, int] = {}

    @seed(SEED)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy, real=st.booleans())
    def fuzz(case: Any, real: bool) -> None:
        headers = _prepare(served, case, real)
        response = case.call(
            base_url=served.base, session=served.session, headers=headers, timeout=30
        )
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        problem = _problem(case, response)
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except (Exception, BaseExceptionGroup) as exc:  # schemathesis's FailureGroup (a
            # BaseExceptionGroup): its text names each failure
            problem = f"{problem or 'schemathesis'}: {exc}"
        try:
            case.validate_response(response, checks=[positive_data_acceptance], headers=headers)
        except (Exception, BaseExceptionGroup) as exc:
            if _excused(case, response) is None:
                problem = f"{problem or 'schemathesis'}: {exc}"
        served.tally["checks"] += len(CHECKS) + 2
        if problem is not None:
            served.tally["failures"] += 1
            problems.append(f"{problem}: {case.as_curl_command(headers=headers)}\n{response.text}")

    fuzz()
    served.tally["operations"] += 1
    served.tally["requests"] += sum(statuses.values())
    assert not problems, f"{len(problems)} bad answers, the first:\n" + "\n\n".join(problems[:3])
    assert statuses, "no request was sent"


def test_the_served_schema_lists_every_operation(served: Served) -> None:
    served_labels = {op.ok().label for op in served.schema.get_all_operations()}
    assert served_labels == set(LABELS)


def _example_path(served: Served, path: str) -> str | None:
    """``path`` with existing ids (a fresh thread: an example may delete or terminate it);
    None when its ids cannot exist in this mode (users and keys without credentials), or
    when the route's body depends on who calls (a key for the local principal)."""
    if ("{key_id}" in path or "{user_id}" in path) and not served.key:
        return None
    if path == "/api/api-keys" and not served.key:
        return None  # the local principal is a system principal: it must name a user_id
        # (spec 10 §10.5.7), which no example can know
    ids: dict[str, str] = {"agent": AGENTS[0]}
    if "{log_id}" in path:
        served.ensure_thread()
        ids.update(id=served.thread, log_id=served.log)
    elif "{id}" in path:
        ids["id"] = served.new_thread()
    if "{message_id}" in path:
        ids["message_id"] = served.first_message(ids["id"])
    if "{path}" in path:
        served.upload(ids["id"], served.file)
        ids["path"] = served.file
    if "{key_id}" in path:
        ids["key_id"] = served.new_key()[0]
    if "{user_id}" in path:
        ids["user_id"] = served.new_user()
    if "{tool_call_id}" in path:  # no approval is pending: the decision's answer is a 404
        ids["tool_call_id"] = "call_example"
    if "{grant_id}" in path:  # no MCP host was allowed: the revocation's answer is a 404
        ids["grant_id"] = "0" * 64
    if "{webhook_id}" in path:  # no such subscription: the answer is a 404
        ids["webhook_id"] = "00000000-0000-4000-8000-000000000000"
    if "{event_id}" in path:
        ids["event_id"] = "evt_example"
    if "{compaction_id}" in path:  # no such compaction: the undo's answer is a 404
        ids["compaction_id"] = "0" * 32
    if "{name}" in path:  # a tool of examples/ (the playground, §8.10.7)
        ids["name"] = "lookup_order"
    if "{schedule_id}" in path:
        ids["schedule_id"] = served.new_schedule()
    if "{trigger_id}" in path:
        ids["trigger_id"] = served.new_trigger()
    return path.format(**ids)


def _all_nulls(schema: dict[str, Any]) -> dict[str, Any]:
    """The first example with every other property the schema lets be ``null`` set to
    ``null``: what a client generated from the schema sends for the fields it leaves
    unset (issue 31 item 7: ``arguments`` and ``data`` both null were refused)."""
    body = dict(schema["examples"][0])
    for name, prop in schema.get("properties", {}).items():
        if name not in body and {"type": "null"} in prop.get("anyOf", []):
            body[name] = None
    return body


def test_c08_145_every_declared_request_example_is_accepted(served: Served) -> None:
    """C08-145: every example a JSON request body declares in the served /openapi.json —
    on its media type and on its named schemas, and the first of them with every other
    nullable property ``null`` — sent as is to its operation (existing ids in the path)
    → never 400 or 422: an example is a request the server accepts."""
    doc = served.ok("GET", "/openapi.json")
    schemas = doc["components"]["schemas"]
    refused: list[str] = []
    sent = 0
    for path, ops in doc["paths"].items():
        for method, operation in ops.items():
            media = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if media is None:
                continue
            bodies = [example["value"] for example in media.get("examples", {}).values()]
            schema = media["schema"]
            for ref in (s["$ref"] for s in schema.get("anyOf", [schema])):
                named = schemas[ref.rsplit("/", 1)[1]]
                bodies += named.get("examples", [])
                bodies += [_all_nulls(named)] if named.get("examples") else []
            for body in bodies:
                target = _example_path(served, path)
                if target is None:
                    continue
                answer = served.request(method.upper(), target, json=body)
                sent += 1
                if answer.status_code in (400, 422):
                    refused.append(f"{method.upper()} {path} {json.dumps(body)}: {answer.text}")
    assert sent >= 20
    assert not refused, "\n".join(refused)
