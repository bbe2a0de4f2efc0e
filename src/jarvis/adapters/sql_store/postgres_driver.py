"""``PostgresDriver``: the SQL stores in a PostgreSQL database that many machines share.

* psycopg 3 is imported on first use, so jarvis without the ``postgres`` extra runs until a
  PostgreSQL store is asked for, and then says how to install it.
* Connecting is bounded by ``connect_timeout`` and every statement by ``statement_timeout``;
  the driver's errors become :class:`~jarvis.domain.sessions.records.SessionStoreError` naming the
  URL with its secrets replaced by ``***`` (and scrubbed from the driver's message); a URL
  libpq cannot read, or would read otherwise than written, is a ``ConfigurationError``,
  raised before anything is sent.
* Every name starts with ``jarvis_``, so the tables can live in a database shared with other
  programs; lease times are the server's clock (``clock_timestamp()``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from jarvis.adapters.sql_store.driver import Connection, Cursor, Dialect, Renderer
from jarvis.adapters.sql_store.postgres_schema import migrate
from jarvis.adapters.sql_store.run_guard import GuardedDriver, RunGuard
from jarvis.adapters.sql_store.urls import cut_authority, redact_url, secrets_of
from jarvis.domain.errors import ConfigurationError
from jarvis.domain.sessions.records import (
    SessionStoreError,
    SessionStoreLockedError,
    SessionStoreUnavailableError,
)

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

T = TypeVar("T")

POSTGRES = Dialect(
    placeholder="%s",
    fields=(
        ("sessions", "jarvis_sessions"),
        ("messages", "jarvis_messages"),
        ("state", "jarvis_operator_state"),
        ("leases", "jarvis_leases"),
        ("approvals", "jarvis_approvals"),
        ("now", "(extract(epoch from clock_timestamp()) * 1000000)::bigint"),
        ("c", ' COLLATE "C"'),
        # the last "created_us":N of the canonical record, whose top-level created_us and
        # updated_us come last
        (
            "created",
            "COALESCE(substring(value from '.*\"created_us\":(-?[0-9]{1,19})')::bigint, 0)",
        ),
        ("next_touch", "nextval('jarvis_session_touch')"),
        ("returning", "RETURNING message_count"),
        # one writer at a time per agent, until the transaction ends
        ("lock_agent", "pg_advisory_xact_lock(hashtext(%s))"),
        # a row read to check it stays as read until the transaction ends
        ("share", " FOR SHARE"),
        # a row read to change it: a second writer waits for the first one's commit
        ("lock", " FOR UPDATE"),
    ),
    unlimited=None,
    max_seq=(1 << 31) - 1,
)
"""PostgreSQL's spelling: the server's clock, byte (``"C"``) order of text keys."""


def _require_psycopg() -> None:
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            "The PostgreSQL session store needs psycopg, which is not installed.",
            hint="Install it with: pip install 'jarvis[postgres]'",
        ) from exc


class _PostgresConnection:
    """A psycopg connection in autocommit mode, speaking the stores' SQL."""

    def __init__(self, raw: psycopg.Connection[TupleRow]) -> None:
        self.raw = raw
        self._sql = Renderer(POSTGRES)

    def execute(self, template: str, parameters: Sequence[object] = ()) -> Cursor:
        return self.raw.execute(self._sql(template), parameters)

    def executemany(self, template: str, rows: Sequence[Sequence[object]]) -> None:
        with self.raw.cursor() as cursor:
            cursor.executemany(self._sql(template), rows)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.raw.transaction():
            yield


class PostgresDriver(GuardedDriver):
    """The database at ``url`` (``postgresql://user:password@host:port/db``)."""

    dialect = POSTGRES

    def __init__(
        self, url: str, *, connect_timeout: float = 5.0, statement_timeout: float = 30.0
    ) -> None:
        self.url = url
        self.location = redact_url(url)
        self.connect_timeout = connect_timeout
        self.statement_timeout = statement_timeout
        self._connection: _PostgresConnection | None = None
        self._guard = RunGuard(self._close_now)
        # longest first: a secret inside a longer one would leave the rest of that one
        self._secrets = sorted(secrets_of(url), key=len, reverse=True)

    def _scrub(self, text: str) -> str:
        if self.url:  # libpq quotes a URI it cannot read
            text = text.replace(self.url, self.location)
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text.strip()

    def _check_url(self) -> None:
        """A URL libpq cannot read (``[::1`` without its ``]``, an unknown parameter) is a
        configuration error (exit code 2), not a server that refused the store; so is a
        password with a ``/``, ``?`` or ``#`` not percent-encoded, which libpq would read
        as a host, a port and a database name, sending a part of it to that host."""
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        problem = ""
        if cut_authority(self.url):
            problem = "a / ? or # before the @ of its user and password is not percent-encoded"
        else:
            try:
                conninfo_to_dict(self.url)
            except psycopg.Error as exc:
                problem = self._scrub(str(exc)) or type(exc).__name__
        if problem:
            raise ConfigurationError(
                f"[sessions] url {self.location} is not a PostgreSQL URL libpq can read: "
                f"{problem}.",
                hint="Percent-encode a / ? # or @ in the user, password or database name "
                "(%2F %3F %23 %40); see libpq's connection URIs.",
            )

    def _open(self) -> _PostgresConnection:
        _require_psycopg()
        import psycopg

        self._check_url()
        connection = psycopg.connect(
            self.url,
            autocommit=True,
            connect_timeout=max(1, round(self.connect_timeout)),
            application_name="jarvis",
        )
        try:
            connection.execute(
                "SELECT set_config('statement_timeout', %s, false)",
                (f"{round(self.statement_timeout * 1000)}ms",),
            )
            migrate(connection, self.location)
        except BaseException:
            connection.close()
            raise
        return _PostgresConnection(connection)

    def _translate(self, exc: Exception) -> SessionStoreError:
        import psycopg
        import psycopg.errors

        reason = self._scrub(str(exc)) or type(exc).__name__
        if isinstance(exc, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable):
            return SessionStoreLockedError(
                f"PostgreSQL at {self.location} did not finish in "
                f"{self.statement_timeout:g} s: {reason}",
                location=self.location,
                hint="Nothing was written; try again.",
            )
        if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            return SessionStoreUnavailableError(
                f"Cannot reach PostgreSQL at {self.location}: {reason}",
                location=self.location,
                hint="Check that the server runs and that [sessions] url is right.",
            )
        return SessionStoreError(
            f"PostgreSQL at {self.location} refused the session store: {reason}",
            location=self.location,
        )

    def run(self, work: Callable[[Connection], T]) -> T:
        _require_psycopg()
        import psycopg

        def body() -> T:
            try:
                if self._connection is None or self._connection.raw.closed:
                    self._connection = self._open()
                return work(self._connection)
            except psycopg.Error as exc:
                if self._connection is not None and self._connection.raw.broken:
                    self._connection.raw.close()
                    self._connection = None
                raise self._translate(exc) from None

        return self._guard.run(body)
