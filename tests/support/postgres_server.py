"""A real PostgreSQL server for the tests: ``initdb`` in a temp dir, a free loopback port.

postgres refuses to run as root, so under root the server runs as an unprivileged user
created here (``jarvis-pgtest``) through ``runuser``. Logins need a password
(scram-sha-256), so the URLs the tests use carry one, as real deployments do.

Missing binaries skip the tests, saying why, except in CI (``CI=true``), where they fail:
CI is expected to have installed PostgreSQL (``scripts/lib/install.sh``).
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import count
from pathlib import Path

import pytest

from tests.support.ports import free_port

SERVER_USER = "jarvis-pgtest"
ADMIN = "jarvis"
_DATABASES = count(1)


def pg_binary(name: str) -> str | None:
    """``name`` on PATH, else in the newest ``/usr/lib/postgresql/*/bin`` (Debian's place)."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return candidates[-1] if candidates else None


def require_binaries() -> tuple[str, str]:
    """``initdb`` and ``pg_ctl``; skips (or fails in CI) when they are missing."""
    initdb, pg_ctl = pg_binary("initdb"), pg_binary("pg_ctl")
    if initdb and pg_ctl:
        return initdb, pg_ctl
    reason = "PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or /usr/lib/postgresql"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI must install them (scripts/lib/install.sh)")
    pytest.skip(reason)


@dataclass(frozen=True, slots=True)
class PostgresServer:
    host: str
    port: int
    password: str

    def url(self, database: str = "postgres", *, password: str | None = None) -> str:
        secret = self.password if password is None else password
        return f"postgresql://{ADMIN}:{secret}@{self.host}:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = f"t{os.getpid()}_{next(_DATABASES)}"
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"'.encode())
        return self.url(name)


def _ensure_server_user() -> None:
    """Create the server's user once. Test processes running in parallel may race here:
    a ``useradd`` that failed because another one just created the user is fine."""
    if _user_exists():
        return
    made = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
         SERVER_USER],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if made.returncode != 0 and not _user_exists():
        raise RuntimeError(f"useradd {SERVER_USER} failed: {made.stderr.strip()}")


def _user_exists() -> bool:
    return (
        subprocess.run(["id", "-u", SERVER_USER], capture_output=True, check=False).returncode == 0
    )


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", SERVER_USER, "--", *command]


@contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    """Start a throw-away server; stop it and delete its files afterwards."""
    initdb, pg_ctl = require_binaries()
    base = Path(tempfile.mkdtemp(prefix="jarvis-pg-"))
    data, password = base / "data", secrets.token_urlsafe(16)
    (base / "pw").write_text(password + "\n")
    if os.geteuid() == 0:
        _ensure_server_user()
        shutil.chown(base, SERVER_USER)
        shutil.chown(base / "pw", SERVER_USER)
    base.chmod(0o700)
    run = _as_server_user
    subprocess.run(
        run([initdb, "-D", str(data), "-U", ADMIN, "--auth=scram-sha-256",
             f"--pwfile={base / 'pw'}", "--encoding=UTF8", "--no-locale", "--no-sync"]),
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    port = 0
    try:
        for _attempt in range(3):  # the free port may be taken before the server binds it
            port = free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -p {port} -k {base} -c fsync=off"
                " -c max_connections=40"
            )
            started = subprocess.run(
                run([pg_ctl, "-D", str(data), "-l", str(base / "log"), "-w", "-t", "60",
                     "-o", options, "start"]),
                capture_output=True, text=True, timeout=90, check=False,
            )  # fmt: skip
            if started.returncode == 0:
                break
        else:
            log = (base / "log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"PostgreSQL did not start: {started.stderr}\n{log}")
        yield PostgresServer(host="127.0.0.1", port=port, password=password)
    finally:
        subprocess.run(
            run([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"]),
            capture_output=True, timeout=60, check=False,
        )  # fmt: skip
        shutil.rmtree(base, ignore_errors=True)
