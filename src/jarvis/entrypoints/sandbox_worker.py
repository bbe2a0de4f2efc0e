"""``python -I -m jarvis.entrypoints.sandbox_worker``: the inside of a sandboxed run.

Run by the sandbox image's Python in a container with no network. It reads the ``run``
line from stdin (the inner agent, its persona, conversation, tool settings and secrets),
builds its runtime with the :func:`~jarvis.entrypoints.composition.bootstrap` jarvis uses
on the host, its parts given as :class:`~jarvis.entrypoints.composition.Overrides`: the
brokered engine (:class:`~jarvis.domain.sandbox.client.BrokeredInference`) in place of a
real one, the persona the host sent, ``file_read`` confined to the mounts, the REPL of
``code_interpreter`` / ``native_openhands`` / ``rlm`` running here, and the host tools the
user allowed brokered. It runs the inner agent through the ask use case, writing its
updates and result as protocol lines.

stdout belongs to the protocol alone: the original descriptor is kept for it and fd 1 is
pointed at stderr, so nothing the agent or a library prints can corrupt a line. Nothing
the host sent is ever printed or logged.

The worker makes itself undumpable (``prctl(PR_SET_DUMPABLE, 0)``) before it reads a byte:
the code the model writes runs as the same user in a child process, and a dumpable parent
would let it read the secrets out of ``/proc/<worker>/mem`` or ``environ``, or ptrace it.
If that cannot be done, the worker refuses to run. When its stdin ends (the host is gone:
killed, or the connection dropped) the run is cancelled and the worker exits, so the
container ends with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from jarvis.domain.errors import (
    ConfigurationError,
    InferenceError,
    JarvisError,
    PersonaError,
    SandboxError,
    ToolError,
)
from jarvis.domain.llm.messages import ToolCall
from jarvis.domain.ports import InferencePort, ReplPort, ReplSession, ToolPort
from jarvis.domain.repl import ReplCallbacks, ReplIsolation, ReplLimits
from jarvis.domain.run.contract import AgentContext, MemoryHit
from jarvis.domain.sandbox.client import BrokeredInference, BrokeredTool, HostLink, LineSink
from jarvis.domain.sandbox.protocol import (
    HOST_MESSAGE,
    MAX_RUN_CHARS,
    ErrorMessage,
    ResultMessage,
    RunMessage,
    TextUpdate,
    ToolCallModel,
    ToolCallsUpdate,
    ToolResultModel,
    ToolResultUpdate,
    UsageModel,
    encode,
)

if TYPE_CHECKING:
    from jarvis.application.ask import Answer
    from jarvis.domain.run.updates import (
        ApprovalDecided,
        ApprovalRequired,
        TextDelta,
        ToolCallsRequested,
        ToolResultReady,
    )

ReadLine = Callable[[], Awaitable[str | None]]
MAX_LINE_BYTES = 4 * MAX_RUN_CHARS
PR_SET_DUMPABLE = 4
EXIT_HOST_GONE = 3
EXIT_NOT_CONFINED = 4
CANCEL_GRACE_SECONDS = 5.0


def make_undumpable() -> str:
    """Make this process undumpable; "" when done, else why it could not be."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            return os.strerror(ctypes.get_errno())
    except (OSError, AttributeError, ImportError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def _seccomp_filtered() -> bool:
    """Whether a system-call filter confines this process (the runtime's default profile)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Seccomp:"):
                    return line.split(":", 1)[1].strip() == "2"
    except OSError:
        pass
    return False


class ContainerRepl:
    """The REPL inside the sandbox container, described as what confines it.

    bubblewrap cannot create namespaces inside an unprivileged container (no capabilities,
    no-new-privileges), so the interpreter runs under the REPL's audit-hook plan and the
    container itself is the isolation: no network, a read-only root, no capabilities, the
    unprivileged ``nobody`` user, the container's memory and pids limits for everything in
    it."""

    def __init__(self, inner: ReplPort) -> None:
        self._inner = inner

    def isolation(self) -> ReplIsolation:
        return ReplIsolation(
            network="namespace",
            processes="pid_namespace",
            user="nobody (65534) in the sandbox container, no capabilities",
            environment_scrubbed=True,
            writes_confined=True,
            sandbox="the sandbox container (plus the REPL's audit hook)",
            filesystem="read-only image root, a small tmpfs /tmp, only the mounts allowed",
            seccomp=_seccomp_filtered(),
            memory="the container's memory limit, for everything in it (cgroup)",
            process_limit="the container's pids limit; forks refused by the audit hook",
            dies_with_host=False,
        )

    async def start(
        self, *, callbacks: ReplCallbacks | None = None, limits: ReplLimits | None = None
    ) -> ReplSession:
        return await self._inner.start(callbacks=callbacks, limits=limits)


class InsideTools:
    """The inner agent's tools: built here, except the host tools (brokered)."""

    def __init__(self, catalogue: object, host: Mapping[str, ToolPort]) -> None:
        self._catalogue = catalogue
        self._host = host

    def build(
        self, names: Sequence[str], *, inference: InferencePort, model: str
    ) -> list[ToolPort]:
        inside = [n for n in names if n not in self._host]
        build = getattr(self._catalogue, "build")  # noqa: B009 - the ToolProvider protocol
        built: list[ToolPort] = build(inside, inference=inference, model=model) if inside else []
        return [*built, *(self._host[n] for n in names if n in self._host)]

    async def prepare(self, names: Sequence[str]) -> None:
        """Nothing to start inside the sandbox: MCP tools run on the host (brokered)."""


def error_kind(exc: BaseException) -> str:
    if isinstance(exc, InferenceError):
        return type(exc).__name__
    if isinstance(exc, (ConfigurationError, PersonaError)):
        return "configuration"
    if isinstance(exc, SandboxError):
        return "sandbox"
    if isinstance(exc, ToolError):
        return "tool"
    return "unexpected"


async def build_service(run: RunMessage, link: HostLink) -> object:
    """The ask use case inside the container (see the module docstring): the host's
    persona, the REPL in this container, the host's tools beside the inner catalogue."""
    from jarvis.application.config import (
        AgentSettings,
        FileReadSettings,
        JarvisConfig,
        ReplSettings,
        ToolSettings,
    )
    from jarvis.entrypoints.composition import Overrides, bootstrap

    config = JarvisConfig(
        agent=AgentSettings(max_turns=run.default_max_turns),
        tools=ToolSettings(file_read=FileReadSettings(roots=tuple(run.file_roots))),
        repl=ReplSettings(network="unsafe-audit-hook-only"),
    )
    inference = BrokeredInference(link, engine_id=run.engine_id, model=run.model)
    persona = run.persona_prompt
    host = {spec.name: BrokeredTool(link, spec.value()) for spec in run.host_tools}
    overrides = Overrides(
        persona=lambda _selection: persona,
        wrap_repl=ContainerRepl,
        wrap_tools=lambda tools: InsideTools(tools, host),
    )
    runtime = bootstrap(config, inference=inference, overrides=overrides)
    return await runtime.service()


class _UpdateLines:
    """Each update of the inner run as the protocol line that tells the host of it."""

    def __init__(self, link: HostLink, *, stream_text: bool) -> None:
        self.link = link
        self.stream_text = stream_text
        """Whether the host asked for the text as it is generated (``run.stream``)."""

    async def text(self, update: TextDelta) -> None:
        if self.stream_text and update.text:
            await self.link.send_line(encode(TextUpdate(text=update.text)))

    async def tool_calls(self, update: ToolCallsRequested) -> None:
        calls = [ToolCallModel.of(c) for c in update.calls if isinstance(c, ToolCall)]
        await self.link.send_line(encode(ToolCallsUpdate(calls=calls)))

    async def tool_result(self, update: ToolResultReady) -> None:
        result = ToolResultModel.of(update.result)
        await self.link.send_line(encode(ToolResultUpdate(result=result)))

    async def approval_required(self, update: ApprovalRequired) -> None:
        """No line: the inner run's question has no approvals, so its calls are never
        asked about."""

    async def approval_decided(self, update: ApprovalDecided) -> None:
        """No line, as for :meth:`approval_required`."""

    async def answer(self, update: Answer) -> None:
        result = ResultMessage(
            content=update.content,
            stop_reason=update.stop_reason,  # type: ignore[arg-type]  # one of the agents' stop reasons
            tool_results=[ToolResultModel.of(r) for r in update.tool_results],
            turns=update.turns,
            usage=UsageModel.of(update.usage),
            model=update.model,
            metadata=dict(update.metadata),
        )
        await self.link.send_line(encode(result))


async def run_inner(run: RunMessage, link: HostLink) -> None:
    """Run the inner agent; its updates and its result (or error) as protocol lines."""
    from jarvis.application.ask import AskQuestion, AskService
    from jarvis.application.run_updates import handle

    try:
        service = await build_service(run, link)
        assert isinstance(service, AskService)
        command = AskQuestion(
            question=run.question,
            agent=run.agent,
            model=run.model,
            temperature=run.temperature,
            max_tokens=run.max_tokens,
            system_prompt=run.system_prompt,
            tools=(*run.tools, *(spec.name for spec in run.host_tools)),
            context=AgentContext(
                conversation=tuple(m.value() for m in run.conversation),
                memory_results=tuple(
                    MemoryHit(content=h.content, source=h.source, score=h.score)
                    for h in run.memory_results
                ),
                metadata=dict(run.metadata),
            ),
            agent_options=dict(run.agent_options),
        )
        sender = _UpdateLines(link, stream_text=run.stream)
        async for update in service.stream(command):
            await handle(update, sender)
    except JarvisError as exc:
        await link.send_line(
            encode(ErrorMessage(kind=error_kind(exc), message=exc.message, hint=exc.hint))
        )
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"[:4000]
        await link.send_line(encode(ErrorMessage(kind="unexpected", message=text)))


async def serve(read_line: ReadLine, sink: LineSink) -> int:
    """The whole inside: the ``run`` line, then the run; replies routed as they come."""
    link = HostLink(sink)
    first = await read_line()
    try:
        run = HOST_MESSAGE.validate_json(first or "")
    except ValueError:
        run = None
    if not isinstance(run, RunMessage):
        await link.send_line(
            encode(ErrorMessage(kind="sandbox", message="The first line was not a run message."))
        )
        return 2

    async def pump() -> None:
        while (line := await read_line()) is not None:
            with contextlib.suppress(ValueError):  # the host is trusted; a bad line is dropped
                link.dispatch(line)
        link.close()

    reader = asyncio.create_task(pump())
    running = asyncio.create_task(run_inner(run, link))
    try:
        await asyncio.wait({reader, running}, return_when=asyncio.FIRST_COMPLETED)
        if running.done():
            await running
            return 0
        # stdin ended before the run did: the host is gone, nobody reads the answer
        running.cancel()
        await asyncio.wait({running}, timeout=CANCEL_GRACE_SECONDS)
        return EXIT_HOST_GONE
    finally:
        reader.cancel()
        running.cancel()


class FdSink:
    """Writes lines to the protocol's own copy of stdout."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write_line(self, line: str) -> None:
        view = memoryview((line + "\n").encode("utf-8", errors="replace"))
        while view:
            view = view[os.write(self._fd, view) :]


def stdin_lines(loop: asyncio.AbstractEventLoop) -> ReadLine:
    """Lines of stdin, read by a thread (stdin may be any kind of file)."""
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def read() -> None:
        stdin = sys.stdin.buffer
        while True:
            data = stdin.readline(MAX_LINE_BYTES)
            if not data or not data.endswith(b"\n"):
                loop.call_soon_threadsafe(queue.put_nowait, None)
                return
            line = data[:-1].decode("utf-8", errors="replace")
            loop.call_soon_threadsafe(queue.put_nowait, line)

    threading.Thread(target=read, name="jarvis-sandbox-stdin", daemon=True).start()

    async def next_line() -> str | None:
        line = await queue.get()
        if line is None:
            queue.put_nowait(None)
        return line

    return next_line


async def _main(protocol_fd: int) -> int:
    return await serve(stdin_lines(asyncio.get_running_loop()), FdSink(protocol_fd))


def main() -> int:
    refused = make_undumpable()  # before anything is read: see the module docstring
    protocol_fd = os.dup(1)
    os.dup2(2, 1)  # whatever else writes to stdout ends up on stderr
    sys.stdout = sys.stderr
    if refused:
        line = encode(
            ErrorMessage(
                kind="sandbox",
                message=f"The sandbox worker could not make itself undumpable ({refused}): "
                "the code it runs could read its memory, so it refused to run.",
            )
        )
        os.write(protocol_fd, (line + "\n").encode())
        return EXIT_NOT_CONFINED
    try:
        code = asyncio.run(_main(protocol_fd))
    except Exception as exc:  # never print what the host sent
        sys.stderr.write(f"jarvis sandbox worker: {type(exc).__name__}\n")
        return 1
    if code == EXIT_HOST_GONE:  # threads still blocked in the cancelled run: do not wait
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
