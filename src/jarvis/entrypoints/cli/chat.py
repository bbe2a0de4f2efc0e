"""``jarvis chat``: an interactive, streaming conversation in the terminal, on any agent.

Every chat is a stored session (resumable with ``jarvis chat --session ID`` or
``jarvis ask -c``). Input is read with prompt_toolkit when stdin and stdout are a terminal
(line editing, history with the arrow keys, the session's earlier questions included;
Enter sends, Alt-Enter or a line ending in ``\\`` starts a new line, pasted text keeps its
lines); otherwise one line of stdin is one message. prompt_toolkit is imported by this
command only, so no other command pays for it.

A turn the session store cannot keep (locked past ``busy_timeout``, out of reach) is said
so and the chat goes on; the chat then ends with the store's exit code (3), in a terminal
and on a pipe alike, so a script learns that its session lacks a turn it was shown.

While an answer streams, Ctrl-C stops it and the conversation goes on (a stopped answer
is not stored: its question and partial answer never enter later prompts); at the prompt
Ctrl-C clears the line; Ctrl-D (or ``/exit``) leaves; ``SIGTERM`` ends the chat like an
interruption (the answer stopped, exit 130). ``/new`` starts a new session,
``/agent KEY`` and ``/tools a,b`` change the agent and its tools for the next questions.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

import typer

from jarvis.domain.errors import ConfigurationError, JarvisError
from jarvis.domain.sessions.records import SessionStoreError
from jarvis.entrypoints.cli.chat_input import MAX_MESSAGE_CHARS, line_reader
from jarvis.entrypoints.cli.errors import guarded, write_stderr
from jarvis.entrypoints.cli.options import (
    ApproveOption,
    BaseUrlOption,
    ConfigOption,
    EngineOption,
    MemoryContextOption,
    ModelOption,
    NoProjectInstructionsOption,
    VerboseOption,
    open_runtime,
)
from jarvis.entrypoints.cli.persona import PersonaOption, persona_warnings
from jarvis.entrypoints.cli.tools import ToolsOption, parse_tool_names

if TYPE_CHECKING:
    import asyncio

    from jarvis.application.approvals import ApprovalChoice
    from jarvis.application.conversation import ConversationService
    from jarvis.domain.json_types import JSONObject
    from jarvis.entrypoints.composition import Runtime

HELP = (
    "Commands: /new (a new session), /agent KEY, /tools a,b (/tools none), /session, "
    "/help, /exit. Alt-Enter or a trailing \\ for a new line; Ctrl-C stops an answer; "
    "Ctrl-D leaves."
)


@dataclass(slots=True, kw_only=True)
class ChatState:
    """What the next question is asked with; changed by the slash commands."""

    session_id: str
    agent: str | None = None
    tools: tuple[str, ...] | None = None
    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    system: str | None = None
    persona: str | None = None
    agent_options: JSONObject = field(default_factory=dict)
    project_instructions: bool | None = None
    memory: bool | None = None
    approval: ApprovalChoice | None = None
    """Who approves tool calls, for the whole chat (an *always* lasts until it ends)."""
    unsaved: list[SessionStoreError] = field(default_factory=list)
    """Why each turn the session store could not keep was lost (the chat ends non-zero)."""
    unanswered: list[JarvisError] = field(default_factory=list)
    """Why each turn that got no answer failed (an engine down, an unknown model...): the
    chat goes on, and ends with the first one's exit code, so a script that piped questions
    in learns that some were never answered."""


def _say(line: str) -> None:
    write_stderr(line.rstrip("\n") + "\n")


async def _command(
    text: str, state: ChatState, runtime: Runtime, conversations: ConversationService
) -> bool:
    """Run a slash command; ``False`` means leave the chat."""
    from jarvis.entrypoints.cli.errors import describe

    name, _, argument = text.partition(" ")
    argument = argument.strip()
    try:
        if name in ("/exit", "/quit"):
            return False
        if name == "/new":
            state.session_id = conversations.new_session_id()
            _say(f"jarvis: new session {state.session_id}")
        elif name == "/session":
            _say(f"jarvis: session {state.session_id}")
        elif name == "/agent":
            service = await runtime.service()
            if not argument:
                _say(f"jarvis: agent {state.agent or service.default_agent}")
                return True
            key = service.registry.resolve(argument)
            accepts = service.registry.get(key).accepts_tools
            state.agent = key
            if state.tools and not accepts:
                state.tools = None
                _say(f"jarvis: agent {key} (it takes no tools: tools cleared)")
            else:
                _say(f"jarvis: agent {key}")
        elif name == "/tools":
            if not argument:
                shown = ", ".join(state.tools) if state.tools else "the default ([tools] enabled)"
                _say(f"jarvis: tools {shown}")
            elif argument == "none":
                state.tools = None
                _say("jarvis: tools: the default ([tools] enabled)")
            else:
                service = await runtime.service()
                agent_cls = service.registry.get(
                    service.registry.resolve(state.agent or service.default_agent)
                )
                if not agent_cls.accepts_tools:
                    _say(
                        f"jarvis: the {agent_cls.agent_id} agent takes no tools; choose one "
                        "that does first, e.g. /agent orchestrator"
                    )
                    return True
                state.tools = parse_tool_names(argument)
                _say(f"jarvis: tools {', '.join(state.tools or ())}")
        elif name == "/help":
            _say(HELP)
        else:
            _say(f"jarvis: unknown command {name}. {HELP}")
    except JarvisError as exc:
        _say(f"jarvis: {describe(exc)}")
    return True


async def _turn(
    text: str, state: ChatState, runtime: Runtime, conversations: ConversationService
) -> None:
    """One question, its answer streamed; Ctrl-C stops it (the chat goes on)."""
    import asyncio
    import signal

    from jarvis.application.conversation import without_history
    from jarvis.entrypoints.cli.render import StreamRenderer
    from jarvis.entrypoints.cli.run_view import ShownRun

    renderer = StreamRenderer()
    command = runtime.question(
        text,
        agent=state.agent,
        model=state.model,
        temperature=state.temperature,
        max_tokens=state.max_tokens,
        system=state.system,
        tools=state.tools,
        persona=state.persona,
        agent_options=state.agent_options,
        project_instructions=state.project_instructions,
        memory=state.memory,
        approve=state.approval,
    )

    async def answer() -> None:
        renderer.start()
        updates = without_history(conversations.stream(state.session_id, command))
        answer = await ShownRun(renderer).show(updates)
        if answer is not None and not answer.content.strip():
            renderer.notice("jarvis: (an empty answer)")
        renderer.finish()

    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(answer())
    stoppable = True
    try:
        loop.add_signal_handler(signal.SIGINT, task.cancel)
    except (NotImplementedError, RuntimeError, ValueError):  # no signals here: no stopping
        stoppable = False
    try:
        await task
    except asyncio.CancelledError:
        renderer.abort()
        current = asyncio.current_task()
        if not task.cancelled() or (current is not None and current.cancelling()):
            raise  # the chat itself is ending (SIGTERM), not just this answer
        _say("jarvis: stopped (this answer is not kept)")
    except Exception as exc:
        from jarvis.entrypoints.cli.conversation import ends_the_conversation
        from jarvis.entrypoints.cli.errors import describe

        renderer.abort()
        if not isinstance(exc, JarvisError) or ends_the_conversation(exc):
            raise
        _say(f"jarvis: {describe(exc)}")
        if isinstance(exc, SessionStoreError):  # shown, perhaps, but not in the session
            state.unsaved.append(exc)
            _say(f"jarvis: this turn is not in session {state.session_id}; the chat goes on")
        else:
            state.unanswered.append(exc)
    finally:
        if stoppable:
            loop.remove_signal_handler(signal.SIGINT)


class _SigtermEnds:
    """While inside, ``SIGTERM`` ends the chat: the answer streaming is stopped (not kept,
    as with Ctrl-C), the conversation loop is cancelled, and the caller's cleanup runs.
    Where the loop takes no signal handlers (not the main thread), nothing changes."""

    def __init__(self) -> None:
        self.fired = False
        self._task: asyncio.Task[object] | None = None
        self._installed = False

    def _on_sigterm(self) -> None:  # runs on the event loop, between its callbacks
        if self.fired:
            return
        self.fired = True
        if self._task is not None:
            self._task.cancel()

    def __enter__(self) -> _SigtermEnds:
        import asyncio
        import signal

        self._task = asyncio.current_task()
        if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN:  # nohup-like: keep it
            return self
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self._on_sigterm)
            self._installed = True
        except (NotImplementedError, RuntimeError, ValueError):
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        self._task = None  # a SIGTERM from now on (the cleanup) is noted, not acted on

    def restore(self) -> None:
        """Give ``SIGTERM`` its default back (after the cleanup)."""
        import asyncio
        import signal

        if self._installed:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)
            self._installed = False


async def _chat(runtime: Runtime, state: ChatState, resume: str | None, last: bool) -> bool:
    """The conversation loop; ``True`` when ``SIGTERM`` ended it."""
    import asyncio

    ending = _SigtermEnds()
    try:
        with ending:
            try:
                await _converse(runtime, state, resume, last)
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if not ending.fired or current is None:
                    raise
                current.uncancel()
    finally:
        try:
            await runtime.aclose()
        finally:
            ending.restore()
    return ending.fired


async def _converse(runtime: Runtime, state: ChatState, resume: str | None, last: bool) -> None:
    conversations = await runtime.conversations()
    if last:
        resume = await conversations.last_session()
    history: list[str] = []
    if resume is not None:
        state.session_id = resume
        records = await conversations.store.load_records(resume, limit=200)
        history = [r.message.content for r in records if r.message.role.value == "user"]
        if not records:
            _say(f"jarvis: session {resume} (new)")
        else:
            more = "+" if len(records) >= 200 else ""
            _say(f"jarvis: session {resume} ({len(records)}{more} messages)")
    else:
        _say(f"jarvis: session {state.session_id} (new)")
    _say("jarvis: /help for commands; Ctrl-C stops an answer, Ctrl-D leaves")
    reader = line_reader(history)
    while True:
        try:
            text = await reader.read()
        except KeyboardInterrupt:
            continue
        except EOFError:
            break
        text = text.strip()
        if not text:
            continue
        if len(text) > MAX_MESSAGE_CHARS:
            _say(f"jarvis: a message is at most {MAX_MESSAGE_CHARS:,} characters")
            continue
        if text.startswith("/"):
            if not await _command(text, state, runtime, conversations):
                break
            continue
        await _turn(text, state, runtime, conversations)
    if state.unsaved:
        raise _not_kept(state.unsaved)
    if state.unanswered:
        raise _unanswered(state.unanswered)


def _unanswered(failed: list[JarvisError]) -> JarvisError:
    """What ends a chat some of whose questions got no answer (each shown as it failed): the
    first failure, of its own class (so the exit code is its own: 3 for an engine out of
    reach), saying how many there were."""
    import copy

    count = f"{len(failed)} question{'s' if len(failed) > 1 else ''}"
    first = copy.copy(failed[0])
    first.message = f"{count} of this chat got no answer (shown above); the first: " + (
        first.message
    )
    return first


def _not_kept(lost: list[SessionStoreError]) -> SessionStoreError:
    """What ends a chat some of whose turns the store could not keep: an error of the first
    loss's class, so the exit code is the store's (3 for one locked or out of reach), and a
    script that piped the chat learns that its session lacks them."""
    first = lost[0]
    count = f"{len(lost)} turn{'s' if len(lost) > 1 else ''}"
    return type(first)(
        f"{count} of this chat could not be saved to the session store (shown above, not "
        f"kept): {first.message}",
        location=first.location,
        hint="The other turns are kept; ask the lost questions again.",
    )


def _approvals(approve: str | None) -> ApprovalChoice:
    """``--approve``; asked inside the chat with the same line editor when it runs in a
    terminal, else ``ask`` means deny."""
    from jarvis.entrypoints.cli.approval_prompt import approval_choice
    from jarvis.entrypoints.cli.render import is_tty

    terminal = sys.stdin is not None and is_tty(sys.stdin) and is_tty(sys.stdout)
    return approval_choice(approve, read=_read_answer, terminal=terminal)


async def _read_answer(prompt: str) -> str | None:
    """One answer typed at prompt_toolkit's line editor (Ctrl-C or Ctrl-D: no answer)."""
    from prompt_toolkit import PromptSession

    session: PromptSession[str] = PromptSession()
    try:
        return await session.prompt_async(prompt)
    except (EOFError, KeyboardInterrupt):
        return None


def _check_agent(runtime: Runtime, agent: str, tools: tuple[str, ...] | None) -> None:
    registry = runtime.agents()
    key = registry.resolve(agent)
    if tools and not registry.get(key).accepts_tools:
        raise ConfigurationError(
            f"Agent '{key}' does not take tools, but tools were given: " + ", ".join(tools),
            hint="Use a tool-using agent such as --agent orchestrator, or drop --tools.",
        )


def chat(
    ctx: typer.Context,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", "-a", help="Agent key (default: [agent] default).", show_default=False
        ),
    ] = None,
    engine: EngineOption = None,
    base_url: BaseUrlOption = None,
    model: ModelOption = None,
    tools: ToolsOption = None,
    persona: PersonaOption = None,
    system: Annotated[
        str | None,
        typer.Option("--system", help="Replace the agent's system prompt.", show_default=False),
    ] = None,
    agent_option: Annotated[
        list[str] | None,
        typer.Option(
            "--agent-option",
            "-O",
            help="KEY=VALUE passed to the agent (repeatable).",
            show_default=False,
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session", help="Resume the session NAME (started when new).", show_default=False
        ),
    ] = None,
    continue_last: Annotated[
        bool, typer.Option("--continue", "-c", help="Resume the last conversation.")
    ] = False,
    no_project_instructions: NoProjectInstructionsOption = False,
    memory: MemoryContextOption = None,
    approve: ApproveOption = None,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
) -> None:
    """Talk with an agent: streamed answers, history with the arrow keys, /help."""

    def body() -> None:
        from jarvis.entrypoints.cli.ask import parse_agent_options
        from jarvis.entrypoints.cli.conversation import SessionChoice
        from jarvis.entrypoints.cli.streams import repair_text

        choice = SessionChoice.of(continue_last=continue_last, name=session)
        if sys.stdin is None:  # started with fd 0 closed (`jarvis chat <&-`)
            raise ConfigurationError(
                "Standard input is closed: the chat has nothing to read.",
                hint='Pipe the messages in (printf "one\\ntwo\\n" | jarvis chat) or ask '
                'one question with jarvis ask "...".',
            )
        runtime = open_runtime(
            ctx, config=config, engine=engine, base_url=base_url, model=model, verbose=verbose
        )
        from jarvis.application.conversation import new_session_id

        state = ChatState(
            session_id=new_session_id(),
            agent=agent,
            tools=parse_tool_names(tools),
            system=None if system is None else repair_text(system),
            persona=persona,
            agent_options=parse_agent_options([repair_text(o) for o in agent_option or []]),
            project_instructions=False if no_project_instructions else None,
            memory=memory,
            approval=_approvals(approve),
        )
        if agent is not None:  # an unknown agent, or tools it cannot take: exit 2 now
            _check_agent(runtime, agent, state.tools)
        import asyncio

        with persona_warnings(verbose):
            terminated = asyncio.run(_chat(runtime, state, choice.name, choice.continue_last))
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        if terminated:  # SIGTERM: reported and exited as an interruption (130)
            raise KeyboardInterrupt

    code = guarded(body, verbose=verbose)
    if code:
        raise typer.Exit(code)
