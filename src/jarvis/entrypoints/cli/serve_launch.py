"""What ``jarvis serve`` was asked for, and the application built from it, in one process or
in each of ``--workers N`` processes.

With one worker the application is built and served in the command's own process. With
more, uvicorn's supervisor starts ``N`` processes sharing the listening socket; each builds
its own application through :func:`app_from_environment`, from the :class:`ServeSpec` the
command leaves in the ``JARVIS_SERVE_SPEC`` variable of its environment (which the workers
inherit, and which only the same user and root may read, like ``JARVIS_API_KEY``). What the
workers share lives in the stores: managed agents and conversations in the SQLite file or on
the PostgreSQL server. What is per process: ``active_runs`` in ``/health`` (the answering
worker's), the engine's model list, and the connections to the engine.

The workers end with their supervisor, however it ends: on Linux each asks the kernel for
``SIGTERM`` when its parent dies (``prctl(PR_SET_PDEATHSIG)``), then checks that its parent
is still the supervisor (one killed before the request was made is not signalled), so a
``kill -9`` of ``jarvis serve`` does not leave workers serving its port. ``SIGTERM`` ends
a worker as Ctrl-C does: it stops listening, and its runs stop and store what they completed.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jarvis.entrypoints.http.security import App

SPEC_VARIABLE = "JARVIS_SERVE_SPEC"
SUPERVISOR_VARIABLE = "JARVIS_SERVE_SUPERVISOR"
"""The supervisor's process id, which its workers check their parent against."""
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeSpec:
    """The options of ``jarvis serve`` that shape the application (not where it listens)."""

    config: str | None = None
    engine: str | None = None
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = 8 * 1024 * 1024
    request_timeout: float = 600.0
    max_output_tokens: int = 8192
    max_agents: int = 1000
    max_queued_messages: int = 100
    verbose: bool = False
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    allowed_uids: tuple[int, ...] = ()
    allowed_options: tuple[str, ...] = ()
    enabled_runtimes: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeSpec:
        data = json.loads(text)
        for name in _TUPLES:
            data[name] = tuple(data.get(name) or ())
        return cls(**data)


_TUPLES = (
    "cors_origins",
    "allowed_hosts",
    "allowed_origins",
    "allowed_uids",
    "allowed_options",
    "enabled_runtimes",
)


def build_app(spec: ServeSpec) -> App:
    """The application ``spec`` describes, over the configured engine and stores."""
    from pathlib import Path

    from jarvis.entrypoints.cli.options import stderr_line
    from jarvis.entrypoints.composition import bootstrap
    from jarvis.entrypoints.composition.serving import server_state
    from jarvis.entrypoints.http.app import create_app
    from jarvis.entrypoints.http.listener_guard import ListenerPolicy
    from jarvis.entrypoints.http.run_policy import RunPolicy
    from jarvis.entrypoints.http.state import ServeLimits
    from jarvis.entrypoints.settings import EngineOverrides, load_config

    loaded = load_config(
        None if spec.config is None else Path(spec.config),
        overrides=EngineOverrides(engine=spec.engine, base_url=spec.base_url, model=spec.model),
    )
    runtime = bootstrap(loaded, notice=stderr_line if spec.verbose else None)
    limits = ServeLimits(
        max_body_bytes=spec.max_body_bytes,
        request_timeout=spec.request_timeout,
        max_output_tokens=spec.max_output_tokens,
        max_agents=spec.max_agents,
        max_queued_messages=spec.max_queued_messages,
    )
    state = server_state(runtime, limits=limits)
    state.policy = RunPolicy.of(options=spec.allowed_options, runtimes=spec.enabled_runtimes)
    listener = ListenerPolicy.of(
        allowed_hosts=spec.allowed_hosts,
        allowed_origins=spec.allowed_origins,
        allowed_uids=spec.allowed_uids,
    )

    def write_pending_traces() -> None:  # the last batch, before a worker's process ends
        writer = runtime.trace_writer()
        if writer is not None:
            writer.flush()

    return create_app(
        state,
        api_key=spec.api_key,
        cors_origins=spec.cors_origins,
        listener=listener,
        at_shutdown=write_pending_traces,
    )


def app_from_environment() -> App:
    """The application of one worker process (uvicorn's factory for ``--workers``).

    The variable is taken out of the worker's environment as it is read, so that nothing
    the worker starts (a tool's process) inherits the API key it may hold."""
    text = os.environ.pop(SPEC_VARIABLE, None)
    supervisor = os.environ.pop(SUPERVISOR_VARIABLE, None)
    if not text:
        raise RuntimeError(f"{SPEC_VARIABLE} is not set: start workers with jarvis serve.")
    if supervisor is not None:
        end_with_parent(int(supervisor))
    from jarvis.entrypoints.http.collector import pace_for_serving

    pace_for_serving()  # a worker process serves and nothing else
    return build_app(ServeSpec.from_json(text))


def end_with_parent(supervisor: int) -> None:
    """Have the kernel send this process ``SIGTERM`` when its parent dies, then end at once
    if the parent is no longer ``supervisor`` (it died before the request took effect).
    Elsewhere than on Linux only the check is made."""
    import signal
    import sys

    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != supervisor:
        os._exit(0)  # the supervisor is gone: nothing to serve for


def run_workers(
    spec: ServeSpec, *, host: str, port: int, workers: int, log_level: str = "warning"
) -> None:
    """Serve with ``workers`` processes (uvicorn's supervisor; each builds its application
    from ``spec``, see :func:`app_from_environment`) until interrupted."""
    import os

    from jarvis.entrypoints.http.server import run_factory

    os.environ[SPEC_VARIABLE] = spec.to_json()
    os.environ[SUPERVISOR_VARIABLE] = str(os.getpid())
    try:
        run_factory(
            "jarvis.entrypoints.cli.serve_launch:app_from_environment",
            host=host,
            port=port,
            workers=workers,
            log_level=log_level,
        )
    finally:
        os.environ.pop(SPEC_VARIABLE, None)
        os.environ.pop(SUPERVISOR_VARIABLE, None)
