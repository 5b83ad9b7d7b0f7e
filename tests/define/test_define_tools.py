"""The ``@tool`` decorator (spec 04 §4.5): options, schema derivation, invoke, results.

C04-015…017 are checked here at the level of ``normalize_tool_result`` / ``error_result``
and ``invoke``; the stored tool messages belong to the engine's tests.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import TYPE_CHECKING, Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, model_validator

from threadloom.define import (
    Attachment,
    ToolArgumentsError,
    ToolDefinition,
    ToolResult,
    error_result,
    normalize_tool_result,
    tool,
    tool_definition_of,
)
from threadloom.errors import DefinitionError
from threadloom.records import AttachmentRef

if TYPE_CHECKING:
    from threadloom import ThreadState


def definition_of(fn: Any) -> ToolDefinition:
    found = tool_definition_of(fn)
    assert found is not None
    return found


class Address(BaseModel):
    street: str
    city: str


class Customer(BaseModel):
    name: str
    address: Address


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    tag: str


class Range(BaseModel):
    low: int
    high: int

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.low > self.high:
            raise ValueError("low must not exceed high")
        return self


# --- the decorator ----------------------------------------------------------------------


def test_bare_decorator_keeps_the_function_callable() -> None:
    @tool
    def add(a: int, b: int = 2) -> int:
        """Add two numbers.

        The second defaults to two.
        """
        return a + b

    assert add(1) == 3
    definition = definition_of(add)
    assert add.tool_definition is definition  # type: ignore[attr-defined]
    assert definition.name == "add"
    assert definition.description == "Add two numbers.\n\nThe second defaults to two."
    assert (definition.timeout, definition.progress_argument) == (None, None)
    assert not definition.takes_state and not definition.is_async
    assert definition.problems == ()


def test_decorator_with_options() -> None:
    @tool(name="search", description="  Full-text search.  ", timeout=30, progress_argument="q")
    async def find(q: str) -> list[str]:
        """Ignored docstring."""
        return [q]

    definition = definition_of(find)
    assert (definition.name, definition.description) == ("search", "Full-text search.")
    assert definition.timeout == 30.0 and definition.progress_argument == "q"
    assert definition.is_async
    assert asyncio.run(find("x")) == ["x"]
    assert definition.self_problems() == []


def test_wrong_decorator_usage_raises_type_error() -> None:
    with pytest.raises(TypeError):
        tool("name")  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        tool(name=3)(lambda: None)  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        tool(timeout="soon")(lambda: None)  # type: ignore[call-overload]


def test_state_parameter_detection() -> None:
    @tool
    def annotated(st: ThreadState, x: int) -> None:
        """Annotated state."""

    @tool
    def named(state, x: int) -> None:  # type: ignore[no-untyped-def]
        """Named state."""

    @tool
    def stateless(x: int) -> None:
        """No state."""

    assert definition_of(annotated).takes_state
    assert definition_of(named).takes_state and definition_of(named).problems == ()
    assert not definition_of(stateless).takes_state
    for fn in (annotated, named, stateless):
        assert list(definition_of(fn).parameters["properties"]) == ["x"]


# --- schemas (§4.5.2) -----------------------------------------------------------------------


def test_no_parameters_schema() -> None:
    @tool
    def ping(state: ThreadState) -> str:
        """Ping."""
        return "pong"

    assert definition_of(ping).parameters == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }


def test_annotated_field_descriptions_and_constraints() -> None:
    @tool
    def lookup(
        order_id: Annotated[str, Field(description="Order number, e.g. A-1001")],
        limit: Annotated[int, Field(ge=1, le=10)] = 5,
        note: str | None = None,
    ) -> str:
        """Look up an order."""
        return order_id

    schema = definition_of(lookup).parameters
    assert schema["properties"]["order_id"] == {
        "description": "Order number, e.g. A-1001",
        "title": "Order Id",
        "type": "string",
    }
    assert schema["properties"]["limit"] == {
        "default": 5,
        "maximum": 10,
        "minimum": 1,
        "title": "Limit",
        "type": "integer",
    }
    assert schema["properties"]["note"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert schema["required"] == ["order_id"]
    assert schema["additionalProperties"] is False and "title" not in schema


def test_nested_models_keep_defs_and_refs_and_are_closed() -> None:
    @tool
    def save(customer: Customer, notify: bool = True) -> str:
        """Save a customer."""
        return customer.name

    schema = definition_of(save).parameters
    assert schema["properties"]["customer"] == {"$ref": "#/$defs/Customer"}
    assert schema["$defs"]["Customer"]["additionalProperties"] is False
    assert schema["$defs"]["Address"]["additionalProperties"] is False
    assert schema["$defs"]["Customer"]["title"] == "Customer"  # only the top-level title goes


def test_explicit_additional_properties_are_kept() -> None:
    @tool
    def tally(counts: dict[str, int], extra: dict[str, Any]) -> None:
        """Tally."""

    @tool
    def tag(item: Loose) -> None:
        """Single model allowing extras."""

    properties = definition_of(tally).parameters["properties"]
    assert properties["counts"]["additionalProperties"] == {"type": "integer"}
    assert properties["extra"]["additionalProperties"] is True
    assert definition_of(tag).parameters["additionalProperties"] is True


def test_unusual_parameter_names() -> None:
    @tool
    def odd(json: str, model_config: int, _hidden: bool = False) -> dict[str, Any]:
        """Odd names."""
        return {"json": json, "model_config": model_config, "hidden": _hidden}

    definition = definition_of(odd)
    assert list(definition.parameters["properties"]) == ["json", "model_config", "_hidden"]
    result = asyncio.run(definition.invoke(None, {"json": "j", "model_config": 2, "_hidden": True}))
    assert json.loads(result.result or "") == {"json": "j", "model_config": 2, "hidden": True}


def test_positional_only_parameters_are_supported() -> None:
    @tool
    def pair(a: int, /, b: int) -> str:
        """Pair."""
        return f"{a},{b}"

    result = asyncio.run(definition_of(pair).invoke(None, {"a": 1, "b": 2}))
    assert result.result == "1,2"


def test_a_missing_description_does_not_hide_the_schema() -> None:
    @tool
    def quiet(x: int) -> int:
        return x

    definition = definition_of(quiet)
    assert definition.problems == ("has no description (write a docstring or pass description=)",)
    assert definition.parameters["required"] == ["x"]


def test_unresolvable_annotation_is_a_v21_problem() -> None:
    @tool
    def later(x: NotYetDefined) -> None:  # type: ignore[name-defined]  # noqa: F821
        """Refers to a missing name."""

    (problem,) = definition_of(later).problems
    assert problem.startswith('cannot resolve the annotation of parameter "x": NameError:')


def test_locally_defined_models_resolve() -> None:
    class Local(BaseModel):
        value: int

    @tool
    def use(item: Local) -> int:
        """Uses a local model."""
        return item.value

    definition = definition_of(use)
    assert definition.problems == ()
    assert definition.arguments_model is Local


# --- invoke ---------------------------------------------------------------------------------


async def test_invoke_async_receives_state_and_values() -> None:
    seen: list[Any] = []

    @tool
    async def act(state: ThreadState, n: int, tag: str = "x") -> str:
        """Act."""
        seen.append((state, n, tag))
        return f"{n}{tag}"

    marker = object()
    result = await definition_of(act).invoke(marker, {"n": "7"})
    assert result == ToolResult(result="7x")
    assert seen == [(marker, 7, "x")]


async def test_invoke_runs_plain_functions_in_a_worker_thread() -> None:
    loop_thread = threading.get_ident()

    @tool
    def where() -> int:
        """Which thread."""
        return threading.get_ident()

    result = await definition_of(where).invoke(None, {})
    assert result.result is not None and int(result.result) != loop_thread


async def test_invoke_awaits_an_awaitable_from_a_plain_function() -> None:
    async def later() -> str:
        return "done"

    @tool
    def deferred() -> Any:
        """Returns a coroutine."""
        return later()

    assert (await definition_of(deferred).invoke(None, {})).result == "done"


async def test_argument_validation_errors() -> None:
    @tool
    def typed(n: int, who: Customer) -> None:
        """Typed."""

    definition = definition_of(typed)
    with pytest.raises(ToolArgumentsError) as info:
        await definition.invoke(None, {"n": "a", "who": {"name": "x", "address": {}}, "zz": 1})
    assert str(info.value) == (
        "Tool argument validation failed: "
        "[n] Input should be a valid integer, unable to parse string as an integer; "
        "[who.address.street] Field required; [who.address.city] Field required; "
        "[zz] Extra inputs are not permitted"
    )
    with pytest.raises(ToolArgumentsError) as info:
        await definition.invoke(None, [1, 2])  # type: ignore[arg-type]
    assert str(info.value) == "Tool arguments must be a JSON object"


async def test_argument_validation_error_at_the_root() -> None:
    @tool
    def span(r: Range) -> None:
        """Span."""

    with pytest.raises(ToolArgumentsError) as info:
        await definition_of(span).invoke(None, {"low": 3, "high": 1})
    assert str(info.value) == (
        "Tool argument validation failed: [root] Value error, low must not exceed high"
    )


async def test_invoke_does_not_catch_tool_exceptions() -> None:
    @tool
    async def boom() -> None:
        """Explodes."""
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await definition_of(boom).invoke(None, {})


async def test_invoke_refuses_a_tool_with_schema_problems() -> None:
    @tool
    def broken(x) -> None:  # type: ignore[no-untyped-def]
        """Broken."""

    with pytest.raises(DefinitionError) as info:
        await definition_of(broken).invoke(None, {"x": 1})
    assert info.value.problems == ['Tool "broken": parameter "x" has no type annotation']


# --- results (§4.5.3) -----------------------------------------------------------------------


async def test_tool_result_normalisation_dict_is_indented_json() -> None:
    """Basis of C04-015: ``{"x": 1}`` → ``{\\n  "x": 1\\n}``."""

    @tool
    def give() -> dict[str, int]:
        """Give."""
        return {"x": 1}

    result = await definition_of(give).invoke(None, {})
    assert result == ToolResult(status="success", result='{\n  "x": 1\n}')


async def test_tool_result_normalisation_none_is_success_without_text() -> None:
    """Basis of C04-016: ``None`` → success with no text (the engine stores the fallback)."""

    @tool
    async def nothing() -> None:
        """Nothing."""

    assert await definition_of(nothing).invoke(None, {}) == ToolResult()


def test_tool_result_normalisation_exception_text() -> None:
    """Basis of C04-017: a raised ``ValueError("boom")`` → error ``boom``."""
    assert error_result(ValueError("boom")) == ToolResult(status="error", error="boom")
    assert error_result(KeyboardInterrupt()).error == "KeyboardInterrupt"


def test_tool_result_normalisation_table() -> None:
    class Out(BaseModel):
        a: int
        b: str = "é"

    assert normalize_tool_result("text") == ToolResult(result="text")
    assert normalize_tool_result("") == ToolResult(result="")
    assert normalize_tool_result(Out(a=1)).result == Out(a=1).model_dump_json(indent=2)
    assert normalize_tool_result([1, "é"]).result == '[\n  1,\n  "é"\n]'
    assert normalize_tool_result(3.5).result == "3.5"
    assert normalize_tool_result(True).result == "true"
    for bad, name in (({1, 2}, "set"), (object(), "object"), (b"x", "bytes")):
        assert normalize_tool_result(bad) == ToolResult(
            status="error", error=f"Tool returned a value that is not JSON-serialisable: {name}"
        )
    assert normalize_tool_result(float("nan")).status == "error"


def test_tool_result_normalisation_keeps_tool_results() -> None:
    given = ToolResult(result="fine")
    assert normalize_tool_result(given) is given
    failed = normalize_tool_result(ToolResult(status="error", result="went wrong"))
    assert (failed.status, failed.error, failed.result) == ("error", "went wrong", "went wrong")


def test_tool_result_attachments() -> None:
    ref = AttachmentRef(id="f1", path="/a.png", name="a.png", mimeType="image/png", size=3)
    new = Attachment(data=b"abc", name="b.txt", mime_type="text/plain")
    result = ToolResult(attachments=[ref, new])
    assert result.attachments == [ref, new]
    with pytest.raises(ValueError):
        Attachment(data=b"", name="x", mime_type="image/png", width=0)


def test_c04_113_a_google_args_section_describes_the_parameters() -> None:
    """C04-113: the text before the sections is the description; each documented
    parameter is described in the schema; an Annotated description wins; an explicit
    ``description=`` replaces the text but keeps the parameters described."""

    def lookup(
        order_id: str,
        verbose: bool = False,
        note: Annotated[str, Field(description="kept")] = "",
    ) -> str:
        """Look an order up.

        Reads the order store.

        Args:
            order_id: The order's id,
                like A-1001.
            verbose: Whether to say more.
            note: Not this text.

        Returns:
            The order's state.
        """
        return order_id

    definition = tool(lookup).tool_definition
    assert definition.description == "Look an order up.\n\nReads the order store."
    properties = definition.parameters["properties"]
    assert properties["order_id"]["description"] == "The order's id, like A-1001."
    assert properties["verbose"]["description"] == "Whether to say more."
    assert properties["note"]["description"] == "kept"
    assert definition.parameters["required"] == ["order_id"]
    explicit = tool(description="Find an order.")(lookup).tool_definition
    assert explicit.description == "Find an order."
    assert explicit.parameters["properties"]["verbose"]["description"] == "Whether to say more."


def test_c04_114_numpy_and_rest_sections_and_a_docstring_without_one() -> None:
    """C04-114: NumPy and reST parameter sections describe ``x`` too; a docstring without
    a parameter section is the description whole, and describes no parameter."""

    def numpy_style(x: int) -> int:
        """Double a number.

        Parameters
        ----------
        x : int
            The number.
        """
        return 2 * x

    def rest_style(x: int) -> int:
        """Double a number.

        :param x: The number.
        """
        return 2 * x

    def prose(x: int) -> int:
        """Double a number.

        Args in prose are not a section: x is any integer."""
        return 2 * x

    for fn in (numpy_style, rest_style):
        definition = tool(fn).tool_definition
        assert definition.description == "Double a number."
        assert definition.parameters["properties"]["x"]["description"] == "The number."
    plain = tool(prose).tool_definition
    assert plain.description == (
        "Double a number.\n\nArgs in prose are not a section: x is any integer."
    )
    assert "description" not in plain.parameters["properties"]["x"]
