"""The pluggable part of the one agent loop: how tools are offered and replies understood.

The loop (:mod:`jarvis.domain.loop.tool_loop`) owns everything that must behave the same
for every tool-using agent — the run budget, usage, the loop guard, events, streaming,
cancellation. A :class:`ToolProtocol` owns only the conversation format:

* the section it adds to the system prompt (:meth:`~ToolProtocol.instructions`),
* what each request carries (:meth:`~ToolProtocol.request_shape`: native tool definitions,
  a tool choice, a response format),
* how a completion is read (:meth:`~ToolProtocol.interpret` →
  :class:`FinalAnswer` | :class:`ToolCalls` | :class:`ParseFailure`),
* how the turn is written back into the conversation (assistant message, observations,
  parse-error feedback, the final "answer now" request).

Other action kinds (running code for CodeAct, a REPL cell for RLM) are tool calls to a tool
each run adds itself (see ``ToolUsingAgent.open_run``), so they reuse the executor's
validation, timeouts, events and the loop guard unchanged.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, TypeAlias

from jarvis.domain.llm.completion import Completion, ResponseFormat, ToolChoice
from jarvis.domain.llm.messages import Message, ToolCall
from jarvis.domain.protocols.code_blocks import without_blocks
from jarvis.domain.protocols.reply_text import THINK_CLOSE, THINK_OPEN
from jarvis.domain.protocols.reply_text import strip_think as _strip_think
from jarvis.domain.tools.specs import ToolResult, ToolSpec


@dataclass(frozen=True, slots=True)
class FinalAnswer:
    """The model answered; the run is over."""

    content: str


@dataclass(frozen=True, slots=True)
class ToolCalls:
    """The model asked for these calls (at least one); ``thought`` is its stated reason."""

    calls: tuple[ToolCall, ...]
    thought: str = ""
    text: str | None = None
    """The assistant text to record for this turn when it differs from the raw reply (text
    protocols drop what the model wrote after its action, e.g. an imagined observation)."""


@dataclass(frozen=True, slots=True)
class ParseFailure:
    """The reply follows the protocol badly; ``error`` tells the model what to fix."""

    error: str


Decision: TypeAlias = FinalAnswer | ToolCalls | ParseFailure


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestShape:
    """The protocol-specific fields of an inference request."""

    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = "auto"
    response_format: ResponseFormat | None = None


class TextFilter(Protocol):
    """Chooses which streamed text the user sees while a turn is generated."""

    def feed(self, piece: str) -> str:
        """The part of ``piece`` to show now (possibly empty). Whatever is held back and
        belongs to the final answer is shown by the loop once the turn is read."""
        ...


class ThinkFilter:
    """Shows streamed text without ``<think>…</think>`` blocks (tags split across pieces
    included) and without the whitespace that leads the visible answer.

    Each piece is scanned once, from where the last tag ended, with the same
    case-insensitive tag patterns as :func:`~jarvis.domain.protocols.reply_text.strip_think`; only
    a possible partial tag (at most seven characters) is held back for the next piece.
    """

    __slots__ = ("_held", "_inside", "_started")

    def __init__(self) -> None:
        self._held = ""
        self._inside = False
        self._started = False

    def feed(self, piece: str) -> str:
        text = self._held + piece
        self._held = ""
        out: list[str] = []
        position = 0
        while position < len(text):
            pattern, tag = (THINK_CLOSE, "</think>") if self._inside else (THINK_OPEN, "<think>")
            found = pattern.search(text, position)
            if found is None:
                keep = _partial_suffix(text, tag, position)
                if not self._inside:
                    out.append(text[position : len(text) - keep])
                self._held = text[len(text) - keep :] if keep else ""
                break
            if not self._inside:
                out.append(text[position : found.start()])
            position = found.end()
            self._inside = not self._inside
        return self._visible("".join(out))

    def _visible(self, text: str) -> str:
        if not self._started:
            text = text.lstrip()
            self._started = bool(text)
        return text


def _partial_suffix(text: str, tag: str, start: int = 0) -> int:
    """Length of the longest suffix of ``text[start:]`` that is a proper prefix of ``tag``
    (compared in lower case, character by character)."""
    for size in range(min(len(text) - start, len(tag) - 1), 0, -1):
        if text[len(text) - size :].lower() == tag[:size]:
            return size
    return 0


class SilentFilter:
    """Shows nothing while streaming; the final answer is shown once parsed."""

    __slots__ = ()

    def feed(self, piece: str) -> str:
        return ""


BUDGET_WORDS = {
    "turns": "the maximum number of steps",
    "time": "the time limit",
    "tokens": "the token budget",
    "loop": "the limit on repeated tool calls",
}


class ToolProtocol(ABC):
    """A conversation format for tool use. Instances are bound to one agent's tool specs
    and are stateless across runs, so they compute their prompt section and request shape
    once."""

    name: ClassVar[str]
    native_tools: ClassVar[bool] = False
    """True when tools travel as native function definitions (an engine may refuse them
    with ``ToolsNotSupportedError``)."""

    def __init__(self, specs: Sequence[ToolSpec]) -> None:
        self.specs = tuple(specs)

    @abstractmethod
    def instructions(self) -> str:
        """The protocol's section of the system prompt ("" when none is needed). It is
        always part of the system prompt, whatever ``system_prompt`` or persona is set."""

    @abstractmethod
    def request_shape(self) -> RequestShape:
        """Tools, tool choice and response format of a normal turn."""

    def request_shape_for(self, turn: int) -> RequestShape:
        """The request fields of turn ``turn`` (1 = the first inference); by default the
        same every turn."""
        return self.request_shape()

    def final_shape(self) -> RequestShape:
        """Request fields of the one tool-less call made when the budget runs out."""
        return RequestShape()

    @abstractmethod
    def interpret(self, completion: Completion, *, turn: int) -> Decision:
        """Read a completion. Never raises: bad replies are :class:`ParseFailure`."""

    @abstractmethod
    def assistant_message(self, completion: Completion, decision: Decision) -> Message:
        """The assistant message recording a turn that called tools or failed to parse."""

    @abstractmethod
    def observations(self, results: Sequence[ToolResult]) -> list[Message]:
        """The messages carrying a turn's tool results back to the model, in call order."""

    def parse_error_messages(self, failure: ParseFailure) -> list[Message]:
        """Feedback after a reply that could not be understood."""
        return [Message.user(f"Your last reply could not be used: {failure.error}")]

    def final_request(self, budget: str) -> Message:
        """The message asking for the best final answer once ``budget`` ran out."""
        what = BUDGET_WORDS.get(budget, "the run budget")
        return Message.user(
            f"You have reached {what} for this task. Do not call any more tools. Using the "
            "information gathered so far, give your best final answer now."
        )

    def final_answer(self, completion: Completion) -> str:
        """The answer text of the tool-less final call."""
        decision = self.interpret(completion, turn=0)
        return decision.content if isinstance(decision, FinalAnswer) else ""

    def visible_text(self, completion: Completion) -> str:
        """The readable text of a reply (kept as the run's last words, the answer of last
        resort when the final call yields nothing)."""
        return _strip_think(completion.content)

    def text_filter(self) -> TextFilter:
        """A fresh filter for one streamed turn."""
        return ThinkFilter()


class CodeRunningProtocol(ToolProtocol):
    """A protocol whose replies may hold code that the loop runs (CodeAct, the RLM).

    The wrap-up runs nothing: its answer is the reply read as usual when that is final,
    otherwise the reply's text with its code blocks removed.
    """

    def final_answer(self, completion: Completion) -> str:
        decision = self.interpret(completion, turn=0)
        if isinstance(decision, FinalAnswer):
            return decision.content
        return without_blocks(_strip_think(completion.content))
