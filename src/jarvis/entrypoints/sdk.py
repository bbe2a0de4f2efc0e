"""The SDK: ``from jarvis import Jarvis``.

::

    from jarvis import Jarvis

    with Jarvis() as j:
        print(j.ask("What is the capital of France?"))
        answer = j.ask_full("And of Italy?")          # content, turns, usage, model...
        for piece in j.ask_stream("Tell me a story"):
            print(piece, end="", flush=True)

    async with Jarvis(engine="ollama", model="qwen3:8b") as j:
        texts = await asyncio.gather(*(j.aask(q) for q in questions))

An ``await``-ed call runs on the caller's event loop, with no hand-off to another thread;
the synchronous methods run on the instance's own event loop, in a private thread started
by the first of them. The engine and its pooled HTTP connections are built once per event
loop and reused by every call on it (an HTTP connection pool belongs to one loop, so a
second loop, such as the private one or another ``asyncio.run``, gets a pool of its own,
closed when that loop shuts down or the instance is closed); calls can run concurrently.

For tests: ``Jarvis(inference=fake)`` runs on an in-memory engine (see
:mod:`jarvis.testing`), and ``jarvis.container`` is the dependency-injector container, whose
providers can be overridden before the first question.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Coroutine,
    Generator,
    Mapping,
    Sequence,
)
from dataclasses import replace
from os import PathLike
from typing import TYPE_CHECKING, TypeVar, Unpack, overload

from jarvis.domain.errors import ConfigurationError, shown
from jarvis.domain.typed_output import DEFAULT_OUTPUT_RETRIES
from jarvis.entrypoints.closing import AcloseOnExit, CloseOnExit
from jarvis.entrypoints.composition import AskOptions, bootstrap
from jarvis.entrypoints.sdk_loop import LoopThread, TextStream, blocking_pieces
from jarvis.entrypoints.sdk_output_types import OutputSpecs
from jarvis.entrypoints.sdk_output_types import OutputType as OutputType
from jarvis.entrypoints.settings import EngineOverrides, load_config

if TYPE_CHECKING:
    from jarvis.application.approvals import ApproveCallback
    from jarvis.application.ask import Answer, AskQuestion
    from jarvis.application.config import JarvisConfig
    from jarvis.domain.json_types import JSONValue
    from jarvis.domain.ports import InferencePort, ToolPort
    from jarvis.entrypoints.sdk_conversation import AsyncConversation, Conversation
    from jarvis.entrypoints.sdk_memory import Memory

T = TypeVar("T")


class Jarvis(CloseOnExit, AcloseOnExit):
    """Ask questions through jarvis agents from Python.

    ``engine`` (auto, ollama, vllm, openai, llamacpp; ``engine_key``, OpenJarvis's name for
    it, is taken too), ``model`` and ``base_url`` override
    the configuration file (``config_path``, default ``<config dir>/config.toml``) and the
    environment, exactly as the CLI options do. ``inference`` replaces the engine altogether
    (an in-memory fake in tests, or an engine the application built itself; jarvis does not
    close an engine it did not build). ``agent`` is the default agent of this instance
    (else ``[agent] default``, else ``simple``, as on the command line).

    ``tools`` adds the application's own tools — :func:`jarvis.tool` functions, plain typed
    functions with a docstring, or any ``ToolPort`` — and gives them, with ``[tools]
    enabled``, to every tool-using agent of this instance when a question names no tools.
    :meth:`register_tool` adds one later, available by name (``tools=["name"]``).

    Every question method takes the question and the keyword options of
    :class:`~jarvis.entrypoints.composition.AskOptions` (``jarvis.AskOptions``): ``agent``,
    ``model``, ``temperature``, ``max_tokens``, ``system``, ``tools``, ``persona``,
    ``context`` and ``agent_options``.
    """

    def __init__(
        self,
        *,
        engine: str | None = None,
        model: str | None = None,
        base_url: str | None = None,
        config_path: str | PathLike[str] | None = None,
        inference: InferencePort | None = None,
        agent: str | None = None,
        tools: Sequence[ToolPort | Callable[..., object]] = (),
        approve: str | ApproveCallback | None = None,
        engine_key: str | None = None,
    ) -> None:
        engine = _engine_name(engine, engine_key)
        config = load_config(
            config_path, overrides=EngineOverrides(engine=engine, base_url=base_url, model=model)
        )
        ports = _as_tools(tools)
        self.config = _with_default_tools(config, ports) if ports else config
        self._runtime = bootstrap(self.config, inference=inference)
        self.container = self._runtime.container
        """The dependency-injector container; override providers before the first call."""
        for port in ports:
            self._add_tool(port)
        self.agent = agent
        self.approve = approve
        """Who approves the tool calls of every question that passes no ``approve=``."""
        self._loop: LoopThread | None = None
        self._lock = threading.Lock()
        self._output_specs = OutputSpecs()
        """The spec of each ``output_type`` asked for (a type's schema and validator take
        pydantic a millisecond or more to build), at most :data:`MAX_KEPT_OUTPUT_TYPES`."""
        self._closed = False

    # -- tools ------------------------------------------------------------------------------

    def _add_tool(self, tool: ToolPort | Callable[..., object]) -> ToolPort:
        from jarvis.application.tools.function_tool import as_tool

        port = as_tool(tool)
        registered = self._runtime.user_tools()
        if any(other.spec.name == port.spec.name for other in registered):
            raise ConfigurationError(f"A tool named '{port.spec.name}' is already registered.")
        registered.append(port)
        return port

    def register_tool(self, tool: ToolPort | Callable[..., object]) -> ToolPort:
        """Add a tool (or a typed function with a docstring) that questions can name.

        Returns the tool. Its name must not be taken; a function without type annotations
        or a docstring is refused with a ``ToolError`` saying what is missing.
        """
        if self._runtime.choice is None:
            return self._add_tool(tool)
        from jarvis.application.tools.catalogue import ToolCatalogue

        catalogue = self._runtime.tools()
        if not isinstance(catalogue, ToolCatalogue):
            raise RuntimeError("This Jarvis instance has no tool catalogue.")
        return catalogue.register(tool)

    # -- memory ------------------------------------------------------------------------------

    @functools.cached_property
    def memory(self) -> Memory:
        """The knowledge base (``jarvis memory``): ``add``, ``search``, ``remove``, ``stats``,
        ``sources``, ``sync``; and ``aadd``, ``asearch``... (``async_sync``) on the
        caller's loop."""
        from jarvis.entrypoints.sdk_memory import Memory

        return Memory(self)

    # -- conversations -----------------------------------------------------------------------

    def conversation(self, name: str | None = None, **options: Unpack[AskOptions]) -> Conversation:
        """A conversation whose questions carry its history and are stored (``[sessions]``):
        ``with j.conversation() as c: c.ask(...)``. ``name`` continues (or starts) that
        session; without one, a new session. ``options`` apply to every question; see
        :mod:`jarvis.entrypoints.sdk_conversation`."""
        from jarvis.entrypoints.sdk_conversation import Conversation

        return Conversation(self, name, options)

    def aconversation(
        self, name: str | None = None, **options: Unpack[AskOptions]
    ) -> AsyncConversation:
        """:meth:`conversation` for ``async with``: ``await c.aask(...)`` on the caller's loop."""
        from jarvis.entrypoints.sdk_conversation import AsyncConversation

        return AsyncConversation(self, name, options)

    # -- the loop ---------------------------------------------------------------------------

    def _loop_thread(self) -> LoopThread:
        with self._lock:
            if self._closed:
                raise RuntimeError("This Jarvis instance is closed.")
            if self._loop is None:
                self._loop = LoopThread()
            return self._loop

    def _runner_for(self, coro: Coroutine[object, object, object]) -> LoopThread:
        """The loop thread that will run ``coro``; ``coro`` is closed if there is none."""
        try:
            return self._loop_thread()
        except RuntimeError:
            coro.close()
            raise

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("This Jarvis instance is closed.")

    def _call(self, coro: Coroutine[object, object, T]) -> T:
        """Run ``coro`` on the instance's loop and wait for it (synchronous callers)."""
        runner = self._runner_for(coro)
        if runner.thread is threading.current_thread():
            coro.close()
            raise RuntimeError("Synchronous Jarvis methods cannot be called from its own loop.")
        future = runner.submit(coro)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    # -- building a question -----------------------------------------------------------------

    def _question(
        self,
        question: str,
        output_type: OutputType | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        **options: Unpack[AskOptions],
    ) -> AskQuestion:
        options["agent"] = options.get("agent") or self.agent
        if options.get("approve") is None:
            options["approve"] = self.approve
        command = self._runtime.question(question, **options)
        if output_type is None:
            return command
        return replace(command, output=self._output_specs.spec(output_type, output_retries))

    async def _ask(self, command: AskQuestion) -> Answer:
        service = await self._runtime.service()
        return await service.ask(command)

    async def _stream(self, command: AskQuestion) -> AsyncGenerator[str, None]:
        from jarvis.application.run_updates import text_of

        service = await self._runtime.service()
        async for update in service.stream(command):
            text = text_of(update)
            if text is not None:
                yield text

    # -- synchronous API ---------------------------------------------------------------------

    @overload
    def ask(
        self,
        question: str,
        *,
        output_type: None = None,
        output_retries: int = ...,
        **options: Unpack[AskOptions],
    ) -> str: ...

    @overload
    def ask(
        self,
        question: str,
        *,
        output_type: Mapping[str, object],
        output_retries: int = ...,
        **options: Unpack[AskOptions],
    ) -> JSONValue: ...

    @overload
    def ask(
        self,
        question: str,
        *,
        output_type: type[T],
        output_retries: int = ...,
        **options: Unpack[AskOptions],
    ) -> T: ...

    def ask(
        self,
        question: str,
        *,
        output_type: OutputType | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        **options: Unpack[AskOptions],
    ) -> object:
        """The answer's text; with ``output_type`` (a pydantic model, a dataclass, a
        TypedDict or a JSON Schema dict) the validated answer (see :meth:`ask_full`)."""
        answer = self.ask_full(
            question, output_type=output_type, output_retries=output_retries, **options
        )
        return answer.content if output_type is None else answer.output

    def ask_full(
        self,
        question: str,
        *,
        output_type: OutputType | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        **options: Unpack[AskOptions],
    ) -> Answer:
        """The whole answer: content, turns, tool results, usage, model, engine, stop reason.

        With ``output_type`` the answer must match its schema: ``output`` is the validated
        answer (an instance of the type; the JSON value for a schema dict) and ``content``
        that answer as JSON. An invalid reply is sent back with its errors at most
        ``output_retries`` times, then ``OutputValidationError`` is raised (usage counts
        every attempt)."""
        command = self._question(question, output_type, output_retries, **options)
        return self._call(self._ask(command))

    def ask_stream(
        self,
        question: str,
        *,
        output_type: OutputType | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        **options: Unpack[AskOptions],
    ) -> TextStream:
        """The answer's text as it is generated. Stop iterating (or ``close()``) to cancel.
        With ``output_type``, the checked answer's JSON arrives whole, as one piece. ``async
        for`` works too (as on OpenJarvis): that is :meth:`aask_stream`, on the caller's loop."""

        def pieces() -> Generator[str, None, None]:
            command = self._question(question, output_type, output_retries, **options)
            yield from blocking_pieces(self._call, self._stream(command))

        def async_pieces() -> AsyncIterator[str]:
            return self.aask_stream(
                question, output_type=output_type, output_retries=output_retries, **options
            )

        return TextStream(pieces, async_pieces)

    def list_models(self) -> list[str]:
        """The models the engine lists (``jarvis models``)."""
        return self._call(self.alist_models())

    async def alist_models(self) -> list[str]:
        """``await``-able :meth:`list_models` (runs on the caller's event loop)."""
        self._check_open()
        return await (await self._runtime.inference()).list_models()

    def list_engines(self) -> list[str]:
        """The engines jarvis can run on: what ``engine=`` (``engine_key=``) takes, besides
        ``auto`` (a local Ollama, else the embedded model)."""
        from jarvis.application.engine_names import ENGINE_NAMES

        return [name for name in ENGINE_NAMES if name != "auto"]

    def _mark_closed(self) -> tuple[bool, LoopThread | None]:
        """Mark the instance closed: whether it was open, and its loop thread if it had one."""
        with self._lock:
            if self._closed:
                return False, None
            self._closed = True
            runner, self._loop = self._loop, None
        return True, runner

    def close(self) -> None:
        """Close the engines this instance built and stop its loop. Idempotent.

        The engines of other event loops are closed on those loops: at once when they have
        shut down already, else as soon as they run (prefer ``await aclose()`` there).
        """
        was_open, runner = self._mark_closed()
        if not was_open:
            return
        try:
            if runner is not None:
                runner.submit(self._runtime.aclose()).result()
            else:
                self._runtime.close_soon()
        finally:
            if runner is not None:
                runner.stop()

    def __enter__(self) -> Jarvis:
        return self

    # -- asynchronous API --------------------------------------------------------------------

    @overload
    async def aask(
        self,
        question: str,
        *,
        output_type: None = None,
        output_retries: int = ...,
        **options: Unpack[AskOptions],
    ) -> str: ...

    @overload
    async def aask(
        self,
        question: str,
        *,
        output_type: Mapping[str, object],
        output_retries: int = ...,
        **options: Unpack[AskOptions],
    ) -> JSONValue: ...

    @overload
    async def aask(
        self,
        question: str,
        *,
        output_type: type[T],
        output_retries: int = ...,
        **options: Unpack[AskOptions],
    ) -> T: ...

    async def aask(
        self,
        question: str,
        *,
        output_type: OutputType | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        **options: Unpack[AskOptions],
    ) -> object:
        """``await``-able :meth:`ask`."""
        answer = await self.aask_full(
            question, output_type=output_type, output_retries=output_retries, **options
        )
        return answer.content if output_type is None else answer.output

    async def aask_full(
        self,
        question: str,
        *,
        output_type: OutputType | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        **options: Unpack[AskOptions],
    ) -> Answer:
        """``await``-able :meth:`ask_full` (runs on the caller's event loop)."""
        command = self._question(question, output_type, output_retries, **options)
        self._check_open()
        return await self._ask(command)

    async def aask_stream(
        self,
        question: str,
        *,
        output_type: OutputType | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        **options: Unpack[AskOptions],
    ) -> AsyncIterator[str]:
        """:meth:`ask_stream` for ``async for``. Stop iterating to cancel the run."""
        command = self._question(question, output_type, output_retries, **options)
        self._check_open()
        async for piece in self._stream(command):
            yield piece

    async def aclose(self) -> None:
        """``await``-able :meth:`close`: this loop's engines are closed before it returns."""
        was_open, runner = self._mark_closed()
        if not was_open:
            return
        try:
            if runner is not None:  # the private loop's engines first, on that loop
                await asyncio.wrap_future(runner.submit(self._runtime.aclose_loop()))
        finally:
            try:
                await self._runtime.aclose()
            finally:
                if runner is not None:
                    await asyncio.to_thread(runner.stop)

    async def __aenter__(self) -> Jarvis:
        return self


def _engine_name(engine: str | None, engine_key: str | None) -> str | None:
    """``engine``, or OpenJarvis's ``engine_key`` for it; both naming different engines is
    an error (which one was meant cannot be guessed)."""
    if engine is not None and engine_key is not None and engine != engine_key:
        raise ConfigurationError(
            f"engine={shown(repr(engine))} and engine_key={shown(repr(engine_key))} name "
            "different engines.",
            hint="Pass one of them (engine_key is OpenJarvis's name for engine).",
        )
    return engine if engine is not None else engine_key


def _as_tools(tools: Sequence[ToolPort | Callable[..., object]]) -> list[ToolPort]:
    """``tools`` as ports (functions wrapped); the function-tool module is imported only
    when there are some."""
    if not tools:
        return []
    from jarvis.application.tools.function_tool import as_tool

    return [as_tool(tool) for tool in tools]


def _with_default_tools(config: JarvisConfig, tools: Sequence[ToolPort]) -> JarvisConfig:
    """``config`` with ``tools`` added to ``[tools] enabled``."""
    enabled = tuple(dict.fromkeys([*config.tools.enabled, *(t.spec.name for t in tools)]))
    return replace(config, tools=replace(config.tools, enabled=enabled))
