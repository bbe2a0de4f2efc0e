"""``jarvis ask``: one question through an agent, streamed to the terminal."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from jarvis.domain.errors import ConfigurationError, OutputValidationError
from jarvis.entrypoints.cli.errors import guarded
from jarvis.entrypoints.cli.options import (
    ApproveOption,
    BaseUrlOption,
    ConfigOption,
    EngineOption,
    JsonOption,
    MemoryContextOption,
    ModelOption,
    NoProjectInstructionsOption,
    VerboseOption,
    runtime_for,
)
from jarvis.entrypoints.cli.persona import PersonaOption, persona_warnings
from jarvis.entrypoints.cli.render import (
    StreamRenderer,
)
from jarvis.entrypoints.cli.tools import ToolsOption, parse_tool_names

if TYPE_CHECKING:
    from jarvis.application.approvals import ApprovalChoice
    from jarvis.application.ask import AskQuestion
    from jarvis.domain.json_types import JSONObject
    from jarvis.domain.traces import Trace
    from jarvis.entrypoints.cli.conversation import SessionChoice
    from jarvis.entrypoints.composition import Runtime


def parse_agent_options(values: list[str]) -> JSONObject:
    """``KEY=VALUE`` pairs as agent keyword arguments; a value that is JSON (``5``,
    ``true``, ``{"a": 1}``) is decoded, anything else stays a string. Non-finite numbers,
    out-of-range budgets and internal parameters are usage errors (see
    :mod:`jarvis.entrypoints.cli.agent_options`, loaded only when there are options)."""
    if not values:
        return {}
    from jarvis.entrypoints.cli.agent_options import parse_agent_options as parse

    return parse(values)


MAX_TOKENS_LIMIT = 1 << 20
"""``--max-tokens`` at most: the bound of ``[agent] max_tokens`` (kept equal by a test; not
imported, so that ``jarvis --help`` loads no configuration code)."""


def _finite_temperature(value: float | None) -> float | None:
    """``--temperature nan`` passes click's range check (NaN compares false with both ends)."""
    import math

    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number in the range 0<=x<=2.")
    return value


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
        typer.Option(
            "--temperature",
            "-t",
            min=0.0,
            max=2.0,
            callback=_finite_temperature,
            help="Sampling temperature, 0 to 2 (default: [agent] temperature, else what suits "
            "the engine: 0 for the embedded model, else the agent's 0.7).",
            show_default=False,
        ),
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-tokens",
            min=1,
            max=MAX_TOKENS_LIMIT,
            help="Most tokens to generate per turn.",
            show_default=False,
        ),
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
    mount: Annotated[
        list[str] | None,
        typer.Option(
            "--mount",
            help="PATH[:TARGET][:ro|rw]: a host folder the sandboxed agent sees (repeatable; "
            "read-only unless the mount allowlist allows writing), e.g. --mount ./data:ro.",
            show_default=False,
        ),
    ] = None,
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
    continue_last: Annotated[
        bool,
        typer.Option(
            "--continue",
            "-c",
            help="Continue the last conversation (a new one when there is none yet): its "
            "history enters the prompt, and this exchange is added to it.",
        ),
    ] = False,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Continue the conversation NAME (started when it does not exist yet); see "
            "`jarvis sessions list`.",
            show_default=False,
        ),
    ] = None,
    operator: Annotated[
        str | None,
        typer.Option(
            "--operator",
            help="With -a operative or monitor_operative: the operator the question is one "
            "tick of (created on first use; default adhoc). It keeps its state and history "
            "for the next such question.",
            show_default=False,
        ),
    ] = None,
    no_keep: Annotated[
        bool,
        typer.Option(
            "--no-keep",
            "--ephemeral",
            help="Store nothing of this question and answer (by default a plain ask is kept "
            "as a new session, which -c continues; [sessions] keep_asks = false turns that "
            "off).",
        ),
    ] = False,
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            help="The answer must be a JSON object of this shape: a JSON Schema file, a JSON "
            "Schema, or fields such as 'name str, age int'. Prints the object; exit code 5 "
            "when the model never matches it (--verbose shows its last reply and the errors).",
            show_default=False,
        ),
    ] = None,
    output_retries: Annotated[
        int,
        typer.Option(
            "--output-retries",
            min=0,
            max=10,
            help="With --schema: how many times an invalid answer is sent back with its errors.",
        ),
    ] = 2,
    json_output: JsonOption = False,
    no_stream: Annotated[
        bool, typer.Option("--no-stream", help="Print the answer once it is complete.")
    ] = False,
    no_project_instructions: NoProjectInstructionsOption = False,
    memory: MemoryContextOption = None,
    profile: Annotated[
        bool,
        typer.Option(
            "--profile",
            help="After the answer, print each inference's and tool call's duration and tokens, "
            "and the run's totals (on stderr).",
        ),
    ] = False,
    approve: ApproveOption = None,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
) -> None:
    """Ask a question and print the answer as it is generated."""
    renderer = StreamRenderer()

    def body() -> None:
        import asyncio

        from jarvis.entrypoints.cli.streams import repair_text

        def arg(value: str | None) -> str | None:
            return None if value is None else repair_text(value)

        from jarvis.entrypoints.cli.question_input import read_context_file, read_question

        conversation = _conversation(continue_last, arg(session), no_keep=no_keep)
        text = repair_text(read_question(question))
        context_text = read_context_file(context_file) if context_file is not None else None
        from jarvis.entrypoints.settings import EngineOverrides, read_config

        loaded = read_config(  # the URL is checked: undecodable bytes are refused there
            config, overrides=EngineOverrides(engine=engine, base_url=base_url, model=arg(model))
        )
        runtime = runtime_for(ctx, loaded, verbose=verbose)
        if agent is None:  # an unknown default agent: say which key of which file named it
            from jarvis.entrypoints.cli.config_names import check_default_agent

            check_default_agent(loaded, runtime.agents())
        command = runtime.question(
            text,
            agent=arg(agent),
            temperature=temperature,
            max_tokens=max_tokens,
            system=arg(system),
            tools=parse_tool_names(arg(tools)),
            persona=arg(persona),
            context=context_text,
            agent_options=parse_agent_options([repair_text(o) for o in agent_option or []]),
            mounts=[repair_text(m) for m in mount or []],
            project_instructions=False if no_project_instructions else None,
            memory=memory,
            approve=_approvals(approve, renderer),
        )
        if schema is not None:
            from dataclasses import replace

            from jarvis.entrypoints.cli.schema_option import schema_option

            spec = schema_option(repair_text(schema), retries=output_retries)
            command = replace(command, output=spec)
        mode = "json" if json_output else "whole" if no_stream else "stream"
        if _as_operator(runtime, command, arg(operator), conversation):
            asyncio.run(
                _operator_answer(runtime, command, arg(operator) or "adhoc", json=json_output)
            )
            return  # an operator keeps its own history: nothing is kept as a session
        if conversation is None and not no_keep and runtime.config.sessions.keep_asks:
            from jarvis.entrypoints.cli.conversation import SessionChoice, too_large_to_keep

            reason = too_large_to_keep(text)
            if reason:  # a long question on stdin: answered, not kept
                from jarvis.entrypoints.cli.options import stderr_line

                stderr_line(f"jarvis: {reason}")
            else:
                conversation = SessionChoice()  # kept as a new session, for a later -c
        if temperature is not None:
            chosen_by = "--temperature"
        elif runtime.config.agent.temperature is not None:
            chosen_by = "[agent] temperature"
        else:
            chosen_by = ""
        from jarvis.entrypoints.cli.termination import sigterm_as_interrupt

        profiled = _profile(runtime) if profile else None
        try:
            with persona_warnings(verbose), sigterm_as_interrupt():
                asyncio.run(
                    _answer(
                        runtime,
                        command,
                        renderer,
                        mode=mode,
                        verbose=verbose,
                        temperature_from=chosen_by,
                        conversation=conversation,
                    )
                )
        finally:
            writer = runtime.trace_writer()
            if writer is not None:
                writer.flush()
        if profiled:
            from jarvis.entrypoints.cli.errors import write_stderr
            from jarvis.entrypoints.cli.traces import profile_lines

            write_stderr("".join(line + "\n" for line in profile_lines(profiled[-1])))

    def checked_body() -> None:
        try:
            body()
        except Exception as exc:
            if verbose:
                _invalid_answer_details(exc)
            raise

    code = guarded(checked_body, verbose=verbose, cleanup=renderer.abort)
    if code:
        raise typer.Exit(code)


def _invalid_answer_details(exc: Exception) -> None:
    """``--verbose`` after a typed answer that never matched: its last reply and errors."""
    if not isinstance(exc, OutputValidationError):
        return
    from jarvis.entrypoints.cli.errors import write_stderr

    lines = [f"jarvis: the last of {exc.attempts} replies:\n", exc.last_reply.rstrip() + "\n"]
    lines.append("jarvis: why it does not match the schema:\n")
    lines.extend(f"  - {error}\n" for error in exc.errors)
    usage = exc.usage
    lines.append(
        f"jarvis: tokens of every attempt: {usage.prompt_tokens}+{usage.completion_tokens}\n"
    )
    write_stderr("".join(lines))


OPERATIVE_KEYS = ("operative", "monitor_operative")
"""``jarvis.domain.operators.OPERATIVE_AGENTS``, named here so that a question to any
other agent does not import the operators' module (a test checks they are equal)."""


def _as_operator(
    runtime: Runtime,
    command: AskQuestion,
    operator: str | None,
    conversation: SessionChoice | None,
) -> bool:
    """Whether the question runs as a tick of an operator (the agent is an operative)."""
    key = runtime.agents().resolve(command.agent or runtime.config.agent.default)
    if key not in OPERATIVE_KEYS:
        if operator is not None:
            raise ConfigurationError(
                "--operator applies to the operative agents only.",
                hint="Add -a operative (or -a monitor_operative), or drop --operator.",
            )
        return False
    if conversation is not None:
        raise ConfigurationError(
            f"-c / --session do not apply to the {key} agent: its operator keeps its history.",
            hint="Name the operator with --operator NAME instead.",
        )
    return True


async def _operator_answer(
    runtime: Runtime, command: AskQuestion, name: str, *, json: bool
) -> None:
    """``command`` as one tick of operator ``name`` (created on first use), printed."""
    from jarvis.entrypoints.cli.output import write_json, write_line

    service = runtime.operators()
    try:
        await runtime.service()  # the engine, started now: a missing one fails here
        answer = await service.ask(name, command)
    finally:
        await runtime.aclose()
    if json:
        data = dict(answer.to_json())
        data["operator"] = name
        write_json(data)
    else:
        write_line(answer.content)


def _approvals(approve: str | None, renderer: StreamRenderer) -> ApprovalChoice:
    """``--approve``, asked at the terminal (the answer's stream paused on a fresh line)."""
    from jarvis.entrypoints.cli.approval_prompt import approval_choice

    return approval_choice(approve, write=renderer.notice)


def _profile(runtime: Runtime) -> list[Trace]:
    """Records the run for ``--profile`` (whether or not traces are kept): the list gets
    the run's trace when it ends."""
    from jarvis.application.traces import TraceRecorder

    traces: list[Trace] = []
    TraceRecorder(traces.append).attach(runtime.bus())
    return traces


def _conversation(
    continue_last: bool, session: str | None, *, no_keep: bool = False
) -> SessionChoice | None:
    """Which conversation ``-c`` / ``--session`` asked for (``None``: none was asked for;
    the question is then kept as a new session unless ``--no-keep`` or ``[sessions]
    keep_asks = false`` says otherwise, and only then is the session store loaded)."""
    if not continue_last and session is None:
        return None
    if no_keep:
        raise ConfigurationError(
            "--no-keep cannot be used with -c or --session (they store the exchange).",
            hint="Drop --no-keep, or ask without -c / --session.",
        )
    from jarvis.entrypoints.cli.conversation import SessionChoice

    return SessionChoice.of(continue_last=continue_last, name=session)


async def _answer(
    runtime: Runtime,
    command: AskQuestion,
    renderer: StreamRenderer,
    *,
    mode: str,
    verbose: bool,
    temperature_from: str = "",
    conversation: SessionChoice | None = None,
) -> None:
    from jarvis.application.ask import Answer
    from jarvis.application.run_updates import answer_of
    from jarvis.entrypoints.cli.run_view import ShownRun, sampling_line, summary_lines
    from jarvis.entrypoints.cli.streams import json_text

    started = time.perf_counter()
    renderer.start()
    try:
        service = await runtime.service()
        if verbose:
            renderer.notice(sampling_line(service.sampling(command), temperature_from))
            for path in service.instruction_files(command):
                renderer.notice(f"project instructions: {path}")
        command = await service.with_memory(command)
        if verbose and command.context is not None:
            for hit in command.context.memory_results:
                renderer.notice(f"memory: {hit.citation} (score {hit.score:.4f})")
        answer: Answer | None = None
        session_id: str | None = None
        updates = None
        if conversation is not None:
            from jarvis.entrypoints.cli.conversation import conversation_updates

            session_id, updates = await conversation_updates(
                runtime, conversation, command, notice=renderer.notice if verbose else None
            )
        if mode == "stream":
            answer = await ShownRun(renderer).show(updates or service.stream(command))
            renderer.finish()
        else:
            if updates is None:
                answer = await service.ask(command)
            else:
                async for update in updates:
                    found = answer_of(update)
                    if found is not None:
                        answer = found
            assert answer is not None
            if mode == "json":
                data = answer.to_json()
                if session_id is not None:
                    data["session"] = session_id
                renderer.answer(json_text(data, stream=renderer.out))
            else:
                renderer.answer(answer.content)
        if verbose and answer is not None:
            for line in summary_lines(answer, started):
                renderer.notice(line)
    finally:
        await runtime.aclose()
