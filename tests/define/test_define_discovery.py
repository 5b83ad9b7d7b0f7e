"""Project folder discovery (spec 04 §4.2.2) with real project folders under ``tmp_path``."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from threadloom.define import Agent, Definitions, Model, Side
from threadloom.define.discovery import PACKAGE, reset_project_modules
from threadloom.errors import DefinitionError


@pytest.fixture(autouse=True)
def _forget_project_modules() -> Iterator[None]:
    yield
    reset_project_modules()


def write(root: Path, files: dict[str, str]) -> Path:
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    return root


TRACE = "from threadloom_project.models._trace import ORDER\nORDER.append(__name__)\n"


def test_folder_and_file_order_and_what_is_skipped(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "models/_trace.py": "ORDER: list[str] = []\n",
            "agents/b.py": TRACE,
            "agents/a.py": TRACE,
            "prompts/p.py": TRACE,
            "hooks/h.py": TRACE,
            "tools/z.py": TRACE,
            "tools/_private.py": TRACE,
            "tools/nested/deep.py": TRACE,
            "tools/notes.txt": "not python",
            "models/m.py": TRACE,
            "other/x.py": TRACE,
        },
    )
    Definitions.from_project(root).validate()
    order = sys.modules[f"{PACKAGE}.models._trace"].ORDER
    assert order == [
        f"{PACKAGE}.models.m",
        f"{PACKAGE}.tools.z",
        f"{PACKAGE}.hooks.h",
        f"{PACKAGE}.prompts.p",
        f"{PACKAGE}.agents.a",
        f"{PACKAGE}.agents.b",
    ]


def test_files_import_each_other_and_each_runs_once(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "models/_trace.py": "ORDER: list[str] = []\n",
            "models/fast.py": """
                from threadloom.define import Model
                fast = Model(name="fast", provider="scripted", model="m")
            """,
            "tools/a_uses_b.py": TRACE
            + "from threadloom_project.tools.b_search import search, helper_value\n"
            + "from threadloom_project.tools._helpers import helper_tool\n",
            "tools/b_search.py": TRACE
            + textwrap.dedent(
                '''
                from threadloom.define import tool
                from threadloom_project.tools._helpers import helper_value

                @tool
                def search(query: str) -> str:
                    """Search."""
                    return query + helper_value
                '''
            ),
            "tools/_helpers.py": '''
                from threadloom.define import tool

                helper_value = "!"

                @tool
                def helper_tool() -> str:
                    """Defined in a private helper file, registered through an importer."""
                    return helper_value
            ''',
            "prompts/main.py": """
                from threadloom.define import Prompt
                from threadloom_project.tools.b_search import search
                main = Prompt(name="main", model="fast", tools=[search.tool_definition.name])
            """,
            "tools/agent_in_tools.py": """
                from threadloom.define import Agent, Side
                support = Agent(name="support", side_a=Side(prompt="main"))
            """,
        },
    )
    defs = Definitions.from_project(root)
    defs.validate()
    order = sys.modules[f"{PACKAGE}.models._trace"].ORDER
    assert order == [f"{PACKAGE}.tools.a_uses_b", f"{PACKAGE}.tools.b_search"]  # once each
    search = defs.tool("search")
    agent = defs.agent("support")
    assert search is not None and agent is not None
    assert defs.origin_of(search) == "tools/b_search.py"  # where it was first seen
    assert defs.origin_of(agent) == "tools/agent_in_tools.py"  # folders are a convention
    helper = defs.tool("helper_tool")
    assert helper is not None and defs.origin_of(helper) == "tools/_helpers.py"
    assert [t.name for t in defs.tools()] == ["search", "helper_tool"]


def test_hooks_are_registered_and_duplicate_ids_reported(tmp_path: Path) -> None:
    hook_source = """
        from threadloom.define import hook

        @hook("filter_messages")
        def trim(state, messages):
            return messages[-10:]
    """
    root = write(
        tmp_path,
        {
            "hooks/a.py": hook_source,
            "hooks/b.py": hook_source,
            "models/m.py": """
                from threadloom.define import Model
                M = Model(name="M", provider="scripted", model="m")
            """,
            "prompts/p.py": """
                from threadloom.define import Prompt
                p = Prompt(name="p", model="M", hooks=["trim"])
            """,
        },
    )
    defs = Definitions.from_project(root)
    assert "trim" in defs.hooks
    assert defs.hook_origin("trim") == "hooks/a.py"
    assert defs.problems() == [
        'hooks/b.py: Duplicate name "trim": hook in hooks/a.py and hook in hooks/b.py'
    ]


def test_import_errors_name_the_file_and_exception(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "agents/syntax.py": "def broken(:\n",
            "agents/typed.py": """
                from threadloom.define import Agent
                a = Agent(name="a", max_session_turns="many")
            """,
            "prompts/missing_import.py": "import threadloom_project.tools.nothing\n",
        },
    )
    with pytest.raises(DefinitionError) as info:
        Definitions.from_project(root).validate()
    first, second, third = info.value.problems
    assert first.startswith("prompts/missing_import.py: ModuleNotFoundError: No module named")
    assert second.startswith("agents/syntax.py: SyntaxError: ")
    assert third.startswith("agents/typed.py: ValidationError: 1 validation error for Agent")


def test_reloading_a_project_into_a_fresh_registry(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "models/m.py": """
                from threadloom.define import Model
                M = Model(name="M", provider="scripted", model="m")
            """,
        },
    )
    first = Definitions.from_project(root)
    module = sys.modules[f"{PACKAGE}.models.m"]
    (root / "models" / "m.py").write_text(
        "from threadloom.define import Model\n"
        'M = Model(name="M", provider="scripted", model="changed-id")\n'
        'N = Model(name="N", provider="scripted", model="n")\n',
        encoding="utf-8",
    )
    second = Definitions.from_project(root)
    assert sys.modules[f"{PACKAGE}.models.m"] is not module
    assert [m.model for m in first.models()] == ["m"]
    assert [m.model for m in second.models()] == ["changed-id", "n"]


def test_explicit_and_discovered_definitions_share_one_registry(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "prompts/p.py": """
                from threadloom.define import Prompt
                p = Prompt(name="p", model="M")
            """,
        },
    )
    defs = Definitions().add(
        Model(name="M", provider="scripted", model="m"),
        Agent(name="p", side_a=Side(prompt="p")),
    )
    defs.load_project(root)
    assert defs.prompt("p") is None  # the agent took the shared name first
    assert defs.problems() == [
        'prompts/p.py: Duplicate name "p": agent defined in code and prompt in prompts/p.py',
        'defined in code: Agent "p": side a prompt "p" is not defined',
    ]
    assert isinstance(defs.model("M"), Model)


def test_missing_project_folder(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError, match="project folder does not exist"):
        Definitions.from_project(tmp_path / "nowhere")
