"""Text with lone surrogates from code jarvis does not own: a plug-in module (an agent
whose answer holds one, a tool whose result holds one) and an application's own engine
that repeats the last tool result it was shown."""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path
from typing import Any

import httpx

from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Role, ToolCall
from jarvis.testing import ScriptedInference
from jarvis.testing.inference import ScriptedReply

AGENT_ANSWER = "half \ud800 a pair"
"""What the plug-in agent answers: a high surrogate with no low one after it."""
TOOL_RESULT = "tool \udc80 half"
"""What the plug-in tool returns (a low surrogate alone, as ``surrogateescape`` makes)."""
AGENT_SHOWN = AGENT_ANSWER.replace("\ud800", "\ufffd")
TOOL_SHOWN = TOOL_RESULT.replace("\udc80", "\ufffd")

SOURCE = textwrap.dedent(
    '''
    from jarvis.agents._stubs import AgentResult, BaseAgent

    class Halves(BaseAgent):
        agent_id = "halves"

        def run(self, input, context=None, **kwargs):
            return AgentResult(content="half \\ud800 a pair", turns=1)

    def lone_half(text: str = "x") -> str:
        """Half of a character.

        Args:
            text: Anything.
        """
        return "tool \\udc80 half"

    AGENTS = {"halves": Halves}
    TOOLS = [lone_half]
    '''
)


def write_surrogate_plugin(folder: Path) -> str:
    """The module written into ``folder`` under a name no other test uses; its name."""
    name = f"surrogate_plugin_{uuid.uuid4().hex}"
    (folder / f"{name}.py").write_text(SOURCE, encoding="utf-8")
    return name


class RepeatingEngine(ScriptedInference):
    """Calls ``lone_half`` when the question has no tool result yet, then answers with
    the last tool result it was shown, as it was shown (a model repeating its tool)."""

    def _next(self, request: InferenceRequest) -> ScriptedReply:
        self.requests.append(request)
        last_user = max(i for i, m in enumerate(request.messages) if m.role is Role.USER)
        results = [m.content for m in request.messages[last_user:] if m.role is Role.TOOL]
        if results:
            return f"It said: {results[-1]}"
        call = ToolCall(id="call_1", name="lone_half", arguments={"text": "x"})
        return Completion(content="", tool_calls=(call,), finish_reason="tool_calls")


def body_of(reply: httpx.Response) -> Any:
    """The reply's JSON, read from its bytes as strict UTF-8 (a lone surrogate cannot be)."""
    assert reply.status_code == 200, reply.text
    return json.loads(reply.content.decode("utf-8"))


def streamed(reply: httpx.Response) -> tuple[str, list[object]]:
    """A stream's text (OpenAI chunks and Anthropic deltas) and every event's data; checks
    the bytes are UTF-8 and that no event is an error."""
    assert reply.status_code == 200, reply.text
    text, events = [], []
    for line in reply.content.decode("utf-8").splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line.removeprefix("data: "))
        assert "error" not in event, event
        assert event.get("type") != "error", event
        events.append(event)
        for choice in event.get("choices", ()):
            text.append(choice.get("delta", {}).get("content") or "")
        text.append(event.get("delta", {}).get("text", "") if event.get("delta") else "")
    return "".join(text), events
