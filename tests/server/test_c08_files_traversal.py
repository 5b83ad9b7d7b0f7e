"""Spec 08 §8.8 / C08-112: no request to a thread's ``/fs`` routes reads or writes anything
outside that thread's own file space — not another thread's files, not the server's disk.

Every file route and method is tried with encoded ``..`` (``%2F``, ``%2e%2e``), literal dot
segments, backslashes (encoded and literal), NUL and absolute paths. Requests go through
``rawhttp.raw_request`` so that the exact request target reaches the server.
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from rawhttp import raw_request

from conftest import Api
from threadloom.errors import InvalidPath
from threadloom.thread.filetypes import normalize_path

SECRET = b"top secret of thread B"
MINE = b"alice's own bytes"


def jbody(value: dict[str, Any]) -> bytes:
    return json.dumps(value).encode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class Victims:
    """Thread A (the attacker's) and the files that must stay out of its reach."""

    def __init__(self, api: Api, a: str, b: str, c: str) -> None:
        self.api, self.a, self.b, self.c = api, a, b, c
        self.fs = f"/api/threads/{a}/fs"

    async def files(self, thread: str) -> dict[str, bytes | None]:
        state = await self.api.runtime.thread(thread)
        found = await state.find_files("**", type="all", limit=1000)
        return {f.path: await state.read_file(f.path) for f in found}


async def victims(api: Api) -> Victims:
    a = await api.thread()
    b = await api.thread()  # alice's other thread
    c = await api.thread(user="bob")
    for thread in (b, c):
        state = await api.runtime.thread(thread)
        await state.write_file("/secret.txt", SECRET)
        await state.write_file("/d/keep.txt", b"keep")
    state_a = await api.runtime.thread(a)
    await state_a.write_file("/mine.txt", MINE)
    return Victims(api, a, b, c)


def bad_paths(v: Victims) -> list[str]:
    """Path parts after ``/fs/`` that spec 07 §7.2 refuses, each aimed at thread B."""
    b = v.b
    return [
        f"..%2F{b}%2Ffs%2Fsecret.txt",
        f"..%2F..%2F{b}%2Ffs%2Fsecret.txt",
        f"%2e%2e/%2e%2e/{b}/fs/secret.txt",
        f"%2E%2E%2F%2E%2E%2F{b}%2Ffs%2Fsecret.txt",
        "a/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        f"..%5C..%5C{b}%5Cfs%5Csecret.txt",
        "secret.txt%00.png",
        "mine.txt%00",
        ".%2Fmine.txt",
        "%2e/mine.txt",
        f"../../{b}/fs/secret.txt",
        f"a/../../../{b}/fs/secret.txt",
        "./mine.txt",
        "mine.txt/..",
        f"..\\..\\{b}\\fs\\secret.txt",
        "d%0Aa.txt",
    ]


def attempts(target: str) -> list[tuple[str, str, bytes | None, str | None]]:
    """Every file route and method on ``target``: (method, url, body, content type)."""
    return [
        ("GET", target, None, None),
        ("GET", f"{target}?format=json", None, None),
        ("GET", f"{target}?thumbnail", None, None),
        ("POST", target, b"overwritten", "text/plain"),
        ("POST", target, b"overwritten", None),
        ("POST", target, jbody({"data": b64(b"overwritten")}), "application/json"),
        ("POST", target, jbody({"type": "directory"}), "application/json"),
        ("POST", target, jbody({"action": "move", "destination": "/stolen"}), "application/json"),
        ("POST", target, jbody({"action": "rename", "newName": "stolen"}), "application/json"),
        ("DELETE", target, None, None),
        ("DELETE", f"{target}?recursive=true", None, None),
    ]


async def assert_untouched(v: Victims, a_before: dict[str, bytes | None]) -> None:
    for thread in (v.b, v.c):
        assert await v.files(thread) == {
            "/d": None,
            "/d/keep.txt": b"keep",
            "/secret.txt": SECRET,
        }
    assert await v.files(v.a) == a_before


async def test_c08_112_every_route_refuses_traversal_paths(api: Api) -> None:
    v = await victims(api)
    before = await v.files(v.a)
    for part in bad_paths(v):
        for method, url, body, ctype in attempts(f"{v.fs}/{part}"):
            status, _, text = await raw_request(api, method, url, body, ctype)
            assert status == 400, (method, url, status, text)
            assert json.loads(text)["code"] == "invalid_request", (method, url)
            assert SECRET not in text
            assert b"root:" not in text
    await assert_untouched(v, before)


async def test_c08_112_refused_paths_reach_nothing_for_another_users_thread(api: Api) -> None:
    """bob aiming at his own thread's neighbours gets the same 400s, never alice's data."""
    v = await victims(api)
    before = await v.files(v.a)
    bob_fs = f"/api/threads/{v.c}/fs"
    for part in (f"..%2F{v.a}%2Ffs%2Fmine.txt", f"../../{v.a}/fs/mine.txt"):
        for method, url, body, ctype in attempts(f"{bob_fs}/{part}"):
            status, _, text = await raw_request(api, method, url, body, ctype, user="bob")
            assert status == 400, (method, url)
            assert MINE not in text
    await assert_untouched(v, before)


async def test_c08_112_move_rename_and_grep_arguments_cannot_leave_the_thread(api: Api) -> None:
    v = await victims(api)
    before = await v.files(v.a)
    mine = f"{v.fs}/mine.txt"
    destinations = [
        f"../{v.b}/fs/secret.txt",
        f"/../../{v.b}/fs/stolen.txt",
        "..\\stolen.txt",
        "/a/./b",
        "stolen\x00.txt",
        "/a/..",
    ]
    for destination in destinations:
        body = jbody({"action": "move", "destination": destination})
        status, _, text = await raw_request(api, "POST", mine, body, "application/json")
        assert status == 400, destination
        assert json.loads(text)["details"][0]["field"] == "destination"
    for new_name in ("..", ".", "../stolen.txt", "..\\stolen.txt", "x\x00", f"../{v.b}"):
        body = jbody({"action": "rename", "newName": new_name})
        status, _, _ = await raw_request(api, "POST", mine, body, "application/json")
        assert status == 400, new_name
    for scope in ("..", "/..", "..%5C", "%2e%2e%2F", "/d/../..", "%00"):
        for url in (f"{v.fs}?grep=secret&path={scope}", f"{v.fs}?stats&path={scope}"):
            status, _, text = await raw_request(api, "GET", url)
            assert status == 400, url
            assert SECRET not in text
    for pattern in ("../**", "/../**", "**/secret.txt", "**"):
        status, _, text = await raw_request(api, "GET", f"{v.fs}?find={pattern}")
        assert status == 200
        assert [f["path"] for f in json.loads(text)["files"]] == (
            ["/mine.txt"] if pattern == "**" else []
        )
    status, _, text = await raw_request(api, "GET", f"{v.fs}?grep=secret")
    assert (status, json.loads(text)["results"]) == (200, [])
    status, _, text = await raw_request(api, "GET", f"{v.fs}?stats")
    assert json.loads(text) == {"totalSize": len(MINE), "fileCount": 1}
    await assert_untouched(v, before)


async def test_c08_112_absolute_paths_stay_inside_the_thread(api: Api, tmp_path: Path) -> None:
    v = await victims(api)
    sentinel = tmp_path / "sentinel.txt"
    sentinel.write_bytes(b"on disk")
    disk = str(sentinel)
    for target in (f"{v.fs}/{disk}", f"{v.fs}//etc/passwd", f"{v.fs}/%2Fetc%2Fpasswd"):
        status, _, text = await raw_request(api, "GET", target)
        assert status == 404, target  # nothing there in the thread; the disk is not looked at
        assert b"on disk" not in text and b"root:" not in text
    status, _, text = await raw_request(api, "POST", f"{v.fs}/{disk}", b"via api", "text/plain")
    assert status == 201
    assert json.loads(text)["path"] == disk  # a path of the thread's own space
    status, _, text = await raw_request(api, "POST", f"{v.fs}//{disk}", b"again", "text/plain")
    assert json.loads(text)["path"] == disk
    status, _, text = await raw_request(api, "GET", f"{v.fs}/{disk}")
    assert (status, text) == (200, b"again")
    status, _, _ = await raw_request(api, "DELETE", f"{v.fs}/{disk}")
    assert status == 204
    assert sentinel.read_bytes() == b"on disk"
    await assert_untouched(v, {"/mine.txt": MINE})


def random_target(rng: random.Random) -> str:
    """A request target part built from the pieces traversal attempts are made of."""
    pieces = "a b.txt . .. / // %2F %2f %2e %2E %5C \\ %00 %0A %0D %09 %7F %25 %252e %C3%A9 ~ %20"
    choices = pieces.split()
    return "".join(rng.choice(choices) for _ in range(rng.randint(1, 8)))


async def test_c08_112_random_paths_answer_by_spec_07_and_stay_inside(api: Api) -> None:
    """Random mixes of dots, slashes, backslashes, escapes and control characters: each
    answers 400 exactly when spec 07 refuses the once-decoded path, never a 5xx, and a
    write lands at the normalised path of the thread's own space."""
    v = await victims(api)
    rng = random.Random(8112)
    for _ in range(150):
        part = random_target(rng)
        decoded = unquote(part)
        try:
            expected: str | None = normalize_path(decoded)
        except InvalidPath:
            expected = None
        url = f"{v.fs}/{part}"
        status, _, text = await raw_request(api, "POST", url, b"fuzz", "text/plain")
        if expected is None:
            assert status == 400, (part, status, text)
        elif expected == "/":
            assert status == 400, part  # the root cannot be written
        else:
            assert status in (201, 409), (part, status, text)  # 409: a file is an ancestor
            if status == 201:
                assert json.loads(text)["path"] == expected, part
        for method in ("GET", "DELETE"):
            status, _, text = await raw_request(api, method, url)
            assert status < 500, (method, part, status)
            assert SECRET not in text
            if expected is None:
                assert status == 400, (method, part)
    for thread in (v.b, v.c):
        assert await v.files(thread) == {"/d": None, "/d/keep.txt": b"keep", "/secret.txt": SECRET}
