"""A TypeScript client generated from ``/openapi.json`` (spec 08 §8.11.3 rules 7–8,
C08-171): openapi-typescript 7, with its default options, on the document the app
serves, then ``tsc --noEmit`` over a send that gives only ``content``. Before rule 8 the
generator made ``role`` and ``silent`` required (their ``default`` and its
``defaultNonNullable``), and tsc refused the send."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from node_clients import installed

from threadloom.server.app import _build
from threadloom.server.settings import ServerSettings

HERE = Path(__file__).resolve().parent / "openapi_node"


def test_c08_171_a_generated_typescript_send_needs_only_content() -> None:
    node, folder = installed(HERE, "openapi-typescript", ["send.ts", "tsconfig.json"])
    document = _build(ServerSettings()).openapi()
    (folder / "openapi.json").write_text(json.dumps(document))
    bin_ = folder / "node_modules" / ".bin"
    generated = subprocess.run(
        [node, str(bin_ / "openapi-typescript"), "openapi.json", "-o", "api.d.ts"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert generated.returncode == 0, generated.stderr
    types = (folder / "api.d.ts").read_text()
    send = types[types.index("        SendMessage: ({") :]
    send = send[: send.index("\n        }")]
    assert "role?:" in send and "silent?:" in send, send
    checked = subprocess.run(
        [node, str(bin_ / "tsc"), "-p", "tsconfig.json"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert checked.returncode == 0, f"tsc refused the send:\n{checked.stdout}{checked.stderr}"
