"""An offline demo model: a scripted provider whose replies depend on the conversation.

It is deterministic and needs no network, so the example agents run anywhere. It reads
the request like a (very small) model would: the system prompt says which role it plays,
the last message says what to do next. It streams at about a reader's pace (a chunk every
``DEMO_CHUNK_SECONDS``, 0.06 s by default), so the web UI shows a reply being written, its
generating state and Stop; ``DEMO_CHUNK_SECONDS=0`` answers at once (the tests do).
"""

from __future__ import annotations

import json
import os
import re

from threadloom.testing import Call, ProviderRequest, Reply, ScriptedProvider, ToolMessage

ORDER = re.compile(r"\b([A-Z]-?\d{3,})\b")


def _last(request: ProviderRequest, role: str) -> str:
    for message in reversed(request.messages):
        if message.role == role:
            return message.text
    return ""


def _support(request: ProviderRequest) -> Reply:
    last = request.messages[-1]
    if last.role == "tool":
        if last.name == "subagent_create":
            # The blocking call returned the pair's session result: "<findings>\n\nReference: <id>".
            findings = last.text.split("\n\nReference:")[0].strip()
            if isinstance(last, ToolMessage) and last.is_error:
                return Reply.text(f"Sorry, the warranty research failed: {findings}")
            return Reply.text(f"Our warranty team checked it: {findings}", chunk_size=12)
        if last.name == "lookup_order":
            return Reply.text(f"Here is what I found: {last.text}", chunk_size=12)
        return Reply.text(f"Done. {last.text}", chunk_size=12)
    question = _last(request, "user")
    match = ORDER.search(question.upper())
    if match and "warrant" in question.lower():
        order = match.group(1)
        message = f"Research the warranty for order {order}. The customer asked: {question}"
        create = {"agent": "research", "name": f"Warranty {order}", "message": message}
        return Reply.tool_calls(Call("subagent_create", {**create, "attachments": []}))
    if match and "refund" in question.lower():
        return Reply.tool_calls(Call("refund", {"order_id": match.group(1), "reason": question}))
    if match:
        return Reply.tool_calls(Call("lookup_order", {"order_id": match.group(1)}))
    return Reply.text(
        "Hello! I can look up an order, refund it or research its warranty. Tell me the "
        "order number (for example A-1001).",
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


def _researcher(request: ProviderRequest) -> Reply:
    # Side a of the warranty pair. Its instructions (and the reviewer's notes) arrive as user
    # messages. It looks the order up, then drafts; the first draft forgets the exclusions,
    # the revision asked for by the reviewer adds them.
    asked = [ORDER.search(m.text.upper()) for m in request.messages if m.role == "user"]
    orders = [match.group(1) for match in asked if match is not None]
    if not orders:
        return Reply.text("I need an order number (for example A-1001) to research.")
    found: list[ToolMessage] = [
        m for m in request.messages if isinstance(m, ToolMessage) and m.name == "warranty_terms"
    ]
    if not found or orders[-1] not in found[-1].text.upper():
        return Reply.tool_calls(Call("warranty_terms", {"order_id": orders[-1]}))
    if found[-1].is_error:
        return Reply.text(f"I could not find order {orders[-1]}: {found[-1].text}")
    terms = json.loads(found[-1].text)
    draft = (
        f"Order {terms['order_id']} is a {terms['item']} ({terms['status']}). Its warranty "
        f"lasts {terms['warranty_years']} years and covers {terms['covers']}."
    )
    if request.messages[-1].role == "user":  # the reviewer asked for a change
        draft += f" It does not cover {terms['excludes']}."
    return Reply.text(draft, chunk_size=16)


def _reviewer(request: ProviderRequest) -> Reply:
    # Side b of the warranty pair: the researcher's drafts reach it as user messages.
    draft = _last(request, "user")
    if "warranty lasts" in draft and "not cover" not in draft:
        return Reply.text("Please add what the warranty does not cover.", chunk_size=16)
    return Reply.tool_calls(Call("submit_findings", {"findings": draft}))


def _paced(reply: Reply) -> Reply:
    """``reply`` streamed a chunk every ``DEMO_CHUNK_SECONDS`` (read at each request)."""
    raw = os.environ.get("DEMO_CHUNK_SECONDS", "0.06")
    try:
        reply.chunk_delay = max(0.0, float(raw))
    except ValueError:
        reply.chunk_delay = 0.06
    return reply


def demo(request: ProviderRequest) -> Reply:
    return _paced(_answer(request))


def _answer(request: ProviderRequest) -> Reply:
    system = (
        request.messages[0].text
        if request.messages and request.messages[0].role == ("system")
        else ""
    )
    if "warranty reviewer" in system.lower():
        return _reviewer(request)
    if "warranty researcher" in system.lower():
        return _researcher(request)
    if "critic" in system.lower():
        return _critic(request)
    if "writer" in system.lower():
        return _writer(request)
    return _support(request)


# A served demo never reads what its model was sent, so it keeps no copy of the requests
# (a scripted provider keeps the last 100 by default, for tests).
demo_provider = ScriptedProvider(demo, name="demo", record=False)
