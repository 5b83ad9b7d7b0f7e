"""An offline demo model: a scripted provider whose replies depend on the conversation.

It is deterministic and needs no network, so the example agents run anywhere. It reads
the request like a (very small) model would: the system prompt says which role it plays,
the last message says what to do next.
"""

from __future__ import annotations

import re

from threadloom.providers.script import Call, Reply
from threadloom.providers.scripted import ScriptedProvider
from threadloom.providers.types import ProviderRequest

ORDER = re.compile(r"\b([A-Z]-?\d{3,})\b")


def _last(request: ProviderRequest, role: str) -> str:
    for message in reversed(request.messages):
        if message.role == role:
            return message.text
    return ""


def _support(request: ProviderRequest) -> Reply:
    last = request.messages[-1]
    if last.role == "tool":
        if last.name == "lookup_order":
            return Reply.text(f"Here is what I found: {last.text}", chunk_size=12)
        return Reply.text(f"Done. {last.text}", chunk_size=12)
    question = _last(request, "user")
    match = ORDER.search(question.upper())
    if match and "refund" in question.lower():
        return Reply.tool_calls(Call("refund", {"order_id": match.group(1), "reason": question}))
    if match:
        return Reply.tool_calls(Call("lookup_order", {"order_id": match.group(1)}))
    return Reply.text(
        "Hello! I can look up an order or refund it. Tell me the order number "
        "(for example A-1001).",
        chunk_size=12,
    )


def _writer(request: ProviderRequest) -> Reply:
    drafts = sum(1 for m in request.messages if m.role == "assistant")
    topic = _last(request, "user") if drafts == 0 else "the same topic"
    return Reply.reasoning(
        f"Draft {drafts + 1}: a short paragraph about {topic[:80]}.",
        "Keep it concrete; answer the critic's last point.",
        chunk_size=16,
    )


def _critic(request: ProviderRequest) -> Reply:
    # The critic acts as side b: its own reviews are presented as assistant messages; the
    # opening request (a user message stored by the human) is presented as assistant too.
    reviews = sum(1 for m in request.messages[2:] if m.role == "assistant")
    if reviews >= 1:
        return Reply.tool_calls(Call("approve", {"verdict": "Good enough to publish."}))
    return Reply.text("Tighten the opening sentence and add one example.", chunk_size=16)


def demo(request: ProviderRequest) -> Reply:
    system = (
        request.messages[0].text
        if request.messages and request.messages[0].role == ("system")
        else ""
    )
    if "critic" in system.lower():
        return _critic(request)
    if "writer" in system.lower():
        return _writer(request)
    return _support(request)


demo_provider = ScriptedProvider(demo, name="demo")
