"""``jarvis sandbox build`` and ``jarvis sandbox status``: the container sandbox.

``build`` builds the sandbox image from what is installed here (Python, jarvis and its
dependencies; no registry), its progress on stderr, and prints the image's reference.
``status`` says which runtime, socket and image are in use and whether the image is
present; exit code 6 when there is no runtime or it does not answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from jarvis.entrypoints.cli.errors import EXIT_SANDBOX_UNAVAILABLE, guarded, write_stderr
from jarvis.entrypoints.cli.options import ConfigOption, JsonOption

if TYPE_CHECKING:
    from pathlib import Path

    from jarvis.domain.ports import ContainerPort

app = typer.Typer(
    help="The container sandbox of the sandboxed agent (Docker or Podman).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def _runtime(ctx: typer.Context, config: Path | None) -> ContainerPort:
    from jarvis.entrypoints.bootstrap import bootstrap
    from jarvis.entrypoints.settings import load_config

    return bootstrap(load_config(config), container=ctx.obj).container.container_runtime()


@app.command("build")
def build(ctx: typer.Context, config: ConfigOption = None) -> None:
    """Build the sandbox image (if missing or stale) and print its reference."""

    def body() -> None:
        import asyncio

        runtime = _runtime(ctx, config)

        def progress(line: str) -> None:
            write_stderr(f"jarvis: {line}\n")

        reference = asyncio.run(runtime.ensure_image(progress))
        typer.echo(reference)

    code = guarded(body, verbose=False)
    if code:
        raise typer.Exit(code)


@app.command("status")
def status(
    ctx: typer.Context, config: ConfigOption = None, json_output: JsonOption = False
) -> None:
    """Which runtime, socket and image are in use; exit code 6 when unavailable."""
    outcome = {"code": 0}

    def body() -> None:
        import asyncio
        import json

        found = asyncio.run(_runtime(ctx, config).status())
        if json_output:
            typer.echo(
                json.dumps(
                    {
                        "runtime": found.runtime,
                        "endpoint": found.endpoint,
                        "available": found.available,
                        "version": found.version,
                        "image": found.image,
                        "image_present": found.image_present,
                        "detail": found.detail,
                    }
                )
            )
        else:
            typer.echo(f"runtime: {found.runtime}{' ' + found.version if found.version else ''}")
            typer.echo(f"socket:  {found.endpoint or '(none found)'}")
            if found.available:
                present = "present" if found.image_present else "missing (jarvis sandbox build)"
                typer.echo(f"image:   {found.image} ({present})")
        if not found.available:
            write_stderr(f"jarvis: no container runtime available: {found.detail}\n")
            outcome["code"] = EXIT_SANDBOX_UNAVAILABLE

    code = guarded(body, verbose=False) or outcome["code"]
    if code:
        raise typer.Exit(code)
