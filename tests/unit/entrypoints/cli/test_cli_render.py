"""The terminal renderer: spinner until the first token, clean lines, answer on stdout."""

from __future__ import annotations

import io
import threading

import pytest

from jarvis.domain.errors import (
    ConfigurationError,
    ContainerRuntimeUnavailableError,
    EngineTimeoutError,
    EngineUnavailableError,
    ModelNotFoundError,
    PersonaError,
    RateLimitedError,
    RunCancelledError,
    SandboxError,
    ToolError,
    UnknownAgentError,
)
from jarvis.domain.knowledge import MemoryStoreBusyError, MemoryStoreDamagedError
from jarvis.domain.sessions.records import (
    SessionStoreCorruptError,
    SessionStoreLockedError,
    SessionStoreUnavailableError,
)
from jarvis.entrypoints.cli.errors import (
    EXIT_ENGINE_ERROR,
    EXIT_ENGINE_UNAVAILABLE,
    EXIT_INTERRUPTED,
    EXIT_MODEL_NOT_FOUND,
    EXIT_SANDBOX_UNAVAILABLE,
    EXIT_STORE_DAMAGED,
    EXIT_UNEXPECTED,
    EXIT_USAGE,
    describe,
    exit_code_for,
)
from jarvis.entrypoints.cli.render import StreamRenderer

CLEAR = "\r\x1b[K"


class Terminal(io.StringIO):
    """A terminal that tells the test when something was drawn on it (the spinner runs on
    its own thread: the test waits for its first frame instead of sleeping and hoping)."""

    def __init__(self) -> None:
        super().__init__()
        self.drawn = threading.Event()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        written = super().write(text)
        self.drawn.set()
        return written


def spinner_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "jarvis-spinner"]


def test_spinner_runs_until_the_first_token_then_is_erased() -> None:
    out, err = io.StringIO(), Terminal()
    renderer = StreamRenderer(out, err)
    renderer.start()
    assert err.drawn.wait(60), "the spinner drew nothing"
    renderer.text("Hello")
    spun = err.getvalue()
    assert "thinking" in spun
    assert spun.endswith(CLEAR)
    renderer.text(" world")
    renderer.finish()
    assert err.getvalue() == spun  # nothing drawn after the first token
    assert out.getvalue() == "Hello world\n"


def test_no_spinner_when_stderr_is_not_a_terminal() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = StreamRenderer(out, err)
    renderer.start()
    assert spinner_threads() == []  # nothing started that could draw later
    renderer.answer("text")
    assert err.getvalue() == ""
    assert out.getvalue() == "text\n"


def test_abort_mid_line_leaves_a_fresh_line() -> None:
    out, err = io.StringIO(), Terminal()
    renderer = StreamRenderer(out, err)
    renderer.start()
    renderer.text("partial")
    renderer.abort()
    assert out.getvalue() == "partial\n"


def test_abort_before_any_token_clears_the_spinner() -> None:
    out, err = io.StringIO(), Terminal()
    renderer = StreamRenderer(out, err)
    renderer.start()
    assert err.drawn.wait(60), "the spinner drew nothing"
    renderer.abort()
    assert "thinking" in err.getvalue()
    assert err.getvalue().endswith(CLEAR)
    assert spinner_threads() == []
    assert out.getvalue() == ""


def test_notices_go_to_stderr_on_their_own_line() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = StreamRenderer(out, err)
    renderer.text("Thinking about it")
    renderer.notice("· calculator {}")
    renderer.text("Done.")
    renderer.finish()
    assert out.getvalue() == "Thinking about it\nDone.\n"
    assert err.getvalue() == "· calculator {}\n"


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ConfigurationError("x"), EXIT_USAGE),
        (UnknownAgentError("x", ["simple"]), EXIT_USAGE),
        (PersonaError("x"), EXIT_USAGE),
        (ToolError("x"), EXIT_USAGE),
        (EngineUnavailableError("x"), EXIT_ENGINE_UNAVAILABLE),
        (ModelNotFoundError("m", available=["a"]), EXIT_MODEL_NOT_FOUND),
        (EngineTimeoutError("x"), EXIT_ENGINE_ERROR),
        (RateLimitedError("x"), EXIT_ENGINE_ERROR),
        (SandboxError("x"), EXIT_SANDBOX_UNAVAILABLE),
        (ContainerRuntimeUnavailableError("x", endpoint="unix:///x"), EXIT_SANDBOX_UNAVAILABLE),
        (SessionStoreUnavailableError("x", location="postgresql://u:***@h/db"), 3),
        (SessionStoreLockedError("x"), EXIT_ENGINE_UNAVAILABLE),
        (SessionStoreCorruptError("x"), EXIT_STORE_DAMAGED),
        (MemoryStoreBusyError("x"), EXIT_ENGINE_UNAVAILABLE),
        (MemoryStoreDamagedError("x"), EXIT_STORE_DAMAGED),
        (RunCancelledError("x"), EXIT_INTERRUPTED),
        (KeyboardInterrupt(), EXIT_INTERRUPTED),
        (ValueError("x"), EXIT_UNEXPECTED),
    ],
)
def test_exit_codes(error: BaseException, code: int) -> None:
    assert exit_code_for(error) == code


def test_unavailable_engine_message_names_engine_url_and_remedy() -> None:
    text = describe(EngineUnavailableError("Connection refused.", engine="vllm", url="http://h/v1"))
    assert text.splitlines()[0] == "Connection refused. (vllm engine at http://h/v1)"
    assert "vllm serve" in text


def test_adapter_hint_is_kept() -> None:
    error = EngineUnavailableError(
        "Cannot reach the ollama engine at http://h:1.",
        engine="ollama",
        url="http://h:1",
        hint="Run `ollama serve`.",
    )
    assert describe(error) == "Cannot reach the ollama engine at http://h:1.\n  Run `ollama serve`."
