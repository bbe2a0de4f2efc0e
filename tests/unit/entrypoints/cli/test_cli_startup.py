"""How ``jarvis`` starts: only the command asked for is built, the collector waits."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import pytest
from typer.testing import CliRunner

import jarvis.entrypoints.cli as cli
from bench.stub_server import ANSWER, StubServer


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    """``main()`` freezes what is alive out of the collector (for the process's exit):
    give this test session's objects back to it."""
    yield
    gc.unfreeze()


def test_main_builds_only_the_command_named(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Sequence[str]] = []

    def fake_build(commands: Sequence[str] = cli.COMMANDS) -> Callable[[], None]:
        built.append(tuple(commands))
        return lambda: None

    monkeypatch.setattr(cli, "build_app", fake_build)
    for argv, expected in [
        (["ask", "q"], ("ask",)),
        (["persona", "show"], ("persona",)),
        (["--help"], cli.COMMANDS),
        (["--version"], cli.COMMANDS),
        (["nope"], cli.COMMANDS),
        ([], cli.COMMANDS),
    ]:
        monkeypatch.setattr(sys, "argv", ["jarvis", *argv])
        cli.main()
        assert built.pop() == expected


@pytest.mark.parametrize(
    "args",
    [
        ["ask", "--help"],
        ["ask", "--temperature", "nope", "q"],
        ["ask", "--no-such-option", "q"],
        ["persona", "--help"],
        ["tools", "--help"],
        ["agents", "--help"],
        ["models", "--help"],
    ],
)
def test_one_command_behaves_as_in_the_whole_app(args: list[str]) -> None:
    runner = CliRunner()
    whole = runner.invoke(cli.build_app(), args)
    alone = runner.invoke(cli.build_app(cli._commands_for(args)), args)
    assert (alone.exit_code, alone.output) == (whole.exit_code, whole.output)


def test_jarvis_ask_imports_no_other_command() -> None:
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
    loaded = set(json.loads(result.stderr.strip().splitlines()[-1]))
    assert "jarvis.entrypoints.cli.ask" in loaded
    assert "jarvis.entrypoints.cli.listing" not in loaded


def test_the_collector_waits_while_a_command_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    resumed = threading.Event()

    def command() -> None:
        seen.append(gc.isenabled())  # off as the command starts
        deadline = time.monotonic() + 10  # a long command: the collector comes back on
        while not gc.isenabled() and time.monotonic() < deadline:
            time.sleep(0.01)
        if gc.isenabled():
            resumed.set()

    monkeypatch.setattr(cli, "GC_PAUSE_SECONDS", 0.05)
    monkeypatch.setattr(cli, "build_app", lambda commands=cli.COMMANDS: command)
    monkeypatch.setattr(sys, "argv", ["jarvis", "ask", "q"])
    assert gc.isenabled()
    cli.main()
    assert seen == [False]
    assert resumed.is_set()
    assert gc.isenabled()  # and on after the command, for an in-process caller


def test_a_quick_command_leaves_the_collector_as_it_found_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "argv", ["jarvis", "--version"])
    with pytest.raises(SystemExit):
        cli.main()
    assert gc.isenabled()
    gc.disable()
    try:
        with pytest.raises(SystemExit):
            cli.main()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_plain_question_loads_neither_the_sandbox_nor_pydantic(stub_server: StubServer) -> None:
    code = (
        "import sys\n"
        f"sys.argv = ['jarvis', 'ask', '--base-url', {stub_server.url!r}, '-m', 'm', 'q']\n"
        "from jarvis.entrypoints.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(__import__('json').dumps(sorted(sys.modules)), file=sys.stderr)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ANSWER
    loaded = set(json.loads(result.stderr.strip().splitlines()[-1]))
    assert "pydantic" not in loaded  # no config file: nothing to validate
    assert not {m for m in loaded if "sandbox" in m}  # built only for the sandboxed agent
