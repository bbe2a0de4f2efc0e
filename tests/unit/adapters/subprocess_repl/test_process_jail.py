"""The jail's command line (``subprocess_repl/process_jail.py``): which folders are bound,
hidden and made read-only, in which order. What the jail does to a real process is tested
in ``tests/integration/test_runtime_confinement.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from jarvis.adapters.subprocess_repl.process_jail import Confinement, jail_arguments


def _mounts(arguments: list[str]) -> list[tuple[str, str]]:
    """(option, path) of every mount and remount, in order."""
    found = []
    for index, argument in enumerate(arguments):
        if argument in ("--tmpfs", "--bind", "--ro-bind", "--remount-ro"):
            found.append((argument, arguments[index + 1]))
    return found


def test_a_workspace_in_the_home_is_bound_on_top_of_the_hidden_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    workspace = home / "project"
    workspace.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    mounts = _mounts(jail_arguments(str(workspace), [str(workspace)], [], []))
    assert mounts[0] == ("--ro-bind", "/")
    assert mounts.index(("--tmpfs", str(home))) < mounts.index(("--bind", str(workspace)))
    assert ("--remount-ro", str(home)) in mounts
    assert mounts.index(("--bind", str(workspace))) < mounts.index(("--remount-ro", str(home)))
    assert ("--remount-ro", str(workspace)) not in mounts


def test_a_workspace_that_is_the_home_stays_writable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    mounts = _mounts(jail_arguments(str(home), [str(home)], [], []))
    assert mounts.index(("--tmpfs", str(home))) < mounts.index(("--bind", str(home)))
    assert ("--remount-ro", str(home)) not in mounts


def test_the_state_dir_inside_the_hidden_config_dir_is_bound_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    config = tmp_path / "config"
    state = config / "runtimes" / "opencode"
    install = tmp_path / "cache" / "opencode"
    for folder in (state, install):
        folder.mkdir(parents=True)
    arguments = jail_arguments(str(tmp_path), [str(state)], [str(install)], [str(config)])
    mounts = _mounts(arguments)
    assert mounts.index(("--tmpfs", str(config))) < mounts.index(("--bind", str(state)))
    assert ("--ro-bind", str(install)) in mounts
    for hidden in ("/tmp", "/run", str(config)):
        assert ("--remount-ro", hidden) in mounts
    for option in ("--unshare-pid", "--die-with-parent", "--new-session", "--unshare-user"):
        assert option in arguments
    assert "--unshare-net" not in arguments  # the engine is reached on loopback
    assert arguments[arguments.index("--cap-drop") + 1] == "ALL"


def test_a_missing_folder_is_not_bound(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    mounts = _mounts(jail_arguments(str(tmp_path), [str(tmp_path)], [str(missing)], []))
    assert all(path != str(missing) for _, path in mounts)


def test_an_opted_out_run_is_not_jailed_and_probes_nothing() -> None:
    by_option = Confinement("opencode", enabled=True)
    assert asyncio.run(by_option.choose(False)) is None
    by_config = Confinement("opencode", enabled=False)
    assert asyncio.run(by_config.choose(True)) is None
    assert by_option.wrap(None, ["opencode", "serve"], workdir="/", writable=[]) == [
        "opencode",
        "serve",
    ]
