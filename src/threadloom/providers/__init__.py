"""Model providers behind one protocol (spec 05): neutral types, the registry, the
scripted provider, and the reasoning conversion rules the SDK adapters share.

The SDK adapters (``threadloom.providers.openai``, ``threadloom.providers.anthropic``)
are imported lazily by the registry, so importing this package never loads an SDK.
"""

from __future__ import annotations

from threadloom.errors import ProviderError, ProviderErrorCode
from threadloom.providers.base import (
    BUILTIN_PROVIDERS,
    Provider,
    ProviderRegistry,
    ResponseBuilder,
    close_provider,
    generate,
    is_provider,
    new_response_id,
)
from threadloom.providers.reasoning import ReasoningSupply, ReasoningTarget, supply_reasoning
from threadloom.providers.scripted import (
    Call,
    Expect,
    Fail,
    Reply,
    Script,
    ScriptedProvider,
)
from threadloom.providers.types import (
    AssistantMessage,
    Finish,
    FinishReason,
    ImagePart,
    NamedToolChoice,
    Part,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    ReasoningDelta,
    ReasoningRequest,
    StreamEvent,
    SystemMessage,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallSpec,
    ToolCallStart,
    ToolChoice,
    ToolMessage,
    ToolSpec,
    Usage,
    UserMessage,
)

__all__ = [
    "BUILTIN_PROVIDERS",
    "AssistantMessage",
    "Call",
    "Expect",
    "Fail",
    "Finish",
    "FinishReason",
    "ImagePart",
    "NamedToolChoice",
    "Part",
    "Provider",
    "ProviderError",
    "ProviderErrorCode",
    "ProviderMessage",
    "ProviderRegistry",
    "ProviderRequest",
    "ProviderResponse",
    "ReasoningDelta",
    "ReasoningRequest",
    "ReasoningSupply",
    "ReasoningTarget",
    "Reply",
    "ResponseBuilder",
    "Script",
    "ScriptedProvider",
    "StreamEvent",
    "SystemMessage",
    "TextDelta",
    "TextPart",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallSpec",
    "ToolCallStart",
    "ToolChoice",
    "ToolMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "close_provider",
    "generate",
    "is_provider",
    "new_response_id",
    "supply_reasoning",
]
