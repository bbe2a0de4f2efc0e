"""``jarvis serve``: the HTTP server (managed agents, OpenAI- and Anthropic-compatible APIs).

The web framework is imported only here, when the command runs: ``jarvis ask`` never loads
it. Without the ``serve`` extra the command says how to install it (exit code 2).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from jarvis.domain.errors import ConfigurationError
from jarvis.entrypoints.cli.errors import guarded
from jarvis.entrypoints.cli.listener_options import (
    AllowedHostOption,
    AllowedOriginOption,
    AllowOptionOption,
    AllowUserOption,
    ApiKeyFileOption,
    EnableRuntimeOption,
)
from jarvis.entrypoints.cli.options import (
    BaseUrlOption,
    ConfigOption,
    EngineOption,
    ModelOption,
    VerboseOption,
)
from jarvis.entrypoints.http.guarded_options import GUARDED_OPTIONS, HOST_RUNTIMES


def _require_framework() -> None:
    """Import the web framework, or say how to install it (exit 2): a package that is
    missing, or present but failing to import, is the same missing extra."""
    import importlib

    missing = []
    for name in ("uvicorn", "fastapi"):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise ConfigurationError(
            "jarvis serve needs " + " and ".join(missing) + ", which are not installed "
            "(or do not import).",
            hint="Install them with: pip install 'jarvis[serve]'",
        )


def _finite(value: float) -> float:
    """A float option's value when it is a finite number: NaN passes click's range check
    (it compares false with both ends), so every float option of serve goes through here."""
    if not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number.")
    return value


def serve(
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            help="Address to listen on; anything but loopback needs an API key "
            "(default: [server] host, else 127.0.0.1).",
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            "-p",
            min=0,
            max=65535,
            help="Port (default: [server] port, else 8000).",
            show_default=False,
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            help="Key every request must send (Authorization: Bearer KEY or x-api-key); "
            "required beyond loopback. Visible to other users in /proc: prefer the "
            "JARVIS_API_KEY (or OPENJARVIS_API_KEY) variable, --api-key-file or [server.auth] "
            "api_key in a private config file.",
            show_default=False,
        ),
    ] = None,
    api_key_file: ApiKeyFileOption = None,
    allowed_host: AllowedHostOption = None,
    allowed_origin: AllowedOriginOption = None,
    allow_user: AllowUserOption = None,
    allow_option: AllowOptionOption = None,
    enable_runtime: EnableRuntimeOption = None,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--cors-origin",
            help="Allow browser requests from this origin (repeatable; default: [server] "
            "cors_origins; CORS is off without either).",
            show_default=False,
        ),
    ] = None,
    max_body_mb: Annotated[
        float,
        typer.Option(
            "--max-body-mb",
            min=0.001,
            max=1024,
            callback=_finite,
            help="Largest request body.",
        ),
    ] = 8.0,
    request_timeout: Annotated[
        float,
        typer.Option(
            "--request-timeout",
            min=1,
            max=86_400,
            callback=_finite,
            help="Seconds a non-streamed request may take.",
        ),
    ] = 600.0,
    max_output_tokens: Annotated[
        int,
        typer.Option(
            "--max-output-tokens",
            min=1,
            max=1 << 20,
            help="Cap on the tokens the compatible endpoints ask for.",
        ),
    ] = 8192,
    unix: Annotated[
        Path | None,
        typer.Option(
            "--unix",
            help="Listen on this Unix socket (mode 0600: only your user can connect) "
            "instead of --host/--port.",
            show_default=False,
        ),
    ] = None,
    max_agents: Annotated[
        int,
        typer.Option(
            "--max-agents", min=1, max=1_000_000, help="Most managed agents the store may hold."
        ),
    ] = 1000,
    max_queued_messages: Annotated[
        int,
        typer.Option(
            "--max-queued-messages",
            min=1,
            max=100_000,
            help="Most messages one managed agent may have waiting for a run.",
        ),
    ] = 100,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            max=64,
            help="Server processes sharing the port (managed agents and conversations are "
            "shared through the session store; default: [server] workers, else 1).",
            show_default=False,
        ),
    ] = None,
    engine: EngineOption = None,
    base_url: BaseUrlOption = None,
    model: ModelOption = None,
    config: ConfigOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Serve jarvis agents over HTTP: /v1/managed-agents (SSE), /v1/chat/completions,
    /v1/models, /v1/messages. Binds 127.0.0.1:8000 unless told otherwise."""

    def body() -> None:
        _require_framework()  # first: the server module imports uvicorn
        from jarvis.entrypoints.cli import serve_access as access
        from jarvis.entrypoints.http.server import KEY_SOURCES, check_bind
        from jarvis.entrypoints.settings import read_config

        loaded = read_config(config)
        server = loaded.config.server
        bind_host = server.host if host is None else host
        bind_port = server.port if port is None else port
        processes = server.workers if workers is None else workers
        origins = tuple(cors_origin) if cors_origin else server.cors_origins
        config_key = access.ConfigKey(server.auth.api_key, loaded.file)
        key = access.api_key_from(api_key, api_key_file, config_key=config_key)
        access.check_unix(unix, processes)
        check_bind(
            bind_host,
            key,
            key_sources=f"{KEY_SOURCES}, or set [server.auth] api_key in the config file "
            "(chmod 600)",
        )
        access.check_owner_only(key)
        from jarvis.entrypoints.cli.serve_launch import ServeSpec, build_app, run_workers
        from jarvis.entrypoints.http.server import run

        spec = ServeSpec(
            config=None if config is None else str(config),
            engine=engine,
            base_url=base_url,
            model=model,
            api_key=key,
            cors_origins=origins,
            max_body_bytes=int(max_body_mb * 1024 * 1024),
            request_timeout=request_timeout,
            max_output_tokens=max_output_tokens,
            max_agents=max_agents,
            max_queued_messages=max_queued_messages,
            verbose=verbose,
            allowed_hosts=tuple(allowed_host or ()),
            allowed_origins=tuple(allowed_origin or ()),
            allowed_uids=access.user_ids(allow_user or ()),
            allowed_options=access.checked_names(
                allow_option or (), GUARDED_OPTIONS, "--allow-option"
            ),
            enabled_runtimes=access.checked_names(
                enable_runtime or (), HOST_RUNTIMES, "--enable-runtime"
            ),
        )
        app = build_app(spec)  # in the workers too; here it checks the configuration first
        log_level = "info" if verbose else "warning"
        if processes == 1:
            run(
                app,
                host=bind_host,
                port=bind_port,
                log_level=log_level,
                unix=access.unix_path(unix),
            )
        else:
            run_workers(
                spec, host=bind_host, port=bind_port, workers=processes, log_level=log_level
            )

    raise typer.Exit(guarded(body, verbose=verbose))
