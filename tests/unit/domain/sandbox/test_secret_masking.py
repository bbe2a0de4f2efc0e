"""Secrets masked in whole strings and in streams cut anywhere, and what a hostile
container says through the sandboxed agent (every kind of line) masked on the host."""

from __future__ import annotations

import json
import random
from collections.abc import Awaitable, Callable

import pytest

from jarvis.application.sandbox_runner import ContainerRunner
from jarvis.domain.agents.sandboxed import SandboxedAgent
from jarvis.domain.agents.simple import SimpleAgent
from jarvis.domain.run.updates import RunFinished, TextDelta, ToolCallsRequested, ToolResultReady
from jarvis.domain.sandbox.client import LineSink
from jarvis.domain.sandbox.protocol import RunMessage
from jarvis.domain.sandbox.secret_masking import REDACTED, SecretMask, StreamMasker
from jarvis.domain.tools.specs import ToolSpec
from jarvis.testing import InMemoryTool, ScriptedInference
from tests.support.inprocess_sandbox import InProcessContainers

SECRET = "sk-live-0123456789"
OTHER = "hunter2hunter2"


def streamed(mask: SecretMask, pieces: list[str]) -> str:
    masker = StreamMasker(mask)
    return "".join(masker.feed(p) for p in pieces) + masker.flush()


def test_whole_strings_lose_every_secret_and_keep_the_rest() -> None:
    mask = SecretMask([SECRET, OTHER, "abc"])  # "abc": too short to mask
    text = f"a {SECRET} b {OTHER}{SECRET} abc"
    assert mask.redact(text) == f"a {REDACTED} b {REDACTED}{REDACTED} abc"
    assert SecretMask([]).redact(text) == text


def test_a_secret_split_at_every_point_and_char_by_char_is_masked() -> None:
    mask = SecretMask([SECRET, OTHER])
    text = f"before {SECRET} middle {OTHER} s{SECRET[:5]} after"
    expected = f"before {REDACTED} middle {REDACTED} s{SECRET[:5]} after"
    for cut in range(len(text) + 1):
        assert streamed(mask, [text[:cut], text[cut:]]) == expected
    assert streamed(mask, list(text)) == expected
    generator = random.Random(7)
    for _ in range(200):
        cuts = sorted(generator.sample(range(len(text)), 6))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        assert streamed(mask, pieces) == expected


def test_nothing_is_held_back_that_cannot_start_a_secret() -> None:
    mask = SecretMask([SECRET])
    masker = StreamMasker(mask)
    assert masker.feed("plain text ") == "plain text "
    assert masker.feed("sk-li") == ""  # may still become the secret
    assert masker.feed("ght") == "sk-light"  # cannot any more: let out at once
    assert masker.feed("sk-live-01") == ""
    assert masker.flush() == "sk-live-01"  # the stream ended: it was not the secret


def test_overlapping_and_nested_secrets_never_appear() -> None:
    mask = SecretMask(["abcdef", "cdefgh", "bcd1"])
    for text in ("abcdefgh", "xabcdefghx", "abcbcd1", "aabcdeabcdef"):
        for pieces in ([text], list(text)):
            out = streamed(mask, pieces)
            assert all(s not in out for s in ("abcdef", "cdefgh", "bcd1")), (text, out)


def test_the_held_back_text_is_at_most_the_longest_secret_less_one() -> None:
    mask = SecretMask([SECRET])
    masker = StreamMasker(mask)
    let_out = 0
    text = (SECRET[:-1] + "x") * 50  # every piece nearly the secret
    for char in text:
        let_out += len(masker.feed(char))
    held = len(masker.flush())
    assert held <= len(SECRET) - 1
    assert let_out + held == len(text)


ReadLine = Callable[[], Awaitable[str | None]]


async def test_every_line_a_hostile_container_sends_is_masked_on_the_host() -> None:
    """The model inside echoes the secret everywhere it can: split across text deltas, in a
    tool call's name, id and arguments, in a tool result and in the final answer."""

    async def echoes(read_line: ReadLine, sink: LineSink) -> int:
        run = RunMessage.model_validate_json(await read_line() or "")
        secret = run.secrets["TOKEN"]
        half = len(secret) // 2
        lines = [
            {"type": "text", "text": "the key is " + secret[:half]},
            {"type": "text", "text": secret[half:] + "!"},
            {
                "type": "tool_calls",
                "calls": [
                    {
                        "id": "id-" + secret,
                        "name": "n" + secret,
                        "arguments": {secret: [secret, {"k": "x" + secret}]},
                        "raw_arguments": secret,
                    }
                ],
            },
            {
                "type": "tool_result",
                "result": {
                    "tool_name": "t",
                    "content": "out " + secret,
                    "call_id": secret,
                    "metadata": {"m": secret},
                },
            },
            {"type": "text", "text": secret[:3]},  # held back, then let out at the end
            {
                "type": "result",
                "content": "answer " + secret,
                "model": secret,
                "metadata": {"x": secret},
                "tool_results": [{"tool_name": "t", "content": secret}],
            },
        ]
        for line in lines:
            await sink.write_line(json.dumps(line))
        return 0

    runtime = InProcessContainers(echoes)
    agent = SandboxedAgent(
        SimpleAgent(ScriptedInference(["unused"]), "m"),
        ContainerRunner(runtime),
        secrets={"TOKEN": SECRET},
    )
    updates = [u async for u in agent.astream("q")]
    seen = repr(updates)
    assert SECRET not in seen
    text = "".join(u.text for u in updates if isinstance(u, TextDelta))
    assert text == f"the key is {REDACTED}!{SECRET[:3]}"
    (calls,) = [u for u in updates if isinstance(u, ToolCallsRequested)]
    assert calls.calls[0].arguments == {REDACTED: [REDACTED, {"k": "x" + REDACTED}]}
    (result,) = [u for u in updates if isinstance(u, ToolResultReady)]
    assert result.result.content == "out " + REDACTED
    (finished,) = [u for u in updates if isinstance(u, RunFinished)]
    assert finished.result.content == "answer " + REDACTED
    assert finished.result.tool_results[0].content == REDACTED


class CountingList(list[int]):
    """The automaton's failure links, counting how often one is followed."""

    follows = 0

    def __getitem__(self, index: int) -> int:  # type: ignore[override]
        CountingList.follows += 1
        return super().__getitem__(index)


@pytest.mark.parametrize("size", [1_000, 10_000, 100_000])
def test_masking_an_adversarial_stream_follows_at_most_one_failure_link_per_char(
    size: int,
) -> None:
    """Linear time, counted in steps (not measured in seconds): a long near-miss of the
    secret fed char by char follows at most one failure link per character, and each
    character is let out exactly once."""
    mask = SecretMask(["a" * 50 + "z", "ab" * 20 + "c"])
    mask._fail = CountingList(mask._fail)
    CountingList.follows = 0
    text = ("a" * 60 + "ab" * 30) * (size // 120)
    assert streamed(mask, list(text)) == text
    assert CountingList.follows <= len(text)


async def test_what_the_container_asks_the_engine_and_host_tools_is_masked() -> None:
    """The secret read inside never reaches the host's engine (a provider) nor a host tool
    (a web search) verbatim."""

    async def asks(read_line: ReadLine, sink: LineSink) -> int:
        run = RunMessage.model_validate_json(await read_line() or "")
        secret = run.secrets["TOKEN"]
        await sink.write_line(
            json.dumps(
                {
                    "type": "inference",
                    "id": 1,
                    "request": {
                        "messages": [
                            {"role": "user", "content": "leak " + secret},
                            {
                                "role": "assistant",
                                "tool_calls": [
                                    {"id": "c", "name": "x", "arguments": {"q": secret}}
                                ],
                            },
                        ],
                        "model": "m",
                        "temperature": 0,
                        "max_tokens": 4,
                    },
                }
            )
        )
        await sink.write_line(
            json.dumps({"type": "tool", "id": 2, "name": "echo", "arguments": {"q": secret}})
        )
        replies = [await read_line(), await read_line()]
        await sink.write_line(json.dumps({"type": "result", "content": json.dumps(replies)}))
        return 0

    engine = ScriptedInference(["fine"])
    echo = InMemoryTool(
        ToolSpec(name="echo", description="echo"),
        lambda arguments: str(arguments.get("q")),
    )
    runtime = InProcessContainers(asks)
    agent = SandboxedAgent(
        SimpleAgent(engine, "m"),
        ContainerRunner(runtime),
        secrets={"TOKEN": SECRET},
        host_tools=[echo],
    )
    result = await agent.arun("q")
    assert SECRET not in repr(engine.requests)
    assert "leak [secret]" in repr(engine.requests)
    assert SECRET not in result.content
    assert echo.calls == [{"q": REDACTED}]  # the host tool got the masked value
