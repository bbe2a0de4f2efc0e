"""``jarvis serve``: the HTTP server (managed agents, OpenAI- and Anthropic-compatible APIs).

The web framework is imported only here, when the command runs: ``jarvis ask`` never loads
it. Without the ``serve`` extra the command says how to install it (exit code 2).
"""

from __future__ import annotations

from typing import Annotated

import typer

from jarvis.entrypoints.cli.errors import guarded
from jarvis.entrypoints.cli.options import (
    BaseUrlOption,
    ConfigOption,
    EngineOption,
    ModelOption,
    VerboseOption,
)


def _require_framework() -> None:
    import importlib.util

    from jarvis.domain.errors import ConfigurationError

    missing = [n for n in ("uvicorn", "fastapi") if importlib.util.find_spec(n) is None]
    if missing:
        raise ConfigurationError(
            "jarvis serve needs " + " and ".join(missing) + ", which are not installed.",
            hint="Install them with: pip install 'jarvis[serve]'",
        )


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
            envvar="JARVIS_API_KEY",
            show_envvar=True,
            help="Key every request must send (Authorization: Bearer KEY or "
            "x-api-key); required beyond loopback.",
            show_default=False,
        ),
    ] = None,
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
        float, typer.Option("--max-body-mb", min=0.001, max=1024, help="Largest request body.")
    ] = 8.0,
    request_timeout: Annotated[
        float,
        typer.Option(
            "--request-timeout", min=1, max=86_400, help="Seconds a non-streamed request may take."
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
        from jarvis.entrypoints.http.server import check_bind
        from jarvis.entrypoints.settings import load_config

        server = load_config(config).server
        bind_host = server.host if host is None else host
        bind_port = server.port if port is None else port
        processes = server.workers if workers is None else workers
        origins = tuple(cors_origin) if cors_origin else server.cors_origins
        key = api_key or None
        check_bind(bind_host, key)
        _require_framework()
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
            verbose=verbose,
        )
        app = build_app(spec)  # in the workers too; here it checks the configuration first
        log_level = "info" if verbose else "warning"
        if processes == 1:
            run(app, host=bind_host, port=bind_port, log_level=log_level)
        else:
            run_workers(
                spec, host=bind_host, port=bind_port, workers=processes, log_level=log_level
            )

    raise typer.Exit(guarded(body, verbose=verbose))
