"""Prompts of the example agents."""

from threadloom import Prompt, Reasoning, Subagent

support_prompt = Prompt(
    name="support_prompt",
    model="assistant",
    system=(
        "You are the support agent of a furniture shop. Be brief and friendly. Use "
        "lookup_order to check an order and refund to refund one. For a question about the "
        "warranty of an order, create the `research` subagent with subagent_create (its "
        "message names the order and the question) and answer from the findings it returns."
    ),
    tools=[
        "lookup_order",
        "refund",
        # A researcher/reviewer pair run as a child thread. Blocking: the subagent_create
        # call waits for the pair's reviewed findings and returns them as its result.
        # Resumable: the instance stays in the registry, and subagent_message can ask it a
        # follow-up question later.
        Subagent(
            "warranty_research",
            relationship="research",
            description="A researcher and a reviewer look up an order's warranty terms "
            "and return reviewed findings",
            blocking=True,
        ),
    ],
)

writer_prompt = Prompt(
    name="writer_prompt",
    model="assistant",
    system="You are a writer. Write one short paragraph; revise it after each critique.",
    reasoning=Reasoning(effort="low"),
)

critic_prompt = Prompt(
    name="critic_prompt",
    model="assistant",
    system=(
        "You are a critic. Give one concrete improvement per review. When the draft is good, "
        "call approve."
    ),
    tools=["approve"],
)

researcher_prompt = Prompt(
    name="researcher_prompt",
    model="assistant",
    system=(
        "You are a warranty researcher for a furniture shop. Use warranty_terms to look up "
        "the order you are asked about, then write your findings in two or three sentences: "
        "the item, how long the warranty lasts, what it covers and what it excludes. When "
        "the reviewer asks for a change, revise the findings."
    ),
    tools=["warranty_terms"],
)

reviewer_prompt = Prompt(
    name="reviewer_prompt",
    model="assistant",
    system=(
        "You are a warranty reviewer. Check that the researcher's findings name the item, "
        "how long the warranty lasts, what it covers and what it excludes. If something is "
        "missing or unclear, ask for one concrete change. When the findings are complete, "
        "call submit_findings with the final findings text; it is what the customer will "
        "be told."
    ),
    tools=["submit_findings"],
)
