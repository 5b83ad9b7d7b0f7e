"""Model prices from a maintained catalog (spec 04 §4.25, spec 15 §15.6): pydantic's
``genai-prices`` package, for a model that sets no price of its own.

A model is looked up by its provider and its provider model id (``Model.model``) once per
process; the package is imported at the first lookup (it loads its price data then). A
model the catalog does not know, or one served by a provider it does not name (the scripted
test model, a provider instance), has no price: its cost stays unknown (null), never 0.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Final, NamedTuple

CATALOG_PROVIDERS: Final[dict[str, str]] = {
    "openai": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "azure-openai": "azure",  # Model.model is the deployment: priced when named as a model
    "azure-openai-responses": "azure",
    "anthropic-bedrock": "aws",  # Bedrock model ids and inference profiles
    "anthropic-vertex": "google",  # Vertex ids (claude-sonnet-4@20250514)
    "gemini": "google",
    "gemini-vertex": "google",
}
"""The registered provider names the catalog is asked about, and its provider id for each."""


class CatalogCost(NamedTuple):
    """The cost of one request priced from the catalog (USD): ``cached`` is ``None`` when
    the model's prices are tiered, and ``input`` then holds the cached tokens' cost too."""

    input: float
    cached: float | None
    output: float
    total: float


_found: dict[tuple[str, str], Any] = {}


def _model_price(provider: str, model: str) -> Any:
    """The catalog's ``ModelPrice`` of ``model`` at ``provider``, or ``None``."""
    key = (provider, model)
    if key not in _found:
        from genai_prices import Usage, calc_price

        try:
            found = calc_price(Usage(input_tokens=0), model_ref=model, provider_id=provider)
            _found[key] = found.model_price
        except LookupError:
            _found[key] = None
    return _found[key]


def catalog_cost(
    provider_name: str | None,
    model: str,
    input_tokens: int,
    cached_tokens: int,
    output_tokens: int,
) -> CatalogCost | None:
    """The catalog's cost of a request of ``model`` served by the provider registered as
    ``provider_name``; ``None`` when the catalog has no price for it."""
    provider = CATALOG_PROVIDERS.get(provider_name or "")
    if provider is None or not model:
        return None
    price = _model_price(provider, model)
    if price is None:
        return None
    inp, out, cached = price.input_mtok, price.output_mtok, price.cache_read_mtok
    if all(isinstance(p, Decimal | None) for p in (inp, out, cached)) and inp is not None:
        uncached = max(input_tokens - cached_tokens, 0)
        cost_input = float(uncached * inp / 1_000_000)
        cost_cached = float(cached_tokens * (cached if cached is not None else inp) / 1_000_000)
        cost_output = float(output_tokens * (out or 0) / 1_000_000)
        return CatalogCost(
            cost_input, cost_cached, cost_output, cost_input + cost_cached + cost_output
        )
    from genai_prices import Usage

    costs = price.calc_price(
        Usage(
            input_tokens=input_tokens,
            cache_read_tokens=cached_tokens,
            output_tokens=output_tokens,
        )
    )
    return CatalogCost(
        float(costs["input_price"]), None, float(costs["output_price"]), float(costs["total_price"])
    )
