"""The cost report of a thread and its descendants (spec 01 §1.10.3, spec 08 §8.7): wire
shapes with camelCase aliases. Plain data, no I/O; ``threadloom.records`` re-exports them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class _Camel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True
    )

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)


class ModelCost(_Camel):
    model_name: str
    total_cost: float = 0.0
    input_cost: float = 0.0
    cached_cost: float = 0.0
    output_cost: float = 0.0
    router_fee_cost: float = 0.0
    request_count: int = 0
    unpriced_request_count: int = 0
    """Requests of ``request_count`` without a price (our addition): their cost is unknown."""
    avg_cost_per_request: float = 0.0


class ModelAverage(_Camel):
    avg_cost: float
    message_count: int


class ThreadCost(_Camel):
    thread_id: str
    agent_name: str | None
    thread_name: str | None
    parent: str | None
    is_root: bool
    total_cost: float = 0.0
    llm_cost: float = 0.0
    app_cost: float = 0.0
    input_cost: float = 0.0
    cached_cost: float = 0.0
    output_cost: float = 0.0
    router_fee_cost: float = 0.0
    request_count: int = 0
    unpriced_request_count: int = 0


class CostReport(_Camel):
    """Cost of a thread and its descendants (spec 01 §1.10.3, spec 08 §8.7)."""

    total_cost: float = 0.0
    llm_cost: float = 0.0
    app_cost: float = 0.0
    input_cost: float = 0.0
    cached_cost: float = 0.0
    output_cost: float = 0.0
    router_fee_cost: float = 0.0
    own_cost: float = 0.0
    request_count: int = 0
    unpriced_request_count: int = 0
    """LLM requests without a price (our addition): ``llmCost`` lacks their cost."""
    message_count: int = 0
    avg_cost_per_message: float = 0.0
    model_breakdown: list[ModelCost] = Field(default_factory=list)
    avg_cost_per_message_by_model: dict[str, ModelAverage] = Field(default_factory=dict)
    threads: list[ThreadCost] = Field(default_factory=list)
    truncated: bool = False
