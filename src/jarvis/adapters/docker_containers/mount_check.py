"""The folders a container binds are the folders the mount policy checked.

The runtime binds by path, and a path can be swapped between the check and the bind (the
checked folder renamed away, a link elsewhere put in its place). So each mount that carries
the checked folder's device and inode is verified twice: right before the container is
created (the path, opened one component at a time without following links, still leads to
that folder), and once the container runs, before anything is sent to it (what is bound at
the target, seen through ``/proc/<its init>/root``, is that folder). A mismatch removes the
container and refuses the mount. Where the container's processes are not visible from here
(a runtime on another machine or in a VM), only the first check can be made.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from jarvis.application.sandbox_mounts import open_folder
from jarvis.domain.ports import Mount
from jarvis.domain.sandbox.runner import MountRefusedError


def _swapped(mount: Mount) -> MountRefusedError:
    return MountRefusedError(
        f"Refused to mount {mount.source}: it is no longer the folder that was checked "
        "(it was replaced or moved after the mount check).",
        hint="Mount a folder that nobody else can rename or replace while the sandbox starts.",
    )


def verify_sources(mounts: Sequence[Mount]) -> None:
    """Refuse a mount whose source path no longer leads to the checked folder."""
    for mount in mounts:
        if not mount.inode:
            continue
        folder = open_folder(mount.source, mount.source)
        try:
            info = os.fstat(folder)
        finally:
            os.close(folder)
        if (info.st_dev, info.st_ino) != (mount.device, mount.inode):
            raise _swapped(mount)


def verify_bound(pid: int, mounts: Sequence[Mount]) -> bool:
    """Refuse a mount whose target in the running container (its init ``pid``) is not the
    checked folder. False when the container cannot be seen from here (nothing verified)."""
    checked = [m for m in mounts if m.inode]
    if not checked:
        return True
    if pid <= 0:
        return False
    try:
        os.stat(f"/proc/{pid}/root/")
    except OSError:
        return False
    for mount in checked:
        try:
            info = os.stat(f"/proc/{pid}/root{mount.target}")
        except OSError:
            raise _swapped(mount) from None
        if (info.st_dev, info.st_ino) != (mount.device, mount.inode):
            raise _swapped(mount)
    return True
