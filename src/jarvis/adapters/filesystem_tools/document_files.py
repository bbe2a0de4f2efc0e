"""``DocumentFiles``: what ``jarvis memory add`` reads, under ``file_read``'s rules.

* A path named by the user is made absolute; its folder is resolved once (the user chose
  it), but the path itself must not be a symbolic link, and nothing below it is reached
  through one: folders are listed without following links (a link found is skipped and
  named) and every file is opened beneath its folder's descriptor with
  :class:`~.beneath.BeneathOpener` (``openat2`` ``RESOLVE_NO_SYMLINKS``, else an
  ``O_NOFOLLOW`` walk), so a folder swapped for a link after the listing leads nowhere.
* Secret files (:mod:`jarvis.application.tools.secret_paths`: keys, ``.env``,
  credentials...) and jarvis's own config dir are refused, whether named or found.
* Only regular files with one hard link, at most ``max_bytes`` (checked on the descriptor
  and again while reading), not binary (a NUL byte in the first 8 kB; PDFs excepted).
* Hidden files and folders (``.git``, ``.venv``...) are not walked into; ``max_files``
  bounds a walk.

:meth:`DocumentFiles.collect` only walks: it refuses what the names and ``lstat`` tell
(secrets, links, not regular, several names, too large) and reads no file, so a folder of
200,000 files costs their paths, not their bytes. :meth:`DocumentFiles.load` reads one file
when it is indexed, opened beneath ``/`` without following any link (its path was resolved
by the walk, so a link on it now was put there since), every check made again on the
descriptor.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from jarvis.adapters.filesystem_tools.beneath import BeneathOpener, LinkRefused, Strategy
from jarvis.adapters.filesystem_tools.protected import inside, jarvis_config_dir
from jarvis.application.tools.secret_paths import secret_rule
from jarvis.domain.knowledge import (
    DocumentBatch,
    DocumentError,
    DocumentRefusal,
    FoundDocument,
    RawDocument,
    kind_of,
    looks_binary,
)

MAX_FILE_BYTES: Final = 10 * 1024 * 1024
MAX_FILES: Final = 200_000
MAX_DEPTH: Final = 64


class _Refused(Exception):
    pass


@dataclass(slots=True)
class _Walk:
    found: list[FoundDocument] = field(default_factory=list)
    refused: list[DocumentRefusal] = field(default_factory=list)
    files: int = 0


class DocumentFiles:
    """Reads documents for the knowledge base (see the module's rules)."""

    def __init__(
        self,
        *,
        max_bytes: int = MAX_FILE_BYTES,
        max_files: int = MAX_FILES,
        protected: Sequence[str] | None = None,
        opener: Strategy = "auto",
    ) -> None:
        self.max_bytes = max_bytes
        self.max_files = max_files
        folders = [jarvis_config_dir(os.environ)] if protected is None else list(protected)
        self.protected = tuple(
            {os.path.abspath(os.path.expanduser(f)) for f in folders}
            | {os.path.realpath(os.path.expanduser(f)) for f in folders}
        )
        self.opener = BeneathOpener(opener)

    # --- checks ----------------------------------------------------------------------

    def _secret(self, path: str) -> str | None:
        rule = secret_rule(path.split(os.sep))
        if rule is None and any(inside(path, folder) for folder in self.protected):
            rule = "jarvis config dir"
        if rule is None:
            return None
        return f"a secret or credential file (rule '{rule}'); memory add never reads those"

    def _located(self, given: str) -> str:
        """The absolute path of ``given``: its folder resolved, its last name kept."""
        if "\x00" in given or len(given) > 4096:
            raise _Refused("not a valid path")
        lexical = os.path.abspath(os.path.expanduser(given))
        folder, name = os.path.split(lexical)
        path = os.path.join(os.path.realpath(folder), name) if name else lexical
        why = self._secret(lexical) or self._secret(path)
        if why is not None:
            raise _Refused(why)
        return path

    def _check_stat(self, info: os.stat_result) -> None:
        """Refuse what a file's status tells (``lstat`` when it is found, ``fstat`` of the
        descriptor when it is read)."""
        if stat.S_ISDIR(info.st_mode):
            raise _Refused("a folder (add it with --recursive to index what it holds)")
        if not stat.S_ISREG(info.st_mode):
            raise _Refused("not a regular file")
        if info.st_nlink > 1:
            raise _Refused(
                f"a file with {info.st_nlink} hard links (another name may be a secret "
                "or outside what you chose); copy it to add it"
            )
        if info.st_size > self.max_bytes:
            raise _Refused(
                f"{info.st_size} bytes, over the {self.max_bytes}-byte limit "
                "([memory] max_file_bytes)"
            )

    def _read_file(self, root: str, components: Sequence[str]) -> RawDocument:
        """The file at ``root/components...``, opened beneath ``root`` (no link followed)."""
        path = os.path.join(root, *components)
        name = components[-1]
        why = self._secret(path)
        if why is not None:
            raise _Refused(why)
        try:
            descriptor = self.opener.open(root, list(components))
        except LinkRefused:
            raise _Refused("a symbolic link; memory add does not follow links") from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _Refused("a symbolic link; memory add does not follow links") from None
            raise _Refused(f"cannot be opened: {exc.strerror}") from None
        try:
            self._check_stat(os.fstat(descriptor))
            data = self._bounded(descriptor)
        except OSError as exc:
            raise _Refused(f"cannot be read: {exc.strerror}") from None
        finally:
            os.close(descriptor)
        if looks_binary(data) and not data.startswith(b"%PDF-"):
            raise _Refused("a binary file (memory add reads text, Markdown, code, HTML, PDF)")
        return RawDocument(source=path, data=data, kind=kind_of(name))

    def _bounded(self, descriptor: int) -> bytes:
        parts: list[bytes] = []
        size = 0
        while True:
            part = os.read(descriptor, min(1 << 20, self.max_bytes + 1 - size))
            if not part:
                return b"".join(parts)
            parts.append(part)
            size += len(part)
            if size > self.max_bytes:
                raise _Refused(f"over the {self.max_bytes}-byte limit ([memory] max_file_bytes)")

    # --- walking ---------------------------------------------------------------------

    def _walk(self, root: str, below: list[str], pattern: str, recursive: bool, out: _Walk) -> None:
        folder = os.path.join(root, *below)
        depth = len(below)
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            out.refused.append(
                DocumentRefusal(
                    source=folder,
                    reason=f"cannot be listed: {exc.strerror}",
                    explicit=depth == 0,
                )
            )
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = os.path.join(folder, entry.name)
            if entry.is_symlink():
                if fnmatch.fnmatchcase(entry.name, pattern) or recursive:
                    out.refused.append(
                        DocumentRefusal(
                            source=path,
                            reason="a symbolic link; memory add does not follow links",
                            explicit=False,
                        )
                    )
                continue
            if entry.is_dir(follow_symlinks=False):
                if recursive and depth < MAX_DEPTH and self._secret(path) is None:
                    self._walk(root, [*below, entry.name], pattern, recursive, out)
                continue
            if not fnmatch.fnmatchcase(entry.name, pattern):
                continue
            if out.files >= self.max_files:
                out.refused.append(
                    DocumentRefusal(
                        source=path,
                        reason=f"past the {self.max_files}-file limit of one add",
                        explicit=False,
                    )
                )
                return
            out.files += 1
            try:
                out.found.append(self._found(path, entry))
            except _Refused as refusal:
                out.refused.append(
                    DocumentRefusal(source=path, reason=str(refusal), explicit=False)
                )

    def _found(self, path: str, entry: os.DirEntry[str]) -> FoundDocument:
        """``entry`` checked by its name and its ``lstat``, not read."""
        why = self._secret(path)
        if why is not None:
            raise _Refused(why)
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError as exc:
            raise _Refused(f"cannot be opened: {exc.strerror}") from None
        self._check_stat(info)
        return FoundDocument(source=path, kind=kind_of(entry.name))

    def collect(self, paths: Sequence[str], *, pattern: str, recursive: bool) -> DocumentBatch:
        out = _Walk()
        for given in paths:
            try:
                path = self._located(given)
                try:
                    info = os.lstat(path)
                except FileNotFoundError:
                    raise _Refused("no such file or folder") from None
                except OSError as exc:
                    raise _Refused(f"cannot be read: {exc.strerror}") from None
                if stat.S_ISLNK(info.st_mode):
                    raise _Refused("a symbolic link; memory add does not follow links")
                if stat.S_ISDIR(info.st_mode):
                    self._walk(path, [], pattern, recursive, out)
                    continue
                self._check_stat(info)
                out.found.append(
                    FoundDocument(source=path, kind=kind_of(os.path.basename(path)), named=given)
                )
            except _Refused as refusal:
                out.refused.append(
                    DocumentRefusal(source=given, reason=str(refusal), explicit=True)
                )
        return DocumentBatch(found=tuple(out.found), refused=tuple(out.refused))

    def load(self, found: FoundDocument) -> RawDocument | DocumentRefusal:
        """``found`` read now, opened beneath ``/`` without following any link: the walk
        resolved its path, so a link found on it now was put there since."""
        try:
            return self._read_file(os.sep, self._components(found.source))
        except _Refused as refusal:
            return DocumentRefusal(
                source=found.source if found.named is None else found.named,
                reason=str(refusal),
                explicit=found.named is not None,
            )

    @staticmethod
    def _components(source: str) -> list[str]:
        components = [part for part in source.split(os.sep) if part]
        if not os.path.isabs(source) or not components:
            raise _Refused("not an absolute path")
        return components

    def read(self, source: str) -> RawDocument | None:
        """``source`` again, opened beneath ``/`` without following any link: its path was
        resolved when it was added, so a link found on it now was put there since."""
        try:
            os.lstat(source)
        except FileNotFoundError:
            return None
        except OSError:
            pass
        try:
            return self._read_file(os.sep, self._components(source))
        except _Refused as refusal:
            raise DocumentError(f"{source} is {refusal}.") from None
