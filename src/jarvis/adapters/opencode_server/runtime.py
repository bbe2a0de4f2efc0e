"""The ``opencode`` external runtime over ``opencode serve``'s HTTP API.

One server per engine configuration, started on first use and reused by later runs (a
second question costs 0.2-0.5 s, not a 3-5 s boot), with one HTTP client kept alive and
one ``/event`` stream per directory, opened once and shared by the runs (see
:mod:`.events`). A run subscribes to its session's events, then sends the prompt with the
blocking ``POST /session/{id}/message``, streams the text deltas of the session's parts
and reports each finished tool part; it ends once the prompt's reply is in and its events
are all read. That reply is the answer when the run made one message; a tool round (or a
lost stream) reads the session's messages back for the tool calls and the tokens.
Sessions continue across runs: the last one of each workspace, or the one named.

The server is jailed to the workspace it was started for (see :mod:`.process`), so a run
in another workspace starts a server of its own; up to :data:`MAX_SERVERS` are kept, so
runs in several workspaces at once (``jarvis serve``, the SDK) do not stop each other's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import replace
from pathlib import Path

import httpx

from jarvis.adapters.opencode_server.config import (
    PROVIDER_ID,
    opencode_config,
    passthrough_config,
)
from jarvis.adapters.opencode_server.events import (
    LOST,
    EventStream,
    ServerConnection,
    Signal,
    StreamClosedError,
)
from jarvis.adapters.opencode_server.process import ServerProcess
from jarvis.adapters.opencode_server.wire import (
    MAX_MESSAGES_BYTES,
    RunState,
    answered_alone,
    caught_up,
    final_reply,
)
from jarvis.adapters.subprocess_repl.janitor import Janitor
from jarvis.adapters.subprocess_repl.process_jail import Confinement
from jarvis.domain.cut_text import masked_prefix
from jarvis.domain.errors import ConfigurationError, ExternalRuntimeError
from jarvis.domain.external_runtime import (
    ExternalEvent,
    ExternalRunDone,
    ExternalRunRequest,
    ExternalTextDelta,
    ExternalToolDone,
)

OPENCODE_VERSION = "1.18.33"
INSTALL_HINT = (
    f"Install it with scripts/test (it caches opencode-ai {OPENCODE_VERSION} under "
    "~/.cache/jarvis/runtimes), or `npm install opencode-ai@"
    f"{OPENCODE_VERSION}` and set JARVIS_OPENCODE_BIN to "
    "node_modules/opencode-linux-x64/bin/opencode."
)


def opencode_binary(env: dict[str, str] | None = None) -> str | None:
    """``$JARVIS_OPENCODE_BIN``, else the pinned copy in the runtimes cache, else PATH."""
    env = dict(os.environ) if env is None else env
    if explicit := env.get("JARVIS_OPENCODE_BIN"):
        return explicit if os.access(explicit, os.X_OK) else None
    cache = Path(env.get("JARVIS_RUNTIMES") or Path.home() / ".cache" / "jarvis" / "runtimes")
    pinned = cache / f"opencode-{OPENCODE_VERSION}/node_modules/opencode-linux-x64/bin/opencode"
    if os.access(pinned, os.X_OK):
        return str(pinned)
    return shutil.which("opencode")


def _model_id(request: ExternalRunRequest) -> str:
    return request.model_id or request.model


def _model_spec(request: ExternalRunRequest) -> dict[str, str]:
    """opencode's ``{providerID, modelID}``: jarvis's provider, or in pass-through mode (no
    engine URL) the ``provider/model`` the request names."""
    if not request.base_url:
        provider, _, model = _model_id(request).partition("/")
        if not provider or not model:
            raise ConfigurationError(
                f"opencode needs an engine URL, or a model named provider/model to pass "
                f"through to its own configuration; got {_model_id(request)!r}.",
                hint="Use --engine ollama|vllm|openai, or -m PROVIDER/MODEL.",
            )
        return {"providerID": provider, "modelID": model}
    return {"providerID": request.provider_id or PROVIDER_ID, "modelID": _model_id(request)}


_ANSWERED = Signal("ANSWERED")
"""Put in a run's queue when its prompt's reply is in (or the request failed)."""
IDLE_GRACE = 5.0
"""Seconds a run waits for ``session.idle`` after its prompt's reply is in."""

MAX_SERVERS = 4
"""Servers kept running at once (one per engine configuration and, jailed, per workspace);
past it the least recently used idle one is stopped."""


class OpenCodeRuntime:
    """``ExternalRuntimePort`` for opencode; ``data_dir`` keeps its sessions. ``confine``
    (``[runtimes] confine``) jails the server to the workspace unless a run opts out;
    ``hidden`` names more folders the jailed server must not see (jarvis's config dir)."""

    def __init__(
        self,
        *,
        data_dir: Path,
        binary: str | None = None,
        confine: bool = True,
        hidden: tuple[str, ...] = (),
    ) -> None:
        self.data_dir = data_dir
        self._binary = binary
        self._confinement = Confinement("opencode", enabled=confine, hidden=hidden)
        self._janitor = Janitor()
        self._servers: dict[tuple[str, ...], ServerProcess] = {}
        """The running servers, least recently used first."""
        self._busy: dict[ServerProcess, int] = {}
        self._connections: dict[ServerProcess, ServerConnection] = {}
        """Each server's client and event streams, kept for its life."""
        self._lock = asyncio.Lock()
        self._last_session: dict[str, str] = {}

    @property
    def runtime_id(self) -> str:
        return "opencode"

    @property
    def server(self) -> ServerProcess | None:
        """The server used last, if any (tests and benchmarks count its processes)."""
        return next(reversed(self._servers.values()), None)

    @property
    def connection(self) -> ServerConnection | None:
        """The client and event streams of :attr:`server` (tests drop and count them)."""
        server = self.server
        return None if server is None else self._connections.get(server)

    async def _ensure_server(self, request: ExternalRunRequest) -> ServerProcess:
        """The server for this engine configuration (and, jailed, this workspace), started
        if need be; marked busy until :meth:`_release`."""
        async with self._lock:
            jail = await self._confinement.choose(request.confine)
            key: tuple[str, ...] = (
                request.base_url,
                _model_id(request),
                request.api_key,
                request.provider_id,
            )
            key += ("unjailed",) if jail is None else ("jailed", request.workspace)
            server = self._servers.pop(key, None)
            if server is not None and server.alive:
                self._servers[key] = server  # now the most recently used
                self._busy[server] = self._busy.get(server, 0) + 1
                return server
            if server is not None:
                await self._stop(server)
            await self._evict()
            binary = self._binary or opencode_binary()
            if binary is None or not os.access(binary, os.X_OK):
                raise ExternalRuntimeError(
                    "The opencode binary is not installed.", runtime="opencode", hint=INSTALL_HINT
                )
            passing = not request.base_url
            config = (
                passthrough_config()
                if passing
                else opencode_config(
                    base_url=request.base_url,
                    model=_model_id(request),
                    api_key=request.api_key,
                    provider_id=request.provider_id or PROVIDER_ID,
                )
            )
            server = ServerProcess(
                binary,
                self.data_dir,
                config,
                confinement=self._confinement,
                janitor=self._janitor,
                user_config=passing,
            )
            await server.start(request.workspace, jail)
            self._connections[server] = ServerConnection(server.endpoint.url, server.endpoint.auth)
            self._servers[key] = server
            self._busy[server] = 1
            return server

    async def _evict(self) -> None:
        """Past :data:`MAX_SERVERS`, stops the least recently used idle servers."""
        for key, server in list(self._servers.items()):
            if len(self._servers) < MAX_SERVERS:
                return
            if not self._busy.get(server):
                del self._servers[key]
                await self._stop(server)

    async def _stop(self, server: ServerProcess) -> None:
        self._busy.pop(server, None)
        connection = self._connections.pop(server, None)
        if connection is not None and connection.loop is asyncio.get_running_loop():
            await connection.aclose()
        elif connection is not None:
            connection.close_now()
        await server.stop()

    def _connection(self, server: ServerProcess) -> ServerConnection:
        """``server``'s client and event streams on the running event loop. Those made on
        another loop (an application that calls ``asyncio.run`` again with the same
        runtime: that loop is closed now) are dropped and made again, as the server itself
        is kept."""
        connection = self._connections.get(server)
        if connection is not None and connection.loop is asyncio.get_running_loop():
            return connection
        if connection is not None:
            connection.close_now()
        connection = ServerConnection(server.endpoint.url, server.endpoint.auth)
        self._connections[server] = connection
        return connection

    def _release(self, server: ServerProcess) -> None:
        count = self._busy.get(server, 0)
        if count > 1:
            self._busy[server] = count - 1
        elif count:
            self._busy[server] = 0

    async def run(self, request: ExternalRunRequest) -> AsyncIterator[ExternalEvent]:
        _model_spec(request)  # a model that cannot pass through: refused before any start
        server = await self._ensure_server(request)
        try:
            async with contextlib.aclosing(self._run_on(server, request)) as events:
                async for event in events:
                    yield event
        finally:
            self._release(server)

    async def _run_on(
        self, server: ServerProcess, request: ExternalRunRequest
    ) -> AsyncGenerator[ExternalEvent]:
        connection = self._connection(server)
        client = connection.client
        try:
            session = await self._session(client, request)
        except httpx.HTTPError as exc:
            raise ExternalRuntimeError(
                f"opencode did not answer ({type(exc).__name__}).",
                runtime="opencode",
                hint=server.output_hint(),
            ) from None
        state = RunState(session_id=session)
        try:
            async with (
                asyncio.timeout(request.timeout),
                contextlib.aclosing(self._events(connection, request, state)) as events,
            ):
                async for event in events:
                    yield event
                done = await self._final(client, state)
        except httpx.HTTPError as exc:
            raise ExternalRuntimeError(
                f"opencode stopped before the run finished ({type(exc).__name__}).",
                runtime="opencode",
                hint=server.output_hint(),
            ) from None
        except TimeoutError:
            with contextlib.suppress(httpx.HTTPError):
                await client.post(f"/session/{session}/abort", timeout=5.0)
            raise ExternalRuntimeError(
                f"opencode did not finish within {request.timeout:g} s; the run was aborted.",
                runtime="opencode",
                hint="Raise the limit with -O timeout=SECONDS.",
            ) from None
        self._last_session[request.workspace] = session
        yield replace(done, metadata={**done.metadata, "confined": server.jailed})

    async def _session(self, client: httpx.AsyncClient, request: ExternalRunRequest) -> str:
        directory = {"directory": request.workspace}
        if request.session_id:
            reply = await client.get(f"/session/{request.session_id}", params=directory)
            if reply.status_code != 200:
                raise ConfigurationError(
                    f"opencode has no session '{request.session_id}'.",
                    hint="Drop -O session to continue the last one, or -O new_session=true.",
                )
            return request.session_id
        last = self._last_session.get(request.workspace)
        if last and not request.new_session:
            return last
        title = " ".join(request.prompt.split())[:60] or "jarvis"
        reply = await client.post("/session", params=directory, json={"title": title})
        self._check(reply, "create a session")
        session = reply.json().get("id")
        if not isinstance(session, str) or not session:
            raise ExternalRuntimeError(
                "opencode created a session without an id.", runtime="opencode"
            )
        return session

    def _check(self, reply: httpx.Response, what: str) -> None:
        if reply.status_code >= 400:
            raise ExternalRuntimeError(
                f"opencode could not {what} (HTTP {reply.status_code}): "
                f"{masked_prefix(reply.text, 300)}",
                runtime="opencode",
            )

    async def _events(
        self, connection: ServerConnection, request: ExternalRunRequest, state: RunState
    ) -> AsyncGenerator[ExternalTextDelta | ExternalToolDone]:
        """The run's updates from the server's shared event stream, subscribed to before
        the prompt is sent (nothing of the run can be missed); ends at ``session.idle``
        once the prompt's reply is in (kept in ``state.answer``), or at the reply alone
        when the stream was lost."""
        body: dict[str, object] = {
            "parts": [{"type": "text", "text": request.prompt}],
            "model": _model_spec(request),
            "agent": request.mode,
        }
        if request.system_prompt:
            body["system"] = request.system_prompt
        stream = connection.events(request.workspace)
        queue = await self._subscribe(stream, state.session_id)
        # the blocking endpoint, not prompt_async: the latter costs opencode ~350 ms more
        # per prompt; its reply is the run's last message
        prompt = asyncio.create_task(
            connection.client.post(
                f"/session/{state.session_id}/message",
                params={"directory": request.workspace},
                json=body,
            )
        )
        prompt.add_done_callback(lambda _: queue.put_nowait(_ANSWERED))
        try:
            while not (prompt.done() and self._answered(prompt.result(), state)):
                item = await self._next(queue, waiting_for_idle=prompt.done(), state=state)
                if item is LOST:
                    state.lost = True
                elif not isinstance(item, Signal):
                    for update in state.feed(item):
                        yield update
                    if state.permission is not None:  # config allows or denies; never wait
                        await connection.client.post(
                            f"/permission/{state.permission}/reply", json={"reply": "reject"}
                        )
                        state.permission = None
        finally:
            stream.unsubscribe(state.session_id, queue)
            if not prompt.done():
                prompt.cancel()
                with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                    await prompt

    async def _subscribe(self, stream: EventStream, session: str) -> asyncio.Queue[object]:
        try:
            return await stream.subscribe(session)
        except StreamClosedError as exc:
            raise ExternalRuntimeError(
                f"opencode could not open its event stream (HTTP {exc.status}): "
                f"{masked_prefix(exc.text, 300)}",
                runtime="opencode",
            ) from None

    def _answered(self, reply: httpx.Response, state: RunState) -> bool:
        """Whether the run is over now that the prompt's reply is in: its text is all
        streamed, its events are all read (``session.idle``), or none are coming (the
        stream was lost)."""
        if state.answer is None:
            self._check(reply, "run the prompt")
            if len(reply.content) > MAX_MESSAGES_BYTES:
                raise ExternalRuntimeError(
                    "opencode's answer is too large to read.", runtime="opencode"
                )
            try:
                state.answer = reply.json()
            except ValueError:
                state.answer, state.lost = {}, True  # the session is read back instead
        return state.idle or state.lost or caught_up(state.answer, state)

    @staticmethod
    async def _next(
        queue: asyncio.Queue[object], *, waiting_for_idle: bool, state: RunState
    ) -> object:
        """The next item of the run's queue. Once the prompt's reply is in, ``session.idle``
        is due at once; past :data:`IDLE_GRACE` the run ends without it (its events
        counted as incomplete: the session's messages are read back)."""
        if not waiting_for_idle:
            return await queue.get()
        try:
            return await asyncio.wait_for(queue.get(), IDLE_GRACE)
        except TimeoutError:
            state.lost = True
            return LOST

    async def _final(self, client: httpx.AsyncClient, state: RunState) -> ExternalRunDone:
        """The run's answer: the prompt's own reply when it is the whole answer, else the
        session's messages read back (a tool round, or events lost)."""
        if answered_alone(state.answer, state):
            return final_reply([state.answer], state)
        reply = await client.get(f"/session/{state.session_id}/message")
        self._check(reply, "list the session's messages")
        if len(reply.content) > MAX_MESSAGES_BYTES:
            raise ExternalRuntimeError(
                "opencode's session is too large to read.", runtime="opencode"
            )
        return final_reply(reply.json(), state)

    def close_now(self) -> None:
        """Stops the server at once, from synchronous code (the container's shutdown)."""
        for connection in self._connections.values():
            connection.close_now()
        self._connections.clear()
        for server in self._servers.values():
            server.stop_now()
        self._servers.clear()
        self._busy.clear()
        self._last_session.clear()
        self._janitor.close()

    async def aclose(self) -> None:
        async with self._lock:
            for server in list(self._servers.values()):
                await self._stop(server)
            self._servers.clear()
            self._busy.clear()
        await asyncio.to_thread(self._janitor.close)
