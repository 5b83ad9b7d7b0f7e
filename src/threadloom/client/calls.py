"""The machinery every route description shares (spec 11 §11.1): ``Call`` (one request and how
to read its answer), ``Batch``, the ``UNSET`` / ``AUTO`` sentinels, ``Upload``, and the answer
parsers and query/body builders. The routes themselves are described in ``endpoints.py`` (spec
08) and ``endpoints_auth.py`` (spec 10).
"""

from __future__ import annotations

import base64
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class Unset(enum.Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


class Auto(enum.Enum):
    AUTO = "AUTO"

    def __repr__(self) -> str:
        return "AUTO"


UNSET = Unset.UNSET
"""An argument left at this default is not sent."""
AUTO = Auto.AUTO
"""``client_message_id=AUTO``: a fresh UUID4 per send (spec 11 §11.2.5 rule 2)."""

Retry = Literal["never", "safe"]
"""``never``: only a request that provably never left is repeated; ``safe``: a transport error
or 502/503/504 is repeated too (spec 11 §11.2.5)."""


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP request and how to read its answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Mapping[str, Any] | None = None
    json: Any = None
    retry: Retry = "safe"
    missing_ok: Callable[[], T] | None = None
    """A repeat of this call answered 404 means the first attempt succeeded: this value."""


@dataclass(frozen=True)
class Batch(Generic[T]):
    """Several calls whose answers merge into one result (``messages.get`` by 200 ids)."""

    calls: Sequence[Call[Any]]
    merge: Callable[[list[Any]], T]


@dataclass(frozen=True)
class Upload:
    """An attachment sent with a message, encoded to spec 08 §8.2.5's upload item."""

    name: str
    mime_type: str
    data: bytes
    width: int | None = None
    height: int | None = None
    description: str | None = None

    def to_wire(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            "name": self.name,
            "mimeType": self.mime_type,
            "data": base64.b64encode(self.data).decode("ascii"),
        }
        for key, value in (
            ("width", self.width),
            ("height", self.height),
            ("description", self.description),
        ):
            if value is not None:
                item[key] = value
        return item


def model_of(cls: type[M], key: str | None = None) -> Callable[[httpx.Response], M]:
    def parse(response: httpx.Response) -> M:
        body = response.json()
        return cls.model_validate(body[key] if key is not None else body)

    return parse


def list_of(item: Any, key: str | None) -> Callable[[httpx.Response], Any]:
    adapter: TypeAdapter[Any] = TypeAdapter(list[item])

    def parse(response: httpx.Response) -> Any:
        body = response.json()
        return adapter.validate_python(body[key] if key is not None else body)

    return parse


def no_content(response: httpx.Response) -> None:
    return None


def raw_bytes(response: httpx.Response) -> bytes:
    return response.content


def query_params(**values: Any) -> dict[str, Any]:
    """Query parameters: UNSET dropped, booleans as ``true``/``false``, lists comma-joined."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        if value is UNSET or value is None:
            continue
        if isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, list | tuple):
            out[name] = ",".join(str(v) for v in value)
        else:
            out[name] = value
    return out


def json_body(**values: Any) -> dict[str, Any]:
    return {name: value for name, value in values.items() if value is not UNSET}


def json_object(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    return body
