"""Tools from MCP servers: each server tool becomes an ordinary ``ToolPort``.

:class:`McpToolSource` holds the configured servers. A server starts when a run first asks
for one of its tools (``--tools fs`` for all of them, ``--tools fs.read_file`` for one),
all the servers a run needs start concurrently, and they stay up until :meth:`aclose`
(the end of ``jarvis ask``; the lifetime of the SDK instance, ``jarvis chat`` and
``jarvis serve``). The agents see plain tools: the executor validates their arguments
against the server's schema, bounds their time and output, emits their events and counts
them for the loop guard, as for any tool.

No fault of a server fails or hangs a run. A server that cannot start, crashes, sends
garbage or does not answer makes the call fail with a message the model sees, and writes
one line on stderr (through ``report``). A crashed server is started again by the next
call, at most ``max_restarts`` times per run (:meth:`McpToolSource.prepare` begins a run).

The name a model sees is ``<server>_<tool>`` made valid for every engine's function names
(``^[a-zA-Z0-9_-]{1,64}$``) and unique; each tool keeps its server and MCP name, so a
call maps back exactly.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from jarvis.application.mcp_config import McpServerEntry
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.json_types import JSONObject
from jarvis.domain.mcp import (
    McpCallResult,
    McpClientPort,
    McpContent,
    McpError,
    McpServerSpec,
    McpToolInfo,
)
from jarvis.domain.tools.specs import ToolResult, ToolSpec

McpClientFactory = Callable[[McpServerSpec], McpClientPort]
Report = Callable[[str], None]

MODEL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_NAME = 64
DESCRIPTION_BUDGET = 7000
"""Characters of tool descriptions one server may put in a prompt (about 1,750 tokens):
a server with many tools gets each described more briefly."""
MAX_DESCRIPTION = 400
MIN_DESCRIPTION = 40
CALL_MARGIN_SECONDS = 5.0
"""The executor's timeout is the server's call timeout plus this, so the client's own
timeout (which cancels the request and keeps the connection) fires first."""


def model_name(server: str, tool: str, taken: set[str]) -> str:
    """``server_tool`` as a valid, unused function name; a name that had to be changed or
    was taken gets a short hash of the exact pair, so two tools never share one. ``taken``
    holds lower-cased names: tools are looked up without regard to case."""
    raw = f"{server}_{tool}"
    clean = re.sub(r"[^a-zA-Z0-9_-]", "_", raw)[:MAX_NAME]
    if clean == raw and clean.lower() not in taken:
        return clean
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()
    for length in range(6, 17):
        suffix = "_" + digest[:length]
        candidate = clean[: MAX_NAME - len(suffix)] + suffix
        if candidate.lower() not in taken:
            return candidate
    raise McpError(f"No free name for MCP tool '{server}.{tool}'.", server=server)


def brief(description: str, limit: int) -> str:
    """``description`` on one line, cut at a sentence or word end to ``limit`` characters."""
    text = " ".join(description.split())
    if len(text) <= limit:
        return text
    cut = text[:limit]
    sentence = max(cut.rfind(". "), cut.rfind("? "), cut.rfind("! "))
    if sentence >= limit // 2:
        return cut[: sentence + 1]
    space = cut.rfind(" ")
    return (cut[:space] if space >= limit // 2 else cut[: limit - 1]).rstrip(" ,;:") + "…"


def describe_content(block: McpContent) -> str:
    """One result block as text for the model: binary blocks by type and size."""
    if block.kind == "text":
        return block.text
    if block.kind in ("image", "audio"):
        return f"[{block.kind}: {block.mime_type or 'unknown type'}, {block.size_bytes} bytes]"
    if block.kind == "resource":
        where = block.uri + (f" ({block.mime_type})" if block.mime_type else "")
        if block.text:
            return f"[resource {where}]\n{block.text}"
        return f"[resource {where}: {block.size_bytes} bytes]"
    return f"[resource link {block.uri}" + (f": {block.text}]" if block.text else "]")


def result_text(result: McpCallResult) -> str:
    """The text a model is shown: every block in order; the structured content when no
    block carries text (a server usually repeats it as text)."""
    parts = [describe_content(block) for block in result.content]
    has_text = any(block.kind == "text" and block.text for block in result.content)
    if result.structured is not None and not has_text:
        parts.append(json.dumps(result.structured, ensure_ascii=False, sort_keys=True))
    text = "\n".join(part for part in parts if part)
    return text or ("(the tool reported an error)" if result.is_error else "(no output)")


@dataclass(slots=True)
class McpServerState:
    """What ``jarvis mcp list`` shows of one server."""

    entry: McpServerEntry
    client: McpClientPort | None = None
    tools: tuple[McpToolInfo, ...] = ()
    error: str = ""
    restarts: int = 0
    started: bool = False
    ran: bool = False
    """It ran in this run (so a failure since is a crash, which a call may restart)."""
    loop: asyncio.AbstractEventLoop | None = None
    """The event loop its client was started on (a client serves that loop only)."""

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def state(self) -> str:
        if self.client is not None and self.client.running:
            return "running"
        if self.error:
            return "failed"
        return "stopped"

    @property
    def offered(self) -> tuple[McpToolInfo, ...]:
        return tuple(tool for tool in self.tools if self.entry.offers(tool.name))


class McpTool:
    """One tool of one MCP server, as a ``ToolPort``."""

    def __init__(self, source: McpToolSource, server: str, info: McpToolInfo, spec: ToolSpec):
        self._source = source
        self.server = server
        self.info = info
        self._spec = spec

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def execute(self, arguments: JSONObject) -> ToolResult:
        return await self._source.call(
            self.server, self.info.name, arguments, tool_name=self._spec.name
        )


class McpToolSource:
    """The configured MCP servers and their tools (see the module docstring)."""

    def __init__(
        self,
        entries: Iterable[McpServerEntry],
        factory: McpClientFactory,
        *,
        report: Report | None = None,
    ) -> None:
        self._servers = {entry.name: McpServerState(entry) for entry in entries}
        self._factory = factory
        self._report = report or (lambda _line: None)
        self._names: dict[tuple[str, str], str] = {}
        """(server, MCP tool name) → the name models see, fixed once given."""
        self._taken: set[str] = set()
        self._reserve_later: list[Callable[[], Iterable[str]]] = []
        self._locks: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[str, asyncio.Lock]
        ] = weakref.WeakKeyDictionary()

    # --- names ----------------------------------------------------------------------------

    def servers(self) -> list[str]:
        return sorted(self._servers)

    def owns(self, name: str) -> bool:
        """Whether ``name`` is a server (all its tools) or ``server.tool``."""
        return name.split(".", 1)[0] in self._servers

    def could_offer(self, tool: str) -> list[str]:
        """The servers whose configuration lets them offer a tool named ``tool`` (their
        enabled and disabled tools): the ones a bare tool name starts to look it up."""
        return [name for name in self.servers() if self._servers[name].entry.offers(tool)]

    def offering(self, tool: str) -> tuple[list[str], list[str]]:
        """Where the bare tool name ``tool`` is: the ``SERVER.TOOL`` of each server that
        listed and offers it, and the servers that could offer it but did not start (what
        they have is unknown). A server never started is in neither."""
        offered: list[str] = []
        down: list[str] = []
        for name in self.could_offer(tool):
            state = self._servers[name]
            if any(info.name == tool for info in state.tools):
                offered.append(f"{name}.{tool}")
            elif state.error and not state.tools:  # it failed to start: no list to look in
                down.append(name)
        return offered, down

    def reserve(self, names: Iterable[str]) -> None:
        """Names models can never be given for an MCP tool (the catalogue's own tools)."""
        self._taken.update(name.lower() for name in names)

    def reserve_later(self, names: Callable[[], Iterable[str]]) -> None:
        """Like :meth:`reserve`, for names listed only when the first MCP tool is named
        (the plug-ins' tools: listing them imports the plug-in modules)."""
        self._reserve_later.append(names)

    def _model_name(self, server: str, tool: str) -> str:
        while self._reserve_later:
            self.reserve(self._reserve_later.pop()())
        key = (server, tool)
        if key not in self._names:
            if tool:
                name = model_name(server, tool, self._taken)
            else:  # the stand-in of a server that did not start
                free = server.lower() not in self._taken
                name = server if free else model_name(server, "", self._taken)
            self._names[key] = name
            self._taken.add(name.lower())
        return self._names[key]

    # --- lifecycle ------------------------------------------------------------------------

    async def prepare(
        self, names: Sequence[str], *, bare: Sequence[str] = (), report: bool = True
    ) -> None:
        """Begin a run that asks for ``names``: start the servers they need that are not
        running, concurrently, and give each its restarts again. A server that fails to
        start is reported (one line) and its tools fail when called. ``bare``: tool names
        without a server, which every server that could offer them is started to look up
        (:meth:`offering`). ``report=False``: a failure is kept in the server's state only
        (a caller that shows every state says it there)."""
        wanted = {name.split(".", 1)[0] for name in names if self.owns(name)}
        wanted.update(server for tool in bare for server in self.could_offer(tool))
        for server in wanted:
            self._servers[server].restarts = 0
            self._servers[server].ran = self._running(self._servers[server])
        if wanted:
            starts = (self._ensure(self._servers[s], report) for s in sorted(wanted))
            await asyncio.gather(*starts)

    async def _ensure(self, state: McpServerState, report: bool) -> None:
        """Start ``state``'s server unless it runs: once, however many runs ask at once."""
        async with self._lock_for(state.name):
            if not self._running(state):
                await self._start(state, report=report)

    def _lock_for(self, server: str) -> asyncio.Lock:
        """One lock per server and event loop (an asyncio lock belongs to one loop)."""
        loop = asyncio.get_running_loop()
        locks = self._locks.get(loop)
        if locks is None:
            locks = self._locks[loop] = {}
        return locks.setdefault(server, asyncio.Lock())

    def _running(self, state: McpServerState) -> bool:
        """Running for this event loop: a client started on another loop (the SDK's
        synchronous calls run on a loop of their own) is stopped and started again here."""
        if state.client is None:
            return False
        if state.loop is not asyncio.get_running_loop():
            state.client.close_now()
            state.client = None
            return False
        return state.client.running

    async def _start(self, state: McpServerState, *, report: bool = True) -> bool:
        """Start (or restart) one server; ``False`` with its error set when it cannot."""
        if state.client is not None:
            if state.loop is asyncio.get_running_loop():
                await state.client.aclose()
            else:
                state.client.close_now()
        state.client = self._factory(state.entry.spec)
        state.loop = asyncio.get_running_loop()
        state.started = True
        try:
            state.tools = await state.client.start()
        except McpError as exc:
            state.error = _one_line(exc)
            if report:
                self._report(state.error)
            await state.client.aclose()
            return False
        except Exception as exc:  # a fault of a server never fails the run
            state.error = f"MCP server '{state.name}' could not start: {type(exc).__name__}: {exc}"
            if report:
                self._report(state.error)
            await state.client.aclose()
            return False
        state.error = ""
        state.ran = True
        return True

    async def aclose(self) -> None:
        """Stop every server (concurrently; those of another event loop at once, by
        signal); idempotent."""
        loop = asyncio.get_running_loop()
        clients: list[McpClientPort] = []
        for state in self._servers.values():
            if state.client is not None:
                if state.loop is loop:
                    clients.append(state.client)
                else:
                    state.client.close_now()
            state.client = None
        if clients:
            await asyncio.gather(*(client.aclose() for client in clients))

    def close_now(self, *, closed_loops_only: bool = False) -> None:
        """Kill every server's processes at once, without a loop (``closed_loops_only``:
        only those whose event loop is closed, their connections gone with it)."""
        for state in self._servers.values():
            if state.client is None:
                continue
            if closed_loops_only and state.loop is not None and not state.loop.is_closed():
                continue
            state.client.close_now()
            state.client = None

    # --- tools ----------------------------------------------------------------------------

    def build(self, names: Sequence[str]) -> list[McpTool]:
        """The tools for ``names`` (servers and ``server.tool``), after :meth:`prepare`.

        A server that could not start gives one tool per name that fails with why when
        called (``server.tool``: that tool; a whole server: one tool named after it)."""
        tools: list[McpTool] = []
        seen: set[tuple[str, str]] = set()
        for name in names:
            server, _, tool = name.partition(".")
            state = self._servers[server]
            if tool and state.tools:
                infos = [i for i in state.tools if i.name == tool and state.entry.offers(tool)]
                if not infos:
                    raise ConfigurationError(
                        f"MCP server '{server}' offers no tool '{tool}'.",
                        hint="Its tools: " + ", ".join(i.name for i in state.offered),
                    )
            elif tool:
                infos = [McpToolInfo(name=tool)]
            elif state.tools:
                infos = list(state.offered)
            else:
                infos = [McpToolInfo(name="", description="")]
            for info in infos:
                if (server, info.name) in seen:
                    continue
                seen.add((server, info.name))
                tools.append(self._tool(state, info, len(state.offered) or 1))
        return tools

    def _tool(self, state: McpServerState, info: McpToolInfo, count: int) -> McpTool:
        server = state.name
        limit = max(MIN_DESCRIPTION, min(MAX_DESCRIPTION, DESCRIPTION_BUDGET // count))
        if info.name:
            name = self._model_name(server, info.name)
            description = brief(info.description or info.title or info.name, limit)
        else:  # the server did not start: one stand-in that says why when called
            name = self._model_name(server, "")
            description = f"Tools of the MCP server {server} (it is not available)."
        spec = ToolSpec(
            name=name,
            description=description,
            parameters=info.input_schema,
            category=f"mcp:{server}",
            timeout_seconds=state.entry.spec.timeout + CALL_MARGIN_SECONDS,
            side_effects=info.read_only is not True,
            read_only_hint=info.read_only,
            destructive_hint=info.destructive,
            qualified_name=f"{server}.{info.name}" if info.name else "",
        )
        return McpTool(self, server, info, spec)

    async def call(
        self, server: str, tool: str, arguments: JSONObject, *, tool_name: str = ""
    ) -> ToolResult:
        """Run ``tool`` of ``server``, (re)starting the server when it is down and has
        restarts left; every fault comes back as a failed result (and one stderr line)."""
        shown = tool_name or f"{server}.{tool}"
        state = self._servers.get(server)
        if state is None:
            return self._failed(shown, f"No MCP server named '{server}' is configured.")
        if not tool:
            return self._failed(
                shown, f"MCP server '{server}' is not available: {state.error or 'not started'}."
            )
        if not self._running(state):
            async with self._lock_for(server):
                if not self._running(state):
                    if state.started and not state.ran:  # it failed to start in this run
                        return self._failed(
                            shown, f"MCP server '{server}' is not available: {state.error}"
                        )
                    if state.started and state.restarts >= state.entry.max_restarts:
                        return self._failed(
                            shown,
                            f"MCP server '{server}' is down ({state.error or 'it stopped'}) "
                            f"and was restarted {state.restarts} times in this run already.",
                        )
                    if state.started:
                        state.restarts += 1
                    if not await self._start(state):
                        return self._failed(
                            shown, f"MCP server '{server}' is not available: {state.error}"
                        )
        if state.tools and not any(info.name == tool for info in state.tools):
            return self._failed(shown, f"MCP server '{server}' has no tool '{tool}'.")
        if not state.entry.offers(tool):
            return self._failed(shown, f"Tool '{tool}' of MCP server '{server}' is disabled.")
        client = state.client
        assert client is not None
        try:
            result = await client.call_tool(tool, arguments, timeout=state.entry.spec.timeout)
        except McpError as exc:
            message = _one_line(exc)
            if not client.running:
                state.error = message
            self._report(f"MCP tool {server}.{tool} failed: {message}")
            return self._failed(shown, message)
        metadata: JSONObject = {"mcp_server": server, "mcp_tool": tool}
        if result.structured is not None:
            metadata["structured"] = result.structured
        return ToolResult(
            tool_name=shown,
            content=result_text(result),
            success=not result.is_error,
            metadata=metadata,
        )

    @staticmethod
    def _failed(tool_name: str, message: str) -> ToolResult:
        return ToolResult(tool_name=tool_name, content=f"Error: {message}", success=False)

    # --- listing --------------------------------------------------------------------------

    async def states(self, *, start: bool, report: bool = True) -> list[McpServerState]:
        """Every server's state; with ``start``, the stopped ones are started first (a
        failure reported unless ``report`` is false: see :meth:`prepare`)."""
        if start:
            await self.prepare(self.servers(), report=report)
        return [self._servers[name] for name in self.servers()]

    def spec_of(self, server: str, info: McpToolInfo) -> ToolSpec:
        """The spec a model would be given for ``info`` of ``server``."""
        state = self._servers[server]
        return self._tool(state, info, len(state.offered) or 1).spec


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    return " ".join(text.split())[:600]
