"""The PostgreSQL driver of the SQL stores against a real server these tests start: several
processes, crashes, schema, passwords (the contract runs in ``test_sql_store_contracts.py``)."""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from jarvis.adapters.sql_store.postgres_schema import SCHEMA_VERSION
from jarvis.adapters.sql_store.urls import redact_url
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.llm.messages import Message
from jarvis.domain.sessions.records import SessionStoreCorruptError, SessionStoreUnavailableError
from tests.support.postgres_server import PostgresServer, running_postgres
from tests.support.sql_stores import (
    postgres_backend,
    postgres_sessions,
    the_earlier_data_goes_on,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    with running_postgres() as running:
        yield running


def _writer(url: str, worker: int, start: multiprocessing.synchronize.Event) -> None:
    store = postgres_sessions(url)
    start.wait(60)

    async def go() -> None:
        for i in range(50):
            await store.append(
                "shared", [Message.user(f"{worker}-{i}"), Message.assistant(f"re {worker}-{i}")]
            )

    asyncio.run(go())
    store.close()


def test_eight_processes_appending_at_once_lose_nothing(server: PostgresServer) -> None:
    url = server.create_database()  # fresh: the eight also race to create the schema
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    workers = [context.Process(target=_writer, args=(url, w, start)) for w in range(8)]
    for process in workers:
        process.start()
    start.set()
    for process in workers:
        process.join(120)
        assert process.exitcode == 0
    store = postgres_sessions(url)
    loaded = asyncio.run(store.load("shared"))
    assert len(loaded) == 800
    pairs = [(loaded[i].content, loaded[i + 1].content) for i in range(0, 800, 2)]
    assert sorted(pairs) == sorted((f"{w}-{i}", f"re {w}-{i}") for w in range(8) for i in range(50))
    [info] = asyncio.run(store.list_sessions())
    assert info.message_count == 800
    with psycopg.connect(url) as db:
        seqs = [r[0] for r in db.execute("SELECT seq FROM jarvis_messages ORDER BY seq")]
    assert seqs == list(range(800))


_CRASHING_WRITER = """
import asyncio, sys
from jarvis.adapters.sql_store import SqlBackend
from jarvis.adapters.sql_store.postgres_driver import PostgresDriver
from jarvis.domain.llm.messages import Message
store = SqlBackend(PostgresDriver(sys.argv[1])).sessions
async def go():
    i = 0
    while True:
        await store.append("s", [Message.user(f"q{i}"), Message.assistant("a" * 5000 + str(i))])
        i += 1
asyncio.run(go())
"""


def test_a_writer_killed_mid_append_loses_only_that_append(server: PostgresServer) -> None:
    url = server.create_database()
    child = subprocess.Popen([sys.executable, "-c", _CRASHING_WRITER, url])
    store = postgres_sessions(url)
    try:
        deadline = time.monotonic() + 60
        while len(asyncio.run(store.load("s"))) < 40:  # wait until it is writing for real
            assert child.poll() is None
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    store.close()
    fresh = postgres_sessions(url)
    loaded = asyncio.run(fresh.load("s"))
    assert len(loaded) % 2 == 0
    for n in range(0, len(loaded), 2):
        assert loaded[n].content == f"q{n // 2}"
        assert loaded[n + 1].content == "a" * 5000 + str(n // 2)
    asyncio.run(fresh.append("s", [Message.user("after the crash")]))
    [info] = asyncio.run(fresh.list_sessions())
    assert info.message_count == len(loaded) + 1
    fresh.close()


def test_the_schema_is_versioned_with_state_and_lease_tables(server: PostgresServer) -> None:
    url = server.create_database()
    asyncio.run(postgres_sessions(url).sessions())
    with psycopg.connect(url) as db:
        assert db.execute("SELECT version FROM jarvis_schema").fetchall() == [(SCHEMA_VERSION,)]
        tables = {
            r[0] for r in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        }
    assert {"jarvis_sessions", "jarvis_messages", "jarvis_operator_state", "jarvis_leases"} <= (
        tables
    )
    asyncio.run(postgres_sessions(url).sessions())  # a second start migrates nothing


async def test_a_database_the_earlier_store_wrote_opens_and_goes_on(
    server: PostgresServer,
) -> None:
    url = server.create_database()
    dump = (Path(__file__).parent / "data" / "postgres_sessions_v1.sql").read_text()
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(dump.encode())
    backend = postgres_backend(url)
    try:
        await the_earlier_data_goes_on(backend)
    finally:
        backend.close()
    with psycopg.connect(url) as db:
        assert db.execute("SELECT version FROM jarvis_schema").fetchall() == [(SCHEMA_VERSION,)]


def test_a_newer_schema_is_refused(server: PostgresServer) -> None:
    url = server.create_database()
    asyncio.run(postgres_sessions(url).sessions())
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("UPDATE jarvis_schema SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(SessionStoreCorruptError, match="schema version"):
        asyncio.run(postgres_sessions(url).sessions())


def test_an_unreachable_server_names_the_url_without_the_password(closed: int) -> None:
    url = f"postgresql://jarvis:hunter2-secret@127.0.0.1:{closed}/sessions"
    store = postgres_sessions(url, connect_timeout=2)
    with pytest.raises(SessionStoreUnavailableError) as info:
        asyncio.run(store.append("s", [Message.user("x")]))
    text = str(info.value)
    assert "Cannot reach PostgreSQL at postgresql://jarvis:***@127.0.0.1:" in text
    assert "hunter2" not in text
    assert "hunter2" not in info.value.location
    assert info.value.__cause__ is None  # the driver's exception (and its URL) is not chained


def test_a_wrong_password_is_refused_without_echoing_it(server: PostgresServer) -> None:
    store = postgres_sessions(server.url(password="wrong-pass-123"))
    with pytest.raises(SessionStoreUnavailableError, match="password authentication") as info:
        asyncio.run(store.sessions())
    assert "wrong-pass-123" not in str(info.value)


def test_the_store_recovers_after_the_server_drops_it(server: PostgresServer) -> None:
    url = server.create_database()
    store = postgres_sessions(url)
    asyncio.run(store.append("s", [Message.user("one")]))
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'jarvis'"
        )
    with pytest.raises(SessionStoreUnavailableError):
        asyncio.run(store.append("s", [Message.user("lost: the connection was gone")]))
    asyncio.run(store.append("s", [Message.user("two")]))
    assert [m.content for m in asyncio.run(store.load("s"))] == ["one", "two"]


def test_without_psycopg_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ConfigurationError, match=r"jarvis\[postgres\]"):
        asyncio.run(postgres_sessions("postgresql://localhost/x").sessions())


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:p%40ss@db:5432/x", "postgresql://u:***@db:5432/x"),
        ("postgresql://u@db/x?password=abc&sslmode=require", "postgresql://u@db/x?password=***&sslmode=require"),
        ("postgres://db/x", "postgres://db/x"),
        ("host=db password='a b' user=u", "host=db password=*** user=u"),
        ("host=db password=abc", "host=db password=***"),
        ("host=db sslpassword=abc password='x y'", "host=db sslpassword=*** password=***"),
        ("postgresql://u@db/x?sslpassword=abc&SSLPassword=d", "postgresql://u@db/x?sslpassword=***&SSLPassword=***"),
        # libpq reads host u, port S3cret: the password is masked all the same
        ("postgresql://u:S3cret/Pw@db:1/x", "postgresql://u:***@db:1/x"),
        ("postgresql://u:a?b#c@db/x?sslmode=require", "postgresql://u:***@db/x?sslmode=require"),
        ("postgresql://u:a/b@c@db/x", "postgresql://u:***@db/x"),
        ("postgresql://u:pw@[::1:1/db", "postgresql://u:***@[::1:1/db"),  # libpq cannot read it
        ("postgresql://h1:5432,h2:5433/x?user=me@example.org", "postgresql://h1:5432,h2:5433/x?user=me@example.org"),
    ],
)  # fmt: skip
def test_urls_are_shown_without_passwords(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def _sessions_list(home: Path, url: str) -> subprocess.CompletedProcess[str]:
    """``jarvis sessions list`` as a process, on the PostgreSQL store at ``url``."""
    import os

    (home / "config.toml").write_text(
        f'[sessions]\nbackend = "postgres"\nurl = """{url}"""\n', encoding="utf-8"
    )
    return subprocess.run(
        [sys.executable, "-m", "jarvis", "sessions", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "OPENJARVIS_HOME": str(home)},
        check=False,
    )


@pytest.mark.parametrize(
    ("url", "code", "said"),
    [
        # libpq would read host u and port S3cret, and send "Pw@..." as the database name
        ("postgresql://u:S3cret/Pw@127.0.0.1:{port}/db", 2, "is not percent-encoded"),
        ("postgresql://u:S3cret?Pw@127.0.0.1:{port}/db", 2, "is not percent-encoded"),
        ("postgresql://u:S3cretPw@[::1:{port}/db", 2, "is not a PostgreSQL URL libpq can read"),
        ("postgresql://u:S3cretPw@127.0.0.1:{port}/db?bogus=1", 2, "invalid URI query parameter"),
        ("postgresql://u@127.0.0.1:{port}/db?sslpassword=S3cretPw", 3, "?sslpassword=***"),
        ("host=127.0.0.1 port={port} sslpassword=S3cretPw password=S3cretPw", 3, "sslpassword=***"),
    ],
)  # fmt: skip
def test_a_session_store_url_is_never_shown_with_a_secret(
    jarvis_home: Path, closed: int, url: str, code: int, said: str
) -> None:
    """Through the CLI: a URL libpq cannot read, or would read otherwise than it was meant
    (a password cut by an unescaped ``/``), is a configuration error (exit 2); one that
    cannot be reached is exit 3; neither shows a secret."""
    result = _sessions_list(jarvis_home, url.format(port=closed))
    assert result.returncode == code, result.stderr
    assert said in result.stderr
    assert "S3cret" not in result.stderr + result.stdout
    assert "Pw@" not in result.stderr
    assert "Traceback" not in result.stderr
