"""Spec 08 §8.10.4: ``GET /api/models`` shows each model's fallback classes (spec 04
§4.12.3) beside its fallbacks, as the model declares them or the default ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from threadloom.define import Model
from threadloom.errors import DEFAULT_FALLBACK_ON
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.server.settings import ServerSettings


def _models() -> tuple[Model, ...]:
    provider = ScriptedProvider(lambda request: Reply.text("ok"))
    return (
        Model(
            name="primary_m",
            provider=provider,
            model="scripted-primary",
            fallbacks=("backup_m",),
            fallback_on=("unknown", "rate_limit"),
        ),
        Model(name="backup_m", provider=provider, model="scripted-backup"),
    )


async def test_c08_280_models_show_their_fallback_classes(make_api: Callable[..., Any]) -> None:
    """C08-280: each entry's ``fallback_on`` is its model's classes in the model's order;
    a model that names none shows the default classes."""
    api = await make_api(ServerSettings(auth="required"), extra=_models())
    answer = await api.client("root").get("/api/models")
    assert answer.status_code == 200, answer.text
    entries = {entry["id"]: entry for entry in answer.json()["models"]}
    primary, backup = entries["primary_m"], entries["backup_m"]
    assert primary["fallback_on"] == ["unknown", "rate_limit"]
    assert [f["id"] for f in primary["fallbacks"]] == ["backup_m"]
    assert backup["fallback_on"] == list(DEFAULT_FALLBACK_ON)
    assert backup["fallbacks"] == []
