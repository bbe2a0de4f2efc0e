"""The ``openhands`` external runtime: the openhands SDK in a Python 3.12+ of its own,
one runner process per run, driven over stdio.

A run spawns the runner (:mod:`.process`), writes the request, streams its events and
reads the final block (:mod:`.wire`). The SDK's conversations persist in ``data_dir``
(jarvis's config dir): a run continues the conversation named by ``session_id``, else the
last one of its workspace (kept in a small file per workspace, so it holds across asks),
else starts one. The timeout covers the whole run, the SDK's 8-12 s import included; on
timeout, error, cancellation or :meth:`close_now` the runner's process group is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

from jarvis.adapters.openhands_sdk.interpreter import find_python
from jarvis.adapters.openhands_sdk.process import RunnerProcess
from jarvis.adapters.openhands_sdk.wire import RunnerOutput
from jarvis.adapters.subprocess_repl.janitor import Janitor
from jarvis.adapters.subprocess_repl.process_jail import Confinement
from jarvis.domain.errors import ConfigurationError, ExternalRuntimeError
from jarvis.domain.external_runtime import ExternalEvent, ExternalRunRequest

MAX_ITERATIONS = 50
"""The SDK's agent steps per run unless the request's ``max_turns`` says (its own default
is 500)."""


def conversation_hex(session_id: str) -> str | None:
    """A session id as the SDK's conversation id (32 hex digits), or ``None``."""
    try:
        return uuid.UUID(session_id.strip()).hex
    except ValueError:
        return None


class OpenHandsRuntime:
    """``ExternalRuntimePort`` for the openhands SDK; ``data_dir`` keeps its conversations.
    ``python`` overrides the interpreter search (see :mod:`.interpreter`). ``confine``
    (``[runtimes] confine``) jails each runner to its workspace unless a run opts out;
    ``hidden`` names more folders a jailed runner must not see (jarvis's config dir)."""

    def __init__(
        self,
        *,
        data_dir: Path,
        python: str | None = None,
        confine: bool = True,
        hidden: tuple[str, ...] = (),
    ) -> None:
        self.data_dir = data_dir
        self._confinement = Confinement("openhands", enabled=confine, hidden=hidden)
        self._janitor = Janitor()
        self._python_override = python
        self._python: str | None = None
        self._running: set[RunnerProcess] = set()

    @property
    def runtime_id(self) -> str:
        return "openhands"

    @property
    def running(self) -> frozenset[RunnerProcess]:
        """The runners alive now (tests count their processes)."""
        return frozenset(self._running)

    async def _interpreter(self) -> str:
        if self._python is None:
            self._python = await asyncio.to_thread(find_python, self._python_override)
        return self._python

    def _last_file(self, workspace: str, mode: str) -> Path:
        """Where the workspace's last conversation in ``mode`` is noted. Per mode: the SDK
        refuses to continue a conversation with other tools than it started with."""
        digest = hashlib.sha256(f"{workspace}\0{mode}".encode()).hexdigest()[:32]
        return self.data_dir / "workspaces" / digest

    def _mode_file(self, conversation: str) -> Path:
        return self.data_dir / "modes" / conversation

    def _exists(self, conversation: str) -> bool:
        return (self.data_dir / conversation / "base_state.json").is_file()

    def _read_small(self, path: Path) -> str:
        with contextlib.suppress(OSError, UnicodeDecodeError), path.open("rb") as handle:
            return handle.read(64).decode().strip()
        return ""

    def _conversation(self, request: ExternalRunRequest) -> str:
        """The conversation this run continues or starts."""
        if request.session_id:
            named = conversation_hex(request.session_id)
            if named is None or not self._exists(named):
                raise ConfigurationError(
                    f"openhands has no session '{request.session_id[:100]}'.",
                    hint="Drop -O session to continue the last one, or -O new_session=true.",
                )
            started = self._read_small(self._mode_file(named))
            if started and started != request.mode:
                raise ConfigurationError(
                    f"The openhands session '{named}' was started in {started} mode; it "
                    f"cannot go on in {request.mode} mode (its tools would change).",
                    hint=f"Pass -O agent={started}, or -O new_session=true.",
                )
            return named
        if not request.new_session:
            last = conversation_hex(
                self._read_small(self._last_file(request.workspace, request.mode))
            )
            if last is not None and self._exists(last):
                return last
        return uuid.uuid4().hex

    def _write_small(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(text)
        partial.replace(path)

    def _remember(self, request: ExternalRunRequest, conversation: str) -> None:
        self._write_small(self._last_file(request.workspace, request.mode), conversation)
        self._write_small(self._mode_file(conversation), request.mode)

    def _payload(self, request: ExternalRunRequest, conversation: str) -> bytes:
        return json.dumps(
            {
                "prompt": request.prompt,
                "workspace": request.workspace,
                "model": request.model,
                "base_url": request.base_url,
                "api_key": request.api_key,
                "system_prompt": request.system_prompt,
                "conversation_id": conversation,
                "persistence_dir": str(self.data_dir),
                "max_iterations": request.max_turns or MAX_ITERATIONS,
                "mode": request.mode,
                "timeout": request.timeout,
            }
        ).encode()

    async def run(self, request: ExternalRunRequest) -> AsyncIterator[ExternalEvent]:
        python = await self._interpreter()
        jail = await self._confinement.choose(request.confine)
        conversation = self._conversation(request)
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(OSError):  # the conversations are the user's: theirs only
            self.data_dir.chmod(0o700)
        runner = RunnerProcess(
            python, self.data_dir, confinement=self._confinement, janitor=self._janitor
        )
        self._running.add(runner)
        output = RunnerOutput()
        try:
            try:
                async with asyncio.timeout(request.timeout):
                    await runner.start(
                        self._payload(request, conversation), request.workspace, jail
                    )
                    async for line in runner.lines():
                        for event in output.feed(line):
                            yield event
                    code = await runner.wait()
            except TimeoutError:
                raise ExternalRuntimeError(
                    f"openhands did not finish within {request.timeout:g} s; the run was stopped.",
                    runtime="openhands",
                    hint="Raise the limit with -O timeout=SECONDS (the SDK alone takes 8-12 s "
                    "to start).",
                ) from None
            except OSError as exc:
                raise ExternalRuntimeError(
                    f"openhands could not be started: {exc}", runtime="openhands"
                ) from None
            hint = runner.output_hint()
            if not output.final_seen and code != 0:
                raise ExternalRuntimeError(
                    f"openhands stopped before the run finished (exit status {code}).",
                    runtime="openhands",
                    hint=hint,
                )
            # the conversation is the one the runner was told to run, whatever it says
            result = output.result(session_id=conversation, hint=hint)
            done = replace(
                result,
                session_id=conversation,
                metadata={**result.metadata, "confined": jail is not None},
            )
        finally:
            self._running.discard(runner)
            await runner.stop()
        self._remember(request, conversation)
        yield done

    def close_now(self) -> None:
        """Kills every running runner at once, from synchronous code (the container's
        shutdown, Ctrl-C)."""
        for runner in list(self._running):
            runner.stop_now()
        self._running.clear()
        self._janitor.close()

    async def aclose(self) -> None:
        for runner in list(self._running):
            await runner.stop()
        self._running.clear()
        await asyncio.to_thread(self._janitor.close)
