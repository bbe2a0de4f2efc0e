"""Who may use ``jarvis serve``, from its options: the API key's source, the local users,
host names and origins it answers, and the agent options and runtimes allowed over HTTP.

Why a module of its own: each of these is checked before the server starts, so a mistake is
a usage error (exit 2) with the fix in its hint, never a server that runs open.

The key is read from ``--api-key-file FILE`` (a file only its owner may read, like an SSH
key), else ``JARVIS_API_KEY``, else ``OPENJARVIS_API_KEY`` (OpenJarvis's name), else, for
``jarvis serve``, the config file's ``[server.auth] api_key`` (OpenJarvis's key there, used
only when no other user may read the file). ``--api-key KEY`` still works, with a warning:
every local user can read a process's command line in ``/proc/PID/cmdline``.
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jarvis.domain.errors import ConfigurationError

KEY_VARIABLE = "JARVIS_API_KEY"
OPENJARVIS_KEY_VARIABLE = "OPENJARVIS_API_KEY"
"""OpenJarvis's name of the variable, read when ``JARVIS_API_KEY`` is not set."""
KEY_SOURCES = "JARVIS_API_KEY (or OPENJARVIS_API_KEY) or --api-key-file FILE"
"""Where a key can come from, for the hints."""
MAX_KEY_FILE_BYTES = 4096
FLAG_WARNING = (
    "jarvis: warning: --api-key is visible to every local user (in /proc/PID/cmdline "
    "and ps); pass the key in JARVIS_API_KEY or with --api-key-file FILE instead.\n"
)


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """``[server.auth] api_key`` and the file it was read from."""

    key: str = field(repr=False)
    file: Path


def api_key_from(
    flag: str | None,
    key_file: Path | None,
    warn: bool = True,
    config_key: ConfigKey | None = None,
) -> str | None:
    """The API key (``None``: no key) from ``--api-key`` or ``--api-key-file`` (one of
    them), else ``JARVIS_API_KEY``, else ``OPENJARVIS_API_KEY``, else ``config_key``."""
    # taken out of the environment, so that nothing the server starts (a runtime, a tool's
    # process) inherits it
    variable = os.environ.pop(KEY_VARIABLE, None) or None
    openjarvis_variable = os.environ.pop(OPENJARVIS_KEY_VARIABLE, None) or None
    given = [n for n, v in (("--api-key", flag), ("--api-key-file", key_file)) if v]
    if len(given) > 1:
        raise ConfigurationError(
            "Give the API key one way only.", hint="Use --api-key-file FILE or JARVIS_API_KEY."
        )
    if key_file is not None:
        return _read_key_file(key_file)
    if flag:
        if warn:
            import sys

            sys.stderr.write(FLAG_WARNING)
        return _usable(flag, "--api-key")
    if variable:
        return _usable(variable, KEY_VARIABLE)
    if openjarvis_variable:
        return _usable(openjarvis_variable, OPENJARVIS_KEY_VARIABLE)
    if config_key and config_key.key:
        return _usable(
            _private_config_key(config_key), f"[server.auth] api_key in {config_key.file}"
        )
    return None


def _usable(key: str, source: str) -> str:
    """``key`` without the spaces around it (the server compares the header's key trimmed:
    a key kept with them could never match); a key with spaces or control characters
    inside is refused, naming where it came from, never the key."""
    key = key.strip()
    if not key or any(char.isspace() or not char.isprintable() for char in key):
        raise ConfigurationError(
            f"The API key of {source} is empty or holds spaces or control characters.",
            hint="An API key is one word of printable characters.",
        )
    return key


def _private_config_key(config_key: ConfigKey) -> str:
    """The config file's key, if no other user may read the file (it would let them in)."""
    file = config_key.file
    try:
        mode = os.stat(file).st_mode
    except OSError as exc:
        raise ConfigurationError(
            f"Cannot check who may read the config file {file}: {exc.strerror or exc}."
        ) from None
    if mode & 0o077:
        raise ConfigurationError(
            f"The config file {file} holds [server.auth] api_key, and other users may read "
            f"or change it (mode {stat.S_IMODE(mode):04o}).",
            hint=f"Make it private: chmod 600 {file} (or give the key in {KEY_SOURCES}).",
        )
    return config_key.key


def _read_key_file(path: Path) -> str:
    try:
        with path.open("rb") as stream:
            mode = os.fstat(stream.fileno()).st_mode
            data = stream.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigurationError(
            f"Cannot read the API key file {path}: {exc.strerror or exc}."
        ) from None
    if not stat.S_ISREG(mode):
        raise ConfigurationError(f"The API key file {path} is not a regular file.")
    if mode & 0o077:
        raise ConfigurationError(
            f"The API key file {path} may be read or changed by other users "
            f"(mode {stat.S_IMODE(mode):04o}).",
            hint=f"Make it private: chmod 600 {path}",
        )
    if len(data) > MAX_KEY_FILE_BYTES:
        raise ConfigurationError(f"The API key file {path} is larger than a key.")
    key = data.decode("utf-8", "replace").strip()
    if not key or "\n" in key:
        raise ConfigurationError(f"The API key file {path} must hold the key alone, on one line.")
    return key


def user_ids(names: Sequence[str]) -> tuple[int, ...]:
    """``--allow-user`` values (names or numeric uids) as uids."""
    uids: list[int] = []
    for name in names:
        name = name.strip()
        if name.isdigit():
            uids.append(int(name))
            continue
        try:
            uids.append(pwd.getpwnam(name).pw_uid)
        except KeyError:
            raise ConfigurationError(
                f"No local user named {name!r} (--allow-user).",
                hint="Give a user name or a numeric uid.",
            ) from None
    return tuple(uids)


def checked_names(values: Sequence[str], known: frozenset[str], flag: str) -> tuple[str, ...]:
    """``values`` of ``flag``, each one of ``known``."""
    unknown = sorted({v for v in values if v not in known})
    if unknown:
        raise ConfigurationError(
            f"{flag} does not take {', '.join(unknown)}.",
            hint=f"{flag} takes: " + ", ".join(sorted(known)),
        )
    return tuple(dict.fromkeys(values))


def check_owner_only(api_key: str | None) -> None:
    """Without a key the server serves only its own user: refuse to start where the
    connecting user cannot be told."""
    from jarvis.entrypoints.http.peer_user import available

    if not api_key and not available():
        raise ConfigurationError(
            "Without an API key jarvis serve answers only its own user, and this system "
            "does not tell which user opened a connection (the kernel's socket diagnostics, "
            "NETLINK_SOCK_DIAG, do not answer).",
            hint="Set an API key: JARVIS_API_KEY=... (or OPENJARVIS_API_KEY=...) or "
            "--api-key-file FILE.",
        )


def check_unix(path: Path | None, workers: int) -> None:
    """``--unix`` serves in one process."""
    if path is not None and workers != 1:
        raise ConfigurationError(
            "--unix serves with one process.", hint="Leave out --workers, or use --port."
        )


def unix_path(path: Path | None) -> str | None:
    return None if path is None else str(path)
