"""``jarvis sandbox build`` and ``jarvis sandbox status``: the container sandbox.

``build`` builds the sandbox image from what is installed here (Python, jarvis and its
dependencies; no registry), its progress on stderr, and prints the image's reference.
``status`` says which runtime, socket and image are in use and whether the image is
present; exit code 6 when there is no runtime or it does not answer. ``cleanup`` lists and
removes the sandbox containers of jarvis processes that are gone (killed before they could
remove their own); exit code 0 when none is left, 6 when there is no runtime or one could
not be removed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from jarvis.entrypoints.cli.command_group import command_group
from jarvis.entrypoints.cli.errors import EXIT_SANDBOX_UNAVAILABLE, guarded, write_stderr
from jarvis.entrypoints.cli.options import ConfigOption, JsonOption

DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="List the orphaned containers without removing them.")
]

if TYPE_CHECKING:
    from pathlib import Path

    from jarvis.domain.ports import ContainerPort

app = command_group("The container sandbox of the sandboxed agent (Docker or Podman).")


def _runtime(ctx: typer.Context, config: Path | None) -> ContainerPort:
    from jarvis.entrypoints.composition import bootstrap
    from jarvis.entrypoints.settings import load_config

    return bootstrap(load_config(config), container=ctx.obj).container_runtime()


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


@app.command("cleanup")
def cleanup(
    ctx: typer.Context,
    config: ConfigOption = None,
    json_output: JsonOption = False,
    dry_run: DryRunOption = False,
) -> None:
    """Remove the sandbox containers of jarvis processes that are gone.

    Exit codes: 0 done (also when there was none), 6 no container runtime, or a container
    that could not be removed."""
    outcome = {"code": 0}

    def body() -> None:
        import asyncio
        import json

        found = asyncio.run(_runtime(ctx, config).orphans(remove=not dry_run))
        failed = [o for o in found if not dry_run and not o.removed]
        if json_output:
            typer.echo(
                json.dumps(
                    {
                        "orphans": [
                            {
                                "id": o.id,
                                "name": o.name,
                                "state": o.state,
                                "owner": o.owner,
                                "run": o.run,
                                "removed": o.removed,
                            }
                            for o in found
                        ],
                        "removed": sum(1 for o in found if o.removed),
                        "dry_run": dry_run,
                    }
                )
            )
        else:
            for o in found:
                done = "would remove" if dry_run else "removed" if o.removed else "NOT removed"
                typer.echo(f"{done} {o.id[:12]} {o.name} ({o.state}; owner {o.owner or '?'})")
            verb = "found" if dry_run else "removed"
            count = len(found) if dry_run else len(found) - len(failed)
            typer.echo(f"{count} orphaned sandbox container{'s' if count != 1 else ''} {verb}")
        if failed:
            write_stderr(
                f"jarvis: {len(failed)} container(s) could not be removed; "
                "run the command again, or remove them with the runtime's own CLI\n"
            )
            outcome["code"] = EXIT_SANDBOX_UNAVAILABLE

    code = guarded(body, verbose=False) or outcome["code"]
    if code:
        raise typer.Exit(code)
