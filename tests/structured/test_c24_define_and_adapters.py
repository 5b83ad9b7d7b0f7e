"""Structured output without a store: the prompt's declaration and its load-time checks, the
check of an answer, and each adapter's native form of the request's ``output`` (spec 24
§24.1, §24.2, §24.3; C24-001 … C24-015)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from threadloom.define import Definitions, Model, Prompt
from threadloom.errors import DefinitionError
from threadloom.providers.anthropic import build_request as anthropic_request
from threadloom.providers.gemini import build_request as gemini_request
from threadloom.providers.openai import OpenAIChatProvider, OpenAIResponsesProvider
from threadloom.providers.types import OutputFormat, ProviderRequest, UserMessage
from threadloom.records import Message


class Weather(BaseModel):
    """A forecast."""

    city: str
    celsius: float


CITY_SCHEMA: dict[str, Any] = {
    "title": "City info",
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 1}, "tags": {"type": "array"}},
    "required": ["n"],
}


def problems_of(prompt: Prompt) -> list[str]:
    defs = Definitions().add(Model(name="M", provider="scripted", model="m"), prompt)
    with pytest.raises(DefinitionError) as info:
        defs.validate()
    return info.value.problems


def test_c24_001_declaration_defaults_and_no_output_without_a_type() -> None:
    """C24-001: a prompt declares no output type by default (``output`` None, nothing to
    parse); ``output_retries`` defaults to 2, ``output_strict`` to false."""
    plain = Prompt(name="P", model="M")
    assert plain.output is None
    assert (plain.output_retries, plain.output_strict, plain.output_name) == (2, False, None)
    answer = Message(id="m1", role="assistant", content="{}", metadata={"output": {"a": 1}})
    assert plain.parse_output(answer) is None
    typed = Prompt(name="P", model="M", output_type=Weather)
    assert typed.output is not None and typed.output.model is Weather
    assert Prompt(name="P", model="M", output_type=Weather) == typed  # equal prompts stay equal


def test_c24_002_v24_problems_refuse_the_definitions() -> None:
    """C24-002: V24 — negative retries, a name providers refuse, a schema that is no JSON
    schema — each a problem line of ``Definitions.validate()``."""
    found = problems_of(
        Prompt(
            name="P",
            model="M",
            output_type={"type": "nonsense"},
            output_retries=-1,
            output_name="has space",
        )
    )
    assert found == [
        'defined in code: Prompt "P": output_retries must be >= 0',
        'defined in code: Prompt "P": output_name must match [A-Za-z0-9_-]{1,64}',
        'defined in code: Prompt "P": output_type is not a valid schema: '
        "'nonsense' is not valid under any of the given schemas",
    ]
    ok = Definitions().add(
        Model(name="M", provider="scripted", model="m"),
        Prompt(name="P", model="M", output_type=CITY_SCHEMA, output_retries=0),
    )
    ok.validate()


def test_c24_003_output_names() -> None:
    """C24-003: the name providers get — the model class's name, the schema's ``title``
    with characters outside ``[A-Za-z0-9_-]`` replaced by ``_``, ``output`` without one,
    or ``output_name`` as given."""
    assert Prompt(name="P", model="M", output_type=Weather).output.name == "Weather"  # type: ignore[union-attr]
    titled = Prompt(name="P", model="M", output_type=CITY_SCHEMA).output
    assert titled is not None and titled.name == "City_info"
    untitled = Prompt(name="P", model="M", output_type={"type": "object"}).output
    assert untitled is not None and untitled.name == "output"
    named = Prompt(name="P", model="M", output_type=Weather, output_name="forecast").output
    assert named is not None and named.name == "forecast"


def test_c24_004_model_class_schema_and_check() -> None:
    """C24-004: a model class's schema is the one tools get (no top-level title, closed
    objects); an answer is checked by pydantic and its value is the model's JSON dump;
    problems name each path."""
    output = Prompt(name="P", model="M", output_type=Weather).output
    assert output is not None
    assert output.schema["additionalProperties"] is False and "title" not in output.schema
    good = output.check(' {"city": "Oslo", "celsius": 3} ')
    assert good.valid and good.value == {"city": "Oslo", "celsius": 3.0}
    bad = output.check('{"city": 5}')
    assert not bad.valid
    assert bad.problem == "city: Input should be a valid string; celsius: Field required"
    assert output.check("It is cold.").problem is not None
    assert (output.check("It is cold.").problem or "").startswith("the answer is not valid JSON")


def test_c24_005_json_schema_check_by_jsonschema() -> None:
    """C24-005: a schema dict is checked by ``jsonschema`` (its draft from ``$schema``,
    else the latest): problems are ``<path>: <message>``, ``(root)`` for the top."""
    output = Prompt(name="P", model="M", output_type=CITY_SCHEMA).output
    assert output is not None
    assert output.check('{"n": 3, "tags": []}').value == {"n": 3, "tags": []}
    assert output.check('{"n": 0}').problem == "n: 0 is less than the minimum of 1"
    assert output.check("{}").problem == "(root): 'n' is a required property"
    assert output.check('{"n": 1, "tags": 2}').problem == "tags: 2 is not of type 'array'"
    assert output.parse({"n": 3}) == {"n": 3}


def test_c24_006_a_fenced_answer_is_read_inside_its_fence() -> None:
    """C24-006: one Markdown code fence around the JSON (with or without a language) is
    looked inside; anything else around it is a problem."""
    output = Prompt(name="P", model="M", output_type=CITY_SCHEMA).output
    assert output is not None
    assert output.check('```json\n{"n": 2}\n```').value == {"n": 2}
    assert output.check('```\n{"n": 2}\n```').value == {"n": 2}
    assert not output.check('Here: ```json\n{"n": 2}\n```').valid


def test_c24_007_parse_output_gives_the_declared_type() -> None:
    """C24-007: ``Message.output`` is ``metadata["output"]``; ``Prompt.parse_output`` turns
    it into a model instance for a model class, the value itself for a schema dict."""
    answer = Message(
        id="m1", role="assistant", content="…", metadata={"output": {"city": "Oslo", "celsius": 3}}
    )
    assert answer.output == {"city": "Oslo", "celsius": 3}
    weather = Prompt(name="P", model="M", output_type=Weather).parse_output(answer)
    assert weather == Weather(city="Oslo", celsius=3)
    assert Prompt(name="P", model="M", output_type=CITY_SCHEMA).parse_output(answer) == {
        "city": "Oslo",
        "celsius": 3,
    }
    assert Message(id="m2", role="assistant", content="x").output is None


# -- adapters (§24.2) -----------------------------------------------------------------------

FORMAT = OutputFormat(name="Weather", json_schema={"type": "object"}, strict=True)


def request(**fields: Any) -> ProviderRequest:
    return ProviderRequest(model="m", messages=[UserMessage(content="hi")], **fields)


def test_c24_010_openai_chat_response_format() -> None:
    """C24-010: Chat Completions gets ``response_format`` ``json_schema`` with name, schema
    and strict; it wins over a ``response_format`` in ``provider_options``; without an
    output type the option goes through unchanged."""
    chat = OpenAIChatProvider(api_key="k", base_url="http://127.0.0.1:9", dialect="openai")
    option = {"response_format": {"type": "json_object"}}
    body = chat.request_body(request(output=FORMAT, provider_options=option))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Weather", "schema": {"type": "object"}, "strict": True},
    }
    assert chat.request_body(request(provider_options=option))["response_format"] == {
        "type": "json_object"
    }
    assert "response_format" not in chat.request_body(request())


def test_c24_011_openai_responses_text_format() -> None:
    """C24-011: Responses gets ``text.format`` ``json_schema`` (name, schema, strict),
    beside other ``text`` options (``verbosity``)."""
    responses = OpenAIResponsesProvider(api_key="k", base_url="http://127.0.0.1:9")
    body = responses.request_body(
        request(output=FORMAT, provider_options={"text": {"verbosity": "low"}})
    )
    assert body["text"] == {
        "verbosity": "low",
        "format": {
            "type": "json_schema",
            "name": "Weather",
            "schema": {"type": "object"},
            "strict": True,
        },
    }
    assert "text" not in responses.request_body(request())


def test_c24_012_anthropic_output_config_format() -> None:
    """C24-012: Anthropic gets ``output_config.format`` ``{type: json_schema, schema}``
    (structured outputs), beside other ``output_config`` options (``effort``); the schema
    as the SDK's ``transform_schema`` gives it — a constraint the API refuses moved into
    the description, objects closed —; a schema the transform refuses is sent as given."""
    bounded = OutputFormat(
        name="n",
        json_schema={
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 1}},
            "required": ["n"],
        },
    )
    built = anthropic_request(
        request(output=bounded, provider_options={"output_config": {"effort": "low"}})
    )
    assert built.extra_body["output_config"] == {
        "effort": "low",
        "format": {
            "type": "json_schema",
            "schema": {
                "type": "object",
                "properties": {"n": {"type": "integer", "description": "{minimum: 1}"}},
                "required": ["n"],
                "additionalProperties": False,
            },
        },
    }
    untyped = OutputFormat(name="n", json_schema={"const": 3})
    sent = anthropic_request(request(output=untyped)).extra_body["output_config"]
    assert sent == {"format": {"type": "json_schema", "schema": {"const": 3}}}
    assert "output_config" not in anthropic_request(request()).extra_body


def test_c24_013_gemini_response_json_schema() -> None:
    """C24-013: Gemini gets ``response_mime_type`` ``application/json`` and
    ``response_json_schema``."""
    config = gemini_request(request(output=FORMAT)).config
    assert config["response_mime_type"] == "application/json"
    assert config["response_json_schema"] == {"type": "object"}
    assert "response_json_schema" not in gemini_request(request()).config
