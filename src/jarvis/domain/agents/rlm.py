"""``rlm``: the Recursive Language Model. The (long) context lives in the REPL as the variable
``context`` and is NEVER put in the root model's prompt; the root model sees only its size,
writes code that inspects and decomposes it, and asks a sub-model about pieces with
``llm_query(prompt)`` / ``llm_batch(prompts)`` (answered concurrently).

How a reply is read (``<think>`` stripped first): the first fenced block (```` ```python ````,
```` ```repl ```` or an untagged ```` ``` ````) is run and its output comes back as
``REPL output:`` (cut to ``max_output_chars``); ``FINAL(value)`` / ``FINAL_VAR("name")`` in
that code end the run at once with that answer (the rest of the code does not run; a
missing variable is an error the model sees, never an empty answer). A reply without a
code block is the final answer (a bare ``FINAL(...)`` line included). When the turn budget
runs out, the loop asks once, without code, for the best answer.

Where the context comes from: ``AgentContext.metadata["context"]`` (text; other JSON is
serialised), else the memory results joined by blank lines; the CLI's ``--context-file``
fills the former.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import ClassVar, Unpack

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import Message, ToolCall
from jarvis.domain.loop.budget import RunBudget
from jarvis.domain.loop.repl_agent import ReplAgentOptions, ReplUsingAgent
from jarvis.domain.loop.settings import SamplingSettings, ToolExecution
from jarvis.domain.ports import InferencePort
from jarvis.domain.protocols.code_blocks import PYTHON_LANGUAGES, first_block
from jarvis.domain.protocols.reply_text import strip_think
from jarvis.domain.protocols.tool_protocol import (
    CodeRunningProtocol,
    Decision,
    FinalAnswer,
    RequestShape,
    SilentFilter,
    TextFilter,
    ToolCalls,
    ToolProtocol,
)
from jarvis.domain.run.contract import AgentContext
from jarvis.domain.tools.specs import ToolResult, ToolSpec

RLM_TEMPLATE = (
    "You are Jarvis, a Recursive Language Model. You answer questions about a context that "
    "is too long to read at once, by writing Python code in a REPL that holds it."
)
REPL_LANGUAGES = PYTHON_LANGUAGES | {"repl", ""}
_BARE_FINAL = re.compile(r"^\s*FINAL\((?P<value>.*)\)\s*$", re.DOTALL)
_BARE_FINAL_VAR = re.compile(r"^\s*FINAL_VAR\((?P<name>.*)\)\s*$", re.DOTALL)

_INSTRUCTIONS = """## The REPL

You work in a persistent Python REPL (standard library only, no network). It holds:
- `context`: a str with the material for the task. It is NOT shown to you: read it with
  code (len(context), context[:2000], context.splitlines(), re.findall(...), ...).
- `llm_query(prompt)` -> str: ask a sub-model about a piece of text (it sees only the
  prompt you give it, so include the text it needs, up to a few thousand characters).
- `llm_batch(prompts)` -> list[str]: many llm_query calls at once, answered concurrently
  and returned in order. Use it to process chunks of the context in parallel.{tools}
- `FINAL(value)`: end the task with `value` as the answer (nothing after it runs).
- `FINAL_VAR("name")`: end the task with the value of the variable `name`.

Each reply either runs code — ONE ```python block, then stop: its printed output (cut to
{max_output} characters) comes back as "REPL output:" — or, with no code block, is your
final answer. Variables persist between blocks. Inspect the context first, split it into
chunks, query the sub-model on the chunks, combine the answers, then call FINAL."""

_TOOLS = """
- `tool_call("tool_name", argument=value)` -> str: run a tool ({names})."""


class RlmProtocol(CodeRunningProtocol):
    """The RLM conversation format (see the module docstring)."""

    name = "rlm"

    def __init__(self, specs: Sequence[ToolSpec], *, repl_tool: str, max_output_chars: int) -> None:
        super().__init__(specs)
        self.repl_tool = repl_tool
        names = [s.name for s in self.specs if s.name != repl_tool]
        tools = _TOOLS.format(names=", ".join(names)) if names else ""
        self._instructions = _INSTRUCTIONS.format(tools=tools, max_output=max_output_chars)

    def instructions(self) -> str:
        return self._instructions

    def request_shape(self) -> RequestShape:
        return RequestShape()

    def _run(self, code: str, turn: int, text: str, end: int) -> ToolCalls:
        call = ToolCall(id=f"repl_{turn}", name=self.repl_tool, arguments={"code": code})
        return ToolCalls(calls=(call,), text=text[:end].strip())

    def interpret(self, completion: Completion, *, turn: int) -> Decision:
        text = strip_think(completion.content)
        block = first_block(text, REPL_LANGUAGES)
        if block is not None:
            return self._run(block.code, turn, text, block.end)
        variable = _BARE_FINAL_VAR.match(text)
        if variable is not None:
            return self._run(f"FINAL_VAR({variable.group('name')})", turn, text, len(text))
        final = _BARE_FINAL.match(text)
        if final is not None:
            value = final.group("value").strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            return FinalAnswer(value)
        return FinalAnswer(text)

    def assistant_message(self, completion: Completion, decision: Decision) -> Message:
        if isinstance(decision, ToolCalls) and decision.text is not None:
            return Message.assistant(decision.text)
        return Message.assistant(strip_think(completion.content))

    def observations(self, results: Sequence[ToolResult]) -> list[Message]:
        return [Message.user("\n\n".join(f"REPL output:\n{r.content}" for r in results))]

    def final_request(self, budget: str) -> Message:
        base = super().final_request(budget).content
        return Message.user(f"{base} Do not write code: reply with the answer as plain text.")

    def text_filter(self) -> TextFilter:
        return SilentFilter()


def context_text(context: AgentContext | None) -> str:
    """The RLM's context: ``metadata["context"]``, else the memory results."""
    if context is None:
        return ""
    value = context.metadata.get("context")
    if isinstance(value, str):
        return value
    if value is not None:
        return json.dumps(value, ensure_ascii=False, indent=1)
    return "\n\n".join(
        f"{hit.citation}\n{hit.content}" if hit.source else hit.content
        for hit in context.memory_results
    )


def describe_context(text: str) -> str:
    """What the root model is told about the context: its size, never its content."""
    if not text:
        return "[The REPL variable `context` is an empty string: no context was given.]"
    lines = text.count("\n") + 1
    return (
        f"[The REPL variable `context` holds the material for this task: a str of "
        f"{len(text):,} characters in {lines:,} lines. It is not shown here; read it with code.]"
    )


class RecursiveLMAgent(ReplUsingAgent):
    """The RLM. Needs a REPL (``repl=``). Defaults: ``max_turns`` 10, ``max_tokens`` 2048,
    sub-calls on ``model`` at temperature 0.3 with ``max_tokens`` 1024,
    ``max_output_chars`` 10000."""

    agent_id: ClassVar[str] = "rlm"
    reads_memory_itself: ClassVar[bool] = True
    default_budget: ClassVar[RunBudget] = RunBudget(max_turns=10)
    default_sampling: ClassVar[SamplingSettings] = SamplingSettings(max_tokens=2048)
    default_execution: ClassVar[ToolExecution] = ToolExecution(max_output_chars=10_000)
    repl_tool_name: ClassVar[str] = "repl"
    repl_tool_description: ClassVar[str] = "Run Python code in the RLM's REPL."

    def __init__(
        self, inference: InferencePort, model: str, **options: Unpack[ReplAgentOptions]
    ) -> None:
        if options.get("repl") is None:
            raise ConfigurationError(
                "The rlm agent needs a REPL to run its code.",
                hint="Build it through the container (jarvis ask / Jarvis()), or pass repl=.",
            )
        super().__init__(inference, model, **options)

    def template(self) -> str:
        return RLM_TEMPLATE

    def make_protocol(self, specs: Sequence[ToolSpec]) -> ToolProtocol:
        return RlmProtocol(
            specs, repl_tool=self.repl_tool_name, max_output_chars=self.max_output_chars
        )

    def repl_variables(self, input: str, context: AgentContext | None) -> dict[str, str]:
        return {"context": context_text(context)}

    async def prepare_input(
        self, input: str, context: AgentContext | None
    ) -> tuple[str, list[ToolResult]]:
        return f"{input.rstrip()}\n\n{describe_context(context_text(context))}", []

    def answer_from_results(self, results: Sequence[ToolResult]) -> str | None:
        for result in results:
            final = result.metadata.get("final")
            if result.tool_name == self.repl_tool_name and isinstance(final, str):
                return final
        return None

    def run_metadata(self, input: str, context: AgentContext | None) -> JSONObject:
        return {"context_chars": len(context_text(context))}
