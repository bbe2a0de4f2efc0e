"""The sandbox's mount policy: blocked patterns, allowlist roots, folders holding secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jarvis.application.sandbox_mounts import (
    DEFAULT_BLOCKED,
    AllowedRoot,
    MountPolicy,
    blocked_by,
    load_policy,
)
from jarvis.domain.agents.sandboxed import mount_request
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.sandbox.runner import MountRefusedError, MountRequest

component = st.text(alphabet="abcdefgh_-0123456789", min_size=1, max_size=8)


@given(st.lists(component, max_size=5), st.lists(component, max_size=5))
def test_ssh_anywhere_in_a_path_is_blocked(before: list[str], after: list[str]) -> None:
    assert blocked_by([*before, ".ssh", *after], DEFAULT_BLOCKED) is not None
    assert blocked_by([*before, ".SSH", *after], DEFAULT_BLOCKED) is not None


@given(st.lists(component, max_size=6))
def test_plain_names_are_not_blocked(parts: list[str]) -> None:
    assert blocked_by(parts, (".ssh", "*.pem", "secrets/*.txt")) is None


@given(st.lists(component, max_size=4), component)
def test_a_pattern_with_a_slash_matches_consecutive_components(
    before: list[str], name: str
) -> None:
    patterns = ("secrets/*.txt",)
    assert blocked_by([*before, "secrets", f"{name}.txt"], patterns) == "secrets/*.txt"
    assert blocked_by([*before, "secrets", "x", f"{name}.txt"], patterns) is None
    assert blocked_by([*before, f"{name}.txt"], patterns) is None


def test_defaults_cover_the_mission_list() -> None:
    for parts in (
        [".ssh"],
        [".env"],
        ["a.pem"],
        ["b.key"],
        [".aws", "credentials"],
        [".docker", "config.json"],
        [".kube", "config"],
    ):
        assert blocked_by(parts, DEFAULT_BLOCKED) is not None, parts


def test_mount_specs() -> None:
    assert mount_request("./data:ro") == MountRequest(source="./data")
    assert mount_request("./data") == MountRequest(source="./data")
    assert mount_request("d:/mnt/x:rw") == MountRequest(
        source="d", target="/mnt/x", read_only=False
    )
    with pytest.raises(ConfigurationError):
        mount_request("a:b:c:ro")
    with pytest.raises(ConfigurationError):
        mount_request(":ro")


def _tree(root: Path, *files: str) -> Path:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    return root


def test_a_folder_is_mounted_read_only_at_mnt(tmp_path: Path) -> None:
    data = _tree(tmp_path / "data", "notes.txt", "sub/more.md")
    (mount,) = MountPolicy().resolve([MountRequest(source=str(data))])
    assert (mount.source, mount.target, mount.read_only) == (str(data), "/mnt/data", True)


@pytest.mark.parametrize(
    "secret",
    [
        ".ssh/id_ed25519",
        "deep/er/.env",
        "certs/server.pem",
        ".aws/credentials",
        "deep/.docker/config.json",
    ],
)
def test_a_folder_that_contains_a_secret_is_refused(tmp_path: Path, secret: str) -> None:
    home = _tree(tmp_path / "home", "notes.txt", secret)
    with pytest.raises(MountRefusedError, match="contains") as refused:
        MountPolicy().resolve([MountRequest(source=str(home))])
    assert isinstance(refused.value, ValueError)


def test_a_blocked_path_and_a_link_to_one_are_refused(tmp_path: Path) -> None:
    ssh = _tree(tmp_path / ".ssh", "known_hosts")
    with pytest.raises(MountRefusedError, match=r"blocked pattern '\.ssh'"):
        MountPolicy().resolve([MountRequest(source=str(ssh))])
    (tmp_path / "innocent").symlink_to(ssh)
    with pytest.raises(MountRefusedError, match=r"\.ssh"):
        MountPolicy().resolve([MountRequest(source=str(tmp_path / "innocent"))])


def test_writable_mounts_need_a_writable_root(tmp_path: Path) -> None:
    data = _tree(tmp_path / "data", "a.txt")
    with pytest.raises(MountRefusedError, match="read-only"):
        MountPolicy().resolve([MountRequest(source=str(data), read_only=False)])
    policy = MountPolicy(roots=(AllowedRoot(path=str(tmp_path), read_only=False),))
    (mount,) = policy.resolve([MountRequest(source=str(data), read_only=False)])
    assert not mount.read_only


def test_outside_every_root_is_refused(tmp_path: Path) -> None:
    inside = _tree(tmp_path / "root" / "ok", "a.txt")
    outside = _tree(tmp_path / "other", "a.txt")
    allowlist = tmp_path / "allow.json"
    allowlist.write_text(
        json.dumps(
            {
                "roots": [{"path": str(tmp_path / "root"), "read_only": True}],
                "blocked_patterns": ["private/*.txt"],
            }
        )
    )
    policy = load_policy(str(allowlist))
    assert policy.resolve([MountRequest(source=str(inside))])
    with pytest.raises(MountRefusedError, match="not inside an allowed root"):
        policy.resolve([MountRequest(source=str(outside))])
    with pytest.raises(MountRefusedError, match="writable"):
        policy.resolve([MountRequest(source=str(inside), read_only=False)])
    _tree(inside, "private/diary.txt")
    with pytest.raises(MountRefusedError, match="private/"):
        policy.resolve([MountRequest(source=str(inside))])
    assert ".ssh" in policy.blocked_patterns  # the defaults always apply


@pytest.mark.parametrize(
    "content", ["[]", '{"roots": "x"}', '{"extra": 1}', "{bad", '{"blocked_patterns": [1]}']
)
def test_a_malformed_allowlist_is_a_clear_error(tmp_path: Path, content: str) -> None:
    allowlist = tmp_path / "allow.json"
    allowlist.write_text(content)
    with pytest.raises(MountRefusedError, match="allowlist"):
        load_policy(str(allowlist))


@pytest.mark.parametrize("target", ["/etc", "/mnt/../etc", "relative", "/tmp/x", "/mnt/a:b"])
def test_targets_stay_under_mnt_or_workspace(tmp_path: Path, target: str) -> None:
    data = _tree(tmp_path / "data", "a.txt")
    with pytest.raises(MountRefusedError):
        MountPolicy().resolve([MountRequest(source=str(data), target=target)])


def test_missing_files_and_plain_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(MountRefusedError, match="Cannot mount"):
        MountPolicy().resolve([MountRequest(source=str(tmp_path / "nothing"))])
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(MountRefusedError, match="only folders"):
        MountPolicy().resolve([MountRequest(source=str(tmp_path / "f.txt"))])


def test_the_config_dir_and_folders_holding_it_are_refused(tmp_path: Path) -> None:
    config = _tree(tmp_path / "home" / "jarvis-config", "config.toml")
    policy = MountPolicy(protected=(str(config),))
    for folder in (config, tmp_path / "home", tmp_path):
        with pytest.raises(MountRefusedError, match="configuration folder"):
            policy.resolve([MountRequest(source=str(folder))])
    other = _tree(tmp_path / "other", "a.txt")
    assert policy.resolve([MountRequest(source=str(other))])
