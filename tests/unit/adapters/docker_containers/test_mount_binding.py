"""A mount is bound as checked: its folder's inode travels with it, a folder replaced after
the check is refused before the container is created, and hard links, FIFOs and sockets
inside are refused by the check itself."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from jarvis.adapters.docker_containers.mount_check import verify_bound, verify_sources
from jarvis.application.sandbox_mounts import MountPolicy
from jarvis.domain.sandbox.runner import MountRefusedError, MountRequest


def test_the_checked_folder_s_inode_goes_with_the_mount(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (mount,) = MountPolicy().resolve([MountRequest(source=str(data))])
    info = os.stat(data)
    assert (mount.device, mount.inode) == (info.st_dev, info.st_ino)
    verify_sources([mount])  # unchanged: accepted


def test_a_folder_replaced_after_the_check_is_refused(tmp_path: Path) -> None:
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    data.mkdir()
    elsewhere.mkdir()
    (mount,) = MountPolicy().resolve([MountRequest(source=str(data))])
    data.rename(tmp_path / "moved")
    elsewhere.rename(data)  # another folder under the checked name
    with pytest.raises(MountRefusedError, match="no longer the folder that was checked"):
        verify_sources([mount])
    data.rmdir()
    data.symlink_to(tmp_path / "moved")  # the checked folder itself, but through a link
    with pytest.raises(MountRefusedError, match="only folders are mounted"):
        verify_sources([mount])


def test_a_container_that_cannot_be_seen_is_not_verified_but_a_wrong_bind_is(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (mount,) = MountPolicy().resolve([MountRequest(source=str(data), target="/mnt/data")])
    assert verify_bound(0, [mount]) is False
    # this process's own root has no /mnt/data of that inode: refused
    with pytest.raises(MountRefusedError):
        verify_bound(os.getpid(), [mount])


@pytest.mark.parametrize("kind", ["hard link", "fifo", "socket"])
def test_entries_that_are_not_plain_files_or_folders_are_refused(tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "sub" / "link").symlink_to("/etc/hostname")  # kept: resolved inside
    where = data / "sub" / "entry"
    if kind == "hard link":
        (tmp_path / "secret.txt").write_text("s")
        os.link(tmp_path / "secret.txt", where)
    elif kind == "fifo":
        os.mkfifo(where)
    else:
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(where))
    with pytest.raises(MountRefusedError, match=r"hard links|not a regular file"):
        MountPolicy().resolve([MountRequest(source=str(data))])
    where.unlink()
    assert MountPolicy().resolve([MountRequest(source=str(data))])
