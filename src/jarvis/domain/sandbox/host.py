"""The host's side of a sandboxed run: answer the container, never trust it.

The host sends the ``run`` line, then reads the container's lines one at a time. Each is
checked before anything is done with it: its length (before parsing), that it is one of the
protocol's messages (every field bounded), and the run's totals — lines, inference
requests, tool calls, requests in flight, answer text. A container that floods, sends
something else, asks for a tool it was not given, or asks again with an id in use is
killed at once and the run fails with :class:`~jarvis.domain.sandbox.runner.SandboxRunError`
(reason ``protocol``). What the container reports about its own run is not believed where
the host knows better: ``turns`` and ``usage`` are the host's own count of the inferences
it answered.

Every string that comes out of the container is masked (:mod:`jarvis.domain.sandbox.secret_masking`)
before anything else sees it: streamed text (held back while it may be the start of a
secret), tool calls and results, the answer and its metadata, errors and stderr, and what
it asks of the host (inference requests, host tool arguments).

Inference requests and host tool calls are answered concurrently (each in a task); replies
go out one line at a time. Whatever happens — an answer, an error, the caller cancelling
or closing the stream early — the container is removed before the run returns.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace

from pydantic import ValidationError

from jarvis.domain.errors import (
    ConfigurationError,
    InferenceError,
    JarvisError,
    SandboxError,
    ToolError,
)
from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.llm.completion import Completion, StreamChunk, Usage
from jarvis.domain.llm.inference import InferenceRequest
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.loop.tool_executor import ToolExecutor
from jarvis.domain.ports import ContainerExit, ContainerExitReason, ContainerProcess
from jarvis.domain.run.contract import AgentResult
from jarvis.domain.run.updates import (
    RunUpdate,
    TextDelta,
    ToolCallsRequested,
    ToolResultReady,
)
from jarvis.domain.sandbox.client import INFERENCE_KINDS, inference_error
from jarvis.domain.sandbox.protocol import (
    CONTAINER_MESSAGE,
    MAX_LINE_CHARS,
    ChunkReply,
    CompletionModel,
    CompletionReply,
    ErrorMessage,
    InferenceAsk,
    InferenceErrorReply,
    ResultMessage,
    RunMessage,
    TextUpdate,
    ToolAsk,
    ToolCallsUpdate,
    ToolReply,
    ToolResultModel,
    ToolResultUpdate,
    encode,
)
from jarvis.domain.sandbox.runner import SandboxRunError
from jarvis.domain.sandbox.secret_masking import REDACTED, SecretMask, StreamMasker
from jarvis.domain.tools.specs import ToolResult

__all__ = ["REDACTED", "HostBounds", "HostBroker", "ProtocolViolation"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HostBounds:
    """How much one sandboxed run may ask of the host."""

    max_line_chars: int = MAX_LINE_CHARS
    max_lines: int = 1_000_000
    max_inference_calls: int = 2_000
    max_tool_calls: int = 2_000
    max_in_flight: int = 32
    max_text_chars: int = 64 * 1024 * 1024
    exit_grace_seconds: float = 10.0


@dataclass(slots=True)
class _Tally:
    lines: int = 0
    inference_calls: int = 0
    tool_calls: int = 0
    text_chars: int = 0
    usage: Usage = field(default_factory=Usage)
    in_flight: set[int] = field(default_factory=set)
    used_ids: set[int] = field(default_factory=set)


class ProtocolViolation(Exception):
    """Raised inside the broker; the container is killed and the run fails."""


class HostBroker:
    """Runs one sandboxed conversation over ``process`` (see the module docstring).

    ``generate`` and ``stream`` answer inference requests (the sandboxed agent passes its
    own instrumented helpers, so ``INFERENCE_*`` events are published on the host);
    ``host_tools`` is an executor over the host tools the user allowed.
    """

    def __init__(
        self,
        process: ContainerProcess,
        *,
        generate: Callable[[InferenceRequest], Awaitable[Completion]],
        stream: Callable[[InferenceRequest], AsyncIterator[StreamChunk]],
        engine_id: str,
        host_tools: ToolExecutor | None = None,
        secrets: Mapping[str, str] | None = None,
        bounds: HostBounds | None = None,
    ) -> None:
        self._process = process
        self._generate = generate
        self._stream = stream
        self._engine_id = engine_id
        self._tools = host_tools
        self._mask = SecretMask((secrets or {}).values())
        self._text = StreamMasker(self._mask)
        self.bounds = bounds or HostBounds()
        self._tally = _Tally()
        self._send_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._engine_error: InferenceError | None = None
        self._host_failure: BaseException | None = None
        self.exit: ContainerExit | None = None

    # --- helpers ------------------------------------------------------------------------

    def redact(self, text: str) -> str:
        """``text`` with every secret value replaced (container output may echo them)."""
        return self._mask.redact(text)

    def redact_json(self, value: JSONValue) -> JSONValue:
        """Every string of ``value`` (keys too) redacted."""
        if not self._mask:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self.redact_json(item) for item in value]
        if isinstance(value, dict):
            return {self.redact(k): self.redact_json(v) for k, v in value.items()}
        return value

    def redact_object(self, value: JSONObject) -> JSONObject:
        return {self.redact(k): self.redact_json(v) for k, v in value.items()}

    def redact_call(self, call: ToolCall) -> ToolCall:
        if not self._mask:
            return call
        raw = call.raw_arguments
        return ToolCall(
            id=self.redact(call.id),
            name=self.redact(call.name),
            arguments=self.redact_object(dict(call.arguments)),
            raw_arguments=None if raw is None else self.redact(raw),
        )

    def redact_result(self, result: ToolResult) -> ToolResult:
        if not self._mask:
            return result
        return ToolResult(
            tool_name=self.redact(result.tool_name),
            content=self.redact(result.content),
            success=result.success,
            call_id=self.redact(result.call_id),
            latency_seconds=result.latency_seconds,
            truncated=result.truncated,
            metadata=self.redact_object(dict(result.metadata)),
        )

    def redact_request(self, request: InferenceRequest) -> InferenceRequest:
        """The request the container asks the host's engine, secrets masked (a secret the
        model read inside never reaches the engine, or a provider, verbatim)."""
        if not self._mask:
            return request
        messages = tuple(
            replace(
                m,
                content=self.redact(m.content),
                tool_calls=tuple(self.redact_call(c) for c in m.tool_calls),
            )
            for m in request.messages
        )
        return replace(request, messages=messages)

    def _held_text(self) -> TextDelta | None:
        """The streamed text held back as a possible secret's start, now that the text
        ended (a tool round or the run's end came)."""
        rest = self._text.flush()
        return TextDelta(text=rest) if rest else None

    async def _send(self, line: str) -> None:
        async with self._send_lock:
            with contextlib.suppress(SandboxError):  # gone: the reader sees the end
                await self._process.send(line)

    def _spawn(self, coroutine: Coroutine[None, None, None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- answering ----------------------------------------------------------------------

    async def _answer_inference(self, ask: InferenceAsk) -> None:
        request = self.redact_request(ask.request.value())
        try:
            if ask.stream:
                async for chunk in self._stream(request):
                    if chunk.is_final and chunk.usage is not None:
                        self._tally.usage = self._tally.usage + chunk.usage
                    await self._send(encode(ChunkReply.of(ask.id, chunk)))
            else:
                completion = await self._generate(request)
                self._tally.usage = self._tally.usage + completion.usage
                await self._send(
                    encode(CompletionReply(id=ask.id, completion=CompletionModel.of(completion)))
                )
        except InferenceError as exc:
            self._engine_error = exc
            await self._send(
                encode(
                    InferenceErrorReply(
                        id=ask.id, kind=type(exc).__name__, message=exc.message, hint=exc.hint
                    )
                )
            )
        except Exception as exc:  # a host failure: the run fails with it
            self._host_failure = exc
            await self._process.kill()
        finally:
            self._tally.in_flight.discard(ask.id)

    async def _answer_tool(self, ask: ToolAsk) -> None:
        assert self._tools is not None
        try:
            call = ToolCall(
                id=f"sandbox-{ask.id}",
                name=ask.name,
                arguments=self.redact_object(dict(ask.arguments)),
            )
            result = await self._tools.execute(call)
            await self._send(encode(ToolReply(id=ask.id, result=ToolResultModel.of(result))))
        except Exception as exc:
            self._host_failure = exc
            await self._process.kill()
        finally:
            self._tally.in_flight.discard(ask.id)

    def _admit(self, request_id: int) -> None:
        tally = self._tally
        if request_id in tally.used_ids:
            raise ProtocolViolation(f"request id {request_id} was used twice")
        if len(tally.in_flight) >= self.bounds.max_in_flight:
            raise ProtocolViolation(
                f"more than {self.bounds.max_in_flight} requests in flight at once"
            )
        tally.used_ids.add(request_id)
        tally.in_flight.add(request_id)

    def _read(self, line: str) -> RunUpdate | ResultMessage | ErrorMessage | None:
        """Check one line and act on it; the update it carries, if any."""
        tally, bounds = self._tally, self.bounds
        tally.lines += 1
        if tally.lines > bounds.max_lines:
            raise ProtocolViolation(f"more than {bounds.max_lines} lines")
        if len(line) > bounds.max_line_chars:
            raise ProtocolViolation(f"a line of more than {bounds.max_line_chars} characters")
        try:
            message = CONTAINER_MESSAGE.validate_json(line)
        except (ValidationError, ValueError, RecursionError) as exc:
            raise ProtocolViolation(
                f"a line that is not a protocol message ({_first(exc)})"
            ) from None
        if isinstance(message, InferenceAsk):
            tally.inference_calls += 1
            if tally.inference_calls > bounds.max_inference_calls:
                raise ProtocolViolation(f"more than {bounds.max_inference_calls} inferences")
            self._admit(message.id)
            self._spawn(self._answer_inference(message))
            return None
        if isinstance(message, ToolAsk):
            tally.tool_calls += 1
            if tally.tool_calls > bounds.max_tool_calls:
                raise ProtocolViolation(f"more than {bounds.max_tool_calls} host tool calls")
            if self._tools is None or message.name not in self._tools.names:
                raise ProtocolViolation(f"a call of host tool '{message.name}', never allowed")
            self._admit(message.id)
            self._spawn(self._answer_tool(message))
            return None
        if isinstance(message, TextUpdate):
            tally.text_chars += len(message.text)
            if tally.text_chars > bounds.max_text_chars:
                raise ProtocolViolation(f"more than {bounds.max_text_chars} characters of text")
            return TextDelta(text=self._text.feed(message.text))
        if isinstance(message, ToolCallsUpdate):
            return ToolCallsRequested(
                calls=tuple(self.redact_call(c.value()) for c in message.calls)
            )
        if isinstance(message, ToolResultUpdate):
            return ToolResultReady(result=self.redact_result(message.result.value()))
        return message

    # --- the run ------------------------------------------------------------------------

    async def run(self, run: RunMessage) -> AsyncIterator[RunUpdate | ResultMessage]:
        """Send ``run``, answer the container, yield the run's updates, and end with the
        container's (checked) ``ResultMessage``. Raises the inner run's error, or
        ``SandboxRunError`` when the container did not answer."""
        process = self._process
        ended: ResultMessage | ErrorMessage | None = None
        try:
            await self._send(encode(run))
            while ended is None:
                line = await process.receive()
                if line is None:
                    break
                try:
                    item = self._read(line)
                except ProtocolViolation as violation:
                    await process.kill()
                    raise SandboxRunError(
                        f"The sandboxed agent broke the protocol ({violation}): its container "
                        "was killed.",
                        reason="protocol",
                    ) from None
                if item is None:
                    continue
                if isinstance(item, TextDelta):
                    if item.text:
                        yield item
                    continue
                held = self._held_text()
                if held is not None:
                    yield held
                if isinstance(item, (ResultMessage, ErrorMessage)):
                    ended = item
                else:
                    yield item
            if self._host_failure is not None:
                raise self._host_failure
            if isinstance(ended, ErrorMessage):
                raise self._error(ended)
            if ended is None:
                raise self._ended_early(await process.wait(self.bounds.exit_grace_seconds))
            yield ended
        finally:
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(Exception):
                await process.close_stdin()
            if ended is not None and self.exit is None:
                with contextlib.suppress(Exception):
                    self.exit = await process.wait(self.bounds.exit_grace_seconds)
            with contextlib.suppress(Exception):
                await process.kill()

    def _ended_early(self, ended: ContainerExit) -> SandboxRunError:
        self.exit = ended
        stderr = self.redact(ended.stderr.strip())[-2000:]
        said = f" It wrote: {stderr}" if stderr else ""
        if ended.reason is ContainerExitReason.TIMED_OUT:
            return SandboxRunError(
                "The sandboxed run did not finish within its timeout: its container was removed.",
                reason="timed_out",
                hint="Raise [sandbox] timeout, or ask for less.",
            )
        if ended.reason is ContainerExitReason.OUT_OF_MEMORY:
            return SandboxRunError(
                "The sandboxed run ran out of memory: its container was killed.",
                reason="out_of_memory",
                hint="Raise [sandbox] memory_mb, or work on less data.",
            )
        if ended.reason is ContainerExitReason.KILLED:
            return SandboxRunError(
                "The sandbox container was removed before the run answered." + said,
                reason="killed",
            )
        return SandboxRunError(
            f"The sandbox container exited with code {ended.code} before answering." + said,
            reason="exited",
        )

    def _error(self, message: ErrorMessage) -> JarvisError:
        text, hint = self.redact(message.message), self.redact(message.hint)
        kind = message.kind
        engine_error = self._engine_error
        if engine_error is not None and type(engine_error).__name__ == kind:
            return engine_error  # the host's own error, with its engine and URL
        if kind in INFERENCE_KINDS:
            return inference_error(kind, text, hint, engine=self._engine_id)
        if kind == "configuration":
            return ConfigurationError(
                f"The sandboxed agent refused its settings: {text}", hint=hint
            )
        if kind == "tool":
            return ToolError(text, hint=hint)
        if kind == "sandbox":
            return SandboxError(text, hint=hint)
        return SandboxRunError(
            f"The sandboxed agent failed: {text}", reason="inner_error", hint=hint
        )

    def result(self, message: ResultMessage, *, model: str, metadata: JSONObject) -> AgentResult:
        """The run's result: the container's answer with the host's own counts."""
        return AgentResult(
            content=self.redact(message.content),
            stop_reason=message.stop_reason,
            tool_results=tuple(self.redact_result(r.value()) for r in message.tool_results),
            turns=self._tally.inference_calls,
            usage=self._tally.usage,
            model=self.redact(message.model) or model,
            metadata={**metadata, "inner": self.redact_object(dict(message.metadata))},
        )


def _first(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        errors = exc.errors()
        if errors:
            where = ".".join(str(p) for p in errors[0].get("loc", ()))
            return f"{where}: {errors[0].get('msg', '')}"[:200]
    return str(exc)[:200]
