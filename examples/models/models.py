"""The example's models: a real provider when a key is set, the offline demo model otherwise.

`OPENAI_API_KEY` → OpenAI (`gpt-4o-mini`); else `ANTHROPIC_API_KEY` → Anthropic
(`claude-3-5-haiku-latest`); else `demo`, a scripted model that answers offline.
"""

from __future__ import annotations

import os

from threadloom_project.models.demo import demo_provider

from threadloom import Model

if os.environ.get("OPENAI_API_KEY"):
    assistant = Model(
        name="assistant",
        provider="openai",
        model="gpt-4o-mini",
        input_price=0.15,
        output_price=0.60,
        cached_price=0.075,
    )
elif os.environ.get("ANTHROPIC_API_KEY"):
    assistant = Model(
        name="assistant",
        provider="anthropic",
        model="claude-3-5-haiku-latest",
        input_price=0.80,
        output_price=4.00,
        cached_price=0.08,
    )
else:
    assistant = Model(name="assistant", provider=demo_provider, model="demo-1")
