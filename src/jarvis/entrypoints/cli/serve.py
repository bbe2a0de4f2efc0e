"""``jarvis serve``: the HTTP server (managed agents, OpenAI- and Anthropic-compatible APIs).

The web framework is imported only here, when the command runs: ``jarvis ask`` never loads
it. Without the ``serve`` extra the command says how to install it (exit code 2).
"""

from __future__ import annotations

from pathlib import Path
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
from jarvis.entrypoints.http.guarded_options import GUARDED_OPTIONS, HOST_RUNTIMES


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
        str,
        typer.Option(
            "--host", help="Address to listen on; anything but loopback needs an API key."
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535)] = 8000,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            help="Key every request must send (Authorization: Bearer KEY or x-api-key); "
            "required beyond loopback. Visible to other users in /proc: prefer the "
            "JARVIS_API_KEY variable or --api-key-file.",
            show_default=False,
        ),
    ] = None,
    api_key_file: Annotated[
        Path | None,
        typer.Option(
            "--api-key-file",
            help="Read the API key from this file (only its owner may read it: chmod 600).",
            show_default=False,
        ),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="Also answer to this Host name (repeatable; by default only the bound "
            "address, localhost, 127.0.0.1 and [::1] with the port).",
            show_default=False,
        ),
    ] = None,
    allowed_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-origin",
            help="Accept requests that change something from this browser origin "
            "(repeatable; by default only the server's own).",
            show_default=False,
        ),
    ] = None,
    allow_user: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-user",
            help="Without an API key, also serve this local user (name or uid; "
            "repeatable). By default only the user running the server.",
            show_default=False,
        ),
    ] = None,
    allow_option: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-option",
            help="Let HTTP clients set this agent option (repeatable): "
            + ", ".join(sorted(GUARDED_OPTIONS))
            + ".",
            show_default=False,
        ),
    ] = None,
    enable_runtime: Annotated[
        list[str] | None,
        typer.Option(
            "--enable-runtime",
            help="Offer this external runtime over HTTP (repeatable): "
            + ", ".join(sorted(HOST_RUNTIMES))
            + ". They run the model's commands on this machine.",
            show_default=False,
        ),
    ] = None,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--cors-origin",
            help="Allow browser requests from this origin (repeatable; CORS is off without it).",
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
    unix: Annotated[
        Path | None,
        typer.Option(
            "--unix",
            help="Listen on this Unix socket (mode 0600: only your user can connect) "
            "instead of --host/--port.",
            show_default=False,
        ),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            max=64,
            help="Server processes sharing the port (managed agents and conversations are "
            "shared through the session store).",
        ),
    ] = 1,
    engine: EngineOption = None,
    base_url: BaseUrlOption = None,
    model: ModelOption = None,
    config: ConfigOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Serve jarvis agents over HTTP: /v1/managed-agents (SSE), /v1/chat/completions,
    /v1/models, /v1/messages. Binds 127.0.0.1:8000 unless told otherwise."""

    def body() -> None:
        from jarvis.entrypoints.cli import serve_access as access
        from jarvis.entrypoints.http.server import check_bind

        key = access.api_key_from(api_key, api_key_file)
        access.check_unix(unix, workers)
        check_bind(host, key)
        access.check_owner_only(key)
        _require_framework()
        from jarvis.entrypoints.cli.serve_launch import ServeSpec, build_app, run_workers
        from jarvis.entrypoints.http.server import run

        spec = ServeSpec(
            config=None if config is None else str(config),
            engine=engine,
            base_url=base_url,
            model=model,
            api_key=key,
            cors_origins=tuple(cors_origin or ()),
            max_body_bytes=int(max_body_mb * 1024 * 1024),
            request_timeout=request_timeout,
            max_output_tokens=max_output_tokens,
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
        if workers == 1:
            run(app, host=host, port=port, log_level=log_level, unix=access.unix_path(unix))
        else:
            run_workers(spec, host=host, port=port, workers=workers, log_level=log_level)

    raise typer.Exit(guarded(body, verbose=verbose))
