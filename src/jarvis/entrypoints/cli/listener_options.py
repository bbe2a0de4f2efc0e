"""The options of jarvis's HTTP listeners (``jarvis serve``, ``jarvis mcp serve --http``):
who may connect and what a client may ask for. One definition, so both commands take the
same flags with the same meaning (see the README's "jarvis serve: who may use it")."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jarvis.entrypoints.http.guarded_options import GUARDED_OPTIONS, HOST_RUNTIMES

ApiKeyFileOption = Annotated[
    Path | None,
    typer.Option(
        "--api-key-file",
        help="Read the API key from this file (only its owner may read it: chmod 600); or "
        "set JARVIS_API_KEY (or OPENJARVIS_API_KEY). Without a key only your own user is "
        "served.",
        show_default=False,
    ),
]
AllowedHostOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allowed-host",
        help="Also answer to this Host name (repeatable; by default only the bound address, "
        "localhost, 127.0.0.1 and [::1] with the port).",
        show_default=False,
    ),
]
AllowedOriginOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allowed-origin",
        help="Accept requests that change something from this browser origin (repeatable; "
        "by default only the server's own).",
        show_default=False,
    ),
]
AllowUserOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-user",
        help="Without an API key, also serve this local user (name or uid; repeatable). By "
        "default only the user running the server.",
        show_default=False,
    ),
]
AllowOptionOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-option",
        help="Let clients set this agent option (repeatable): "
        + ", ".join(sorted(GUARDED_OPTIONS))
        + ".",
        show_default=False,
    ),
]
EnableRuntimeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--enable-runtime",
        help="Offer this external runtime to clients (repeatable): "
        + ", ".join(sorted(HOST_RUNTIMES))
        + ". They run the model's commands on this machine.",
        show_default=False,
    ),
]
