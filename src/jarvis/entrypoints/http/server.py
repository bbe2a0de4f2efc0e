"""Running the application on uvicorn: bind rules, and a server in a thread.

Safe by default: the server binds ``127.0.0.1``; any other address needs an API key, and
without one :func:`check_bind` refuses to start. Access logs are uvicorn's (method, path,
status; never headers, so never a key), written with ``--verbose`` only.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Literal, TypedDict

import uvicorn

from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.closing import CloseOnExit
from jarvis.entrypoints.http.collector import pace_for_serving
from jarvis.entrypoints.http.protocol import JarvisHttpProtocol
from jarvis.entrypoints.http.security import App
from jarvis.entrypoints.http.termination import exit_handlers_before_sigterm

STARTUP_TIMEOUT = 30.0


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


KEY_SOURCES = "set JARVIS_API_KEY (or OPENJARVIS_API_KEY) or pass --api-key-file FILE"
"""Where a listener's API key can come from, for the hint."""


def check_bind(host: str, api_key: str | None, *, key_sources: str = KEY_SOURCES) -> None:
    """Refuse to listen beyond this machine without an API key (``key_sources``: where the
    command can take one from, for the hint)."""
    if not is_loopback(host) and not api_key:
        raise ConfigurationError(
            f"Refusing to listen on {host} without an API key: anyone who can reach it "
            "could run agents and tools on this machine.",
            hint=f"{key_sources[:1].upper()}{key_sources[1:]}, or bind 127.0.0.1.",
        )
    if api_key is not None and len(api_key) < 16:
        raise ConfigurationError(
            "The API key is too short (at least 16 characters).",
            hint="Generate one: python -c 'import secrets; print(secrets.token_urlsafe(32))'",
        )


class UvicornOptions(TypedDict):
    """The keywords :func:`uvicorn_options` passes to uvicorn, typed as uvicorn takes them."""

    log_level: str
    access_log: bool
    lifespan: Literal["auto", "on", "off"]
    http: type[asyncio.Protocol]
    proxy_headers: bool
    server_header: bool
    timeout_keep_alive: int


def uvicorn_options(log_level: str) -> UvicornOptions:
    """The settings every ``jarvis serve`` uvicorn runs with, one process or several."""
    return {
        "log_level": log_level,
        # one line per request only when it is shown (``--verbose``): formatting it costs
        # more than routing the request
        "access_log": log_level in ("info", "debug", "trace"),
        "lifespan": "off",
        # each response in one write; a deadline on headers, bounds on their size and count
        # (uvicorn's h11_max_incomplete_event_size applies to its h11 parser, not this one)
        "http": JarvisHttpProtocol,
        "proxy_headers": False,
        "server_header": False,
        "timeout_keep_alive": 5,
    }


def uvicorn_config(app: App, *, host: str, port: int, log_level: str = "info") -> uvicorn.Config:
    return uvicorn.Config(app, host=host, port=port, **uvicorn_options(log_level))


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


class ServerThread(CloseOnExit):
    """``with ServerThread(app) as address:`` serves on a free loopback port (or ``port``)
    in a thread of its own, returning only once the server listens; leaving the block
    stops it. For tests, benchmarks and applications embedding the server."""

    def __init__(
        self, app: App, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"
    ) -> None:
        self.server = uvicorn.Server(uvicorn_config(app, host=host, port=port, log_level=log_level))
        self.thread = threading.Thread(target=self.server.run, name="jarvis-serve", daemon=True)
        self.host = host

    def __enter__(self) -> Address:
        self.thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not self.server.started:  # uvicorn sets it once it listens
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.server.should_exit = True
                raise RuntimeError("The server did not start.")
            time.sleep(0.005)
        sockets = [s for server in self.server.servers for s in server.sockets]
        port = int(sockets[0].getsockname()[1])
        return Address(self.host, port)

    def close(self) -> None:
        """Stop serving, and wait (bounded) for the thread to end."""
        self.server.should_exit = True
        self.thread.join(STARTUP_TIMEOUT)


def listening_url(host: str, sock: socket.socket) -> str:
    """The URL of the TCP socket ``sock`` bound for ``host``, with the port it really has
    (the one the system chose for ``--port 0``)."""
    port = int(sock.getsockname()[1])
    return f"http://[{host.strip('[]')}]:{port}" if ":" in host else f"http://{host}:{port}"


class _AnnouncingServer(uvicorn.Server):
    """Says where it serves once it listens, not before: with ``--port 0`` the port in the
    line is the one the system chose, so whoever started the server (a script, a test)
    reads it there instead of guessing a free port that someone else may take first."""

    def __init__(self, config: uvicorn.Config, host: str) -> None:
        super().__init__(config)
        self._host = host

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        listeners = [sock for server in self.servers for sock in server.sockets]
        if self.started and listeners:
            url = listening_url(self._host, listeners[0])
            sys.stderr.write(f"jarvis: serving on {url} (Ctrl-C to stop)\n")
            sys.stderr.flush()


def run(
    app: App, *, host: str, port: int, log_level: str = "warning", unix: str | None = None
) -> None:
    """Serve ``app`` until interrupted (Ctrl-C or SIGTERM end it cleanly); on the Unix
    socket ``unix`` (mode 0600) instead of ``host:port`` when given. Once it listens, it
    says where on stderr (``jarvis: serving on http://HOST:PORT``)."""
    config = uvicorn_config(app, host=host, port=port, log_level=log_level)
    pace_for_serving()  # this process serves and nothing else
    if unix is not None:
        from pathlib import Path

        from jarvis.entrypoints.http.unix_socket import owner_only_socket

        sock = owner_only_socket(Path(unix))
        sys.stderr.write(f"jarvis: serving on unix:{unix} (Ctrl-C to stop)\n")
        try:
            with exit_handlers_before_sigterm():
                uvicorn.Server(config).run(sockets=[sock])
        finally:
            sock.close()
            Path(unix).unlink(missing_ok=True)
        return
    server = _AnnouncingServer(config, host)
    try:
        with exit_handlers_before_sigterm():
            server.run()
    except SystemExit as exc:  # uvicorn exits (status 3) when it cannot bind
        if exc.code not in (0, None) and not server.started:
            raise _cannot_listen(host, port) from None
        raise  # (or a SIGTERM, once served: see exit_handlers_before_sigterm)
    if not server.started:
        raise _cannot_listen(host, port)


def _cannot_listen(host: str, port: int) -> ConfigurationError:
    """Exit 2, with what to do, where uvicorn would exit 3 (the code of an unreachable
    engine)."""
    return ConfigurationError(
        f"Could not listen on {host}:{port}.",
        hint="Is another server using that port? Choose one with --port.",
    )


def run_factory(factory: str, *, host: str, port: int, workers: int, log_level: str) -> None:
    """Serve with ``workers`` processes until interrupted: uvicorn's supervisor starts them,
    and each calls ``factory`` (``"module:function"``) for its application. The supervisor
    binds the socket the workers share (as ``uvicorn.run`` does), then says where it
    serves, with the port the system chose for ``--port 0``."""
    from uvicorn.supervisors import Multiprocess

    options = uvicorn_options(log_level)
    # a worker ends by the SIGTERM uvicorn raises again, before Python's exit handlers:
    # what must be done before (the traces' last batch) is done at the lifespan's end
    options["lifespan"] = "on"
    config = uvicorn.Config(factory, factory=True, host=host, port=port, workers=workers, **options)
    try:
        sock = config.bind_socket()
        sock.listen(config.backlog)  # connections wait for the first worker, not refused
        url = listening_url(host, sock)
        sys.stderr.write(f"jarvis: serving on {url} with {workers} workers (Ctrl-C to stop)\n")
        sys.stderr.flush()
        try:
            Multiprocess(config, sockets=[sock]).run()
        except KeyboardInterrupt:
            pass
        finally:
            sock.close()
    except SystemExit as exc:  # uvicorn exits when it cannot bind
        if exc.code not in (0, None):
            raise _cannot_listen(host, port) from None
