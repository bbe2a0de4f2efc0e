"""``jarvis serve`` on the command line: its checks, and a ``jarvis ask`` that never loads it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import jarvis.entrypoints.cli as cli

WEB = ("fastapi", "starlette", "uvicorn", "jarvis.entrypoints.http")


def test_jarvis_ask_never_imports_the_web_framework() -> None:
    code = (
        "import sys\n"
        "sys.argv = ['jarvis', 'ask', '--help']\n"
        "from jarvis.entrypoints.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(__import__('json').dumps(sorted(sys.modules)), file=sys.stderr)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    loaded = json.loads(result.stderr.strip().splitlines()[-1])
    assert not [m for m in loaded if m.split(".")[0] in WEB or m.startswith(WEB[-1])]


def test_serve_refuses_a_public_address_without_a_key() -> None:
    result = CliRunner().invoke(
        cli.build_app(("serve",)),
        ["serve", "--host", "0.0.0.0"],
        env={"JARVIS_API_KEY": "", "OPENJARVIS_API_KEY": ""},
    )
    assert result.exit_code == 2
    assert "without an API key" in result.output
    assert "OPENJARVIS_API_KEY" in result.output
    assert "[server.auth] api_key" in result.output


def test_serve_refuses_a_short_key() -> None:
    result = CliRunner().invoke(
        cli.build_app(("serve",)), ["serve", "--host", "0.0.0.0", "--api-key", "short"]
    )
    assert result.exit_code == 2
    assert "too short" in result.output


def _float_options() -> list[str]:
    """Every option of ``jarvis serve`` that takes a float (now and later ones)."""
    import typer

    group = typer.main.get_command(cli.build_app(("serve",)))
    command = group.commands["serve"]  # type: ignore[attr-defined]
    return [p.opts[0] for p in command.params if "float" in getattr(p.type, "name", "")]


def test_every_float_option_of_serve_is_found() -> None:
    assert {"--max-body-mb", "--request-timeout"} <= set(_float_options())


def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``jarvis serve`` as a process (on a free port: a value that slipped through would
    serve, and the timeout would fail the test)."""
    import os

    return subprocess.run(
        [sys.executable, "-m", "jarvis", "serve", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize("option", _float_options())
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
def test_a_non_finite_float_option_is_a_usage_error(option: str, value: str) -> None:
    done = _serve(option, value)
    assert done.returncode == 2, done.stderr
    assert "finite number" in done.stderr or "range" in done.stderr, done.stderr
    assert option in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_without_its_extra_says_how_to_install_it(tmp_path: Path, workers: str) -> None:
    """fastapi and uvicorn made unimportable by packages of the same names first on the path."""
    import os

    for name in ("fastapi", "uvicorn"):
        package = tmp_path / "blocker" / name
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(f"raise ImportError('no {name} here')\n")
    path = os.pathsep.join(
        p for p in (str(tmp_path / "blocker"), os.environ.get("PYTHONPATH")) if p
    )
    done = _serve("--workers", workers, env={"PYTHONPATH": path, "OPENJARVIS_HOME": str(tmp_path)})
    assert done.returncode == 2, done.stderr
    assert "pip install 'jarvis[serve]'" in done.stderr
    assert "Traceback" not in done.stderr
