"""Bounds of the embedded engine's replies, and the decoding every adapter shares.

The embedded engine is given a stand-in for ``llama_cpp.Llama`` here, and only here: no
real model can be made to generate forever, or to hang inside one call, on demand (the real
model is run by ``tests/integration/test_llamacpp_engine.py``). The stand-in waits for the
test, never the other way round.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from jarvis.adapters.inference._bounds import ReplyBounds, trusted_count
from jarvis.adapters.inference._json import MAX_DEPTH, loads
from jarvis.adapters.inference._openai_wire import parse_usage
from jarvis.adapters.inference.llamacpp import LlamaCppEngine
from jarvis.domain.errors import EngineProtocolError, EngineTimeoutError
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message

GUARD = 30.0


def _chunk(text: str) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}


class EndlessLlama:
    """Streams ``text`` forever (one chunk per ``pause`` seconds); a whole answer blocks
    until ``release`` is set."""

    chat_format: str | None = None
    metadata: dict[str, str] = {}  # noqa: RUF012 - read-only stand-in attribute

    def __init__(self, text: str = "tok ", pause: float = 0.0) -> None:
        self.text = text
        self.pause = pause
        self.release = threading.Event()
        self.streams_closed = 0

    @property
    def n_tokens(self) -> int:
        return 0

    def create_chat_completion(self, **kwargs: object) -> object:
        if kwargs.get("stream"):
            return self._endless()
        self.release.wait()
        return {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "late"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1},
        }

    def _endless(self) -> Iterator[dict[str, object]]:
        try:
            while True:
                yield _chunk(self.text)
                if self.pause:
                    self.release.wait(self.pause)
        finally:
            self.streams_closed += 1

    def close(self) -> None:
        self.release.set()


def _engine(llama: EndlessLlama, timeout: float) -> LlamaCppEngine:
    engine = LlamaCppEngine("/models/stand-in.gguf", timeout=timeout)
    engine._llama = llama  # the stand-in instead of loading a model file
    return engine


def _ask(max_tokens: int) -> InferenceRequest:
    return InferenceRequest(
        messages=(Message.user("Go on forever."),), model="any", max_tokens=max_tokens
    )


async def test_an_endless_embedded_stream_ends_at_the_timeout_and_stops_generating() -> None:
    llama = EndlessLlama(pause=0.01)
    engine = _engine(llama, timeout=0.5)

    async def read() -> None:
        async with asyncio.timeout(GUARD):
            async for _ in engine.stream(_ask(max_tokens=1_000_000)):
                pass

    with pytest.raises(EngineTimeoutError, match=r"within 0\.5 s"):
        await read()
    assert llama.streams_closed == 1  # the generation itself was stopped, not only left
    await engine.aclose()


async def test_an_embedded_stream_far_beyond_max_tokens_is_a_protocol_error() -> None:
    llama = EndlessLlama(text="word " * 50)
    engine = _engine(llama, timeout=GUARD)

    async def read() -> None:
        async with asyncio.timeout(GUARD):
            async for _ in engine.stream(_ask(max_tokens=8)):
                pass

    with pytest.raises(EngineProtocolError, match="max_tokens allows"):
        await read()
    assert llama.streams_closed == 1
    await engine.aclose()


async def test_a_whole_embedded_answer_that_hangs_ends_at_the_timeout() -> None:
    llama = EndlessLlama()
    engine = _engine(llama, timeout=0.3)
    async with asyncio.timeout(GUARD):
        with pytest.raises(EngineTimeoutError, match=r"within 0\.3 s"):
            await engine.generate(_ask(max_tokens=8))
    llama.release.set()  # the generation in the worker thread ends; the next one runs
    engine = _engine(llama, timeout=GUARD)
    async with asyncio.timeout(GUARD):
        assert (await engine.generate(_ask(max_tokens=8))).content == "late"
    await engine.aclose()


# --- decoding shared by every adapter ------------------------------------------------------


def test_deep_nesting_is_not_json_and_no_recursion_error() -> None:
    for text in (b"[" * 100_000, b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)):
        with pytest.raises(ValueError, match="nested deeper"):
            loads(text)
    assert loads(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None
    # many brackets inside strings are not nesting
    assert loads('{"content": "' + "[" * 10_000 + '"}') == {"content": "[" * 10_000}


def test_bad_bytes_and_lone_surrogates_become_replacement_characters() -> None:
    text = b'{"a": "caf\xc3\xa9 \xff", "\\ud800k": ["\\udc00", "\\ud83d\\ude00", "\\\\ud800"]}'
    assert loads(text) == {"a": "café \ufffd", "\ufffdk": ["\ufffd", "😀", "\\ud800"]}


@pytest.mark.parametrize("value", [-1, 10**10, 2.5, "12", True, [3]])
def test_usage_counts_that_cannot_be_true_are_not_trusted(value: object) -> None:
    assert trusted_count(value) is None
    assert parse_usage({"prompt_tokens": value, "completion_tokens": 1}) is None
    assert parse_usage({"prompt_tokens": 1, "completion_tokens": value}) is None


def test_completion_tokens_beyond_the_reply_bound_are_not_trusted() -> None:
    bounds = ReplyBounds.for_tokens(8)
    figures = {"prompt_tokens": 5, "completion_tokens": bounds.max_events + 1}
    assert parse_usage(figures, max_completion=bounds.max_events) is None
    usage = parse_usage({"prompt_tokens": 5, "completion_tokens": 8}, max_completion=40)
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (5, 8)
