"""``jarvis serve`` on the command line: its checks, and a ``jarvis ask`` that never loads it."""

from __future__ import annotations

import json
import subprocess
import sys

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
        cli.build_app(("serve",)), ["serve", "--host", "0.0.0.0"], env={"JARVIS_API_KEY": ""}
    )
    assert result.exit_code == 2
    assert "without an API key" in result.output


def test_serve_refuses_a_short_key() -> None:
    result = CliRunner().invoke(
        cli.build_app(("serve",)), ["serve", "--host", "0.0.0.0", "--api-key", "short"]
    )
    assert result.exit_code == 2
    assert "too short" in result.output
