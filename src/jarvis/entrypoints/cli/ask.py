"""``jarvis ask``: one question through an agent, streamed to the terminal."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from jarvis.entrypoints.cli.errors import guarded
from jarvis.entrypoints.cli.options import (
    BaseUrlOption,
    ConfigOption,
    EngineOption,
    JsonOption,
    ModelOption,
    VerboseOption,
    open_runtime,
)
from jarvis.entrypoints.cli.persona import PersonaOption, persona_warnings
from jarvis.entrypoints.cli.render import (
    StreamRenderer,
    is_tty,
    tool_call_line,
    tool_result_line,
)
from jarvis.entrypoints.cli.tools import ToolsOption, parse_tool_names

if TYPE_CHECKING:
    from jarvis.application.ask import AskQuestion
    from jarvis.domain.json_types import JSONObject, JSONValue
    from jarvis.entrypoints.runtime import Runtime


def parse_agent_options(values: list[str]) -> JSONObject:
    """``KEY=VALUE`` pairs as agent keyword arguments; a value that is JSON (``5``,
    ``true``, ``{"a": 1}``) is decoded, anything else stays a string."""
    from jarvis.domain.errors import ConfigurationError

    options: JSONObject = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ConfigurationError(
                f"--agent-option '{item}' is not KEY=VALUE.", hint="Example: -O mode=structured"
            )
        try:
            value: JSONValue = json.loads(raw)
        except ValueError:
            value = raw
        options[key.strip()] = value
    return options


MAX_CONTEXT_FILE_BYTES = 100 * 1024 * 1024


def read_context_file(path: Path) -> str:
    """The text of ``--context-file`` (UTF-8); an unreadable file is a usage error."""
    from jarvis.domain.errors import ConfigurationError

    try:
        size = path.stat().st_size
        if size > MAX_CONTEXT_FILE_BYTES:
            raise ConfigurationError(
                f"The context file '{path}' is too large ({size:,} bytes).",
                hint=f"At most {MAX_CONTEXT_FILE_BYTES:,} bytes are accepted.",
            )
        data = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigurationError(f"Cannot read the context file '{path}': {reason}.") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"The context file '{path}' is not UTF-8 text ({exc.reason} at byte {exc.start})."
        ) from exc


def read_question(question: str | None) -> str:
    """The question from the argument, or from stdin when it is ``-`` or absent (piped)."""
    from jarvis.domain.errors import ConfigurationError

    usage = 'Usage: jarvis ask "question"  (or pipe it: echo "question" | jarvis ask)'
    if question is None or question == "-":
        stdin = sys.stdin
        if stdin is None or (question is None and is_tty(stdin)):
            raise ConfigurationError("No question given.", hint=usage)
        try:
            question = stdin.read()
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"Cannot read the question from stdin: {exc}") from exc
    if not question.strip():
        raise ConfigurationError("The question is empty.", hint=usage)
    return question.strip()


def ask(
    ctx: typer.Context,
    question: Annotated[
        str | None,
        typer.Argument(
            help='The question. "-" (or nothing, when stdin is piped) reads it from stdin.',
            show_default=False,
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            "-a",
            help="Agent key (default: [agent] default, else simple).",
            show_default=False,
        ),
    ] = None,
    engine: EngineOption = None,
    base_url: BaseUrlOption = None,
    model: ModelOption = None,
    temperature: Annotated[
        float | None,
        typer.Option("--temperature", "-t", min=0.0, max=2.0, help="Sampling temperature."),
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=1, help="Most tokens to generate per turn.")
    ] = None,
    system: Annotated[
        str | None,
        typer.Option("--system", help="Replace the agent's system prompt.", show_default=False),
    ] = None,
    tools: ToolsOption = None,
    agent_option: Annotated[
        list[str] | None,
        typer.Option(
            "--agent-option",
            "-O",
            help="KEY=VALUE passed to the agent (repeatable; JSON values allowed), "
            "e.g. -O mode=structured -O max_turns=5.",
            show_default=False,
        ),
    ] = None,
    persona: PersonaOption = None,
    context_file: Annotated[
        Path | None,
        typer.Option(
            "--context-file",
            help="A UTF-8 text file given to the agent as its context (the rlm agent keeps it "
            "in its REPL as `context`, never in the prompt).",
            show_default=False,
            dir_okay=False,
        ),
    ] = None,
    json_output: JsonOption = False,
    no_stream: Annotated[
        bool, typer.Option("--no-stream", help="Print the answer once it is complete.")
    ] = False,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
) -> None:
    """Ask a question and print the answer as it is generated."""
    renderer = StreamRenderer()

    def body() -> None:
        import asyncio

        text = read_question(question)
        context_text = read_context_file(context_file) if context_file is not None else None
        runtime = open_runtime(
            ctx, config=config, engine=engine, base_url=base_url, model=model, verbose=verbose
        )
        command = runtime.question(
            text,
            agent=agent,
            temperature=temperature,
            max_tokens=max_tokens,
            system=system,
            tools=parse_tool_names(tools),
            persona=persona,
            context=context_text,
            agent_options=parse_agent_options(agent_option or []),
        )
        mode = "json" if json_output else "whole" if no_stream else "stream"
        with persona_warnings(verbose):
            asyncio.run(_answer(runtime, command, renderer, mode=mode, verbose=verbose))

    code = guarded(body, verbose=verbose, cleanup=renderer.abort)
    if code:
        raise typer.Exit(code)


async def _answer(
    runtime: Runtime, command: AskQuestion, renderer: StreamRenderer, *, mode: str, verbose: bool
) -> None:
    from jarvis.application.ask import Answer
    from jarvis.domain.updates import TextDelta, ToolCallsRequested, ToolResultReady

    started = time.perf_counter()
    renderer.start()
    try:
        service = await runtime.service()
        answer: Answer | None = None
        if mode == "stream":
            async for update in service.stream(command):
                if isinstance(update, TextDelta):
                    renderer.text(update.text)
                elif isinstance(update, ToolCallsRequested):
                    for call in update.calls:
                        renderer.notice(tool_call_line(call.name, call.arguments_json()))
                elif isinstance(update, ToolResultReady):
                    result = update.result
                    renderer.notice(tool_result_line(result.content, success=result.success))
                elif isinstance(update, Answer):
                    answer = update
            renderer.finish()
        else:
            answer = await service.ask(command)
            if mode == "json":
                renderer.answer(json.dumps(answer.to_json(), indent=2, ensure_ascii=False))
            else:
                renderer.answer(answer.content)
        if verbose and answer is not None:
            usage = answer.usage
            renderer.notice(
                f"model {answer.model} on {answer.engine}: {answer.turns} turn(s), "
                f"{usage.prompt_tokens}+{usage.completion_tokens} tokens, "
                f"stop {answer.stop_reason}, {time.perf_counter() - started:.2f} s"
            )
    finally:
        await runtime.aclose()
