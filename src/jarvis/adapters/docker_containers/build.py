"""The sandbox image, built from what is installed here: no registry, no network.

A ``FROM scratch`` image holding this machine's own CPython (interpreter, standard library
without its tests and GUI parts), jarvis and the distributions it depends on (copied from
this environment's site-packages, at the paths the interpreter expects), the shared
libraries all of them link against (the ``ldd`` closure, with the glibc stubs that wheels
built for manylinux load), and an ``/etc/passwd`` naming ``nobody`` (65534). It has no
shell: nothing in it but Python can run.

Its tag is ``localhost/jarvis-sandbox:<jarvis version>-<content hash>``: the hash covers
every file taken from the Python installation, the packages and jarvis (names, modes and
bytes), so any change to them is a new tag, and a missing tag is what "stale" means. System
libraries are resolved at build time and are not part of the hash (a libc update keeps a
working, self-consistent image).

jarvis's own modules (an editable install has no bytecode of its own) are compiled into
unchecked-hash ``.pyc`` files: the root file system is read-only, so bytecode that is not
in the image would be compiled again by every container.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import os
import py_compile
import re
import site
import stat
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from jarvis.domain.errors import ContainerImageError

if TYPE_CHECKING:
    from jarvis.adapters.docker_containers.api import DockerApi

REPOSITORY = "localhost/jarvis-sandbox"
BUILDER_VERSION = "2"
PYTHON_LINK = "/usr/local/bin/python3"
IMAGE_LABEL = "io.jarvis.sandbox-image"
CONTENT_LABEL = "io.jarvis.content-hash"
"""The full content hash, put on the image when jarvis builds it: the tag carries its
first 16 digits, and an image under the tag without the matching label is refused."""
DOCKERFILE = f"""FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 HOME=/tmp PYTHONDONTWRITEBYTECODE=1
USER 65534:65534
WORKDIR /tmp
CMD ["{PYTHON_LINK}", "-I"]
"""
PASSWD = b"root:x:0:0:root:/root:/nonexistent\nnobody:x:65534:65534:nobody:/tmp:/nonexistent\n"
GROUP = b"root:x:0:\nnogroup:x:65534:\n"
_STDLIB_SKIP = {
    "site-packages",
    "dist-packages",
    "test",
    "tests",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "__phello__",
}
_DYNLOAD_SKIP = re.compile(r"^(_tkinter|_test|_xxtest|xxlimited|_ctypes_test|xxsubtype)")
_GLIBC_STUBS = ("libpthread.so.0", "libdl.so.2", "librt.so.1", "libutil.so.1", "libm.so.6")
_RUNTIME_LIBS = ("libgcc_s.so.1", "libstdc++.so.6")
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True, slots=True)
class Entry:
    """One file of the image: from ``source`` on this machine, or ``data``."""

    path: str
    """Absolute path inside the image."""
    mode: int
    source: Path | None = None
    data: bytes | None = None
    link: str = ""
    """A symbolic link's target (then neither ``source`` nor ``data``)."""


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _file_mode(path: Path) -> int:
    return 0o755 if os.stat(path).st_mode & stat.S_IXUSR else 0o644


def _bytecode(name: str) -> bool:
    """Only the default-optimisation bytecode of this interpreter is worth shipping."""
    return name.endswith(f".{sys.implementation.cache_tag}.pyc")


class SandboxImage:
    """What goes into the sandbox image; its reference; building it."""

    def __init__(self, *, distribution: str = "jarvis", package: str = "jarvis") -> None:
        self._distribution = distribution
        self._package = package
        self._lock = threading.Lock()
        self._reference = ""
        self._hash = ""

    # --- what goes in ------------------------------------------------------------------

    def interpreter(self) -> Path:
        return Path(os.path.realpath(sys.executable))

    def stdlib(self) -> Path:
        return Path(sysconfig.get_paths()["stdlib"])

    def site_packages(self) -> str:
        """Where this interpreter, without a venv, looks for packages (inside the image)."""
        return site.getsitepackages([sys.base_prefix])[0]

    def python_entries(self) -> Iterator[Entry]:
        interpreter = self.interpreter()
        yield Entry(str(interpreter), 0o755, source=interpreter)
        yield Entry(PYTHON_LINK, 0o777, link=str(interpreter))
        if sysconfig.get_config_var("Py_ENABLE_SHARED"):
            libdir = Path(str(sysconfig.get_config_var("LIBDIR")))
            name = str(sysconfig.get_config_var("INSTSONAME") or "")
            if name and (libdir / name).exists():
                library = libdir / name
                yield Entry(str(library), 0o755, source=Path(os.path.realpath(library)))
        stdlib = self.stdlib()
        for folder, dirs, files in os.walk(stdlib):
            here = Path(folder)
            relative = here.relative_to(stdlib)
            dirs[:] = sorted(
                d
                for d in dirs
                if d not in _STDLIB_SKIP
                and not d.startswith("config-")
                and not (relative.parts and d in {"test", "tests"})
            )
            for name in sorted(files):
                path = here / name
                if here.name == "__pycache__":
                    if not _bytecode(name):
                        continue
                elif name.endswith((".pyc", ".a", ".exe")) or path.is_symlink():
                    continue
                if here.name == "lib-dynload" and _DYNLOAD_SKIP.match(name):
                    continue
                yield Entry(str(path), _file_mode(path), source=path)

    def distributions(self) -> list[importlib.metadata.Distribution]:
        """``distribution`` and everything it requires (without extras), as installed."""
        installed: dict[str, importlib.metadata.Distribution] = {}
        for dist in importlib.metadata.distributions():
            installed.setdefault(_normalise(dist.metadata["Name"] or ""), dist)
        wanted, found = [_normalise(self._distribution)], {}
        while wanted:
            name = wanted.pop()
            if name in found or name not in installed:
                continue
            found[name] = installed[name]
            for requirement in found[name].requires or []:
                condition = requirement.partition(";")[2]
                if "extra" in condition:
                    continue
                match = _REQUIREMENT.match(requirement)
                if match:
                    wanted.append(_normalise(match.group(1)))
        if _normalise(self._distribution) not in found:
            raise ContainerImageError(
                f"{self._distribution} is not installed as a distribution: "
                "the sandbox image cannot be assembled.",
                hint="Install it (pip install -e .) first.",
            )
        return [found[name] for name in sorted(found)]

    def package_entries(self) -> Iterator[Entry]:
        target = PurePosixPath(self.site_packages())
        for dist in self.distributions():
            base = Path(str(dist.locate_file("")))
            for record in dist.files or []:
                relative = PurePosixPath(str(record))
                name = relative.name
                if ".." in relative.parts or name.endswith(".pth") or name == "direct_url.json":
                    continue
                if name.endswith(".pyc") and not _bytecode(name):
                    continue
                source = base / str(record)
                if source.is_file() and not source.is_symlink():
                    yield Entry(str(target / relative), _file_mode(source), source=source)
        package = self.package_source()
        if package is not None:  # an editable install: the source tree itself
            for folder, dirs, files in os.walk(package):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for name in sorted(files):
                    path = Path(folder) / name
                    if name.endswith(".pyc") or path.is_symlink():
                        continue
                    inside = target / self._package / path.relative_to(package).as_posix()
                    yield Entry(str(inside), 0o644, source=path)

    def package_source(self) -> Path | None:
        """The package's folder when it lives outside site-packages (an editable install)."""
        import importlib.util

        spec = importlib.util.find_spec(self._package)
        if spec is None or spec.origin is None:
            return None
        folder = Path(spec.origin).parent
        if Path(self.site_packages()) in folder.parents:
            return None
        if any(Path(p) in folder.parents for p in site.getsitepackages()):
            return None
        return folder

    def base_entries(self) -> Iterator[Entry]:
        yield Entry("/etc/passwd", 0o644, data=PASSWD)
        yield Entry("/etc/group", 0o644, data=GROUP)

    def entries(self) -> list[Entry]:
        """Every hashed entry, by path (the last one for a path wins)."""
        chosen: dict[str, Entry] = {}
        for entry in (*self.base_entries(), *self.python_entries(), *self.package_entries()):
            chosen[entry.path] = entry
        return [chosen[path] for path in sorted(chosen)]

    # --- naming ------------------------------------------------------------------------

    def content_hash(self, entries: Iterable[Entry]) -> str:
        digest = hashlib.sha256(f"{BUILDER_VERSION}\n{DOCKERFILE}".encode())
        for entry in entries:
            digest.update(f"{entry.path}\0{entry.mode:o}\0{entry.link}\0".encode())
            if entry.data is not None:
                digest.update(hashlib.sha256(entry.data).digest())
            elif entry.source is not None:
                with open(entry.source, "rb") as handle:
                    digest.update(hashlib.file_digest(handle, "sha256").digest())
        return digest.hexdigest()

    def version(self) -> str:
        try:
            return importlib.metadata.version(self._distribution)
        except importlib.metadata.PackageNotFoundError:
            return "0"

    def reference(self) -> str:
        """``localhost/jarvis-sandbox:<version>-<hash>``, computed once per instance."""
        with self._lock:
            if not self._reference:
                tag = re.sub(r"[^A-Za-z0-9_.-]", "_", self.version())
                self._hash = self.content_hash(self.entries())
                self._reference = f"{REPOSITORY}:{tag}-{self._hash[:16]}"
            return self._reference

    def full_hash(self) -> str:
        """The content hash the reference's tag abbreviates."""
        self.reference()
        return self._hash

    # --- building ----------------------------------------------------------------------

    def library_entries(self, entries: Iterable[Entry]) -> list[Entry]:
        """The shared libraries the ELF files among ``entries`` load (``ldd``)."""
        elves: list[str] = []
        have = set()
        for entry in entries:
            have.add(entry.path)
            if entry.source is None or not (entry.mode & 0o111 or ".so" in entry.path):
                continue
            with open(entry.source, "rb") as handle:
                if handle.read(4) == b"\x7fELF":
                    elves.append(str(entry.source))
        found: dict[str, Path] = {}
        for chunk in range(0, len(elves), 200):
            done = subprocess.run(
                ["ldd", *elves[chunk : chunk + 200]],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
            )
            for line in done.stdout.splitlines():
                line = line.strip()
                path = line.partition("=>")[2].strip() if "=>" in line else line
                path = path.split(" (", 1)[0].strip()
                if path.startswith("/") and os.path.exists(path):
                    found.setdefault(path, Path(os.path.realpath(path)))
        libc = next((p for p in found if Path(p).name == "libc.so.6"), None)
        if libc is not None:
            folder = Path(libc).parent
            for name in (*_GLIBC_STUBS, *_RUNTIME_LIBS):
                if (folder / name).exists():
                    found.setdefault(str(folder / name), Path(os.path.realpath(folder / name)))
        return [Entry(p, 0o755, source=s) for p, s in sorted(found.items()) if p not in have]

    def _bytecode_entries(self, entries: Iterable[Entry], folder: Path) -> list[Entry]:
        """Unchecked-hash bytecode for the package's own modules (editable installs)."""
        if self.package_source() is None:
            return []
        prefix = str(PurePosixPath(self.site_packages()) / self._package) + "/"
        compiled = []
        for number, entry in enumerate(entries):
            if entry.source is None or not entry.path.startswith(prefix):
                continue
            if not entry.path.endswith(".py"):
                continue
            inside = PurePosixPath(entry.path)
            target = (
                inside.parent / "__pycache__" / f"{inside.stem}.{sys.implementation.cache_tag}.pyc"
            )
            out = folder / f"{number}.pyc"
            py_compile.compile(
                str(entry.source),
                cfile=str(out),
                dfile=entry.path,
                doraise=True,
                invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
            )
            compiled.append(Entry(str(target), 0o644, source=out))
        return compiled

    def write_context(self, out: io.BufferedRandom, say: Callable[[str], None]) -> int:
        """The build context (Dockerfile + rootfs/) as a tar into ``out``; its file count."""
        entries = self.entries()
        with tempfile.TemporaryDirectory(prefix="jarvis-image-") as scratch:
            extra = self.library_entries(entries) + self._bytecode_entries(entries, Path(scratch))
            everything = sorted([*entries, *extra], key=lambda e: e.path)
            size = sum(e.source.stat().st_size for e in everything if e.source is not None)
            packages = len(self.distributions()) - 1
            say(
                f"Collected {len(everything)} files ({size / 1e6:.0f} MB): Python, jarvis, "
                f"{packages} packages, {len(extra)} libraries and bytecode files"
            )
            with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
                _add_data(tar, "Dockerfile", DOCKERFILE.encode(), 0o644)
                made: set[str] = set()
                _add_dir(tar, "rootfs/tmp", 0o1777, made)
                for entry in everything:
                    _add_parents(tar, entry.path, made)
                    name = "rootfs" + entry.path
                    if entry.link:
                        info = tarfile.TarInfo(name)
                        info.type, info.linkname, info.mode = tarfile.SYMTYPE, entry.link, 0o777
                        tar.addfile(info)
                    elif entry.data is not None:
                        _add_data(tar, name, entry.data, entry.mode)
                    elif entry.source is not None:
                        info = tar.gettarinfo(str(entry.source), arcname=name)
                        info.type = tarfile.REGTYPE
                        info.size = entry.source.stat().st_size
                        info.mode, info.uid, info.gid, info.uname, info.gname = (
                            entry.mode, 0, 0, "", "")  # fmt: skip
                        with open(entry.source, "rb") as handle:
                            tar.addfile(info, handle)
        out.flush()
        out.seek(0)
        return len(everything)

    def build(self, api: DockerApi, say: Callable[[str], None]) -> str:
        """Build the image into the runtime behind ``api``; its reference."""
        reference = self.reference()
        started = time.monotonic()
        say(f"Building the sandbox image {reference} (first use; no registry needed)")
        with tempfile.TemporaryFile(prefix="jarvis-image-") as context:
            self.write_context(context, say)
            say(f"Sending the build context to {api.endpoint.runtime}")
            api.build(
                context,
                reference,
                {
                    IMAGE_LABEL: "1",
                    CONTENT_LABEL: self.full_hash(),
                    "io.jarvis.version": self.version(),
                },
                say,
            )
        say(f"Built {reference} in {time.monotonic() - started:.1f} s")
        return reference


def rebuild_hint(runtime: str, reference: str) -> str:
    command = "podman" if runtime == "podman" else "docker"
    return f"Remove it and build it again: {command} rmi {reference} && jarvis sandbox build"


def check_identity(reference: str, labels: dict[str, str], runtime: str) -> None:
    """Refuse an image under jarvis's tag that jarvis did not build from this content: its
    content label must be the hash the tag abbreviates (see :data:`CONTENT_LABEL`)."""
    if not reference.startswith(REPOSITORY + ":"):
        return
    abbreviated = reference.rsplit("-", 1)[-1]
    content = labels.get(CONTENT_LABEL, "")
    if labels.get(IMAGE_LABEL) != "1" or len(content) != 64 or not content.startswith(abbreviated):
        raise ContainerImageError(
            f"The image {reference} is not the sandbox image jarvis built: its "
            f"{CONTENT_LABEL} label is {'missing' if not content else 'different'}, so it "
            "was replaced or retagged. It was not run.",
            image=reference,
            hint=rebuild_hint(runtime, reference),
        )


def _add_data(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, name: str, mode: int, made: set[str]) -> None:
    if name in made:
        return
    made.add(name)
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, mode
    tar.addfile(info)


def _add_parents(tar: tarfile.TarFile, path: str, made: set[str]) -> None:
    parts = PurePosixPath(path).parts[1:-1]
    for depth in range(1, len(parts) + 1):
        _add_dir(tar, "rootfs/" + "/".join(parts[:depth]), 0o755, made)
