"""``native_openhands``: CodeAct — the model acts by writing Python that runs in an isolated
REPL, or by calling tools with ``Action:`` / ``Action Input:``.

How a reply is read (the rule, in this order; ``<think>`` blocks are stripped first):

1. A line starting with ``Final Answer:`` (outside code blocks) makes the reply final:
   everything after the label is the answer, and any code block in it is shown to the user,
   never run.
2. Otherwise the first ```` ```python ```` block (also ``py``/``python3``) is executed and
   its output comes back as ``Execution output:``; the rest of the reply (typically an
   imagined output) is dropped. Blocks in other languages are never run.
3. Otherwise an ``Action:`` / ``Action Input:`` pair calls that tool; the result comes
   back as ``Observation:``.
4. Otherwise the whole reply is the final answer.

Before the first turn, the URLs of the request (up to three) are fetched through the run's
search tool (the first of category ``search`` that takes a ``query``: a query that is one
URL fetches that page, with the tool's own address checks) and appended to the request;
the conversation, persona and tools stay.

The conversation is kept inside ``max_prompt_tokens`` (see
:class:`~jarvis.domain.loop.repl_agent.ReplUsingAgent`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar, Self, Unpack

from jarvis.domain.agents.url_prefetch import find_urls, inline_pages
from jarvis.domain.llm.completion import Completion
from jarvis.domain.llm.messages import Message, ToolCall
from jarvis.domain.loop.budget import RunBudget
from jarvis.domain.loop.context_window import ContextWindow
from jarvis.domain.loop.options import AgentOptions, AgentParts
from jarvis.domain.loop.repl_agent import ReplAgentOptions, ReplUsingAgent
from jarvis.domain.loop.settings import SamplingSettings
from jarvis.domain.ports import InferencePort, ToolPort
from jarvis.domain.protocols.code_blocks import (
    PYTHON_LANGUAGES,
    first_block,
    mask_blocks,
)
from jarvis.domain.protocols.react_parser import (
    REACT_LABELS,
    ParsedAction,
    ParsedFinal,
    find_labels,
    parse_reply,
)
from jarvis.domain.protocols.reply_text import strip_think
from jarvis.domain.protocols.text_protocol import LabelledAnswerFilter, LabelledTextProtocol
from jarvis.domain.protocols.tool_protocol import (
    CodeRunningProtocol,
    Decision,
    FinalAnswer,
    ParseFailure,
    RequestShape,
    TextFilter,
    ToolCalls,
    ToolProtocol,
)
from jarvis.domain.run.contract import AgentContext
from jarvis.domain.tools.descriptions import describe_tool
from jarvis.domain.tools.specs import ToolResult, ToolSpec, truncate

OPENHANDS_TEMPLATE = (
    "You are Jarvis, an agent that completes tasks by writing and running Python code and "
    "by using tools. Work step by step; check results before you answer."
)
SEARCH_CATEGORY = "search"
"""The category of the tools that fetch a page when their ``query`` is one URL."""

_CODE_SECTION = """To run Python code, write ONE ```python block and stop. It runs in a
persistent interpreter: variables, functions and imports persist between blocks. Only the
standard library is available, there is no network, and files can be written only in the
working directory. print() what you need to see: the output, the value of the last
expression and any error come back to you as "Execution output:". Never write that
output yourself.{callbacks}"""

_CALLBACKS_WITH_TOOLS = """
Inside code you may also call tool_call("tool_name", argument=value) to use a tool and
llm_query("prompt") to ask a language model a question (both return text)."""
_CALLBACKS_MODEL_ONLY = """
Inside code you may also call llm_query("prompt") to ask a language model a question (it
returns text)."""

_FORMAT = """Each reply does exactly ONE of these:
{options}
- Answer: write "Final Answer:" followed by your complete answer. A reply with
  "Final Answer:" is final: code blocks in it are shown to the user, never run.

A reply with no code block, no Action and no "Final Answer:" is also taken as your final
answer. Do not write <think> tags."""

_ACTION = """- Use a tool: write
  Action: <tool name>
  Action Input: <one JSON object with the tool's arguments>
  and stop; the result comes back as "Observation:"."""

_RULES_BY_CATEGORY = {
    SEARCH_CATEGORY: "for a web page, call {name} with the FULL URL",
    "math": "for arithmetic, use {name} (or Python)",
    "filesystem": "to read a file, use {name}",
}
"""What the model is told to use a tool of each category for (its first tool of that
category is named)."""


def _rules(specs: Sequence[ToolSpec]) -> str:
    """One rule per category the run's tools cover, naming the tool, or ``""``."""
    rules: dict[str, str] = {}
    for spec in specs:
        rule = _RULES_BY_CATEGORY.get(spec.category)
        if rule is not None and spec.category not in rules:
            rules[spec.category] = rule.format(name=spec.name)
    return "Rules: " + "; ".join(rules.values()) + "." if rules else ""


def _example(spec: ToolSpec) -> str:
    """An ``Action`` example for ``spec`` built from its required parameters."""
    properties = spec.parameters.get("properties")
    required = spec.parameters.get("required")
    arguments: dict[str, str] = {}
    if isinstance(properties, Mapping) and isinstance(required, list):
        for name in required:
            if isinstance(name, str) and name in properties:
                arguments[name] = f"<{name}>"
    return f"Example:\nAction: {spec.name}\nAction Input: {json.dumps(arguments)}"


def describe_tools_for_codeact(specs: Sequence[ToolSpec]) -> str:
    """Each tool with its category, typed parameters and an ``Action`` example."""
    if not specs:
        return "No tools available."
    return "\n\n".join(f"{describe_tool(s)}\n{_example(s)}" for s in specs)


class CodeActProtocol(CodeRunningProtocol, LabelledTextProtocol):
    """The CodeAct conversation format; see the module docstring for how replies are read.

    ``code_tool`` is the name of the internal code-running tool, or ``None`` when the run
    has no REPL (then code blocks are never run and count as answer text).
    """

    name = "codeact"
    labels = REACT_LABELS
    call_prefix = "action"

    def __init__(self, specs: Sequence[ToolSpec], *, code_tool: str | None) -> None:
        super().__init__(specs)
        self.code_tool = code_tool
        self.tool_specs = tuple(s for s in self.specs if s.name != code_tool)
        self._instructions = self._render()

    def _render(self) -> str:
        options: list[str] = []
        if self.code_tool is not None:
            callbacks = _CALLBACKS_WITH_TOOLS if self.tool_specs else _CALLBACKS_MODEL_ONLY
            options.append(
                "- Run code: " + _CODE_SECTION.format(callbacks=callbacks).replace("\n", "\n  ")
            )
        if self.tool_specs:
            options.append(_ACTION)
        sections = ["## How to act", _FORMAT.format(options="\n".join(options))]
        if self.tool_specs:
            names = ", ".join(s.name for s in self.tool_specs)
            rules = _rules(self.tool_specs)
            if rules:
                sections.append(rules)
            sections.append(
                f"## Tools\n\nAvailable tools: {names}\n\n"
                + describe_tools_for_codeact(self.tool_specs)
            )
        return "\n\n".join(sections)

    def instructions(self) -> str:
        return self._instructions

    def request_shape(self) -> RequestShape:
        return RequestShape()

    def interpret(self, completion: Completion, *, turn: int) -> Decision:
        text = strip_think(completion.content)
        labels = find_labels(mask_blocks(text), self.labels)
        for kind, _start, end in labels:
            if kind == "final":
                return FinalAnswer(text[end:].strip())
        if self.code_tool is not None:
            block = first_block(text, PYTHON_LANGUAGES)
            if block is not None:
                call = ToolCall(
                    id=f"code_{turn}", name=self.code_tool, arguments={"code": block.code}
                )
                return ToolCalls(
                    calls=(call,),
                    thought=text[: block.start].strip(),
                    text=text[: block.end].strip(),
                )
        if self.tool_specs and any(kind == "action" for kind, _s, _e in labels):
            parsed = parse_reply(text, self.labels)
            if isinstance(parsed, ParsedAction):
                call = self.to_call(parsed, call_id=f"{self.call_prefix}_{turn}")
                return ToolCalls(
                    calls=(call,), thought=parsed.thought, text=text[: parsed.end].strip()
                )
            if isinstance(parsed, ParsedFinal):
                return FinalAnswer(parsed.answer)
            return ParseFailure(self.explain(parsed.error))
        return FinalAnswer(text)

    def explain(self, error: str) -> str:
        return (
            f"{error}. Write one ```python block, or 'Action: <tool name>' with 'Action Input: "
            "<JSON object>', or 'Final Answer: <answer>'."
        )

    def observations(self, results: Sequence[ToolResult]) -> list[Message]:
        parts: list[str] = []
        for result in results:
            if result.tool_name == self.code_tool:
                parts.append(f"Execution output:\n{result.content}")
            elif result.success:
                parts.append(f"Observation: {result.content}")
            else:
                parts.append(f"Observation: Error: {result.content}")
        return [Message.user("\n\n".join(parts))]

    def parse_error_messages(self, failure: ParseFailure) -> list[Message]:
        return [Message.user(f"Observation: Your reply could not be used: {failure.error}")]

    def final_request(self, budget: str) -> Message:
        base = ToolProtocol.final_request(self, budget).content
        return Message.user(f"{base} Do not run code. Reply with 'Final Answer: <your answer>'.")

    def text_filter(self) -> TextFilter:
        return LabelledAnswerFilter(self.labels)


@dataclass(frozen=True, slots=True, kw_only=True)
class UrlPrefetch:
    """Reading the pages of a request before the first turn: at most ``max_urls`` of its
    URLs, each page cut to ``max_chars`` characters."""

    enabled: bool = True
    max_urls: int = 3
    max_chars: int = 4000


class NativeOpenHandsAgent(ReplUsingAgent):
    """CodeAct. Its own setting: ``prefetch`` (:class:`UrlPrefetch`; options
    ``prefetch_urls``, ``max_prefetch_urls``, ``prefetch_max_chars``);
    ``max_prompt_tokens`` defaults to 3000."""

    agent_id: ClassVar[str] = "native_openhands"
    default_budget: ClassVar[RunBudget] = RunBudget(max_turns=3)
    default_sampling: ClassVar[SamplingSettings] = SamplingSettings(max_tokens=2048)
    default_context_window: ClassVar[ContextWindow] = replace(
        ReplUsingAgent.default_context_window, max_prompt_tokens=3000
    )
    default_prefetch: ClassVar[UrlPrefetch] = UrlPrefetch()
    repl_tool_name: ClassVar[str] = "python"

    def __init__(
        self,
        inference: InferencePort,
        model: str,
        *,
        prefetch: UrlPrefetch | None = None,
        **options: Unpack[ReplAgentOptions],
    ) -> None:
        super().__init__(inference, model, **options)
        self.prefetch = self.default_prefetch if prefetch is None else prefetch

    @classmethod
    def from_options(cls, parts: AgentParts, options: AgentOptions) -> Self:
        default = cls.default_prefetch
        prefetch = UrlPrefetch(
            enabled=options.flag("prefetch_urls", default.enabled),
            max_urls=options.integer("max_prefetch_urls", default.max_urls),
            max_chars=options.integer("prefetch_max_chars", default.max_chars),
        )
        return cls(
            parts.inference,
            parts.model,
            prefetch=prefetch,
            **cls.repl_agent_options(parts, options),
        )

    def template(self) -> str:
        return OPENHANDS_TEMPLATE

    def make_protocol(self, specs: Sequence[ToolSpec]) -> ToolProtocol:
        code_tool = (
            self.repl_tool_name if any(s.name == self.repl_tool_name for s in specs) else None
        )
        return CodeActProtocol(specs, code_tool=code_tool)

    # -- before the first turn ------------------------------------------------------------

    def _search_tool(self) -> ToolPort | None:
        for tool in self.user_tools:
            spec = tool.spec
            properties = spec.parameters.get("properties")
            takes_query = isinstance(properties, Mapping) and "query" in properties
            if spec.category == SEARCH_CATEGORY and takes_query:
                return tool
        return None

    async def prepare_input(
        self, input: str, context: AgentContext | None
    ) -> tuple[str, list[ToolResult]]:
        prefetch = self.prefetch
        if not prefetch.enabled:
            return input, []
        urls = find_urls(input, limit=prefetch.max_urls)
        search = self._search_tool()
        if not urls or search is None:
            return input, []
        calls = [
            ToolCall(id=f"prefetch_{n}", name=search.spec.name, arguments={"query": url})
            for n, url in enumerate(urls, start=1)
        ]
        results = await self.tool_runner.execute_all(calls)
        pages = [
            (url, truncate(result.content, prefetch.max_chars)[0], result.success)
            for url, result in zip(urls, results, strict=True)
        ]
        return inline_pages(input, pages), results
