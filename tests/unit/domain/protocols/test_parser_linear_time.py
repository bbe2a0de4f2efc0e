"""Every parser of model output runs in time linear in the text, whatever the text.

A model (or an engine) chooses the text, so a parser that backtracks is a way to freeze the
event loop: a run of ``_`` at a line start once made the label pattern exponential (30
characters: minutes), ``strip_think`` was quadratic in unclosed ``<think>`` tags and the
code-fence pattern in one long line after a fence.

Each parser is timed on ``N`` and on ``4 N`` characters of adversarial text. Load must not
decide the outcome, so the measurement is CPU time (``time.process_time``: a process that
waits for a core is not charged), each size is measured up to five times, interleaved, and
the best of each is kept; and the verdict has a wide margin: four times the text may take at
most ``RATIO`` (8) times the time, where a linear parser needs 4 and a quadratic one 16.
Each parse must also finish within a generous absolute CPU bound: a CPU-time alarm stops a
parser that goes past it, so a backtracking one fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import gc
import math
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from types import FrameType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jarvis.domain.agents.native_openhands import CodeActProtocol, NativeOpenHandsAgent
from jarvis.domain.agents.orchestrator import OrchestratorAgent
from jarvis.domain.agents.react import NativeReActAgent, ReActProtocol
from jarvis.domain.agents.rlm import RlmProtocol
from jarvis.domain.agents.url_prefetch import find_urls
from jarvis.domain.llm.completion import Completion
from jarvis.domain.loop.base import BaseAgent
from jarvis.domain.loop.settings import SamplingSettings
from jarvis.domain.protocols.code_blocks import code_blocks, mask_blocks, without_blocks
from jarvis.domain.protocols.react_parser import STRUCTURED_LABELS, find_labels, parse_reply
from jarvis.domain.protocols.reply_text import strip_think
from jarvis.domain.protocols.structured import StructuredProtocol
from jarvis.domain.protocols.text_protocol import LabelledAnswerFilter
from jarvis.domain.protocols.tool_protocol import ThinkFilter
from jarvis.domain.tools.specs import ToolSpec
from jarvis.testing import InMemoryRepl, InMemoryTool, ScriptedInference

N = 100_000
FACTOR = 4
"""The large text is this many times the small one."""
LIMIT_SECONDS = 4.0
"""CPU seconds allowed for ``FACTOR * N`` characters; the linear parsers need well under 0.5."""
RATIO = 8.0
"""The most the time may grow for ``FACTOR`` times the text: twice what linear needs, half
what quadratic needs."""
FLOOR_SECONDS = 0.03
"""Times below this are noise: the ratio is taken against at least this much."""
ATTEMPTS = 5

SPEC = ToolSpec(
    name="search",
    description="Search.",
    parameters={"type": "object", "properties": {"query": {"type": "string"}}},
)


class TooSlow(BaseException):
    """Raised by the CPU-time alarm inside a parser (a BaseException, so that no
    ``except Exception`` in the code under test swallows it)."""


Parser = Callable[[str], object]


def _streamed(make: Callable[[], ThinkFilter | LabelledAnswerFilter], size: int) -> Parser:
    def feed(text: str) -> None:
        stream = make()
        for start in range(0, len(text), size):
            stream.feed(text[start : start + size])

    return feed


_codeact = CodeActProtocol([SPEC], code_tool="python")
_react = ReActProtocol([SPEC])
_structured = StructuredProtocol([SPEC])
_structured_text = StructuredProtocol([SPEC], output="text")
_rlm = RlmProtocol([SPEC], repl_tool="repl", max_output_chars=1000)

PARSERS: dict[str, Parser] = {
    "parse_reply": parse_reply,
    "parse_reply_structured": lambda text: parse_reply(text, STRUCTURED_LABELS),
    "find_labels": find_labels,
    "strip_think": strip_think,
    "think_filter": lambda text: ThinkFilter().feed(text),
    "think_filter_streamed": _streamed(ThinkFilter, 8),
    "answer_filter_streamed": _streamed(lambda: LabelledAnswerFilter(_react.labels), 8),
    "code_blocks": code_blocks,
    "mask_blocks": mask_blocks,
    "without_blocks": without_blocks,
    "codeact": lambda text: _codeact.interpret(Completion(content=text), turn=1),
    "react": lambda text: _react.interpret(Completion(content=text), turn=1),
    "structured": lambda text: _structured.interpret(Completion(content=text), turn=1),
    "structured_visible": lambda text: _structured.visible_text(Completion(content=text)),
    "structured_text": lambda text: _structured_text.interpret(Completion(content=text), turn=1),
    "rlm": lambda text: _rlm.interpret(Completion(content=text), turn=1),
    "find_urls": lambda text: find_urls(text, limit=3),
}

# the pieces adversarial text is made of: every character the patterns treat specially,
# the tags and labels they look for, and the starts of what they read
FRAGMENTS = [
    *'_*#>` \t\n:{["\\()-=+.~<|',
    "a",
    "1",
    "<think>",
    "</think>",
    "<THINK>",
    "</",
    "```",
    "```python\n",
    "```\n",
    "``",
    "Thought:",
    "Action: search",
    "Action Input: ",
    "Action Input: {",
    "Final Answer:",
    "Final_Answer",
    "Observation:",
    "TOOL:",
    "ARGUMENTS:",
    "**",
    "_ *",
    "## ",
    "http://a",
    "FINAL(",
    "FINAL_VAR(",
    '{"action": "search", "action_input": {',
    '"final_answer": "',
    '"thought": "',
]

# the attacks found so far, as (head, unit, tail): the text is head + unit * k + tail
KNOWN_ATTACKS = [
    ("", "_", "x"),  # the label pattern: exponential in a run of _ * # > at a line start
    ("", "*", "x"),
    ("", "#", "x"),
    ("", ">", "x"),
    ("", "_ ", "Action"),
    ("", "<think>", "</"),  # strip_think: quadratic in unclosed <think>
    ("</think>", "<think>", ""),
    ("", "<think>x", "</think"),
    ("```", "a", ""),  # the code-fence pattern: quadratic in one long line
    ("```", "a", "`"),
    ("", "```\n", ""),
    ("Final Answer", " ", ":x"),
    ("Action", " ", "1"),
    ("Thought:", "x:", ""),  # the streamed answer filter: the whole buffer at every colon
    ("", "a:", ""),
    ("{", '"final_answer": "', ""),
    ("```", '{"a": ', ""),
    ("FINAL(", ") ", "x"),
    ("", "http://", ""),
    ("Action: search\nAction Input: ", "[", ""),  # JSON nested past the recursion limit
    ("Action: search\nAction Input: {", '"a": {', ""),
    ('Action: search\nAction Input: "', "\\", ""),
    ("", "{", ""),
]


def _text(head: str, unit: str, tail: str, size: int) -> str:
    return head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail


def _cpu_seconds(parse: Parser, text: str) -> float:
    """The CPU time of one parse of ``text``; a parse that takes longer than the bound is
    stopped by ``TooSlow``."""

    def alarm(signum: int, frame: FrameType | None) -> None:
        raise TooSlow

    # the cyclic garbage collector's passes cost more the more objects the whole test
    # process holds: they are not the parser's work, so they are kept out of the timing
    gc.disable()
    previous = signal.signal(signal.SIGPROF, alarm)
    signal.setitimer(signal.ITIMER_PROF, LIMIT_SECONDS)
    try:
        started = time.process_time()
        parse(text)
        return time.process_time() - started
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
        gc.enable()


def assert_linear(name: str, head: str, unit: str, tail: str, size: int = N) -> None:
    """Up to ``ATTEMPTS`` measurements of each size, interleaved, the best of each kept,
    until the bounds hold (a burst of load slows some measurements, never all of them)."""
    parse = PARSERS[name]
    what = f"{name} on {head!r} + {unit!r} * k + {tail!r}"
    small_text = _text(head, unit, tail, size)
    large_text = _text(head, unit, tail, FACTOR * size)
    small = large = math.inf
    for _ in range(ATTEMPTS):
        try:
            small = min(small, _cpu_seconds(parse, small_text))
            large = min(large, _cpu_seconds(parse, large_text))
        except TooSlow:
            pytest.fail(
                f"{what}: more than {LIMIT_SECONDS} CPU seconds for {len(large_text)} chars"
            )
        if large <= RATIO * max(small, FLOOR_SECONDS):
            return
    pytest.fail(
        f"{what}: {small:.3f}s for {len(small_text)} characters, {large:.3f}s for {len(large_text)}"
    )


@pytest.mark.parametrize("attack", KNOWN_ATTACKS, ids=repr)
@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_parser_is_linear_in_the_known_attacks(
    name: str, attack: tuple[str, str, str]
) -> None:
    assert_linear(name, *attack)


def test_the_measurement_catches_a_quadratic_parser() -> None:
    """The check itself can fail: a parser that rescans the rest of the text from every
    position (quadratic) is caught, within the alarm's bound."""

    def quadratic(text: str) -> int:
        return sum(text.count("b", index) for index in range(len(text)))

    PARSERS["_quadratic"] = quadratic
    try:
        with pytest.raises(pytest.fail.Exception):
            assert_linear("_quadratic", "", "a", "", size=20_000)
    finally:
        del PARSERS["_quadratic"]


fragments = st.lists(st.sampled_from(FRAGMENTS), max_size=3).map("".join)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    name=st.sampled_from(sorted(PARSERS)),
    head=fragments,
    unit=st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=4).map("".join),
    tail=fragments,
)
def test_every_parser_is_linear_in_any_mix_of_special_text(
    name: str, head: str, unit: str, tail: str
) -> None:
    assert_linear(name, head, unit, tail)


HOSTILE_REPLIES = [
    "_" * 40 + "x",  # minutes per reply with the old label pattern (2^k in the run)
    "#>*_" * 10 + "x",  # the same, mixed
    "<think>" * 40_000 + "</",
    "```" + "a" * 200_000,
    "Final Answer" + " " * 50_000 + "x",
]


def _agents(engine: ScriptedInference) -> list[BaseAgent]:
    # max_tokens high enough for the scripted engine to send the whole reply, as an engine
    # that ignores the limit would
    tool = InMemoryTool(SPEC, lambda arguments: "x")
    sampling = SamplingSettings(max_tokens=1_000_000)
    return [
        NativeReActAgent(
            engine,
            "m",
            tools=[tool],
            sampling=sampling,
            budget=replace(NativeReActAgent.default_budget, max_seconds=2),
        ),
        NativeOpenHandsAgent(
            engine,
            "m",
            repl=InMemoryRepl(),
            sampling=sampling,
            budget=replace(NativeOpenHandsAgent.default_budget, max_seconds=2),
        ),
        OrchestratorAgent(
            engine,
            "m",
            mode="structured",
            structured_output="text",
            sampling=sampling,
            budget=replace(OrchestratorAgent.default_budget, max_seconds=2),
        ),
    ]


@pytest.mark.parametrize("reply", HOSTILE_REPLIES, ids=lambda reply: repr(reply[:12]))
@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
@pytest.mark.parametrize("index", [0, 1, 2], ids=["react", "codeact", "structured"])
def test_a_hostile_reply_cannot_stall_an_agent(reply: str, stream: bool, index: int) -> None:
    """Through the agent, streamed or not: the run ends (its answer is whatever the reply
    means) within the CPU bound, instead of blocking the event loop for minutes."""
    engine = ScriptedInference([reply])
    agent = _agents(engine)[index]

    async def run() -> object:
        if stream:
            return [update async for update in agent.astream("q")]
        return await agent.arun("q")

    try:
        _cpu_seconds(lambda _text: asyncio.run(run()), "")
    except TooSlow:
        pytest.fail(f"{agent.agent_id} spent more than {LIMIT_SECONDS} CPU seconds on one reply")
