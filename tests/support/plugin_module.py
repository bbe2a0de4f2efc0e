"""A plug-in module of the kind ``[plugins] modules`` names: an OpenJarvis-style agent
(``reverse``) and a function tool (``count_letters``), written as a user would write them."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

SOURCE = textwrap.dedent(
    """
    from jarvis.agents._stubs import AgentResult, BaseAgent

    class Reverse(BaseAgent):
        agent_id = "reverse"

        def run(self, input, context=None, **kwargs):
            return AgentResult(content=input[::-1], turns=1)

    def count_letters(text: str) -> int:
        \"\"\"How many letters the text has.

        Args:
            text: The text.
        \"\"\"
        return sum(c.isalpha() for c in text)

    AGENTS = {"reverse": Reverse}
    TOOLS = [count_letters]
    """
)


def write_plugin_module(folder: Path) -> str:
    """The module written into ``folder`` under a name no other test uses; its name."""
    name = f"plugin_{uuid.uuid4().hex}"
    (folder / f"{name}.py").write_text(SOURCE, encoding="utf-8")
    return name
