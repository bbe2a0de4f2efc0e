"""Which host folders a sandbox may see: the mount allowlist and the blocked patterns.

The allowlist is a JSON file (``[sandbox] mount_allowlist_path``)::

    {"roots": [{"path": "/home/user/projects", "read_only": false}],
     "blocked_patterns": [".ssh", ".env", "*.pem", "*.key", "secrets/*.txt"]}

Without a file there is no root restriction, but mounts are read-only. The default blocked
patterns (the secrets ``file_read`` refuses: ``.ssh``, ``.env*``, ``*.pem``, ``*.key``,
credential files, cloud config folders...) always apply, whatever the file says. A pattern
without ``/`` matches any one path component (fnmatch, case-insensitively); a pattern with
``/`` matches consecutive components (``.docker/config.json``, ``secrets/*.txt``).

A mount is refused (:class:`~jarvis.domain.sandbox.runner.MountRefusedError`, before any
container starts) when its resolved path — symlinks followed — is blocked anywhere along it,
lies outside every root, asks to be writable where no root allows it, or is a folder that
*contains* a blocked path (a home folder holding ``.ssh``): refused rather than masked, so
nothing secret is ever under a mount. The check walks the folder without following links
and gives up (refusing) past :data:`MAX_ENTRIES` entries, so a huge tree cannot stall it.

Inside a mounted folder only folders, regular files with one link, and symbolic links are
accepted. A file with more than one hard link is refused: its other name may be a secret
elsewhere that the patterns never saw. FIFOs, sockets and devices are refused. Symbolic
links are kept: the container resolves them in its own file system, where they cannot reach
the host's files.

The folder is opened one component at a time with ``O_NOFOLLOW`` from ``/`` and its
contents are walked through descriptors, so what is checked is one folder even if a path
is swapped meanwhile; its device and inode go with the :class:`Mount`, and the container
runtime binds that folder or refuses (see ``ContainerPort.start``).

The pure part (:func:`blocked_by`, :meth:`MountPolicy.check_path`) takes path components;
:meth:`MountPolicy.resolve` is the part that looks at the file system.
"""

from __future__ import annotations

import errno
import fnmatch
import json
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from jarvis.application.tools.secret_paths import SECRET_NAMES, SECRET_SEQUENCES
from jarvis.domain.ports import Mount
from jarvis.domain.sandbox.runner import MountRefusedError, MountRequest

MAX_ENTRIES = 50_000
MAX_DEPTH = 256
"""Deeper folders are refused (one descriptor is open per level while walking)."""
_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
"""A mounted folder with more entries than this is refused (the blocked-path check would
take too long)."""
MAX_ALLOWLIST_BYTES = 1024 * 1024
MAX_MOUNTS = 32
TARGET_PREFIXES = ("/mnt/", "/workspace")

DEFAULT_BLOCKED: tuple[str, ...] = (
    *SECRET_NAMES,
    *("/".join(sequence) for sequence in SECRET_SEQUENCES),
)
"""Always applied: the secrets ``file_read`` refuses, as patterns."""


def _pattern_parts(pattern: str) -> tuple[str, ...]:
    return tuple(part for part in pattern.casefold().split("/") if part)


def blocked_by(components: Sequence[str], patterns: Sequence[str]) -> str | None:
    """The first pattern that matches ``components`` (a path split at ``/``), or ``None``.

    One-component patterns match any component; longer ones any run of consecutive
    components, each by fnmatch."""
    folded = [c.casefold() for c in components if c]
    for pattern in patterns:
        parts = _pattern_parts(pattern)
        if not parts:
            continue
        width = len(parts)
        for start in range(len(folded) - width + 1):
            if all(fnmatch.fnmatchcase(folded[start + i], parts[i]) for i in range(width)):
                return pattern
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class AllowedRoot:
    path: str
    read_only: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class MountPolicy:
    """The roots (empty: anywhere) and the blocked patterns (defaults included)."""

    roots: tuple[AllowedRoot, ...] = ()
    blocked_patterns: tuple[str, ...] = DEFAULT_BLOCKED
    source: str = ""
    """The allowlist file it came from ("" = none)."""
    protected: tuple[str, ...] = ()
    """Folders never mounted, nor any folder holding them (jarvis's own config dir: its
    config.toml may hold API keys), as resolved absolute paths."""

    # --- pure checks --------------------------------------------------------------------

    def check_path(self, path: str, *, read_only: bool) -> None:
        """Refuse an absolute, resolved ``path`` that is blocked or outside the roots."""
        components = PurePosixPath(path).parts[1:]
        pattern = blocked_by(components, self.blocked_patterns)
        if pattern is not None:
            raise MountRefusedError(
                f"Refused to mount {path}: it matches the blocked pattern '{pattern}'.",
                hint="Secrets are never mounted into a sandbox.",
            )
        if not self.roots:
            if not read_only:
                raise MountRefusedError(
                    f"Refused to mount {path} writable: with no mount allowlist, mounts are "
                    "read-only.",
                    hint='Add a root with "read_only": false to [sandbox] '
                    "mount_allowlist_path, or mount it :ro.",
                )
            return
        for root in self.roots:
            if path == root.path or path.startswith(root.path.rstrip("/") + "/"):
                if not read_only and root.read_only:
                    continue
                return
        allowed = ", ".join(
            f"{r.path} ({'read-only' if r.read_only else 'writable'})" for r in self.roots
        )
        raise MountRefusedError(
            f"Refused to mount {path}{'' if read_only else ' writable'}: it is not inside "
            f"an allowed root of {self.source or 'the mount allowlist'}.",
            hint=f"Allowed roots: {allowed}.",
        )

    def check_protected(self, path: str) -> None:
        """Refuse ``path`` when it is, lies in, or holds a protected folder."""
        for protected in self.protected:
            inside = path == protected or path.startswith(protected.rstrip("/") + "/")
            if inside or protected.startswith(path.rstrip("/") + "/"):
                raise MountRefusedError(
                    f"Refused to mount {path}: it {'is in' if inside else 'holds'} jarvis's "
                    f"configuration folder {protected}.",
                    hint="Mount a folder that holds no configuration or secrets.",
                )

    def check_contents(self, path: str, relative: Iterator[tuple[str, ...]]) -> None:
        """Refuse a folder any entry of which (``relative`` components) is blocked."""
        base = PurePosixPath(path).parts[1:]
        for count, parts in enumerate(relative, 1):
            if count > MAX_ENTRIES:
                raise MountRefusedError(
                    f"Refused to mount {path}: it holds more than {MAX_ENTRIES} entries, too "
                    "many to check for secrets.",
                    hint="Mount a smaller folder.",
                )
            pattern = blocked_by((*base, *parts), self.blocked_patterns)
            if pattern is not None:
                inner = "/".join(parts)
                raise MountRefusedError(
                    f"Refused to mount {path}: it contains {inner}, which matches the "
                    f"blocked pattern '{pattern}'.",
                    hint="Mount a folder that holds no secrets (blocked paths are refused, "
                    "not hidden).",
                )

    # --- the file system ----------------------------------------------------------------

    def resolve(self, requests: Sequence[MountRequest], *, cwd: str = "") -> tuple[Mount, ...]:
        """The checked mounts for ``requests`` (see the module docstring)."""
        if len(requests) > MAX_MOUNTS:
            raise MountRefusedError(f"At most {MAX_MOUNTS} mounts per sandbox.")
        mounts: list[Mount] = []
        targets: set[str] = set()
        for request in requests:
            raw = os.path.expanduser(request.source)
            if "\x00" in raw:
                raise MountRefusedError("A mount path cannot contain NUL.")
            try:
                source = os.path.realpath(os.path.join(cwd or os.getcwd(), raw))
            except OSError as exc:  # a link that changed while it was resolved
                raise MountRefusedError(
                    f"Cannot mount {request.source}: it changed while it was resolved "
                    f"({exc.strerror or exc})."
                ) from None
            self.check_path(source, read_only=request.read_only)
            self.check_protected(source)
            folder = open_folder(source, request.source)
            try:
                info = os.fstat(folder)
                self.check_contents(source, _walk(source, folder))
            finally:
                os.close(folder)
            target = _target(request, source)
            if target in targets:
                raise MountRefusedError(
                    f"Two mounts would appear at {target}.", hint="Give one an explicit TARGET."
                )
            targets.add(target)
            mounts.append(
                Mount(
                    source=source,
                    target=target,
                    read_only=request.read_only,
                    device=info.st_dev,
                    inode=info.st_ino,
                )
            )
        return tuple(mounts)


def _target(request: MountRequest, source: str) -> str:
    if request.target:
        target = request.target
        clean = os.path.normpath(target)
        if (
            not target.startswith("/")
            or clean != target.rstrip("/")
            or ".." in target.split("/")
            or not (clean == "/workspace" or clean.startswith(TARGET_PREFIXES))
        ):
            raise MountRefusedError(
                f"Mount target {target} is not a folder under /mnt/ or /workspace.",
                hint="Example: --mount ./data:/mnt/data:ro",
            )
        target = clean
    else:
        name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(source) or "root").lstrip(".")
        target = f"/mnt/{name or 'root'}"
    if any(c in target for c in ":,\n"):
        raise MountRefusedError(f"Mount target {target} cannot contain ':' or ','.")
    return target


def open_folder(path: str, shown: str) -> int:
    """A descriptor of folder ``path`` (absolute, resolved), opened one component at a
    time without following any link: a component swapped for a link is refused."""
    parts = PurePosixPath(path).parts[1:]
    try:
        current = os.open("/", _PATH_FLAGS)
    except OSError as exc:
        raise MountRefusedError(f"Cannot mount {shown}: {exc.strerror or exc}.") from None
    try:
        for number, part in enumerate(parts):
            flags = _DIR_FLAGS if number == len(parts) - 1 else _PATH_FLAGS
            following = os.open(part, flags, dir_fd=current)
            os.close(current)
            current = following
        if not parts:
            following = os.open(".", _DIR_FLAGS, dir_fd=current)
            os.close(current)
            current = following
    except OSError as exc:
        os.close(current)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise MountRefusedError(
                f"Cannot mount {shown}: only folders are mounted, and {path} is not one "
                "(or changed into a link while it was checked).",
                hint="Mount the folder that holds the file.",
            ) from None
        raise MountRefusedError(f"Cannot mount {shown}: {exc.strerror or exc}.") from None
    return current


def _refuse_entry(root: str, parts: tuple[str, ...], info: os.stat_result) -> None:
    mode, where = info.st_mode, "/".join(parts)
    if stat.S_ISDIR(mode) or stat.S_ISLNK(mode):
        return
    if not stat.S_ISREG(mode):
        raise MountRefusedError(
            f"Refused to mount {root}: {where} is not a regular file or folder (a FIFO, "
            "socket or device).",
            hint="Mount a folder that holds only files and folders.",
        )
    if info.st_nlink > 1:
        raise MountRefusedError(
            f"Refused to mount {root}: {where} has {info.st_nlink} hard links (another name "
            "of it may be a secret elsewhere).",
            hint="Copy the file instead of linking it, or mount another folder.",
        )


def _walk(root: str, folder: int) -> Iterator[tuple[str, ...]]:
    """Every entry below the open folder ``folder`` as components, links not followed,
    each checked (:func:`_refuse_entry`); unreadable folders refused (their contents
    cannot be checked)."""
    stack: list[tuple[int, tuple[str, ...], Iterator[os.DirEntry[str]]]] = []

    def enter(fd: int, parts: tuple[str, ...]) -> None:
        try:
            with os.scandir(fd) as listing:
                found = list(listing)
        except OSError as exc:
            where = "/".join(parts) or "."
            raise MountRefusedError(
                f"Refused to mount {root}: {where} cannot be read ({exc.strerror or exc}), "
                "so it cannot be checked for secrets."
            ) from None
        stack.append((fd, parts, iter(found)))

    enter(os.dup(folder), ())
    try:
        while stack:
            fd, parts, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                os.close(fd)
                continue
            here = (*parts, entry.name)
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError as exc:
                raise MountRefusedError(
                    f"Refused to mount {root}: {'/'.join(here)} cannot be checked "
                    f"({exc.strerror or exc})."
                ) from None
            _refuse_entry(root, here, info)
            yield here
            if stat.S_ISDIR(info.st_mode):
                if len(here) > MAX_DEPTH:
                    raise MountRefusedError(
                        f"Refused to mount {root}: it is more than {MAX_DEPTH} folders deep."
                    )
                try:
                    child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise MountRefusedError(
                        f"Refused to mount {root}: {'/'.join(here)} cannot be read "
                        f"({exc.strerror or exc}), so it cannot be checked for secrets."
                    ) from None
                try:
                    enter(child, here)
                except BaseException:
                    os.close(child)
                    raise
    finally:
        for fd, _parts, _entries in stack:
            os.close(fd)


def load_policy(path: str) -> MountPolicy:
    """The policy of allowlist file ``path`` ("" = no file: defaults only). A file that
    cannot be read or is not the documented shape is a ``MountRefusedError``."""
    if not path:
        return MountPolicy()
    where = os.path.expanduser(path)
    try:
        with open(where, "rb") as handle:
            data = handle.read(MAX_ALLOWLIST_BYTES + 1)
    except OSError as exc:
        raise MountRefusedError(
            f"Cannot read the mount allowlist {path}: {exc.strerror or exc}."
        ) from None
    if len(data) > MAX_ALLOWLIST_BYTES:
        raise MountRefusedError(f"The mount allowlist {path} is larger than 1 MiB.")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise MountRefusedError(f"The mount allowlist {path} is not JSON: {exc}.") from None
    shape = 'Expected {"roots": [{"path": "...", "read_only": true}], "blocked_patterns": [...]}'
    if not isinstance(document, dict) or set(document) - {"roots", "blocked_patterns"}:
        raise MountRefusedError(f"The mount allowlist {path} has an unexpected shape.", hint=shape)
    roots: list[AllowedRoot] = []
    for item in (
        document.get("roots", []) if isinstance(document.get("roots", []), list) else [None]
    ):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("path"), str)
            or not isinstance(item.get("read_only", True), bool)
            or set(item) - {"path", "read_only"}
        ):
            raise MountRefusedError(
                f"A root of the mount allowlist {path} is malformed.", hint=shape
            )
        root = os.path.realpath(os.path.expanduser(item["path"]))
        roots.append(AllowedRoot(path=root, read_only=item.get("read_only", True)))
    patterns = document.get("blocked_patterns", [])
    if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
        raise MountRefusedError(
            f"blocked_patterns of the mount allowlist {path} must be a list of strings.",
            hint=shape,
        )
    blocked = (*DEFAULT_BLOCKED, *(p for p in patterns if p not in DEFAULT_BLOCKED))
    return MountPolicy(roots=tuple(roots), blocked_patterns=blocked, source=path)
