"""What ``/openapi.json`` declares, the server checks, whatever else the request holds
(spec 08 §8.1.5 rules 7–8, §8.11.3 rule 3; case C08-148): the mismatches schemathesis's
``positive_data_acceptance`` and ``negative_data_rejection`` found (issue 31 item 7)."""

from __future__ import annotations

import httpx

from conftest import Api


def _refused(answer: httpx.Response, field: str) -> None:
    assert answer.status_code == 400, answer.text
    assert field in [d["field"] for d in answer.json()["details"]], answer.text


async def test_c08_148_declared_parameters_are_checked_whatever_the_branch(api: Api) -> None:
    """C08-148: ``GET …/fs?stats=true`` with a bad ``limit``, ``type`` or ``path``, or an
    empty ``grep``/``find`` → 400 naming it, though stats use none of them; ``limit=`` and
    ``type=`` empty count as absent; a NUL in a parameter no route reads → 400 naming it."""
    client = api.client()
    thread = await api.thread()
    fs = f"/api/threads/{thread}/fs"
    for params, field in (
        ({"limit": "0"}, "limit"),
        ({"type": "x"}, "type"),
        ({"path": "a/../b"}, "path"),
        ({"grep": ""}, "grep"),
        ({"find": ""}, "find"),
    ):
        _refused(await client.get(fs, params={"stats": "true", **params}), field)
    empty = await client.get(fs, params={"stats": "true", "limit": "", "type": ""})
    assert empty.status_code == 200, empty.text
    _refused(await client.get("/api/threads", params={"unused": "a\x00b"}), "unused")
    _refused(await client.get(fs, params={"stats": "true", "other": "\x00"}), "other")


async def test_c08_148_body_rules_the_schema_states(api: Api) -> None:
    """C08-148: an API key name over 100 characters is refused even when its trimmed form
    fits; an upload item's ``width`` 3.0 is the integer 3 (JSON Schema's integer)."""
    client = api.client()
    long = await client.post("/api/api-keys", json={"name": " " + "k" * 100})
    _refused(long, "name")
    fits = await client.post("/api/api-keys", json={"name": " " + "k" * 98 + " "})
    assert fits.status_code == 201, fits.text
    thread = await api.thread()
    item = {"name": "a.png", "mimeType": "image/png", "data": "aGVsbG8=", "width": 3.0}
    sent = await client.post(
        f"/api/threads/{thread}/messages", json={"content": "hi", "attachments": [item]}
    )
    assert sent.status_code == 202, sent.text
    newline = {**item, "width": 3, "mimeType": "image/png\n"}
    _refused(
        await client.post(
            f"/api/threads/{thread}/messages", json={"content": "x", "attachments": [newline]}
        ),
        "attachments[0].mimeType",
    )
