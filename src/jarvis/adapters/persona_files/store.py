"""``FilesystemPersonaStore``: the persona files in the config dir.

The files are read at the start of every conversation, so an edit applies to the next
one, also in a long-running server (with a watch, what was read is kept until a notice
says a file changed: :mod:`jarvis.adapters.inotify_watch`). They are read defensively
because whatever they hold is pasted into every prompt and may be sent to a remote
engine: a symlink leading out of its folder is not followed (it could expose
``~/.ssh``), a FIFO or device is not opened for reading, a binary file is skipped, and a
huge file is read at its two ends only, never whole.

Edits of the default files take a file lock beside the file (held across processes), read
the whole current text, and write the new text to a temp file in the same folder that is
fsynced and renamed over the old one, so a reader sees the old file or the new one and
concurrent writers never lose each other's entries.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from jarvis.adapters.inotify_watch import InotifyWatch, KeptReading, Read
from jarvis.application.tools.secret_paths import secret_rule_of_paths
from jarvis.domain.errors import PersonaError
from jarvis.domain.persona import (
    FILE_NAMES,
    check_persona_name,
    document_from_bytes,
    text_for_edit,
    unknown_persona,
)
from jarvis.domain.ports import PersonaDocument, PersonaFile

DEFAULT_MAX_READ_BYTES = 64 * 1024
"""Files larger than this are read as their first and last halves of it."""

DEFAULT_LOCK_TIMEOUT = 30.0
PERSONAS_FOLDER = "personas"

_T = TypeVar("_T")
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class _Refused(Exception):
    """A file that must not be read or rewritten; the message says why."""


class FilesystemPersonaStore:
    """Persona files below ``root`` (the config dir).

    ``soul_path``, ``memory_path`` and ``user_path`` move the default files (``~`` is
    expanded; a relative path is taken from ``root``); a symlink is followed only when it
    stays inside ``root`` or inside the folder of the configured path. Named personas are
    ``root/personas/<name>/{SOUL,MEMORY,USER}.md``.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        soul_path: str | os.PathLike[str] | None = None,
        memory_path: str | os.PathLike[str] | None = None,
        user_path: str | os.PathLike[str] | None = None,
        max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        watch: InotifyWatch | None = None,
    ) -> None:
        if max_read_bytes < 2:
            raise ValueError("max_read_bytes must be at least 2")
        self.root = Path(root).expanduser()
        configured = {
            PersonaFile.SOUL: soul_path,
            PersonaFile.MEMORY: memory_path,
            PersonaFile.USER: user_path,
        }
        self._defaults = {kind: self._place(kind, value) for kind, value in configured.items()}
        self._configured = {kind for kind, value in configured.items() if value}
        """The files a config moved: only these can lead to a secret (the rest are jarvis's
        own, in the config dir)."""
        self.max_read_bytes = max_read_bytes
        self.lock_timeout = lock_timeout
        self._kept = KeptReading(self._load, watch)
        """With a watch, what :meth:`load` read is kept until one of its files changes."""

    def _place(self, kind: PersonaFile, value: str | os.PathLike[str] | None) -> Path:
        if value is None or not os.fspath(value):
            return self.root / FILE_NAMES[kind]
        path = Path(value).expanduser()
        return path if path.is_absolute() else self.root / path

    # -- the port: reading ---------------------------------------------------------------

    def load(self, persona: str | None) -> tuple[PersonaDocument, ...]:
        # a relative config dir is read from the working directory of each call
        return self._kept((persona, "" if self.root.is_absolute() else os.getcwd()))

    def _load(self, key: tuple[str | None, str]) -> Read[tuple[PersonaDocument, ...]]:
        """The documents of the persona ``key`` names (with the working directory when the
        config dir is relative) and the paths they depend on: each file, the config dir,
        and the listing of named personas."""
        persona = key[0]
        listed: tuple[str, ...] = ()
        if persona is None:
            places = [(kind, self._defaults[kind]) for kind in PersonaFile]
        else:
            listed = (str(self.root / PERSONAS_FOLDER),)
            folder = self._persona_folder(persona)
            places = [(kind, folder / FILE_NAMES[kind]) for kind in PersonaFile]
        documents = tuple(
            doc
            for doc in (self._read(kind, path, persona is None) for kind, path in places)
            if doc is not None
        )
        paths = [str(self.root)]
        for _kind, path in places:
            paths.append(str(path))  # the watch follows its links itself
        return Read(documents, tuple(paths), listed)

    def names(self) -> list[str]:
        try:
            entries = list(os.scandir(self.root / PERSONAS_FOLDER))
        except OSError:
            return []
        found: list[str] = []
        for entry in entries:
            try:
                check_persona_name(entry.name, [])
            except PersonaError:
                continue
            if entry.is_dir():
                found.append(entry.name)
        return sorted(found)

    def location(self, kind: PersonaFile, persona: str | None = None) -> str:
        if persona is None:
            return str(self._defaults[kind])
        return str(self._persona_folder(persona) / FILE_NAMES[kind])

    def _persona_folder(self, name: str) -> Path:
        existing = self.names()
        check_persona_name(name, existing)
        folder = self.root / PERSONAS_FOLDER / name
        if not folder.is_dir():
            raise unknown_persona(name, existing)
        return folder

    def _allowed_roots(self, path: Path, default: bool) -> list[str]:
        roots = [os.path.realpath(self.root)]
        if default:
            roots.append(os.path.realpath(path.parent))
        return roots

    def _resolve(self, path: Path, default: bool) -> str:
        """The real path behind ``path``; raises ``_Refused`` when it leaves its folder."""
        real = os.path.realpath(path)
        roots = self._allowed_roots(path, default)
        if not any(_within(real, root) for root in roots):
            raise _Refused(
                f"{path} leads through a symlink to {real}, outside {roots[-1]}; it was not "
                "followed. Copy the file there instead of linking it."
            )
        return real

    def _secret(self, kind: PersonaFile) -> str | None:
        """Why the configured file of ``kind`` must be neither read nor written, if it must
        not: ``soul_path = "~/.aws/credentials"`` in a config copied from elsewhere would
        put the key into every prompt, and ``memory_path`` in ``~/.ssh`` would have the
        memory tool write there. Checked as written and as resolved (a dotfile manager's
        ``~/.config`` is often a link), whether the file exists yet or not."""
        if kind not in self._configured:
            return None
        path = self._defaults[kind]
        rule = secret_rule_of_paths(os.path.abspath(path), os.path.realpath(path))
        if rule is None:
            return None
        return (
            f"{path} is a secret file (it matches {rule!r}); jarvis neither reads it into a "
            "prompt nor writes to it."
        )

    def _read(self, kind: PersonaFile, path: Path, default: bool) -> PersonaDocument | None:
        source = str(path)
        secret = self._secret(kind) if default else None
        if secret is not None:
            return PersonaDocument(kind=kind, text="", source=source, warnings=(secret,))
        if not os.path.lexists(path):
            return None
        try:
            real = self._resolve(path, default)
            read = self._read_bounded(real, source)
        except _Refused as refusal:
            return PersonaDocument(kind=kind, text="", source=source, warnings=(str(refusal),))
        if read is None:
            return None
        head, tail, size = read
        return document_from_bytes(
            kind, source, head, tail, size=size, max_read_bytes=self.max_read_bytes
        )

    def _read_bounded(self, real: str, source: str) -> tuple[bytes, bytes, int] | None:
        """(head, tail, size): the whole file as ``head`` when it fits the read limit."""
        try:
            fd = os.open(real, _OPEN_FLAGS)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise _Refused(f"{source} could not be read: {error.strerror or error}.") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                os.close(fd)
                raise _Refused(f"{source} is not a regular file; it was not read.")
            with os.fdopen(fd, "rb") as handle:
                size = info.st_size
                if size <= self.max_read_bytes:
                    return handle.read(self.max_read_bytes), b"", size
                half = self.max_read_bytes // 2
                head = handle.read(half)
                handle.seek(size - half)
                return head, handle.read(half), size
        except OSError as error:
            raise _Refused(f"{source} could not be read: {error.strerror or error}.") from None

    # -- the port: writing ---------------------------------------------------------------

    def _check_not_secret(self, kind: PersonaFile) -> None:
        secret = self._secret(kind)
        if secret is not None:  # before anything is made: the folder, the lock file
            raise PersonaError(f"Refusing to edit {self._defaults[kind]}.", hint=secret)

    def ensure(self, kind: PersonaFile) -> str:
        self._check_not_secret(kind)
        path = self._defaults[kind]
        if os.path.lexists(path):
            self._check_editable_link(path)  # refuse before creating the lock file

        def create() -> str:
            if os.path.lexists(path):
                self._check_editable_link(path)
            else:
                self._replace(path, "")
            return str(path)

        return self._locked(path, create)

    def edit(self, kind: PersonaFile, change: Callable[[str], str]) -> str:
        self._check_not_secret(kind)
        path = self._defaults[kind]
        self._current_text(path)  # refuse before creating anything, even the lock file

        def apply() -> str:
            target, current = self._current_text(path)
            new = change(current)
            if new != current:
                self._replace(target, new)
            return new

        return self._locked(path, apply)

    def _locked(self, path: Path, action: Callable[[], _T]) -> _T:
        from filelock import FileLock, Timeout  # only edits lock: keeps reading start-up light

        lock_path = path.with_name(f".{path.name}.lock")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(lock_path), timeout=self.lock_timeout)
            lock.acquire()
        except Timeout:
            raise PersonaError(
                f"{path} is being edited elsewhere: no lock on {lock_path} after "
                f"{self.lock_timeout:g} s.",
                hint="Another process is editing it (the lock is released when that process "
                "ends); try again.",
            ) from None
        except OSError as error:
            raise self._unwritable(path, error) from None
        try:
            return action()
        finally:
            lock.release()

    def _check_editable_link(self, path: Path) -> str:
        try:
            return self._resolve(path, True)
        except _Refused as refusal:
            raise PersonaError(f"Refusing to edit {path}.", hint=str(refusal)) from None

    def _current_text(self, path: Path) -> tuple[Path, str]:
        """The file to write and its current text; refuses files that cannot be rewritten
        without losing something."""
        if not os.path.lexists(path):
            return path, ""
        real = self._check_editable_link(path)
        try:
            read = self._read_bounded(real, str(path))
        except _Refused as refusal:
            raise PersonaError(f"Refusing to edit {path}.", hint=str(refusal)) from None
        if read is None:
            return Path(real), ""
        data, _, size = read
        return Path(real), text_for_edit(
            str(path), data, size=size, max_read_bytes=self.max_read_bytes
        )

    def _replace(self, target: Path, text: str) -> None:
        """Write ``text`` to a temp file beside ``target``, fsync it, rename it over."""
        folder = target.parent
        temp = folder / f".{target.name}.{secrets.token_hex(6)}.tmp"
        try:
            try:
                mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
            except FileNotFoundError:
                mode = None
            fd = os.open(temp, _CREATE_FLAGS, 0o666)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(text.encode("utf-8"))
                    handle.flush()
                    os.fsync(handle.fileno())
                if mode is not None:
                    os.chmod(temp, mode)
                os.replace(temp, target)
            except BaseException:
                temp.unlink(missing_ok=True)
                raise
        except OSError as error:
            raise self._unwritable(target, error) from None
        _fsync_folder(folder)

    def _unwritable(self, path: Path, error: OSError) -> PersonaError:
        reason = error.strerror or str(error)
        where = f": {error.filename}" if error.filename and error.filename != str(path) else ""
        return PersonaError(
            f"Cannot write {path}: {reason}{where}.",
            hint=f"Make sure {path.parent} is a writable folder (the config dir is "
            f"{self.root}). Nothing was changed.",
        )


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable; not every platform or filesystem allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
